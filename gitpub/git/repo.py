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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from dulwich.errors import NotGitRepository, NotTreeError
from dulwich.file import FileLocked
from dulwich.object_store import tree_lookup_path
from dulwich.objects import ZERO_SHA, Blob, Commit, ObjectID, ShaFile, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

from gitpub.core.errors import CorruptStateError, NotARepositoryError
from gitpub.core.files import fsync_dir
from gitpub.git import packed
from gitpub.git.run import run_git

if TYPE_CHECKING:
    import subprocess

T = TypeVar("T")

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_LINK = 0o120000
MODE_TREE = 0o040000


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
    encoding: str | None = None  # the ``encoding`` header, when the commit has one


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


def _while_locked(action: Callable[[], T], done: Callable[[], bool] | None = None) -> T | None:
    """Run ``action``, retrying while another process holds the lock it needs (dulwich raises
    ``FileLocked``), with a short exponential backoff, for at most ten seconds. ``done`` may
    say that the other process did our work meanwhile (then ``None`` is returned)."""
    delay = 0.001
    deadline = time.monotonic() + 10.0
    while True:
        try:
            return action()
        except FileLocked:
            if time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
            if done is not None and done():
                return None


class Repository:
    """A git repository opened for gitpub: objects, refs and configuration."""

    def __init__(self, repo: Repo) -> None:
        self._repo = repo
        self._repo.object_store.fsync_object_files = True
        self._batch_dirs: set[str] | None = None
        self.common_dir = Path(repo.commondir())
        self.git_dir = Path(repo.controldir())  # differs from common_dir in a linked worktree
        self.work_tree: Path | None = None if repo.bare else Path(repo.path)
        self._refuse_reftable()

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def discover(cls, start: Path) -> Repository:
        try:
            return cls(Repo.discover(str(start)))
        except NotGitRepository:
            raise NotARepositoryError(
                f"not a git repository: {start}",
                hint="run inside a git repository, or pass -C PATH",
            ) from None

    def close(self) -> None:
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

    def git(self, *args: str, timeout: float = 300,
            input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        """Run C git in this repository and no other (see ``git.run``): for what dulwich lacks
        or does slowly — the network, merge-base, read-tree, reset, pack-refs, rev-list."""
        return run_git(args, cwd=self.work_tree or self.git_dir, git_dir=self.git_dir,
                       work_tree=self.work_tree, timeout=timeout, input=input)

    @property
    def pub_dir(self) -> Path:
        """gitpub's private space inside the git directory (scratch, caches, locks)."""
        return self.common_dir / "pub"

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
            raise CorruptStateError(f"packed-refs is corrupt: {e}",
                                    hint="`git pack-refs` rewrites it from the loose refs; "
                                         "inspect it first") from None

    def head_ref(self) -> str | None:
        """The branch HEAD points at (``refs/heads/…``), None when detached or bare."""
        if self.work_tree is None:
            return None
        try:
            raw = self._repo.refs.read_ref(Ref(b"HEAD"))
        except OSError:
            return None
        if raw is None or not raw.startswith(b"ref: "):
            return None
        return raw[5:].strip().decode("utf-8", "replace")

    def cas_ref(self, name: str, old: str | None, new: str, message: str = "gitpub") -> bool:
        """Move ``name`` from ``old`` (``None``: must not exist) to ``new``; False if it moved."""
        old_b = ZERO_SHA if old is None else _b(old)
        ok = _while_locked(lambda: self._repo.refs.set_if_equals(
            _r(name), old_b, _b(new), message=message.encode()))
        if ok:
            ref_dir = (self.common_dir / name).parent
            if ref_dir.is_dir():
                fsync_dir(str(ref_dir))
        return bool(ok)

    def delete_ref(self, name: str, old: str) -> bool:
        return bool(self._repo.refs.remove_if_equals(_r(name), _b(old)))

    def list_refs(self, prefix: str) -> dict[str, str]:
        """Refs under ``prefix`` (which ends with ``/``), keyed by the rest of their name."""
        found = self._repo.refs.as_dict(_r(prefix.rstrip("/")))
        return {_s(k): _s(v) for k, v in found.items()}

    # -- objects ---------------------------------------------------------------------------

    def has_object(self, sha: str) -> bool:
        return _b(sha) in self._repo.object_store

    def _get(self, sha: str) -> ShaFile:
        try:
            return self._repo.object_store[_b(sha)]
        except KeyError:
            raise CorruptStateError(f"object {sha} is missing from the repository") from None

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

    def changed_paths(self, old_tree: str | None, new_tree: str) -> list[tuple[str, str | None]]:
        """(path, new blob id or None if deleted) for every file that differs between two
        trees. Identical subtrees are skipped by id, so the cost follows the change."""
        from dulwich.diff_tree import tree_changes  # 20 ms to import: only where needed

        changes = tree_changes(self._repo.object_store, None if old_tree is None else _b(old_tree),
                               _b(new_tree))
        out: list[tuple[str, str | None]] = []
        for change in changes:
            new, old = change.new, change.old
            if new is not None and new.path is not None and new.sha is not None:
                out.append((new.path.decode("utf-8", "surrogateescape"), _s(new.sha)))
            elif old is not None and old.path is not None:
                out.append((old.path.decode("utf-8", "surrogateescape"), None))
        return out

    # -- writing objects -------------------------------------------------------------------

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Objects written inside are durable when the block ends (not each on its own): the
        directories are fsynced once, together. Nothing may point at them before that."""
        self._batch_dirs = set()
        try:
            yield
            dirs, self._batch_dirs = self._batch_dirs, None
            for d in sorted(dirs):
                fsync_dir(d)
        finally:
            self._batch_dirs = None

    def store(self, objects: Sequence[ShaFile]) -> None:
        """Write objects durably: each file and its directory are fsynced before we return
        (or, inside ``batch()``, before the batch ends)."""
        store = self._repo.object_store
        dirs: set[str] = set()
        for obj in objects:
            if obj.id in store:
                continue
            self._add_object(obj)
            path = store._get_shafile_path(obj.id)
            dirs.add(os.path.dirname(path))
        if dirs:
            dirs.add(os.path.dirname(next(iter(dirs))))  # objects/: new xx/ directories
        if self._batch_dirs is not None:
            self._batch_dirs |= dirs
            return
        for d in sorted(dirs):
            fsync_dir(d)

    def _add_object(self, obj: ShaFile) -> None:
        """Add one loose object; another process writing the same object holds its lock file
        (``FileLocked``) — wait for it to finish instead of failing."""
        store = self._repo.object_store
        _while_locked(lambda: store.add_object(obj), done=lambda: obj.id in store)

    def write_blob(self, data: bytes) -> str:
        blob = Blob.from_string(data)
        self.store([blob])
        return _s(blob.id)

    def write_tree(self, base: str | None, changes: Mapping[str, Entry | None]) -> str:
        """A new tree: ``base`` with each path set to its entry (``None`` deletes it).

        Only the trees on the changed paths are rebuilt, so the cost follows the size of the
        change, not of the repository. Directories left empty disappear, as in git.
        """
        split = {tuple(p.encode("utf-8").split(b"/")): e for p, e in changes.items()}
        for parts in split:
            if any(part in (b"", b".", b"..", b".git") for part in parts):
                raise ValueError(f"unsafe path: {b'/'.join(parts)!r}")
        new_objects: list[ShaFile] = []
        tree = self._apply(None if base is None else self._get_tree(base), split, new_objects)
        root = tree if tree is not None else Tree()
        if tree is None:
            new_objects.append(root)
        self.store(new_objects)
        return _s(root.id)

    def _get_tree(self, sha: str) -> Tree:
        obj = self._get(sha)
        if not isinstance(obj, Tree):
            raise CorruptStateError(f"object {sha} is not a tree")
        return obj

    def _apply(
        self,
        tree: Tree | None,
        changes: Mapping[tuple[bytes, ...], Entry | None],
        new_objects: list[ShaFile],
    ) -> Tree | None:
        result = Tree()
        if tree is not None:
            for item in tree.iteritems():
                result.add(item.path, item.mode, item.sha)
        nested: dict[bytes, dict[tuple[bytes, ...], Entry | None]] = {}
        for parts, entry in changes.items():
            if len(parts) > 1:
                nested.setdefault(parts[0], {})[parts[1:]] = entry
            elif entry is None:
                if parts[0] in result:
                    del result[parts[0]]
            else:
                result.add(parts[0], entry.mode, _b(entry.sha))
        for name, sub in nested.items():
            old = result[name] if name in result else None  # noqa: SIM401 (Tree has no .get)
            old_tree = self._get_tree(_s(old[1])) if old and old[0] == MODE_TREE else None
            subtree = self._apply(old_tree, sub, new_objects)
            if subtree is None:
                if name in result:
                    del result[name]
            else:
                result.add(name, MODE_TREE, subtree.id)
        if len(result) == 0:
            return None
        new_objects.append(result)
        return result

    def write_commit(
        self,
        tree: str,
        parents: Sequence[str],
        message: bytes,
        *,
        author: Identity = STORE_IDENTITY,
        committer: Identity | None = None,
        when: int | None = None,
    ) -> str:
        """Write a commit object (durably) and return its id. Nothing points at it yet."""
        c = Commit()
        c.tree = _b(tree)
        c.parents = [_b(p) for p in parents]
        c.author = author.as_bytes()
        c.committer = (committer or author).as_bytes()
        stamp = int(time.time()) if when is None else when
        c.author_time = c.commit_time = stamp
        c.author_timezone = c.commit_timezone = 0
        c.encoding = None
        c.message = message
        self.store([c])
        return _s(c.id)

    # -- history ---------------------------------------------------------------------------

    def first_parent_chain(self, tip: str) -> Iterator[CommitInfo]:
        sha: str | None = tip
        while sha is not None:
            info = self.commit(sha)
            yield info
            sha = info.parents[0] if info.parents else None


def empty_ref_value() -> str:
    return _s(ZERO_SHA)
