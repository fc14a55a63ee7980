"""Reading git objects for ``Repository``: without dulwich where ``git.odb`` can, else dulwich.

The part of ``Repository`` that reads objects (a mixin, as ``git.writing`` is for writes). Each
read first asks ``git.odb`` — loose and packed objects, answered only when proven by their id,
commits and trees of the plain shape — and, when it cannot answer, dulwich, which then answers
(or fails, with the error a person has always seen) as before. ``status`` and ``log`` so read a
job store without importing dulwich at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gitpub.core.errors import CorruptStateError
from gitpub.git.odb import ObjectReader, parse_commit, parse_tree
from gitpub.git.values import MODE_GITLINK, MODE_TREE, Change, CommitInfo, Entry, _b, _s

if TYPE_CHECKING:
    from dulwich.objects import ShaFile
    from dulwich.repo import Repo

_GITLINK_BITS = 0o170000


class ObjectReading:
    """Object reads, for ``Repository`` (which provides the attributes below)."""

    _reader: ObjectReader | None

    @property
    def _repo(self) -> Repo:
        raise NotImplementedError

    def has_object(self, sha: str) -> bool:
        if self._reader is not None and self._reader.contains(sha):
            return True
        return _b(sha) in self._repo.object_store

    def _raw(self, sha: str) -> tuple[bytes, bytes] | None:
        """(type, content) of object ``sha`` read without dulwich (``git.odb``: proven by its
        id), or None: then dulwich answers (``_get``), as it always did."""
        return None if self._reader is None else self._reader.read(sha)

    def _get(self, sha: str) -> ShaFile:
        try:
            return self._repo.object_store[_b(sha)]
        except KeyError:
            raise CorruptStateError(f"object {sha} is missing from the repository") from None
        except Exception as e:  # truncated, not zlib, bad header, wrong checksum, unreadable
            raise _unreadable(sha, e) from None

    def _typed(self, sha: str, kind: bytes) -> bytes | None:
        """The content of object ``sha`` if it is a ``kind`` (read without dulwich); a
        ``CorruptStateError`` if it is another type; None when dulwich must read it."""
        found = self._raw(sha)
        if found is None:
            return None
        if found[0] != kind:
            raise CorruptStateError(f"object {sha} is a {found[0].decode()}, "
                                    f"not a {kind.decode()}")
        return found[1]

    def blob(self, sha: str) -> bytes:
        return self._raw_of(sha, b"blob")

    def tree_items(self, sha: str) -> list[tuple[str, Entry]]:
        data = self._typed(sha, b"tree")
        entries = None if data is None else parse_tree(data)
        if entries is not None:  # in dulwich's order: a directory sorts as "name/"
            order = sorted(entries, key=lambda n: n + b"/" if _is_dir(entries[n][0]) else n)
            return [(n.decode("utf-8", "surrogateescape"), Entry(*entries[n])) for n in order]
        from dulwich.objects import Tree

        obj = self._get(sha)
        if not isinstance(obj, Tree):
            raise CorruptStateError(f"object {sha} is a {obj.type_name.decode()}, not a tree")
        return [
            (item.path.decode("utf-8", "surrogateescape"), Entry(item.mode, _s(item.sha)))
            for item in obj.iteritems()
        ]

    def lookup(self, tree: str, path: str) -> Entry | None:
        """The entry at ``path`` inside ``tree``, or ``None``."""
        found = self._lookup_fast(tree, path.encode("utf-8"))
        if found is not _ASK_DULWICH:
            return found  # type: ignore[return-value]
        from dulwich.errors import NotTreeError
        from dulwich.object_store import tree_lookup_path

        try:
            mode, sha = tree_lookup_path(
                self._repo.object_store.__getitem__, _b(tree), path.encode("utf-8")
            )
        except (KeyError, NotADirectoryError, NotTreeError):
            return None
        except Exception as e:  # a tree on the way is corrupt
            raise _unreadable(tree, e) from None
        return Entry(mode, _s(sha))

    def _lookup_fast(self, tree: str, path: bytes) -> Entry | object | None:
        """``lookup`` as dulwich's ``tree_lookup_path`` answers it, from objects ``git.odb``
        reads (None: no such entry, or a non-tree on the way); ``_ASK_DULWICH`` whenever
        dulwich's answer could be anything else (an error, a submodule on the way)."""
        if self._reader is None or not path:
            return _ASK_DULWICH
        sha, mode = tree, None
        for part in path.split(b"/"):
            if not part:
                continue
            if mode is not None and mode & _GITLINK_BITS == MODE_GITLINK:
                return _ASK_DULWICH
            found = self._raw(sha)
            if found is None:
                return _ASK_DULWICH
            if found[0] != b"tree":
                return None
            entries = parse_tree(found[1])
            if entries is None:
                return _ASK_DULWICH
            if part not in entries:
                return None
            mode, sha = entries[part]
        return _ASK_DULWICH if mode is None else Entry(mode, sha)

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
        data = self._typed(sha, b"commit")
        parsed = None if data is None else parse_commit(data)
        if parsed is not None:
            tree, parents, message, when, encoding = parsed
            return CommitInfo(sha=sha, tree=tree, parents=parents, message=message,
                              commit_time=when, encoding=None if encoding is None
                              else encoding.decode("ascii", "replace"))
        from dulwich.objects import Commit

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
        return self._raw_of(sha, b"tree")

    def _raw_of(self, sha: str, kind: bytes) -> bytes:
        """An object's content, which must be of type ``kind``: by the fast reader, else
        dulwich's."""
        data = self._typed(sha, kind)
        if data is not None:
            return data
        obj = self._get(sha)
        if obj.type_name != kind:
            raise CorruptStateError(f"object {sha} is a {obj.type_name.decode()}, "
                                    f"not a {kind.decode()}")
        return bytes(obj.as_raw_string())

    def is_signed(self, sha: str) -> bool:
        """Whether the commit carries a signature (``gpgsig``, ``gpgsig-sha256``): one that a
        rewrite (a new parent or message) cannot keep."""
        from dulwich.objects import Commit

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



#: ``Repository._lookup_fast``'s "dulwich must answer this one".
_ASK_DULWICH = object()


def _is_dir(mode: int) -> bool:
    return mode & _GITLINK_BITS == MODE_TREE


def _unreadable(sha: str, error: Exception, what: str = "") -> CorruptStateError:
    """The error for an object dulwich failed to read. ``error``'s traceback is dropped (with
    those of its own causes): its frames hold views of a mapped pack, and dulwich's ``close``
    refuses to unmap a pack while one lives (``BufferError``), which replaced this error
    with an unexpected one when it was on its way out of the repository's ``with``."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        cause.__traceback__ = None
        cause = cause.__context__
    detail = " ".join(str(error).split())[:120] or type(error).__name__
    return CorruptStateError(f"{what}object {sha} is unreadable ({type(error).__name__}: "
                             f"{detail})", hint="`git fsck` lists the damaged objects")
