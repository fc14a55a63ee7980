"""The git layer: every read and write of git objects and refs goes through here.

Everything above this module deals in hex object ids (``str``) and plain values; only this module
and the job store know dulwich. The rules it enforces, learnt the hard way (see docs/dulwich.md):

- Objects are written before anything points at them, and they are on disk (file *and* directory
  fsynced) before the ref that makes them reachable moves. dulwich only fsyncs loose objects when
  ``fsync_object_files`` is set and never fsyncs directories, so we do both ourselves.
- Refs move only by compare-and-swap (``set_if_equals``), and ``FileLocked`` — another writer
  holding the lock — is a reason to re-try the same swap, never to write unconditionally.
- A loose ref file that is empty or garbage is corruption (a crash symptom): dulwich would quietly
  fall back to a stale packed value, so we read the raw file first and refuse.
- Reftable repositories are refused: dulwich's writes there are not atomic.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CorruptStateError, NotARepositoryError
from gitpub.core.files import fsync_dir
from gitpub.git import packed, refstore
from gitpub.git.gitconfig import config_path, is_plain
from gitpub.git.locate import Location, locate
from gitpub.git.odb import ObjectReader
from gitpub.git.reading import ObjectReading
from gitpub.git.run import run_git
from gitpub.git.values import (
    BLOB_MODES,
    MODE_EXEC,
    MODE_FILE,
    MODE_GITLINK,
    MODE_LINK,
    MODE_TREE,
    STORE_IDENTITY,
    Change,
    CommitInfo,
    Entry,
    Identity,
    _b,
    _r,
    _s,
)
from gitpub.git.writing import ObjectWriter

if TYPE_CHECKING:  # dulwich is imported where it is used (~40 ms): reading needs none of it
    import subprocess

    from dulwich.repo import Repo

    from gitpub.git import locks

T = TypeVar("T")

__all__ = ["BLOB_MODES", "MODE_EXEC", "MODE_FILE", "MODE_GITLINK", "MODE_LINK", "MODE_TREE",
           "STORE_IDENTITY", "Change", "CommitInfo", "Entry", "Identity", "Repository",
           "empty_ref_value"]

#: The id git uses for "no object" (dulwich's ``ZERO_SHA``).
ZERO_ID = "0" * 40


class Repository(ObjectReading, ObjectWriter):
    """A git repository opened for gitpub: objects, refs and configuration (writing objects:
    ``git.writing``).

    Reading needs no dulwich in a repository whose configuration is plain
    (``gitconfig.is_plain``): refs are read from their files (``git.refstore``), objects by
    ``git.odb``, which answers only with objects proven by their id and leaves everything else
    — a missing or damaged object, an unusual shape — to dulwich, opened on first need. A
    repository that is not plain is opened with dulwich at once, and read only through it.
    """

    def __init__(self, location: Location) -> None:
        self._dulwich: Repo | None = None
        self._batch_dirs: set[str] | None = None
        self.git_dir = location.git_dir  # differs from common_dir in a linked worktree
        self.common_dir = location.common_dir
        self.work_tree: Path | None = location.work_tree
        #: Where a line about healing goes (a stale lock removed): the command's progress.
        self.notice: Callable[[str], None] = lambda message: None
        #: How long a write waits for a lock another process holds (None: ``locks.WAIT``,
        #: see ``git.locks``, imported by the first write: reading takes no locks).
        self.lock_wait: float | None = None
        self._presence: locks.Presence | None = None
        self._healer: locks.Healer | None = None
        #: Where the command runs, relative to the top of the working tree ("" at the top or
        #: outside it): what ``git rev-parse --show-prefix`` says.
        self.prefix = location.prefix
        #: The working tree is git's guess from ``GIT_DIR`` alone (``Location``).
        self.work_tree_implied = location.implied_work_tree
        self._reader: ObjectReader | None = None
        if is_plain(config_path(self.common_dir), bare_matters=False):
            self._reader = ObjectReader(str(self.common_dir / "objects"))
        else:
            self._refuse_reftable()  # opens it with dulwich: what dulwich refuses, it refuses

    @property
    def plain(self) -> bool:
        """Whether the repository's own configuration is plain (``git.gitconfig``): no
        extensions, includes or ``core.worktree``; its objects are read by ``git.odb``."""
        return self._reader is not None

    def sampled_commits(self, n: int, at_least: int) -> list[tuple[int, str]]:
        """(commit time, id) of commits sampled from the packs (``ObjectReader.sampled_commits``):
        a guess of the history's spread, made without a walk; none unless plain."""
        return [] if self._reader is None else self._reader.sampled_commits(n, at_least)

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def discover(cls, start: Path) -> Repository:
        """The repository git would use in ``start``: ``git.locate`` asks git itself, with the
        ``GIT_DIR``/``GIT_WORK_TREE``/``GIT_COMMON_DIR`` of the environment, then this opens
        exactly that git directory, common directory and working tree."""
        return cls(locate(start))

    @property
    def _repo(self) -> Repo:
        """The repository as dulwich opens it (on first use: writing, or a read ``git.odb``
        leaves to dulwich)."""
        if self._dulwich is None:
            self._dulwich = self._open_dulwich()
        return self._dulwich

    def _open_dulwich(self) -> Repo:
        from dulwich.errors import NotGitRepository
        from dulwich.repo import Repo

        try:
            repo = Repo(controldir=str(self.git_dir), commondir=str(self.common_dir),
                        worktree=None if self.work_tree is None else str(self.work_tree),
                        bare=self.work_tree is None)
        except (NotGitRepository, OSError) as e:
            raise NotARepositoryError(
                f"cannot open the repository at {self.git_dir}: {e}",
                hint="check the GIT_DIR and GIT_WORK_TREE you set, or pass -C PATH",
            ) from None
        repo.object_store.fsync_object_files = True
        return repo

    def close(self) -> None:
        if self._presence is not None:
            self._presence.close()
            self._presence = None
        if self._reader is not None:
            self._reader.close()
        if self._dulwich is not None:
            self._dulwich.close()
            self._dulwich = None

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _refuse_reftable(self) -> None:
        cfg = self._repo.get_config()
        try:
            storage = cfg.get((b"extensions",), b"refStorage")
        except KeyError:
            return
        if storage.lower() == b"reftable":
            raise NotARepositoryError(
                "reftable repositories are not supported (ref updates there are not atomic)",
                hint="convert with `git refs migrate --ref-format=files`",
            )

    def git(self, *args: str, timeout: float = 300, input: bytes | None = None,
            env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
        """Run C git in this repository and no other (see ``git.run``): for what dulwich lacks
        or does slowly — the network, merge-base, read-tree, reset, pack-refs, rev-list.
        ``env`` adds variables (a temporary ``GIT_INDEX_FILE``, say) after the hardening."""
        return run_git(args, cwd=self.work_tree or self.git_dir, git_dir=self.git_dir,
                       work_tree=self.work_tree, timeout=timeout, input=input, env=env)

    @property
    def pub_dir(self) -> Path:
        """gitpub's private space inside the git directory (scratch, caches, locks); a
        ``PubDirError`` if something else stands there."""
        path = self.common_dir / "pub"
        if path.exists() and not path.is_dir():
            from gitpub.git import locks

            locks.ensure_pub_dir(path)  # raises, saying what is wrong
        return path

    # -- locks -----------------------------------------------------------------------------

    def _while_locked(self, action: Callable[[], T], what: str,
                      done: Callable[[], bool] | None = None) -> T | None:
        """Run ``action``, retrying while another process holds the lock it needs (dulwich
        raises ``FileLocked``), with a short exponential backoff; a stale lock is removed
        (``git.locks``). ``done`` may say that the other process did our work meanwhile (then
        ``None`` is returned). After ``lock_wait`` seconds: ``LockedError``."""
        from gitpub.git import locks
        from gitpub.git.lockfile import FileLocked  # dulwich's, for objects, is translated

        if self._presence is None:
            self._presence = locks.Presence(locks.ensure_pub_dir(self.pub_dir))
        delay = 0.001
        deadline = time.monotonic() + (locks.WAIT if self.lock_wait is None else self.lock_wait)
        while True:
            try:
                return action()
            except FileLocked as e:
                lock = Path(os.fsdecode(e.lockfilename))
                if self.healer.heal(lock) and time.monotonic() <= deadline:
                    continue  # it was stale and is gone, or its holder finished: at once
                if time.monotonic() > deadline:
                    raise self.healer.locked_error(lock, what) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
                if done is not None and done():
                    return None

    @property
    def healer(self) -> locks.Healer:
        from gitpub.git import locks

        if self._healer is None:
            self._healer = locks.Healer(self.common_dir, self.common_dir / "pub",
                                        lambda message: self.notice(message))
        return self._healer

    def sweep_stale_locks(self) -> int:
        """Remove the stale lock files nobody ran into yet (see ``git.locks``); how many."""
        return self.healer.sweep()

    def heal_lock(self, lock: Path) -> bool:
        """Remove ``lock`` (a C git command's) if it is stale; whether it is gone now."""
        return self.healer.heal(lock)

    # -- configuration ---------------------------------------------------------------------

    def config_value(self, section: str, key: str) -> str | None:
        stack = self._repo.get_config_stack()
        try:
            return stack.get((section.encode(),), key.encode()).decode("utf-8", "replace")
        except KeyError:
            return None

    def user_identity(self) -> Identity:
        """The identity for content commits: git's own rules, minus the interactive prompts."""
        name = os.environ.get("GIT_AUTHOR_NAME") or self.config_value("user", "name") or "gitpub"
        email = (
            os.environ.get("GIT_AUTHOR_EMAIL")
            or self.config_value("user", "email")
            or "gitpub@localhost"
        )
        return Identity(name.replace("<", "").replace(">", ""), email.strip("<> "))

    def committer_now(self) -> tuple[Identity, int, int]:
        """Who commits now, when, and in which time zone (seconds east of UTC), as git itself
        says (``git var GIT_COMMITTER_IDENT``: ``GIT_COMMITTER_NAME``/``EMAIL``/``DATE``, the
        configuration): what ``git rebase`` stamps on a commit it replays. When git cannot say
        (no identity it accepts, a date it cannot read), this user at this time, in UTC."""
        proc = self.git("var", "GIT_COMMITTER_IDENT", timeout=30)
        found = _ident(proc.stdout) if proc.returncode == 0 else None
        return found or (self.user_identity(), int(time.time()), 0)

    # -- refs ------------------------------------------------------------------------------

    def read_ref(self, name: str) -> str | None:
        """The object id a ref points at, ``None`` if absent; corruption raises."""
        raw_path = self.common_dir / name
        try:
            raw = raw_path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            raw = None
        except IsADirectoryError:
            return None
        if raw is not None:
            if raw.startswith(b"ref: "):
                return self._follow(name)
            value = refstore.loose_id(raw)  # as git reads a ref file
            if value is None:
                raise CorruptStateError(
                    f"ref {name} is corrupt ({len(raw)} bytes that are not an object id)",
                    hint=f"inspect {raw_path}; restore it from `git reflog` or a backup",
                )
            return value
        try:
            return packed.lookup(self.common_dir / "packed-refs", name)
        except packed.PackedRefsError as e:
            raise self.corrupt_packed_refs(str(e)) from None

    def _follow(self, name: str) -> str | None:
        """The object id a symbolic ref ends at, as git follows it (dulwich's
        ``refs.follow``). gitpub writes none: one that dangles, loops or ends at something
        that is not an object id is corruption, reported — never taken for no ref."""
        try:
            names, sha = self._repo.refs.follow(_r(name))
        except Exception as e:  # dulwich's SymrefLoop, or a damaged ref on the way
            sha, names, error = None, [], f"a loop or a damaged ref on the way: {type(e).__name__}"
        else:
            error = f"a symbolic ref to {_s(names[-1]) if names else '?'}"
        value = None if sha is None or len(sha) != 40 else refstore.loose_id(sha)
        if value is None:
            from gitpub.core.sanitize import sanitize

            raise CorruptStateError(sanitize(f"ref {name} is corrupt ({error}, which does not "
                                             "name an object)"),
                                    hint=f"inspect {self.common_dir / name}")
        return value

    def corrupt_packed_refs(self, what: str) -> CorruptStateError:
        """The error for a ``packed-refs`` file git would not have written (see
        ``refstore.corrupt_packed``)."""
        return refstore.corrupt_packed(self.common_dir, what)

    def head_ref(self) -> str | None:
        """The branch HEAD points at (``refs/heads/…``), None when detached or bare."""
        return None if self.work_tree is None else self.symbolic_head()

    def symbolic_head(self) -> str | None:
        """The ref HEAD points at (``refs/heads/…``), with or without a working tree; None when
        HEAD is detached."""
        try:
            raw = self._repo.refs.read_ref(_r("HEAD"))
        except OSError:
            return None
        if raw is None or not raw.startswith(b"ref: "):
            return None
        return raw[5:].strip().decode("utf-8", "replace")

    def cas_ref(self, name: str, old: str | None, new: str, message: str = "gitpub") -> bool:
        """Move ``name`` from ``old`` (``None``: must not exist) to ``new``; False if it moved.
        Costs one ref, however many are packed (``git.refstore``)."""
        ok = self._while_locked(
            lambda: refstore.compare_and_swap(self.common_dir, name, old, new), f"ref {name}")
        if ok:
            fsync_dir(str((self.common_dir / name).parent))
            with contextlib.suppress(OSError):  # the ref moved; a reflog is never state
                if self.plain:
                    refstore.append_reflog(self.common_dir, name, old, new, message)
                else:
                    self._repo.refs._log(_r(name), _b(ZERO_ID if old is None else old),
                                         _b(new), message=message.encode())
        return bool(ok)

    def delete_ref(self, name: str, old: str) -> bool:
        """Delete ``name`` if it is ``old``; False if it holds another value (or none)."""
        done = self._while_locked(lambda: refstore.delete_loose(self.common_dir, name, old),
                                  f"ref {name}")
        if done:
            refstore.delete_reflog(self.common_dir, name)  # as git does
        if done is not None:
            return done
        # packed: C git rewrites packed-refs under its own lock, checking the old value
        return self.git("update-ref", "-d", name, old).returncode == 0

    def ref_names(self, prefix: str) -> list[str]:
        """The names under ``prefix`` (ending with ``/``) of every ref, *including* damaged
        loose ones (empty or garbage files), which dulwich's listing silently skips: a damaged
        ref must be reported, never be taken for no ref."""
        names = set(self.list_refs(prefix))
        top = self.common_dir / prefix
        for dirpath, _dirs, files in os.walk(top):
            rel = Path(dirpath).relative_to(top)
            names.update((rel / f).as_posix() for f in files if not f.endswith(".lock"))
        return sorted(names)

    def list_refs(self, prefix: str) -> dict[str, str]:
        """Refs under ``prefix`` (which ends with ``/``), keyed by the rest of their name: a
        range of ``packed-refs`` and the loose files below the prefix, nothing else read."""
        return refstore.with_prefix(self.common_dir, prefix)

    # -- objects (reading: ``git.reading``; writing: ``git.writing``) -----------------------

    def message_as_git_shows(self, sha: str) -> bytes:
        """A commit's message as C git shows it: re-encoded to UTF-8 from the commit's
        ``encoding`` header (what ``git log`` and ``%(trailers)`` read)."""
        proc = self.git("show", "-s", "--no-notes", "--encoding=UTF-8", "--format=%B", sha)
        if proc.returncode != 0:
            raise CorruptStateError(f"git cannot show commit {sha}")
        return proc.stdout.removesuffix(b"\n")

def _lock_crash_points() -> None:
    """Crash points inside dulwich's locked writes (``git.ref-locked``, ``git.object-locked``):
    its ``.lock`` file is written and not yet renamed. Installed only when the environment asks
    for a crash point or a trace (tests); nothing changes otherwise."""
    asked = [os.environ.get(v, "") for v in ("GITPUB_CRASH_AT", "GITPUB_FAIL_AT")]
    if not any(a.startswith("git.") for a in asked) and not os.environ.get("GITPUB_CRASH_TRACE"):
        return
    from dulwich.file import _GitFile

    original = _GitFile.close

    def close(self: _GitFile) -> None:
        if not self._closed:
            self._file.flush()
            lock = os.fsdecode(self._lockfilename)
            inside_objects = f"{os.sep}objects{os.sep}" in lock
            crash_point("git.object-locked" if inside_objects else "git.ref-locked")
        original(self)

    _GitFile.close = close  # type: ignore[method-assign]


_lock_crash_points()


def empty_ref_value() -> str:
    return ZERO_ID


def _ident(out: bytes) -> tuple[Identity, int, int] | None:
    """``Name <email> 1700000000 +0100`` (what ``git var`` prints) as its parts, or None."""
    head, sep, tail = out.rstrip(b"\n").rpartition(b"> ")
    name, lt, email = head.partition(b" <")
    when, _, zone = tail.partition(b" ")
    if not (sep and lt) or b"<" in email or len(zone) != 5 or zone[:1] not in b"+-":
        return None
    if not (when.lstrip(b"-").isdigit() and zone[1:].isdigit()):
        return None
    offset = (int(zone[1:3]) * 60 + int(zone[3:])) * 60
    return (Identity(name.decode("utf-8", "replace"), email.decode("utf-8", "replace")),
            int(when), -offset if zone[:1] == b"-" else offset)
