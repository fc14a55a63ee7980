"""``.git/pub``, gitpub's private space, and its lock policy: which lock files are stale.

git and dulwich take a lock by creating ``<file>.lock`` with ``O_EXCL`` and release it by
renaming it over the file. A process killed in between leaves the lock file behind, and every
later writer of that file fails — forever, until a person deletes it. Such lock files carry no
pid, so staleness is decided from what can be observed:

- a live holder keeps a ref or object lock for milliseconds (one small file written, fsynced,
  renamed). A lock file unchanged (same inode, size, mtime) for ``STALE_AFTER`` seconds — by
  its mtime, or watched that long by us — is stale, whoever may hold it;
- every gitpub process holds an ``flock`` on its own file under ``.git/pub/live/`` while it has
  the repository open (the kernel drops it when the process dies, however it dies). When no
  other gitpub process holds one, a lock file unchanged for ``GRACE`` seconds is stale: its
  writer was gitpub (dead now) or a C git command, whose ref transactions are as short.

A stale lock is removed — under an ``flock`` of its own (``.git/pub/heal.lock``), after checking
it is still the same file — with a line in the output, and the write is retried. Only lock files
of refs (``refs/**.lock``, ``packed-refs.lock``, ``HEAD.lock``) and of loose objects
(``objects/**.lock``) are healed (also in the private fetch repository,
``.git/pub/fetch.git``), never a user's ``index.lock``. A writer waits at most until a lock
would be stale (``Healer.wait``), then gives up with ``LockedError`` (one line and a hint, never a
traceback). ``open_repository`` (``runtime.session``) gives every repository gitpub opens this
policy (``git.locks.LockPolicy``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from gitpub.git.locks import LockedError, ensure_pub_dir

STALE_AFTER = 30.0
GRACE = 2.0
LIVE_DIR = "live"


class Presence:
    """This process, announced to the others: an ``flock`` held while a repository is open."""

    def __init__(self, pub_dir: Path) -> None:
        self.path: Path | None = None
        self._fd: int | None = None
        live = pub_dir / LIVE_DIR
        name = f"{os.getpid()}-{os.urandom(6).hex()}"
        try:
            live.mkdir(exist_ok=True)
            fd = os.open(live / name, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644)
        except OSError:
            return  # a read-only repository: we take no locks there either
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.path, self._fd = live / name, fd

    def close(self) -> None:
        if self._fd is not None and self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            os.close(self._fd)
            self._fd = None


def others_alive(pub_dir: Path) -> bool:
    """Whether another gitpub process has this repository open (dead ones' files are removed)."""
    live = pub_dir / LIVE_DIR
    try:
        names = os.listdir(live)
    except OSError:
        return False
    mine = f"{os.getpid()}-"
    for name in names:
        if name.startswith(mine):
            continue  # this process holds no lock while it asks
        try:
            fd = os.open(live / name, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            (live / name).unlink()
    return False


class _Seen(NamedTuple):
    ino: int
    size: int
    mtime_ns: int
    first_seen: float  # time.monotonic() when we first saw it like this

    def same(self, st: os.stat_result) -> bool:
        return (st.st_ino, st.st_size, st.st_mtime_ns) == (self.ino, self.size, self.mtime_ns)


class Healer:
    """The lock policy of a repository (``git.locks.LockPolicy``): decides whether a lock file
    in ``git_dir`` is stale, and removes it if so; announces this process to the others while
    it takes locks (``Presence``)."""

    def __init__(self, git_dir: Path, pub_dir: Path,
                 notice: Callable[[str], None] = lambda message: None,
                 wait: float = STALE_AFTER + 5.0) -> None:
        self.git_dir, self.pub_dir, self.notice = git_dir, pub_dir, notice
        #: How long a writer waits for a lock (until it would be stale for everyone).
        self.wait = wait
        self._seen: dict[str, _Seen] = {}
        self._presence: Presence | None = None

    def enter(self) -> None:
        if self._presence is None:
            self._presence = Presence(ensure_pub_dir(self.pub_dir))

    def close(self) -> None:
        if self._presence is not None:
            self._presence.close()
            self._presence = None

    def healable(self, lock: Path) -> bool:
        try:
            rel = lock.resolve().relative_to(self.git_dir.resolve()).as_posix()
        except (OSError, ValueError):
            return False
        rel = rel.removeprefix("pub/fetch.git/")  # the private fetch repository's refs too
        # HEAD.lock: git locks HEAD too (for its reflog) when it moves the checked-out branch
        head = rel == "HEAD.lock" or (rel.startswith("worktrees/") and rel.count("/") == 2
                                      and rel.endswith("/HEAD.lock"))
        return rel.endswith(".lock") and (rel.startswith(("refs/", "objects/")) or head
                                          or rel == "packed-refs.lock")

    def age(self, lock: Path) -> float | None:
        """How long ``lock`` is known to have been unchanged; None if it is gone."""
        try:
            st = lock.lstat()
        except FileNotFoundError:
            return None
        seen = self._seen.get(str(lock))
        now = time.monotonic()
        if seen is None or not seen.same(st):
            seen = _Seen(st.st_ino, st.st_size, st.st_mtime_ns, now)
            self._seen[str(lock)] = seen
        return max(time.time() - st.st_mtime, now - seen.first_seen)

    def stale(self, age: float) -> bool:
        return age >= STALE_AFTER or (age >= GRACE and not others_alive(self.pub_dir))

    def heal(self, lock: Path) -> bool:
        """Remove ``lock`` if it is stale; whether the write may be retried at once (also when
        the lock is gone by itself)."""
        age = self.age(lock)
        if age is None:
            return True
        if not self.healable(lock) or not self.stale(age):
            return False
        with self._healing():
            seen = self._seen.get(str(lock))
            try:
                st = lock.lstat()
            except FileNotFoundError:
                return True
            if seen is None or not seen.same(st):
                return True  # another healer removed it and a new holder took it: re-try
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
        rel = lock.relative_to(self.git_dir) if lock.is_relative_to(self.git_dir) else lock
        self.notice(f"removed a stale lock {rel} (unchanged for {age:.0f}s; its holder "
                    "is gone)")
        return True

    def sweep(self) -> int:
        """Remove every stale lock file of refs and loose objects (``reconcile``: a leftover
        that no write ran into yet); how many."""
        found = [self.git_dir / "packed-refs.lock", self.git_dir / "HEAD.lock",
                 *self.git_dir.glob("worktrees/*/HEAD.lock")]
        for top in ("refs", "objects", "pub/fetch.git/refs"):
            for dirpath, _dirs, files in os.walk(self.git_dir / top):
                found += [Path(dirpath) / f for f in files if f.endswith(".lock")]
        found = [lock for lock in found if lock.exists() and self.healable(lock)]
        ages = [a for a in map(self.age, found) if a is not None]
        if ages and min(ages) < GRACE and not others_alive(self.pub_dir):
            # A young lock with no gitpub alive: its holder is dead or a short C git write;
            # the grace is waited out here (at most GRACE seconds), as a writer would.
            time.sleep(GRACE - min(ages))
        return sum(1 for lock in found if lock.exists() and self.heal(lock) and not lock.exists())

    @contextlib.contextmanager
    def _healing(self) -> Iterator[None]:
        """One healer at a time in a repository (an flock: never stale itself)."""
        with open(ensure_pub_dir(self.pub_dir) / "heal.lock", "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def locked_error(self, lock: Path, what: str) -> LockedError:
        age = self.age(lock) or 0.0
        return LockedError(
            f"{what} is locked by another process ({lock} exists, unchanged for {age:.0f}s)",
            hint=f"run the command again; a lock unchanged for {STALE_AFTER:.0f}s is removed "
                 "automatically (sooner when no other gitpub process runs)")
