"""``.git/pub``, gitpub's private space, and its lock policy: which lock files are stale.

git and dulwich take a lock by creating ``<file>.lock`` with ``O_EXCL`` and release it by
renaming it over the file. A process killed in between leaves the lock file behind, and every
later writer of that file fails — forever, until a person deletes it. Such lock files carry no
pid, and a live C git holds a ref's lock without keeping it open (it writes the new value,
closes the file, and renames it at commit), so no age tells a dead holder from a slow one.
What can be observed is whether any process that could hold it is alive:

- a **holder** is a process, other than this one, the readers it keeps (its repository's
  ``git cat-file``) and those waiting for it (its ancestors: the ``git commit`` whose
  post-commit hook this is holds no ref lock while it runs the hook, and one that did could
  not release it before we end), that is git
  (any ``git*`` program) or gitpub working in this repository — its working directory, its
  command line or its ``GIT_DIR``-like variables name the repository — or any process with a
  file of the git directory open (every gitpub process keeps one: its presence file under
  ``.git/pub/live/``, an ``flock`` the kernel drops when it dies, however it dies);
- a lock with no holder is stale; a lock with a holder is never removed, however old: the
  writer waits (``Healer.wait``) and then gives up with ``LockedError``, naming the processes.

Processes are read from ``/proc`` (Linux). Where there is no ``/proc`` — or a process cannot be
read (another user's) and may be git — nobody can be ruled out, and nothing is removed: the
error says which lock to delete by hand once no git runs.

A stale lock is removed — under an ``flock`` of its own (``.git/pub/heal.lock``), after checking
it is still the same file — with a line in the output, and the write is retried. Only lock files
of refs (``refs/**.lock``, ``packed-refs.lock``, ``HEAD.lock``) and of loose objects
(``objects/**.lock``) are healed (also in the private fetch repository,
``.git/pub/fetch.git``), never a user's ``index.lock``. ``open_repository``
(``runtime.session``) gives every repository gitpub opens this policy
(``git.locks.LockPolicy``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from gitpub.core.files import ensure_pub_dir
from gitpub.git.locks import LockedError

#: How long a writer waits for a lock a live process holds (seconds).
WAIT = 10.0
LIVE_DIR = "live"
_GIT_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE")


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
        _prune_dead(live, name)

    def close(self) -> None:
        if self._fd is not None and self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            os.close(self._fd)
            self._fd = None


def _prune_dead(live: Path, mine: str) -> None:
    """Remove the presence files of processes that died (their ``flock`` is free)."""
    for name in os.listdir(live):
        if name == mine:
            continue
        try:
            fd = os.open(live / name, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # alive
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            (live / name).unlink()


class Holder(NamedTuple):
    """A live process that may hold a lock of the repository."""

    pid: int
    command: str  # its command line, shortened, for the error

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command})"


def holders(places: Sequence[Path], git_dir: Path,
            readers: Iterable[int] = ()) -> list[Holder] | None:
    """The live processes that may hold a lock in the repository at ``places`` (its git
    directory, its working tree), but ``readers`` (this process's own): see the module. None
    when they cannot be told (no ``/proc``)."""
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return None
    ours = _ancestors(os.getpid()) | set(readers)
    roots = [str(p) for p in places]
    found = []
    for pid in pids:
        if pid in ours:
            continue
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone, or a kernel thread
        args = [a.decode("utf-8", "surrogateescape") for a in command if a]
        if not args:
            continue
        shown = " ".join(args)[:80]
        try:
            named = _names_repository(pid, args, roots, str(git_dir))
        except PermissionError:
            named = None  # another user's: git may be at work there
        except OSError:
            continue  # it ended while we looked
        if (named is None and _is_git(args)) or named is True or (named == "git" and _is_git(args)):
            found.append(Holder(pid, shown))
    return found


def _names_repository(pid: int, args: list[str], roots: list[str],
                      git_dir: str) -> bool | str:
    """True: the process has a file of the git directory open; "git": its working directory,
    command line or git's variables name the repository; False: none of that."""
    proc = f"/proc/{pid}"
    for fd in os.listdir(f"{proc}/fd"):  # raises for a process that ended meanwhile
        with contextlib.suppress(OSError):
            if _inside(os.readlink(f"{proc}/fd/{fd}"), [git_dir]):
                return True
    with contextlib.suppress(FileNotFoundError):
        if _inside(os.readlink(f"{proc}/cwd"), roots):
            return "git"
    if any(root in arg for arg in args for root in roots):
        return "git"
    with contextlib.suppress(FileNotFoundError):
        env = Path(f"{proc}/environ").read_bytes().split(b"\0")
        for item in env:
            key, _, value = item.decode("utf-8", "surrogateescape").partition("=")
            if key in _GIT_ENV and _inside(value, roots):
                return "git"
    return False


def _inside(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _is_git(args: list[str]) -> bool:
    """git (any ``git*`` program) or gitpub, as its command line shows it."""
    first = os.path.basename(args[0])
    return first.startswith("git") or any("gitpub" in a or "git-pub" in a for a in args[:3])


def _ancestors(pid: int) -> set[int]:
    """The processes ``pid`` descends from (its parent, its parent's parent, …)."""
    out: set[int] = set()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
            pid = int(stat.rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


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
                 wait: float = WAIT, work_tree: Path | None = None,
                 readers: Callable[[], Iterable[int]] = lambda: ()) -> None:
        self.git_dir, self.pub_dir, self.notice = git_dir, pub_dir, notice
        #: How long a writer waits for a lock a live process holds.
        self.wait = wait
        #: The processes this one keeps reading the repository (never a lock's holder).
        self.readers = readers
        #: Where the repository is: its git directory and working tree, as named and resolved.
        self.places = list(dict.fromkeys(
            p for d in (git_dir, work_tree) if d is not None for p in (d, d.resolve())))
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

    def holders(self) -> list[Holder] | None:
        return holders(self.places, self.git_dir.resolve(), self.readers())

    def heal(self, lock: Path) -> bool:
        """Remove ``lock`` if it is stale (no process may hold it); whether the write may be
        retried at once (also when the lock is gone by itself)."""
        age = self.age(lock)
        if age is None:
            return True
        if not self.healable(lock):
            return False
        with self._healing():
            seen = self._seen.get(str(lock))
            try:
                st = lock.lstat()
            except FileNotFoundError:
                return True
            if seen is None or not seen.same(st):
                return True  # another healer removed it and a new holder took it: re-try
            if self.holders() != []:
                return False  # a process may hold it, or nobody can be ruled out
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
        rel = lock.relative_to(self.git_dir) if lock.is_relative_to(self.git_dir) else lock
        self.notice(f"removed a stale lock {rel} (no process that could hold it is alive)")
        return True

    def set_aside(self, obj: Path, sound: Callable[[Path], bool]) -> Path | None:
        """Move a corrupt loose object into ``.git/pub/quarantine/`` (renamed: the bytes are
        kept, for inspection), so that a fetch brings a sound copy; said once, as a lock's
        healing is. Where it is kept, None when it is not out (git's error stands). The bytes
        moved are judged again (``sound``: the git layer's reading of a loose object): a
        sound copy written in its place since git read it (another process's fetch) goes
        back, never into the quarantine, and the path returned then holds nothing, as when
        another process set the object aside first: the fetch is made again."""
        quarantine = self.pub_dir / "quarantine"
        name = f"{obj.parent.name}{obj.name}.{time.time_ns()}"
        try:
            ensure_pub_dir(self.pub_dir)
            quarantine.mkdir(exist_ok=True)
            os.replace(obj, quarantine / name)
        except FileNotFoundError:  # another process set it aside, or git replaced it
            return quarantine / name  # (nothing kept here: ``put_back`` finds nothing)
        except OSError:
            return None  # another file system, say: git's error stands
        if sound(quarantine / name):
            # a sound copy took its place since git's reading (another process's fetch):
            # what is moved is what is judged, and it goes back
            try:
                os.link(quarantine / name, obj)  # never over a copy written meanwhile
            except FileExistsError:
                pass
            except OSError:
                return quarantine / name  # it cannot go back: out, and kept
            (quarantine / name).unlink()
            return quarantine / name  # nothing kept: the fetch is made again, as below
        self.notice(f"moved the corrupt object {obj.parent.name}{obj.name} aside to "
                    f".git/pub/quarantine/{name} (kept for inspection); fetched again from "
                    "the remote")
        return quarantine / name

    def put_back(self, obj: Path, kept: Path) -> bool:
        """Move ``kept`` back to ``obj`` unless a sound copy stands there now; said."""
        try:
            os.link(kept, obj)  # never over a sound copy fetched meanwhile
        except FileNotFoundError:  # another process's (or its directory is gone)
            if not kept.exists():
                return False
            obj.parent.mkdir(exist_ok=True)
            try:
                os.link(kept, obj)
            except OSError:
                return False
        except OSError:
            return False
        kept.unlink()
        self.notice(f"put the corrupt object {obj.parent.name}{obj.name} back: the remote "
                    "sent no sound copy of it")
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
        return sum(1 for lock in found if self.heal(lock) and not lock.exists())

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
        found = self.holders()
        if found is None:
            return LockedError(
                f"{what} is locked ({lock} exists, unchanged for {age:.0f}s), and this system "
                "cannot tell whether a process holds it",
                hint=f"once no git runs in this repository, delete {lock}")
        names = ", ".join(str(h) for h in found[:3]) + (", ..." if len(found) > 3 else "")
        return LockedError(
            f"{what} is locked by another process ({lock} exists, unchanged for {age:.0f}s; "
            f"it may be held by {names})",
            hint="run the command again when they are done; a lock is removed automatically "
                 "only once no process could hold it")

