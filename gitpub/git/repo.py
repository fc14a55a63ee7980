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
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from dulwich.errors import NotGitRepository, NotTreeError
from dulwich.file import FileLocked
from dulwich.object_store import tree_lookup_path
from dulwich.objects import ZERO_SHA, Blob, Commit, ShaFile, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CorruptStateError, NotARepositoryError
from gitpub.core.files import fsync_dir
from gitpub.git import locks, packed, refstore
from gitpub.git.locate import Location, locate
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

if TYPE_CHECKING:
    import subprocess

T = TypeVar("T")

__all__ = ["BLOB_MODES", "MODE_EXEC", "MODE_FILE", "MODE_GITLINK", "MODE_LINK", "MODE_TREE",
           "STORE_IDENTITY", "Change", "CommitInfo", "Entry", "Identity", "Repository",
           "empty_ref_value"]


class Repository(ObjectWriter):
    """A git repository opened for gitpub: objects, refs and configuration (writing objects:
    ``git.writing``)."""

    def __init__(self, repo: Repo, location: Location | None = None) -> None:
        self._repo = repo
        self._repo.object_store.fsync_object_files = True
        self._batch_dirs: set[str] | None = None
        self.common_dir = Path(repo.commondir())
        self.git_dir = Path(repo.controldir())  # differs from common_dir in a linked worktree
        self.work_tree: Path | None = None if repo.bare else Path(repo.path)
        #: Where a line about healing goes (a stale lock removed): the command's progress.
        self.notice: Callable[[str], None] = lambda message: None
        #: How long a write waits for a lock another process holds (see ``git.locks``).
        self.lock_wait = locks.WAIT
        self._presence: locks.Presence | None = None
        self._healer: locks.Healer | None = None
        #: Where the command runs, relative to the top of the working tree ("" at the top or
        #: outside it): what ``git rev-parse --show-prefix`` says.
        self.prefix = ""
        #: The working tree is git's guess from ``GIT_DIR`` alone (``Location``).
        self.work_tree_implied = False
        if location is not None:
            self.work_tree, self.prefix = location.work_tree, location.prefix
            self.work_tree_implied = location.implied_work_tree
        self._refuse_reftable()

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def discover(cls, start: Path) -> Repository:
        """The repository git would use in ``start``: ``git.locate`` asks git itself, with the
        ``GIT_DIR``/``GIT_WORK_TREE``/``GIT_COMMON_DIR`` of the environment, then this opens
        exactly that git directory, common directory and working tree."""
        location = locate(start)
        try:
            repo = Repo(controldir=str(location.git_dir), commondir=str(location.common_dir),
                        worktree=None if location.work_tree is None else str(location.work_tree),
                        bare=location.work_tree is None)
        except (NotGitRepository, OSError) as e:
            raise NotARepositoryError(
                f"cannot open the repository at {location.git_dir}: {e}",
                hint="check the GIT_DIR and GIT_WORK_TREE you set, or pass -C PATH",
            ) from None
        return cls(repo, location)

    def close(self) -> None:
        if self._presence is not None:
            self._presence.close()
            self._presence = None
        self._repo.close()

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
            locks.ensure_pub_dir(path)  # raises, saying what is wrong
        return path

    # -- locks -----------------------------------------------------------------------------

    def _while_locked(self, action: Callable[[], T], what: str,
                      done: Callable[[], bool] | None = None) -> T | None:
        """Run ``action``, retrying while another process holds the lock it needs (dulwich
        raises ``FileLocked``), with a short exponential backoff; a stale lock is removed
        (``git.locks``). ``done`` may say that the other process did our work meanwhile (then
        ``None`` is returned). After ``lock_wait`` seconds: ``LockedError``."""
        if self._presence is None:
            self._presence = locks.Presence(locks.ensure_pub_dir(self.pub_dir))
        delay = 0.001
        deadline = time.monotonic() + self.lock_wait
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
            value = raw.strip()
            if value.startswith(b"ref: "):
                target = self._repo.refs.read_ref(_r(name))
                return None if target is None else _s(target)
            if len(value) != 40 or any(c not in b"0123456789abcdef" for c in value):
                raise CorruptStateError(
                    f"ref {name} is corrupt ({len(raw)} bytes that are not an object id)",
                    hint=f"inspect {raw_path}; restore it from `git reflog` or a backup",
                )
            return _s(value)
        try:
            return packed.lookup(self.common_dir / "packed-refs", name)
        except packed.PackedRefsError as e:
            raise self.corrupt_packed_refs(str(e)) from None

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
            raw = self._repo.refs.read_ref(Ref(b"HEAD"))
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
                self._repo.refs._log(_r(name), ZERO_SHA if old is None else _b(old), _b(new),
                                     message=message.encode())
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

    # -- objects ---------------------------------------------------------------------------

    def has_object(self, sha: str) -> bool:
        return _b(sha) in self._repo.object_store

    def _get(self, sha: str) -> ShaFile:
        try:
            return self._repo.object_store[_b(sha)]
        except KeyError:
            raise CorruptStateError(f"object {sha} is missing from the repository") from None
        except Exception as e:  # truncated, not zlib, bad header, wrong checksum, unreadable
            raise _unreadable(sha, e) from None

    def blob(self, sha: str) -> bytes:
        obj = self._get(sha)
        if not isinstance(obj, Blob):
            raise CorruptStateError(f"object {sha} is a {obj.type_name.decode()}, not a blob")
        return bytes(obj.as_raw_string())

    def tree_items(self, sha: str) -> list[tuple[str, Entry]]:
        obj = self._get(sha)
        if not isinstance(obj, Tree):
            raise CorruptStateError(f"object {sha} is a {obj.type_name.decode()}, not a tree")
        return [
            (item.path.decode("utf-8", "surrogateescape"), Entry(item.mode, _s(item.sha)))
            for item in obj.iteritems()
        ]

    def lookup(self, tree: str, path: str) -> Entry | None:
        """The entry at ``path`` inside ``tree``, or ``None``."""
        try:
            mode, sha = tree_lookup_path(
                self._repo.object_store.__getitem__, _b(tree), path.encode("utf-8")
            )
        except (KeyError, NotADirectoryError, NotTreeError):
            return None
        except Exception as e:  # a tree on the way is corrupt
            raise _unreadable(tree, e) from None
        return Entry(mode, _s(sha))

    def file_in_the_way(self, tree: str, path: str) -> str | None:
        """The first proper parent directory of ``path`` that is not a directory in ``tree``
        (a file or a symlink stands where a directory would have to be), or None."""
        parts = path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            entry = self.lookup(tree, parent)
            if entry is None:
                return None
            if entry.mode != MODE_TREE:
                return parent
        return None

    def walk_files(self, tree: str, prefix: str = "") -> Iterator[tuple[str, Entry]]:
        """Every non-tree entry below ``tree``, depth first, with its full path."""
        for name, entry in self.tree_items(tree):
            path = f"{prefix}{name}"
            if entry.mode == MODE_TREE:
                yield from self.walk_files(entry.sha, path + "/")
            else:
                yield path, entry

    def commit(self, sha: str) -> CommitInfo:
        obj = self._get(sha)
        if not isinstance(obj, Commit):
            raise CorruptStateError(f"object {sha} is a {obj.type_name.decode()}, not a commit")
        return CommitInfo(
            sha=sha,
            tree=_s(obj.tree),
            parents=tuple(_s(p) for p in obj.parents),
            message=bytes(obj.message),
            commit_time=int(obj.commit_time),
            encoding=None if obj.encoding is None else obj.encoding.decode("ascii", "replace"),
        )

    def raw_tree(self, sha: str) -> bytes:
        """A tree object's content exactly as stored (dulwich's parsed view drops duplicate
        entries; ``git.treecheck`` must see them)."""
        obj = self._get(sha)
        if not isinstance(obj, Tree):
            raise CorruptStateError(f"object {sha} is a {obj.type_name.decode()}, not a tree")
        return bytes(obj.as_raw_string())

    def message_as_git_shows(self, sha: str) -> bytes:
        """A commit's message as C git shows it: re-encoded to UTF-8 from the commit's
        ``encoding`` header (what ``git log`` and ``%(trailers)`` read)."""
        proc = self.git("show", "-s", "--no-notes", "--encoding=UTF-8", "--format=%B", sha)
        if proc.returncode != 0:
            raise CorruptStateError(f"git cannot show commit {sha}")
        return proc.stdout.removesuffix(b"\n")

    def is_signed(self, sha: str) -> bool:
        """Whether the commit carries a signature (``gpgsig``, ``gpgsig-sha256``): one that a
        rewrite (a new parent or message) cannot keep."""
        obj = self._get(sha)
        return isinstance(obj, Commit) and (
            obj.gpgsig is not None or any(k.startswith(b"gpgsig") for k, _ in obj._extra))

    def file_at(self, commit: str, path: str) -> bytes | None:
        """The content of the file (blob) at ``path`` in ``commit``, or None."""
        entry = self.lookup(self.commit(commit).tree, path)
        if entry is None or entry.mode == MODE_TREE or entry.mode == MODE_GITLINK:
            return None
        return self.blob(entry.sha)

    def diff_entries(self, old_tree: str | None, new_tree: str) -> list[Change]:
        """Every file (blob, symlink or submodule entry) that differs between two trees, with
        its entry on each side, sorted by path. A rename is a deletion and an addition; a type
        change (file to symlink) is one change of mode. Identical subtrees are skipped by id, so
        the cost follows the change."""
        from dulwich.diff_tree import tree_changes  # 20 ms to import: only where needed

        changes = tree_changes(self._repo.object_store, None if old_tree is None else _b(old_tree),
                               _b(new_tree))
        try:
            listed = list(changes)
        except KeyError as e:
            raise CorruptStateError(f"a tree below {new_tree} is missing ({e})") from None
        except Exception as e:
            raise _unreadable(new_tree, e, "a tree below ") from None
        old: dict[str, Entry] = {}
        new: dict[str, Entry] = {}
        for change in listed:
            for side, found in ((old, change.old), (new, change.new)):
                if found is not None and found.path is not None and found.sha is not None:
                    side[found.path.decode("utf-8", "surrogateescape")] = Entry(
                        int(found.mode or 0), _s(found.sha))
        return [Change(p, old.get(p), new.get(p)) for p in sorted(old.keys() | new.keys())
                if old.get(p) != new.get(p)]

    def changed_paths(self, old_tree: str | None, new_tree: str) -> list[tuple[str, str | None]]:
        """(path, new blob id or None if deleted) for every file that differs between two
        trees."""
        return [(c.path, None if c.new is None else c.new.sha)
                for c in self.diff_entries(old_tree, new_tree)]

    # -- history ---------------------------------------------------------------------------

    def first_parent_chain(self, tip: str) -> Iterator[CommitInfo]:
        sha: str | None = tip
        while sha is not None:
            info = self.commit(sha)
            yield info
            sha = info.parents[0] if info.parents else None


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


def _unreadable(sha: str, error: Exception, what: str = "") -> CorruptStateError:
    detail = " ".join(str(error).split())[:120] or type(error).__name__
    return CorruptStateError(f"{what}object {sha} is unreadable ({type(error).__name__}: "
                             f"{detail})", hint="`git fsck` lists the damaged objects")


def empty_ref_value() -> str:
    return _s(ZERO_SHA)
