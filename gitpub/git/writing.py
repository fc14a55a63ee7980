"""Writing git objects durably: blobs, trees rebuilt along the changed paths, commits.

The part of ``Repository`` that writes (a mixin: ``Repository`` is the only class using it). Every
object is on disk — file *and* directory fsynced — before anything may point at it; inside
``batch()`` the directories are fsynced once, together, when the block ends. Trees are rebuilt
only along the paths that change, so the cost follows the size of the change; a commit is a new
one (``write_commit``) or a person's commit rebased (``rewrite_commit``: its author and
encoding kept).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from gitpub.core.errors import CorruptStateError
from gitpub.core.files import fsync_dir
from gitpub.git import loose
from gitpub.git.values import MODE_TREE, STORE_IDENTITY, Entry, Identity, _b, _s

if TYPE_CHECKING:  # imported where objects are written: reading needs no dulwich (~40 ms)
    from dulwich.objects import ShaFile, Tree
    from dulwich.repo import Repo

    from gitpub.git.odb import ObjectReader

T = TypeVar("T")


class ObjectWriter:
    """Durable object writes, for ``Repository`` (which provides the attributes below)."""

    _batch_dirs: set[str] | None
    _reader: ObjectReader | None  # set in a plain repository: objects written by ``git.loose``

    @property
    def _repo(self) -> Repo:
        raise NotImplementedError

    def _typed(self, sha: str, kind: bytes) -> bytes | None:
        raise NotImplementedError

    def _get(self, sha: str) -> ShaFile:
        raise NotImplementedError

    def _while_locked(self, action: Callable[[], T], what: str,
                      done: Callable[[], bool] | None = None) -> T | None:
        raise NotImplementedError

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
        from dulwich.file import FileLocked

        from gitpub.git.lockfile import FileLocked as Locked

        store = self._repo.object_store

        def add() -> None:
            try:
                store.add_object(obj)
            except FileLocked as e:
                raise Locked(os.fsdecode(e.filename), os.fsdecode(e.lockfilename)) from None

        self._while_locked(add, f"object {_s(obj.id)}", done=lambda: obj.id in store)

    def _write_plain(self, kind: bytes, body: bytes) -> str:
        """One object written by ``git.loose`` (a plain repository), durably as ``store``."""
        reader = self._reader
        assert reader is not None
        sha = loose.object_id(kind, body)
        if reader.contains(sha):
            return sha
        self._while_locked(lambda: loose.write_loose(reader.objects, kind, body),
                           f"object {sha}", done=lambda: reader.contains(sha))
        dirs = {os.path.join(reader.objects, sha[:2]), reader.objects}
        if self._batch_dirs is not None:
            self._batch_dirs |= dirs
        else:
            for d in sorted(dirs):
                fsync_dir(d)
        return sha

    def write_blob(self, data: bytes) -> str:
        if self._reader is not None:
            return self._write_plain(b"blob", data)
        from dulwich.objects import Blob

        blob = Blob.from_string(data)
        self.store([blob])
        return _s(blob.id)

    def write_tree(self, base: str | None, changes: Mapping[str, Entry | None]) -> str:
        """A new tree: ``base`` with each path set to its entry (``None`` deletes it).

        Only the trees on the changed paths are rebuilt, so the cost follows the size of the
        change, not of the repository. Directories left empty disappear, as in git.
        """
        if self._reader is not None:
            written = self._write_tree_plain(base, changes)
            if written is not None:
                return written
        from dulwich.objects import Tree

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

    def _write_tree_plain(self, base: str | None,
                          changes: Mapping[str, Entry | None]) -> str | None:
        """``write_tree`` by ``git.loose`` (a plain repository): the same trees, or None when
        a tree on the way is not one ``git.odb`` reads (then dulwich writes them, as ever)."""
        split = {tuple(p.encode("utf-8").split(b"/")): e for p, e in changes.items()}
        for parts in split:
            if any(part in (b"", b".", b"..", b".git") for part in parts):
                raise ValueError(f"unsafe path: {b'/'.join(parts)!r}")
        out: list[tuple[bytes, bytes]] = []
        try:
            root = self._apply_plain(base, split, out)
        except _AskDulwich:
            return None
        if root is None:
            out.append((b"", loose.tree_body({})))
        sha = ""
        with contextlib.ExitStack() as stack:
            if self._batch_dirs is None:
                stack.enter_context(self.batch())
            for _kind, body in out:
                sha = self._write_plain(b"tree", body)
        return sha  # the root: written last

    def _entries(self, sha: str) -> dict[bytes, tuple[int, str]]:
        from gitpub.git.odb import parse_tree

        data = self._typed(sha, b"tree")
        entries = None if data is None else parse_tree(data)
        if entries is None:
            raise _AskDulwich
        return entries

    def _apply_plain(self, tree: str | None, changes: Mapping[tuple[bytes, ...], Entry | None],
                     out: list[tuple[bytes, bytes]]) -> str | None:
        """``_apply`` on tree entries (name -> (mode, id)); each new tree's content appended
        to ``out``, the subtrees before the trees holding them. Its id, or None if empty."""
        result = {} if tree is None else dict(self._entries(tree))
        direct, nested = _split(changes)
        for name, entry in direct.items():
            if entry is None:
                result.pop(name, None)
            elif any(e is not None for e in nested.get(name, {}).values()):
                raise ValueError(f"{name!r} is set both as a file and as a directory")
            else:
                result[name] = (entry.mode, entry.sha)
        for name, sub in nested.items():
            if direct.get(name) is not None:
                continue  # a file replaces the directory (its files are all deleted)
            old = result.get(name)
            old_tree = old[1] if old and old[0] == MODE_TREE else None
            subtree = self._apply_plain(old_tree, sub, out)
            if subtree is not None:
                result[name] = (MODE_TREE, subtree)
            elif old_tree is not None:
                del result[name]  # the directory's last file is gone (a file there stays)
        if not result:
            return None
        body = loose.tree_body(result)
        out.append((b"tree", body))
        return loose.object_id(b"tree", body)

    def _get_tree(self, sha: str) -> Tree:
        from dulwich.objects import Tree

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
        from dulwich.objects import Tree

        result = Tree()
        if tree is not None:
            for item in tree.iteritems():
                result.add(item.path, item.mode, item.sha)
        direct, nested = _split(changes)
        for name, entry in direct.items():
            if entry is None:
                if name in result:
                    del result[name]
            elif any(e is not None for e in nested.get(name, {}).values()):
                raise ValueError(f"{name!r} is set both as a file and as a directory")
            else:
                result.add(name, entry.mode, _b(entry.sha))
        for name, sub in nested.items():
            if direct.get(name) is not None:
                continue  # a file replaces the directory (its files are all deleted)
            old = result[name] if name in result else None  # noqa: SIM401 (Tree has no .get)
            old_tree = self._get_tree(_s(old[1])) if old and old[0] == MODE_TREE else None
            subtree = self._apply(old_tree, sub, new_objects)
            if subtree is not None:
                result.add(name, MODE_TREE, subtree.id)
            elif old_tree is not None:
                del result[name]  # the directory's last file is gone (a file there stays)
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
        stamp = int(time.time()) if when is None else when
        if self._reader is not None:
            return self._write_plain(b"commit", loose.commit_body(
                tree, parents, author.as_bytes(), (committer or author).as_bytes(), stamp,
                message))
        from dulwich.objects import Commit

        c = Commit()
        c.tree = _b(tree)
        c.parents = [_b(p) for p in parents]
        c.author = author.as_bytes()
        c.committer = (committer or author).as_bytes()
        c.author_time = c.commit_time = stamp
        c.author_timezone = c.commit_timezone = 0
        c.encoding = None
        c.message = message
        self.store([c])
        return _s(c.id)

    def rewrite_commit(self, original: str, *, tree: str, parents: Sequence[str],
                       message: bytes, committer: Identity, when: int,
                       timezone: int = 0) -> str:
        """``original`` with a new tree, parents and message, committed by ``committer`` at
        ``when`` (``timezone``: seconds east of UTC): what ``git rebase`` makes of a commit.
        Its author (name, e-mail, date and time zone, byte for byte) and its encoding are kept;
        a signature is dropped (it would no longer verify).
        Written durably; nothing points at it yet."""
        from dulwich.objects import Commit

        old = self._get(original)
        if not isinstance(old, Commit):
            raise CorruptStateError(f"object {original} is not a commit")
        c = Commit()
        c.tree = _b(tree)
        c.parents = [_b(p) for p in parents]
        c.author = old.author
        c.author_time = old.author_time
        c.author_timezone = old.author_timezone
        c._author_timezone_neg_utc = old._author_timezone_neg_utc
        c.committer = committer.as_bytes()
        c.commit_time = when
        c.commit_timezone = timezone
        c.encoding = old.encoding
        c.message = message
        self.store([c])
        return _s(c.id)



class _AskDulwich(Exception):
    """A tree ``git.odb`` does not read: dulwich writes the change instead."""


def _split(changes: Mapping[tuple[bytes, ...], Entry | None]) -> tuple[
        dict[bytes, Entry | None], dict[bytes, dict[tuple[bytes, ...], Entry | None]]]:
    """The changes of one tree: those of its own entries (name -> entry, None: deleted), and
    those below each of its subdirectories (name -> the changes relative to it)."""
    nested: dict[bytes, dict[tuple[bytes, ...], Entry | None]] = {}
    direct: dict[bytes, Entry | None] = {}
    for parts, entry in changes.items():
        if len(parts) > 1:
            nested.setdefault(parts[0], {})[parts[1:]] = entry
        else:
            direct[parts[0]] = entry
    return direct, nested
