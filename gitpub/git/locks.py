"""Lock files: git's lock-file protocol, and what a writer does when another process holds one.

git and dulwich take a lock by creating ``<file>.lock`` with ``O_EXCL`` and release it by
renaming it over the file; anyone else gets ``FileLocked`` (git: "Unable to create
'….lock': File exists"). ``Repository`` waits for the lock, a little longer each time, and asks
its ``LockPolicy`` whether a lock that stays is stale — left by a process that died — and may be
removed. Which locks are stale is gitpub's policy, not git's: ``runtime.pubdir`` has it. Without
a policy a writer only waits, then gives up with ``LockedError``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from gitpub.core.errors import GitpubError

#: How long a writer waits for a lock without a policy (seconds).
WAIT = 35.0


class FileLocked(Exception):
    """Another process holds ``lockfilename``, the lock of ``filename`` (git's lock-file
    protocol: ``<file>.lock`` created exclusively, renamed over the file when done)."""

    def __init__(self, filename: str, lockfilename: str) -> None:
        super().__init__(filename, lockfilename)
        self.filename, self.lockfilename = filename, lockfilename


class LockedError(GitpubError):
    """A lock another process holds, and that is not stale (yet): try again later."""


class LockPolicy(Protocol):
    """What to do about a lock another process holds (``runtime.pubdir.Healer``)."""

    wait: float  # how long a writer waits for a lock, at most (seconds)

    def enter(self) -> None:
        """This process is about to take locks: announce it to the others."""

    def heal(self, lock: Path) -> bool:
        """Remove ``lock`` if it is stale; whether the write may be retried at once."""

    def locked_error(self, lock: Path, what: str) -> LockedError:
        """The error for a write that waited ``wait`` seconds in vain."""

    def sweep(self) -> int:
        """Remove every stale lock nobody ran into yet; how many."""

    def set_aside(self, obj: Path, sound: Callable[[Path], bool]) -> Path | None:
        """Move ``obj``, a loose object git reads as corrupt, out of the object store, kept
        for inspection (so that git fetches a sound copy again); where it is kept (None: it
        is not out)."""

    def put_back(self, obj: Path, kept: Path) -> bool:
        """Move ``kept`` (``set_aside``'s) back to ``obj`` unless something stands there now
        (a sound copy fetched); whether it was put back."""

    def close(self) -> None:
        """This process takes no more locks."""
