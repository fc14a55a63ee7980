"""The plain values the git layer hands out: tree entries, commits, changes, identities.

Hex object ids (``str``) and small frozen values, nothing that holds a repository open: what
every layer above may keep and compare. ``repo`` re-exports them.
"""

from __future__ import annotations

from typing import NamedTuple

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_LINK = 0o120000
MODE_TREE = 0o040000
MODE_GITLINK = 0o160000
#: The modes of entries whose object is a blob (a file, an executable, a symlink).
BLOB_MODES = frozenset({MODE_FILE, MODE_EXEC, MODE_LINK})
_KIND = 0o170000


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
    """One entry that differs between two trees (``git diff-tree``): a file, or with ``-t`` a
    directory; its entry before and after (None: absent)."""

    path: str
    old: Entry | None
    new: Entry | None

    @property
    def status(self) -> str:
        """git's letter: A(dded), D(eleted), T (a change of kind: file, link, submodule,
        directory) or M(odified)."""
        if self.old is None:
            return "A"
        if self.new is None:
            return "D"
        return "T" if self.old.mode & _KIND != self.new.mode & _KIND else "M"

    @property
    def is_tree(self) -> bool:
        """A directory on each side it is on: no file changed at this path itself."""
        return all(e is None or e.mode == MODE_TREE for e in (self.old, self.new))

    @property
    def new_tree(self) -> str | None:
        """The tree this change brings, if it brings one."""
        return self.new.sha if self.new is not None and self.new.mode == MODE_TREE else None


class Identity(NamedTuple):
    """Who made a commit (``Name <email>``)."""

    name: str
    email: str

    def as_bytes(self) -> bytes:
        return f"{self.name} <{self.email}>".encode()


STORE_IDENTITY = Identity("gitpub", "gitpub@localhost")
