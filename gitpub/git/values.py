"""The plain values the git layer hands out: tree entries, commits, changes, identities.

Hex object ids (``str``) and small frozen values, nothing that holds a repository open: what
every layer above may keep and compare. They are ``NamedTuple``s: immutable as frozen
dataclasses are, and several times cheaper to define when a command starts (``status``).
``repo`` re-exports them (``from gitpub.git.repo import Entry`` keeps working).
"""

from __future__ import annotations

from typing import NamedTuple

TYPE_CHECKING = False  # mypy treats this name as True
if TYPE_CHECKING:  # dulwich's types, for the helpers below: not imported to run (~40 ms)
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


class CommitInfo(NamedTuple):
    """The parts of a commit the layers above need, as plain values."""

    sha: str
    tree: str
    parents: tuple[str, ...]
    message: bytes
    commit_time: int
    encoding: str | None = None  # the ``encoding`` header, when the commit has one


class Change(NamedTuple):
    """One file that differs between two trees: its entry before and after (None: absent)."""

    path: str
    old: Entry | None
    new: Entry | None


class Identity(NamedTuple):
    """Who made a commit (``Name <email>``)."""

    name: str
    email: str

    def as_bytes(self) -> bytes:
        return f"{self.name} <{self.email}>".encode()


STORE_IDENTITY = Identity("gitpub", "gitpub@localhost")


def _b(sha: str) -> ObjectID:
    """A hex id as dulwich takes it (``ObjectID`` is a ``NewType``: the bytes themselves)."""
    return sha.encode("ascii")  # type: ignore[return-value]


def _r(name: str) -> Ref:
    return name.encode("utf-8")  # type: ignore[return-value]


def _s(sha: bytes) -> str:
    return sha.decode("ascii")
