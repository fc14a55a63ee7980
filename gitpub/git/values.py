"""The plain values the git layer hands out: tree entries, commits, changes, identities.

Hex object ids (``str``) and small frozen values, nothing that holds a repository open: what
every layer above may keep and compare. ``repo`` re-exports them (``from gitpub.git.repo import
Entry`` keeps working).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from dulwich.objects import ObjectID
from dulwich.refs import Ref

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_LINK = 0o120000
MODE_TREE = 0o040000
MODE_GITLINK = 0o160000
#: The modes of entries whose object is a blob (a file, an executable, a symlink).
BLOB_MODES = frozenset({MODE_FILE, MODE_EXEC, MODE_LINK})


class Entry(NamedTuple):
    """A tree entry: file mode and object id (a blob, or a tree for ``MODE_TREE``)."""

    mode: int
    sha: str


@dataclass(frozen=True)
class CommitInfo:
    """The parts of a commit the layers above need, as plain values."""

    sha: str
    tree: str
    parents: tuple[str, ...]
    message: bytes
    commit_time: int
    encoding: str | None = None  # the ``encoding`` header (``git commit`` with i18n.commitEncoding)


@dataclass(frozen=True)
class Change:
    """One file that differs between two trees: its entry before and after (None: absent)."""

    path: str
    old: Entry | None
    new: Entry | None


@dataclass(frozen=True)
class Identity:
    name: str
    email: str

    def as_bytes(self) -> bytes:
        return f"{self.name} <{self.email}>".encode()


STORE_IDENTITY = Identity("gitpub", "gitpub@localhost")


def _b(sha: str) -> ObjectID:
    return ObjectID(sha.encode("ascii"))


def _r(name: str) -> Ref:
    return Ref(name.encode("utf-8"))


def _s(sha: bytes) -> str:
    return sha.decode("ascii")
