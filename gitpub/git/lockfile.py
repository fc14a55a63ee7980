"""git's lock-file protocol, without dulwich: ``<path>.lock`` created exclusively, written,
fsynced, renamed over ``<path>``.

It is the protocol C git and dulwich's ``GitFile`` follow, so the three exclude each other:
whoever creates ``<path>.lock`` first (``O_CREAT | O_EXCL``) holds the file until it renames or
removes the lock; anyone else gets ``FileLocked`` (and ``Repository`` waits, healing a stale
lock of a killed process: ``git.locks``). gitpub writes refs with it everywhere, and loose
objects with it in a plain repository (``git.loose``): opening dulwich's repository costs
~50 ms of imports that CI's ``confirm`` would pay on every push for nothing else.

A test run may stop a process while it holds the lock (``git.ref-locked``,
``git.object-locked``: the lock is written, not yet renamed), as it does inside dulwich's.
"""

from __future__ import annotations

import contextlib
import os
from types import TracebackType


class FileLocked(Exception):
    """Another process holds ``lockfilename`` (as dulwich's ``FileLocked``)."""

    def __init__(self, filename: str, lockfilename: str) -> None:
        super().__init__(filename, lockfilename)
        self.filename, self.lockfilename = filename, lockfilename


class LockFile:
    """``path`` rewritten under its lock: ``write``, then leave the block (or ``close``) to
    rename the lock over ``path``; ``abort`` (or an exception in the block) removes it."""

    def __init__(self, path: str | os.PathLike[str], mask: int = 0o644) -> None:
        self.path = os.fspath(path)
        self.lock = self.path + ".lock"
        try:
            self._fd: int | None = os.open(self.lock, os.O_RDWR | os.O_CREAT | os.O_EXCL, mask)
        except FileExistsError:
            raise FileLocked(self.path, self.lock) from None

    def write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def abort(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.lock)

    def close(self) -> None:
        if self._fd is None:
            return
        from gitpub.core.crashpoints import crash_point

        crash_point("git.object-locked" if f"{os.sep}objects{os.sep}" in self.lock
                    else "git.ref-locked")
        fd, self._fd = self._fd, None
        try:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(self.lock, self.path)
        except BaseException:  # not renamed (a directory in the way, say): no lock left
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.lock)
            raise

    def __enter__(self) -> LockFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()
