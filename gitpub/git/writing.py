"""Writing git objects durably: blobs, trees rebuilt along the changed paths, commits.

The part of ``Repository`` that writes (a mixin). gitpub makes the bytes (``git.objects``) and
writes them as loose objects, in the repository's own hash (SHA-1 or SHA-256), the way
dulwich's ``DiskObjectStore.add_object`` does, through dulwich's locked file (``dulwich.file``:
the file under its ``.lock``, fsynced, renamed; the modes ``core.sharedRepository`` asks for):
an object already there only has its time refreshed (so that a concurrent ``git gc`` does not
prune it before a ref points at it). Not dulwich's object store itself: importing it (packs,
indexes, logging) costs more than a small command's writes (``git pub confirm``'s notes). A
file's directory is fsynced here — inside ``batch()`` once, together, when the block ends.
Nothing may point at an object before it is durable.

Trees are rebuilt only along the paths that change, so the cost follows the size of the
change; a commit is a new one (``write_commit``) or a person's commit rebased
(``rewrite_commit``: its author line and encoding kept byte for byte).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CorruptStateError
from gitpub.core.files import fsync_dir
from gitpub.git.objects import (
    ObjectFormat,
    TreeEntry,
    commit_body,
    parse_commit,
    parse_tree,
    signature_line,
    tree_body,
)
from gitpub.git.values import MODE_TREE, STORE_IDENTITY, Entry, Identity

if TYPE_CHECKING:
    from dulwich.file import SharedPerm

T = TypeVar("T")

_TYPE_NUMBERS = {b"commit": 1, b"tree": 2, b"blob": 3}


class ObjectWriter:
    """Durable object writes, for ``Repository`` (which provides the attributes below)."""

    object_format: ObjectFormat
    common_dir: Path
    _batch_dirs: set[str] | None
    _shared: object  # core.sharedRepository as dulwich parses it (a SharedPerm or None); _UNREAD

    def has_object(self, sha: str) -> bool:
        raise NotImplementedError

    def raw_tree(self, sha: str) -> bytes:
        raise NotImplementedError

    def _read(self, sha: str, kind: str) -> bytes:
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

    def config_value(self, section: str, key: str) -> str | None:
        raise NotImplementedError

    def layout_config(self) -> Mapping[str, str]:
        raise NotImplementedError

    def _shared_perm(self) -> SharedPerm | None:
        """``core.sharedRepository`` as dulwich parses it (None: not shared), read once: the
        modes of the directories and files gitpub makes are the group's as git makes them
        (else a member's git cannot add an object to a directory gitpub made)."""
        if self._shared is _UNREAD:
            shared = self.layout_config().get("core.sharedrepository")
            if shared is None:
                self._shared = None
            else:
                from dulwich.repo import parse_shared_repository

                self._shared = parse_shared_repository(shared)
        return self._shared  # type: ignore[return-value]

    def write_object(self, kind: bytes, body: bytes) -> str:
        """Write one object durably (see the module); its id."""
        from gitpub.git.locks import FileLocked as Locked

        sha = self.object_format.object_id(kind, body)
        objects = str(self.common_dir / "objects")
        loose = os.path.join(objects, sha[:2], sha[2:])
        shared = self._shared_perm()

        def add() -> None:
            from dulwich.file import FileLocked

            try:
                _add_loose(loose, kind, body, shared)
            except FileLocked as e:  # another process writes the same object
                raise Locked(os.fsdecode(e.filename), os.fsdecode(e.lockfilename)) from None

        # another process writing the same object: done when its file is there (has_object
        # would say yes to the empty tree, which git knows without storing it)
        self._while_locked(add, f"object {sha}", done=lambda: os.path.exists(loose))
        dirs = {os.path.join(objects, sha[:2]), objects}
        if self._batch_dirs is not None:
            self._batch_dirs |= dirs
        else:
            for d in sorted(dirs):
                fsync_dir(d)
        return sha

    def write_blob(self, data: bytes) -> str:
        return self.write_object(b"blob", data)

    def write_tree(self, base: str | None, changes: Mapping[str, Entry | None]) -> str:
        """A new tree: ``base`` with each path set to its entry (``None`` deletes it).

        Only the trees on the changed paths are rebuilt, so the cost follows the size of the
        change, not of the repository. Directories left empty disappear, as in git.
        """
        split = {tuple(p.encode("utf-8", "surrogateescape").split(b"/")): e
                 for p, e in changes.items()}
        for parts in split:
            if any(part in (b"", b".", b"..", b".git") for part in parts):
                raise ValueError(f"unsafe path: {b'/'.join(parts)!r}")
        bodies: list[bytes] = []
        root = self._apply(base, split, bodies)
        if root is None:
            bodies.append(b"")
        sha = ""
        with contextlib.ExitStack() as stack:
            if self._batch_dirs is None:
                stack.enter_context(self.batch())
            for body in bodies:  # subtrees first: the root is written last
                sha = self.write_object(b"tree", body)
        return sha

    def _entries(self, tree: str | None) -> dict[bytes, TreeEntry]:
        """The entries of ``tree`` by name; ``CorruptStateError`` for a tree that has a name
        twice (``git fsck`` refuses it): rebuilt, it would silently lose one of the two."""
        if tree is None:
            return {}
        listed = parse_tree(self.raw_tree(tree), self.object_format, tree)
        entries = {e.name: e for e in listed}
        if len(entries) != len(listed):
            twice = sorted(n for n, k in Counter(e.name for e in listed).items() if k > 1)
            names = ", ".join(repr(n.decode("utf-8", "backslashreplace")) for n in twice)
            raise CorruptStateError(
                f"tree {tree} has {names} twice (git fsck refuses it: duplicateEntries); "
                "nothing was written on top of it",
                hint="repair the tree (a commit whose tree `git fsck` accepts), then run the "
                     "command again")
        return entries

    def _apply(self, tree: str | None, changes: Mapping[tuple[bytes, ...], Entry | None],
               bodies: list[bytes]) -> str | None:
        """``tree`` with ``changes`` (paths split into their parts) applied; each new tree's
        content appended to ``bodies``, the subtrees before the trees holding them. Its id, or
        None if it is empty."""
        result = self._entries(tree)
        direct, nested = _split(changes)
        for name, entry in direct.items():
            if entry is None:
                result.pop(name, None)
            elif any(e is not None for e in nested.get(name, {}).values()):
                raise ValueError(f"{name!r} is set both as a file and as a directory")
            else:
                result[name] = TreeEntry(name, entry.mode, entry.sha)
        for name, sub in nested.items():
            if direct.get(name) is not None:
                continue  # a file replaces the directory (its files are all deleted)
            old = result.get(name)
            old_tree = old.sha if old is not None and old.mode == MODE_TREE else None
            subtree = self._apply(old_tree, sub, bodies)
            if subtree is not None:
                result[name] = TreeEntry(name, MODE_TREE, subtree)
            elif old_tree is not None:
                del result[name]  # the directory's last file is gone (a file there stays)
        if not result:
            return None
        body = tree_body(result.values())
        bodies.append(body)
        return self.object_format.object_id(b"tree", body)

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
        return self.write_object(b"commit", commit_body(
            tree, parents, signature_line(author, stamp),
            signature_line(committer or author, stamp), message))

    def rewrite_commit(self, original: str, *, tree: str, parents: Sequence[str],
                       message: bytes, committer: Identity, when: int,
                       timezone: int = 0) -> str:
        """``original`` with a new tree, parents and message, committed by ``committer`` at
        ``when`` (``timezone``: seconds east of UTC): what ``git rebase`` makes of a commit.
        Its author (name, e-mail, date and time zone, byte for byte) and its encoding are kept;
        a signature is dropped (it would no longer verify).
        Written durably; nothing points at it yet."""
        old = parse_commit(self._read(original, "commit"), original)
        return self.write_object(b"commit", commit_body(
            tree, parents, old.first(b"author") or b"",
            signature_line(committer, when, timezone), message,
            encoding=old.first(b"encoding")))


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


_UNREAD = object()


def loose_object_sound(path: Path, sha: str, object_format: ObjectFormat) -> bool:
    """Whether the loose object file ``path`` inflates whole to the object ``sha`` (the
    format ``_add_loose`` writes): what a file set aside as corrupt is judged by again."""
    digest = hashlib.new(object_format.name)
    inflate = zlib.decompressobj()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 16):
                digest.update(inflate.decompress(chunk))
    except (OSError, zlib.error):
        return False
    return inflate.eof and not inflate.unused_data and digest.hexdigest() == sha


def _add_loose(path: str, kind: bytes, body: bytes, shared: SharedPerm | None) -> None:
    """Write the loose object file ``path`` (``kind``, ``body``) as dulwich's
    ``DiskObjectStore.add_object`` (1.2) does: an object already there has its time refreshed
    instead (its owner another user's: written again, for a fresh time); else it is written
    under its ``.lock`` (read-only, fsynced, renamed; ``FileLocked`` while another process
    holds the lock), zlib-compressed at zlib's default level."""
    from dulwich.file import GitFile, adjust_shared_perm

    directory = os.path.dirname(path)
    try:
        os.mkdir(directory)
        adjust_shared_perm(directory, shared)
    except FileExistsError:
        pass
    try:
        os.utime(path, None)
    except FileNotFoundError:
        pass  # not there: written below
    except PermissionError:
        pass  # another user's, in a shared repository: written again for a fresh time
    else:
        return
    data = zlib.compress(b"%s %d\x00" % (kind, len(body)) + body)
    with GitFile(path, "wb", mask=_LOOSE_MODE, fsync=True, shared_perm=shared) as f:
        f.write(data)


#: A loose object's mode, as git and dulwich write it (``PACK_MODE``).
_LOOSE_MODE = 0o444


def _object_crash_points() -> None:
    """The crash point inside dulwich's locked object write (``git.object-locked``: its
    ``.lock`` is written and not yet renamed). Installed only when the environment asks for
    a crash point or a trace (tests); nothing changes otherwise."""
    asked = [os.environ.get(v, "") for v in ("GITPUB_CRASH_AT", "GITPUB_FAIL_AT",
                                              "GITPUB_PAUSE_AT")]
    if not any(a.startswith("git.object") for a in asked) and \
            not os.environ.get("GITPUB_CRASH_TRACE"):
        return
    from dulwich.file import _GitFile

    original = _GitFile.close

    def close(self: _GitFile) -> None:
        if not self._closed and f"{os.sep}objects{os.sep}" in os.fsdecode(self._lockfilename):
            self._file.flush()
            crash_point("git.object-locked")
        original(self)

    _GitFile.close = close  # type: ignore[method-assign]


_object_crash_points()
