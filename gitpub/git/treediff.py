"""C git's first-parent diff of a commit, computed here when every tree it reads is sound.

``git diff-tree -r -t --no-renames`` (``git.diff``) is the verifier's truth for what a commit
changes: on a tree that dulwich and git read differently (duplicate entries, entries out of
order) only git's answer is what reaches a working tree. But on trees that ``git fsck
--strict`` accepts (``git.treecheck``: well-formed, strictly in git's order, no name twice,
only git's modes) there is nothing to read differently, and the diff is determined by the
bytes: the two trees' entries merged in git's order (a tree's name compares as if it ended in
``/``, so a file and a directory of one name are a deletion and an addition), equal entries
skipped, trees shown before what they hold (``-t``) and entered (``-r``), a change of kind
between file, symbolic link and submodule a ``T``, any other change an ``M``. The probe judges
one commit at a time: this spares it a ``git`` process. Any tree that is not sound on either
side, and the answer is None: ask C git (``git.diff``). ``tests/test_treediff.py`` holds the
two to the same output on random and hostile trees.
"""

from __future__ import annotations

from typing import NamedTuple

from gitpub.git.repo import Repository
from gitpub.git.treecheck import parse_entries, tree_problems

ZERO = "0" * 40
_TREE = 0o040000
_KIND = 0o170000


class Change(NamedTuple):
    """One entry ``git diff-tree -r -t`` reports: a file or a directory (tree) at ``path``."""

    path: str
    old_mode: int  # 0 when added
    new_mode: int  # 0 when deleted
    old_sha: str
    new_sha: str
    status: str  # A, D, M, T

    @property
    def is_tree(self) -> bool:
        """A directory on both sides (or added or deleted as one): no file changed here."""
        return all(m in (0, _TREE) for m in (self.old_mode, self.new_mode))

    @property
    def new_tree(self) -> str | None:
        """The tree this change brings, if it brings one."""
        return self.new_sha if self.new_mode == _TREE and self.new_sha != ZERO else None


class _Unsound(Exception):
    """A tree on the way is one ``git fsck`` refuses: only C git's diff counts."""


Entries = dict[bytes, tuple[int, str, bytes]]  # sort key -> (mode, id, name)


def tree_changes(repo: Repository, old: str | None, new: str) -> list[Change] | None:
    """``git diff-tree -r -t --no-renames old new`` (``old`` None: the empty tree, as
    ``--root`` compares a root commit), or None when a tree it reads is not sound."""
    out: list[Change] = []
    try:
        _diff(repo, old, new, "", out)
    except _Unsound:
        return None
    return out


def _entries(repo: Repository, tree: str | None) -> Entries:
    if tree is None:
        return {}
    raw = repo.raw_tree(tree)
    if tree_problems(raw):
        raise _Unsound(tree)
    found: Entries = {}
    for mode_text, name, oid in parse_entries(raw) or ():
        mode = int(mode_text, 8)
        key = name + b"/" if mode & _KIND == _TREE else name
        found[key] = (mode, oid.hex(), name)
    return found


def _diff(repo: Repository, old: str | None, new: str | None, base: str,
          out: list[Change]) -> None:
    before, after = _entries(repo, old), _entries(repo, new)
    for key in sorted(before.keys() | after.keys()):
        was, now = before.get(key), after.get(key)
        if was is not None and now is not None and was[:2] == now[:2]:
            continue
        name = (now or was)[2]  # type: ignore[index]  # one of them is there
        path = base + name.decode("utf-8", "surrogateescape")
        old_mode, old_sha = (was[0], was[1]) if was else (0, ZERO)
        new_mode, new_sha = (now[0], now[1]) if now else (0, ZERO)
        out.append(Change(path, old_mode, new_mode, old_sha, new_sha,
                          _status(old_mode, new_mode)))
        trees = [m == _TREE for m in (old_mode, new_mode)]
        if any(trees):
            _diff(repo, old_sha if trees[0] else None, new_sha if trees[1] else None,
                  path + "/", out)


def _status(old_mode: int, new_mode: int) -> str:
    if old_mode == 0:
        return "A"
    if new_mode == 0:
        return "D"
    return "T" if old_mode & _KIND != new_mode & _KIND else "M"
