"""Reading git objects for ``Repository``: everything C git reads, as git reads it.

Single objects come from the repository's ``git cat-file --batch-command`` (``git.catfile``);
whole trees (``walk_files``) from one ``git ls-tree -r``, and what changed between two trees
from one ``git diff-tree``: C git's walk of a big tree costs less than one request per tree, and
its diff is the one every clone's checkout agrees with.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

from gitpub.core.errors import CorruptStateError
from gitpub.git.catfile import CatFile, Unreadable
from gitpub.git.objects import ObjectFormat, git_order, is_object_id, parse_commit, parse_tree
from gitpub.git.run import CompletedProcess
from gitpub.git.treecheck import tree_problems
from gitpub.git.values import MODE_GITLINK, MODE_TREE, Change, CommitInfo, Entry


class ObjectReading:
    """Object reads, for ``Repository`` (which provides the attributes below)."""

    object_format: ObjectFormat
    _cat: CatFile
    #: Whole-tree answers of this command (``walk_files``, ``diff_entries``), keyed by the
    #: object ids asked about: objects never change, so an answer stays true; the newest
    #: ``_KEPT`` of each are kept.
    _walks: dict[tuple[str, str], list[tuple[str, Entry]]]
    _diffs: dict[tuple[str, str], list[Change]]
    #: Single objects of this command, by object id: the commits and trees read (up to
    #: ``_SMALL`` bytes each: a command reads the same few again and again — the notes, the
    #: configuration's way down), and the type and size of objects found here (an object
    #: here stays here). The newest ``_OBJECTS`` of each are kept.
    _objects: dict[str, tuple[str, bytes]]
    _present: dict[str, tuple[str, int]]
    #: Answers about one tree of this command, by its object id: its entries in git's order
    #: (``tree_items``, of a tree of up to ``_SMALL`` bytes) and by name (``lookup``), and
    #: what ``git fsck`` refuses in it (``fsck_problems``, keyed by the id and ``padded_ok``:
    #: nothing else goes into that answer — ``git.treecheck`` is a pure function of the
    #: tree's bytes, which its id names). The same trees are asked about again and again: the
    #: base's way to the targets, the new commit's, verified twice by a push. The newest
    #: ``_OBJECTS`` of each are kept.
    _items: dict[str, list[tuple[str, Entry]]]
    _names: dict[str, dict[str, Entry]]
    #: What each commit changes against its first parent (``git.diff.first_parent_changes``),
    #: by the commit's id (which names its parent and both trees); the newest ``_KEPT``.
    _parent_changes: dict[str, list[Change]]
    _fsck: dict[tuple[str, bool], tuple[str, ...]]

    def git(self, *args: str, timeout: float | None = None, input: bytes | None = None
            ) -> CompletedProcess[bytes]:
        raise NotImplementedError

    # -- single objects --------------------------------------------------------------------

    def has_object(self, sha: str) -> bool:
        try:
            return self._info(sha) is not None
        except Unreadable:
            return True  # there, but damaged: reading it says so

    def has_objects(self, shas: Iterable[str]) -> dict[str, bool]:
        """``has_object`` of each of ``shas``, asked of git together (``CatFile.infos``)."""
        unique = list(dict.fromkeys(shas))
        asked = [sha for sha in unique if sha not in self._present]
        try:
            found = self._cat.infos(asked)
        except Unreadable:  # one is there, but damaged: each is asked alone, as has_object
            return {sha: self.has_object(sha) for sha in unique}
        answers = dict.fromkeys(unique, True)  # the others: found here before
        for sha, info in zip(asked, found, strict=True):
            answers[sha] = info is not None
            if info is not None and info[0] == sha:
                _keep(self._present, sha, (info[1], info[2]), _OBJECTS)
        return answers

    def still_has(self, sha: str) -> bool:
        """Whether git has object ``sha`` now: asked of git again, not answered from what this
        command found before. An object the command wrote and nothing refers to yet may be gone
        meanwhile (a person's ``git gc --prune=now``, git's documented hazard)."""
        try:
            return self._cat.info(sha) is not None
        except Unreadable:
            return True  # there, but damaged: reading it says so

    def object_kinds(self, shas: Sequence[str]) -> list[str | None]:
        """``object_kind`` of each of ``shas``, in order, asked of git together
        (``CatFile.infos``: a round trip per 256, not one each). The answers are not kept: a
        sample of hundreds of objects (``git.walk.split_point``) would push out the command's
        own."""
        try:
            found = self._cat.infos(shas)
        except Unreadable:  # one is there, but damaged: each is asked alone, as object_kind
            return [self.object_kind(sha) for sha in shas]
        return [None if info is None else info[1] for info in found]

    def object_kind(self, sha: str) -> str | None:
        """The type of object ``sha`` (``commit``, ``tree``, …; None: not here or unreadable),
        without reading it."""
        try:
            found = self._info(sha)
        except Unreadable:
            return None
        return None if found is None else found[0]

    def object_size(self, sha: str) -> int | None:
        """The size of object ``sha``'s content in bytes (None: not here), without reading it."""
        try:
            found = self._info(sha)
        except Unreadable:
            return None
        return None if found is None else found[1]

    def _info(self, sha: str) -> tuple[str, int] | None:
        """(type, size) of object ``sha``, None when it is not here; ``Unreadable``."""
        known = self._present.get(sha)
        if known is not None:
            return known
        found = self._cat.info(sha)
        if found is None:
            return None
        if found[0] == sha:  # asked by its id (not by a name that may mean another later)
            _keep(self._present, sha, (found[1], found[2]), _OBJECTS)
        return found[1], found[2]

    def _read(self, sha: str, kind: str) -> bytes:
        """The content of object ``sha``, which must be a ``kind``."""
        found = self._objects.get(sha)
        if found is None:
            try:
                found = self._cat.contents(sha)
            except Unreadable as e:
                raise CorruptStateError(f"object {sha} is unreadable (git: {e})",
                                        hint="`git fsck` lists the damaged objects") from None
            if found is None:
                raise CorruptStateError(f"object {sha} is missing from the repository",
                                        hint="`git fsck` lists the damaged objects")
            if found[0] in ("commit", "tree") and len(found[1]) <= _SMALL and \
                    is_object_id(sha):
                _keep(self._objects, sha, found, _OBJECTS)
        if found[0] != kind:
            raise CorruptStateError(f"object {sha} is a {found[0]}, not a {kind}")
        return found[1]

    def blob(self, sha: str) -> bytes:
        return self._read(sha, "blob")

    def raw_tree(self, sha: str) -> bytes:
        """A tree object's content exactly as stored (``git.treecheck`` reads it)."""
        return self._read(sha, "tree")

    def raw_commit(self, sha: str) -> bytes:
        """A commit object's content exactly as stored: its headers (author, committer, …)
        and its message, as a push would carry them."""
        return self._read(sha, "commit")

    def tree_items(self, sha: str) -> list[tuple[str, Entry]]:
        """A tree's entries in git's order (a directory sorts as ``name/``)."""
        found = self._items.get(sha)
        if found is None:
            raw = self.raw_tree(sha)
            entries = parse_tree(raw, self.object_format, sha)
            entries.sort(key=lambda e: git_order(e.name, e.mode))
            found = [(e.name.decode("utf-8", "surrogateescape"), Entry(e.mode, e.sha))
                     for e in entries]
            if len(raw) <= _SMALL and is_object_id(sha):
                _keep(self._items, sha, found, _OBJECTS)
        return list(found)

    def lookup(self, tree: str, path: str) -> Entry | None:
        """The entry at ``path`` inside ``tree``, or ``None`` (also when a file or a
        submodule stands where a directory would be)."""
        entry: Entry | None = None
        for part in (p for p in path.split("/") if p):
            if entry is not None and entry.mode != MODE_TREE:
                return None
            sha = tree if entry is None else entry.sha
            entry = self._by_name(sha).get(part)
            if entry is None:
                return None
        return entry

    def _by_name(self, sha: str) -> dict[str, Entry]:
        """Tree ``sha``'s entries by name (of a name git has twice, the last in git's order)."""
        found = self._names.get(sha)
        if found is None:
            found = {name: e for name, e in self.tree_items(sha)}
            if sha in self._items:  # kept by its id, small
                _keep(self._names, sha, found, _OBJECTS)
        return found

    def fsck_problems(self, sha: str, *, padded_ok: bool = False) -> list[str]:
        """What ``git fsck --strict`` refuses in tree ``sha`` (``git.treecheck.tree_problems``
        of its raw bytes; ``padded_ok`` as there), judged once a command per tree id."""
        key = (sha, padded_ok)
        found = self._fsck.get(key)
        if found is None:
            found = tuple(tree_problems(self.raw_tree(sha), self.object_format.raw_length,
                                        padded_ok=padded_ok))
            if is_object_id(sha):
                _keep(self._fsck, key, found, _OBJECTS)
        return list(found)

    def unsound_trees(self, tree: str | None, paths: Iterable[str]) -> list[str]:
        """What ``git fsck --strict`` refuses in the trees that writing ``paths`` into
        ``tree`` rebuilds: its root and each directory of it on the way to each path (empty
        when nothing). gitpub must not build on such a tree: its rebuilt copy would drop an
        entry git has twice (dulwich and our own parser keep one), or carry a bad mode or name
        into a tree of ours, and the commit would change more than it says. A zero-padded
        mode is no such problem: the rebuilt tree writes it unpadded, meaning the same.
        Trees off those paths are reused as they are, by id: building on them adds nothing
        git did not accept already."""
        if tree is None:
            return []
        todo: dict[str, str] = {tree: ""}  # tree id -> its path, for messages
        for path in paths:
            parts = path.split("/")
            for depth in range(1, len(parts)):
                directory = "/".join(parts[:depth])
                entry = self.lookup(tree, directory)
                if entry is None or entry.mode != MODE_TREE:
                    break
                todo.setdefault(entry.sha, directory + "/")
        return [f"tree {where or '(root)'} {sha[:12]}: {problem}"
                for sha, where in todo.items()
                for problem in self.fsck_problems(sha, padded_ok=True)]

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

    def commit(self, sha: str) -> CommitInfo:
        parsed = parse_commit(self._read(sha, "commit"), sha)
        tree = (parsed.first(b"tree") or b"").decode("ascii", "replace")
        encoding = parsed.first(b"encoding")
        return CommitInfo(
            sha=sha, tree=tree,
            parents=tuple(p.decode("ascii", "replace") for p in parsed.all(b"parent")),
            message=parsed.message, commit_time=parsed.commit_time,
            encoding=None if encoding is None else encoding.decode("ascii", "replace"))

    def is_signed(self, sha: str) -> bool:
        """Whether the commit carries a signature (``gpgsig``, ``gpgsig-sha256``): one that a
        rewrite (a new parent or message) cannot keep."""
        parsed = parse_commit(self._read(sha, "commit"), sha)
        return any(key.startswith(b"gpgsig") for key, _ in parsed.headers)

    def file_at(self, commit: str, path: str) -> bytes | None:
        """The content of the file (blob) at ``path`` in ``commit``, or None."""
        entry = self.lookup(self.commit(commit).tree, path)
        if entry is None or entry.mode in (MODE_TREE, MODE_GITLINK):
            return None
        return self.blob(entry.sha)

    def first_parent_chain(self, tip: str) -> Iterator[CommitInfo]:
        sha: str | None = tip
        while sha is not None:
            info = self.commit(sha)
            yield info
            sha = info.parents[0] if info.parents else None

    # -- whole trees (C git) ---------------------------------------------------------------

    def walk_files(self, tree: str, prefix: str = "") -> list[tuple[str, Entry]]:
        """Every non-tree entry below ``tree`` (files, symlinks, submodules), in git's order,
        with its full path (``prefix`` before it). Asked again for the same tree in a
        command: answered without git."""
        key = (tree, prefix)
        kept = self._walks.get(key)
        if kept is not None:
            return list(kept)
        small = self._small_walk(tree, prefix) if is_object_id(tree) else None
        if small is not None:
            _keep(self._walks, key, small)
            return list(small)
        proc = self.git("ls-tree", "-r", "-z", "--full-tree", tree)
        if proc.returncode != 0:
            raise _failed(f"cannot list tree {tree}", proc.stderr)
        out = []
        for record in proc.stdout.split(b"\0"):
            if not record:
                continue
            meta, _, name = record.partition(b"\t")
            mode, _kind, sha = meta.split(b" ")
            out.append((prefix + name.decode("utf-8", "surrogateescape"),
                        Entry(int(mode, 8), sha.decode("ascii"))))
        if is_object_id(tree):  # a name (HEAD, a ref) may mean another object later
            _keep(self._walks, key, out)
        return list(out)

    def _small_walk(self, tree: str, prefix: str) -> list[tuple[str, Entry]] | None:
        """``walk_files`` of a small tree (a job's artifacts: a few files a few directories
        deep) through ``git cat-file``, a request per tree instead of a process; None when
        the tree is not small (more than ``SMALL_TREES`` trees or ``SMALL_ENTRIES`` entries)
        or not plainly a tree as git writes one (a mode git would show otherwise, entries out
        of git's order or twice, a tree that cannot be read): then ``git ls-tree`` says it,
        exactly as before."""
        out: list[tuple[str, Entry]] = []
        budget = [SMALL_TREES, SMALL_ENTRIES]

        def walk(sha: str, path: str) -> bool:
            budget[0] -= 1
            if budget[0] < 0:
                return False
            try:
                entries = parse_tree(self.raw_tree(sha), self.object_format, sha)
            except (CorruptStateError, Unreadable):
                return False
            budget[1] -= len(entries)
            keys = [git_order(e.name, e.mode) for e in entries]
            if budget[1] < 0 or any(a >= b for a, b in itertools.pairwise(keys)):
                return False
            for e in entries:
                if e.mode not in _CANONICAL or b"/" in e.name or not e.name:
                    return False
                name = path + e.name.decode("utf-8", "surrogateescape")
                if e.mode == MODE_TREE:
                    if not walk(e.sha, name + "/"):
                        return False
                else:
                    out.append((name, Entry(e.mode, e.sha)))
            return True

        return out if walk(tree, prefix) else None

    def diff_entries(self, old_tree: str | None, new_tree: str) -> list[Change]:
        """Every file (blob, symlink or submodule entry) that differs between two trees, with
        its entry on each side, sorted by path (``git diff-tree -r --no-renames``): a rename is
        a deletion and an addition; a type change (file to symlink) is one change of mode; a
        file that becomes a directory is a deletion and additions."""
        old = self.object_format.empty_tree if old_tree is None else old_tree
        key = (old, new_tree)
        kept = self._diffs.get(key)
        if kept is not None:
            return list(kept)
        proc = self.git("diff-tree", "-r", "-z", "--no-renames", old, new_tree)
        if proc.returncode != 0:
            raise _failed(f"cannot compare trees {old} and {new_tree}", proc.stderr)
        out = sorted(parse_raw_diff(proc.stdout, self.object_format.zero), key=lambda c: c.path)
        if is_object_id(old) and is_object_id(new_tree):
            _keep(self._diffs, key, out)
        return list(out)

    def kept_changes(self, commit: str) -> list[Change] | None:
        """What ``commit`` changes against its first parent, if this command asked git."""
        kept = self._parent_changes.get(commit)
        return None if kept is None else list(kept)

    def keep_changes(self, commit: str, changes: list[Change]) -> None:
        if is_object_id(commit):
            _keep(self._parent_changes, commit, list(changes))

    def changed_paths(self, old_tree: str | None, new_tree: str) -> list[tuple[str, str | None]]:
        """(path, new blob id or None if deleted) for every file that differs between two
        trees."""
        return [(c.path, None if c.new is None else c.new.sha)
                for c in self.diff_entries(old_tree, new_tree)]


#: How many whole-tree answers of each kind a repository keeps (``ObjectReading``).
_KEPT = 16
#: How many single objects, and of what size at most (``ObjectReading._objects``).
_OBJECTS = 256
_SMALL = 64 * 1024
K = TypeVar("K")
V = TypeVar("V")


#: ``walk_files`` asks ``git cat-file`` for a tree of at most this many trees and entries
#: (``_small_walk``), ``git ls-tree -r`` for a bigger one.
SMALL_TREES = 16
SMALL_ENTRIES = 256
#: The modes ``git ls-tree`` shows as they are stored (it shows any other as one of these).
_CANONICAL = frozenset({0o100644, 0o100755, 0o120000, MODE_TREE, MODE_GITLINK})


def _keep(kept: dict[K, V], key: K, answer: V, most: int = _KEPT) -> None:
    kept.pop(key, None)
    kept[key] = answer
    while len(kept) > most:
        del kept[next(iter(kept))]


def parse_raw_diff(out: bytes, zero: str) -> list[Change]:
    """``git diff-tree -z`` raw records (``:old_mode new_mode old new status NUL path NUL``)
    as changes (no commit ids in ``out``)."""
    tokens = out.split(b"\0")
    changes = []
    for i in range(0, len(tokens) - 1, 2):
        meta, path = tokens[i], tokens[i + 1]
        if not meta.startswith(b":"):
            raise CorruptStateError("unexpected output of git diff-tree")
        old_mode, new_mode, old_sha, new_sha, _status = meta[1:].decode("ascii").split(" ")
        changes.append(Change(path.decode("utf-8", "surrogateescape"),
                              _entry(old_mode, old_sha, zero), _entry(new_mode, new_sha, zero)))
    return changes


def _entry(mode: str, sha: str, zero: str) -> Entry | None:
    return None if int(mode, 8) == 0 and sha == zero else Entry(int(mode, 8), sha)


def _failed(what: str, stderr: bytes) -> CorruptStateError:
    from gitpub.core.sanitize import sanitize

    said = " ".join(stderr.decode("utf-8", "replace").split())[:200]
    return CorruptStateError(sanitize(f"{what} (git: {said})"),
                             hint="`git fsck` lists the damaged objects")
