"""The git layer's one door: a repository's objects, refs and configuration.

Everything above this module deals in hex object ids (``str``) and plain values. How each part
is done, and why (see docs/dulwich.md for the dulwich behaviours this layer guards against):

- **Objects are read by C git** (``git.reading``: one long-lived ``git cat-file``), so every
  object store git reads — packs, a multi-pack-index, alternates, SHA-256 — reads the same.
- **Objects are written by dulwich** (``git.writing``), durably, before anything points at
  them: file and directory fsynced.
- **Refs are read and moved by C git** (``git.refs``): exact reads, compare-and-swap
  transactions, broken refs reported as corruption, never taken for no ref.
- A lock another process holds is waited for, and a stale one healed by the lock policy
  the caller gives (``git.locks``; gitpub's is ``runtime.pubdir``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from gitpub.core.errors import CorruptStateError
from gitpub.git import locks
from gitpub.git.catfile import CatFile, Unreadable
from gitpub.git.locate import Location, locate
from gitpub.git.objects import FORMATS, ObjectFormat
from gitpub.git.reading import ObjectReading
from gitpub.git.refs import RefAccess, RefUpdate
from gitpub.git.run import CompletedProcess, run_git
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
)
from gitpub.git.writing import _UNREAD, ObjectWriter, loose_object_sound

T = TypeVar("T")

#: git commands that move no ref (they read, or write objects, the index or configuration
#: only): running one keeps the mirror refs known (``git.refs``); any other forgets them, and
#: so do ``remote`` and ``symbolic-ref`` but in their reading forms (``_moves_refs``).
REF_NEUTRAL = frozenset({
    "cat-file", "commit-tree", "config", "diff", "diff-tree", "for-each-ref", "hash-object",
    "interpret-trailers", "log", "ls-files", "ls-remote", "ls-tree", "merge-base", "mktree",
    "read-tree", "remote", "rev-list", "rev-parse", "show", "status", "symbolic-ref",
    "update-index", "var", "worktree", "write-tree"})

__all__ = ["BLOB_MODES", "MODE_EXEC", "MODE_FILE", "MODE_GITLINK", "MODE_LINK", "MODE_TREE",
           "STORE_IDENTITY", "Change", "CommitInfo", "Entry", "Identity", "RefUpdate",
           "Repository"]


def _command_at(args: Sequence[str]) -> int:
    """Where the git command's name is among ``args`` (after git's own options)."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-c", "-C") else 1
    return i


def _command(args: Sequence[str]) -> str | None:
    i = _command_at(args)
    return args[i] if i < len(args) else None


class Repository(ObjectReading, ObjectWriter, RefAccess):
    """A git repository opened for gitpub: objects (``git.reading``, ``git.writing``), refs
    (``git.refs``) and configuration. Close it (``with``): it ends the repository's
    ``git cat-file``."""

    def __init__(self, location: Location) -> None:
        self.git_dir = location.git_dir  # differs from common_dir in a linked worktree
        self.common_dir = location.common_dir
        self.work_tree: Path | None = location.work_tree
        #: Where the command runs, relative to the top of the working tree ("" at the top or
        #: outside it): what ``git rev-parse --show-prefix`` says.
        self.prefix = location.prefix
        #: The working tree is git's guess from ``GIT_DIR`` alone (``Location``).
        self.work_tree_implied = location.implied_work_tree
        found = FORMATS.get(location.object_format)
        if found is None:
            raise CorruptStateError(f"the repository's object format "
                                    f"{location.object_format!r} is not one gitpub knows",
                                    hint="gitpub reads sha1 and sha256 repositories")
        self.object_format: ObjectFormat = found
        #: What to do about a lock another process holds (``git.locks``): None, only wait.
        self.lock_policy: locks.LockPolicy | None = None
        #: How long a write waits for such a lock (None: the policy's, else ``locks.WAIT``).
        self.lock_wait: float | None = None
        self._cat = CatFile(self.git_dir, self.work_tree or self.git_dir)
        self.forget_refs()
        self._config: dict[str, str] | None = None
        self._config_every: dict[str, list[str]] = {}
        self._walks = {}
        self._diffs = {}
        self._objects = {}
        self._present = {}
        self._items = {}
        self._names = {}
        self._fsck = {}
        self._parent_changes = {}
        self._shared: object = _UNREAD
        self._batch_dirs: set[str] | None = None

    @classmethod
    def discover(cls, start: Path) -> Repository:
        """The repository git would use in ``start``: ``git.locate`` asks git itself, with the
        ``GIT_DIR``/``GIT_WORK_TREE``/``GIT_COMMON_DIR`` of the environment, then this opens
        exactly that git directory, common directory and working tree."""
        return cls(locate(start))

    def close(self) -> None:
        if self.lock_policy is not None:
            self.lock_policy.close()
        self.close_refs()
        self._cat.close()

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def git(self, *args: str, timeout: float | None = None, input: bytes | None = None,
            env: Mapping[str, str] | None = None) -> CompletedProcess[bytes]:
        """Run C git in this repository and no other (see ``git.run``). ``env`` adds
        variables (a temporary ``GIT_INDEX_FILE``, say) after the hardening. A git that may
        move refs (anything but the commands in ``REF_NEUTRAL``) makes the refs kept in this
        command forgotten (``git.refs``): a ``push`` those it may move only (``_tracked``)."""
        if self._moves_refs(args):
            if _command(args) == "push":
                self.forget_mirrors(self._tracked())
            else:
                self.forget_refs()
        if "config" in args:
            self._config = None  # it may write: read it again
        return run_git(args, cwd=self.work_tree or self.git_dir, git_dir=self.git_dir,
                       work_tree=self.work_tree, timeout=timeout, input=input, env=env)

    def _tracked(self) -> list[str]:
        """Where a ``git push`` here may move refs: the remote-tracking refs git updates after
        it for the refs it pushed, which the remotes' fetch refspecs name (the destination of
        each, up to its ``*``)."""
        found = []
        for key in [k for k in self.config() if k.startswith("remote.") and k.endswith(".fetch")]:
            for spec in self.config_values(key):
                _, colon, dst = spec.partition(":")
                if colon and dst and not spec.startswith("^"):
                    found.append(dst.split("*", 1)[0])
        return found

    def forget_kept(self) -> None:
        """Forget what this command kept of what another program may change: the
        configuration and the refs kept (after a program of the person's ran, which may run
        git here). Whole-tree answers stay: objects never change."""
        self._config = None
        self.forget_refs()

    @staticmethod
    def _moves_refs(args: tuple[str, ...]) -> bool:
        i = _command_at(args)
        if i >= len(args) or args[i] not in REF_NEUTRAL:
            return True
        rest = [a for a in args[i + 1:] if not a.startswith("-")]
        if args[i] == "remote":  # prune, set-head, rename, remove, update, add -f move them
            return bool(rest) and rest[0] not in ("get-url", "show")
        if args[i] == "symbolic-ref":  # with a target it writes one; -d deletes one
            return len(rest) > 1 or any(a in ("-d", "--delete") for a in args[i + 1:])
        return False

    # -- locks -----------------------------------------------------------------------------

    def _while_locked(self, action: Callable[[], T], what: str,
                      done: Callable[[], bool] | None = None) -> T | None:
        """Run ``action``, retrying while another process holds the lock it needs
        (``FileLocked``), with a short exponential backoff; the lock policy may remove a stale
        lock (``git.locks``). ``done`` may say that the other process did our work meanwhile
        (then ``None`` is returned). After ``lock_wait`` seconds: ``LockedError``."""
        policy = self.lock_policy
        if policy is not None:
            policy.enter()
        wait = self.lock_wait if self.lock_wait is not None else \
            locks.WAIT if policy is None else policy.wait
        delay = 0.001
        deadline = time.monotonic() + wait
        while True:
            try:
                return action()
            except locks.FileLocked as e:
                lock = Path(os.fsdecode(e.lockfilename))
                if self.heal_lock(lock) and time.monotonic() <= deadline:
                    continue  # it was stale and is gone, or its holder finished: at once
                if time.monotonic() > deadline:
                    raise (locks.LockedError(f"{what} is locked by another process ({lock} "
                                             "exists)", hint="run the command again")
                           if policy is None else policy.locked_error(lock, what)) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.05)
                if done is not None and done():
                    return None

    def reader_pids(self) -> list[int]:
        """The processes this repository keeps running to read it (its ``git cat-file``) and
        to move its refs (its ``git update-ref`` session, which holds no lock between two
        transactions, and a transaction that meets a lock ends it): never a lock's holder
        when this process looks for one."""
        pids = [self._cat.pid, None if self._session is None else self._session.proc.pid]
        return [pid for pid in pids if pid is not None]

    def sweep_stale_locks(self) -> int:
        """Remove the stale lock files nobody ran into yet (the lock policy's); how many."""
        return 0 if self.lock_policy is None else self.lock_policy.sweep()

    def set_aside_corrupt(self, sha: str) -> Path | None:
        """Move the loose object ``sha`` out of this repository's object store when git, asked
        again, reads it as corrupt (``LockPolicy.set_aside``); where it is kept (None: it is
        not out). Never a sound object, nor one of an alternate."""
        if self.lock_policy is None or not self.object_format.is_id(sha):
            return None
        path = self._loose_path(sha)
        if not path.is_file():
            return None
        try:  # read whole: a truncated object's header may still read
            self._cat.contents(sha)
        except Unreadable:
            return self.lock_policy.set_aside(
                path, lambda moved: loose_object_sound(moved, sha, self.object_format))
        return None  # sound after all (or gone): nothing is moved

    def put_back_corrupt(self, sha: str, kept: Path) -> bool:
        """Undo ``set_aside_corrupt`` when no sound copy took the object's place (the remote
        had none to send); whether it was put back."""
        return self.lock_policy is not None and self.lock_policy.put_back(
            self._loose_path(sha), kept)

    def _loose_path(self, sha: str) -> Path:
        return self.common_dir / "objects" / sha[:2] / sha[2:]

    def heal_lock(self, lock: Path) -> bool:
        """Remove ``lock`` if the lock policy calls it stale; whether it is gone now."""
        if self.lock_policy is not None:
            return self.lock_policy.heal(lock)
        return not lock.exists()

    # -- configuration ---------------------------------------------------------------------

    def config_value(self, section: str, key: str) -> str | None:
        """``section.key`` as git reads it (every configuration file, includes followed; the
        last value of several), ``""`` for a key without ``=``. ``section`` may name a
        subsection (``remote.origin``), whose case counts."""
        first, dot, sub = section.partition(".")
        name = f"{first.lower()}{dot}{sub}.{key.lower()}"
        return self.config().get(name)

    def config(self) -> dict[str, str]:
        """The whole configuration as git reads it, once per command (``git config --list``;
        read again after a ``git config`` this repository ran): its keys as git lists them
        (section and variable lower case), the last value of each."""
        if self._config is None:
            proc = self.git("config", "--list", "-z", timeout=30)
            found: dict[str, str] = {}
            every: dict[str, list[str]] = {}
            if proc.returncode == 0:
                for item in proc.stdout.split(b"\0"):
                    name, _, value = item.partition(b"\n")
                    if name:
                        key, text = name.decode("utf-8", "surrogateescape"), \
                            value.decode("utf-8", "replace")
                        found[key] = text
                        every.setdefault(key, []).append(text)
            self._config, self._config_every = found, every
        return self._config

    def config_values(self, name: str) -> list[str]:
        """Every value of ``name`` (as ``config`` names keys), in git's order."""
        self.config()
        return list(self._config_every.get(name, ()))

    def layout_config(self) -> Mapping[str, str]:
        """The configuration that says how the repository is laid out and shared
        (``extensions.*``, ``core.sharedRepository``; lower-case names, the last value of
        each): from ``config``, read once per command (``store.fetchdir.can_isolate``, the
        object writer)."""
        return {name: value for name, value in self.config().items()
                if name.startswith("extensions.") or name == "core.sharedrepository"}

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

    def head_ref(self) -> str | None:
        """The branch HEAD points at (``refs/heads/…``), None when detached or bare."""
        return None if self.work_tree is None else self.symbolic_head()

    def message_as_git_shows(self, sha: str) -> bytes:
        """A commit's message as C git shows it: re-encoded to UTF-8 from the commit's
        ``encoding`` header (what ``git log`` and ``%(trailers)`` read); never a signature's
        verification before it (``log.showSignature`` in the user's configuration)."""
        proc = self.git("-c", "log.showSignature=false", "show", "-s", "--no-notes",
                        "--encoding=UTF-8", "--format=%B", sha)
        if proc.returncode != 0:
            raise CorruptStateError(f"git cannot show commit {sha}")
        return proc.stdout.removesuffix(b"\n")


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
