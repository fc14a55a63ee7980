"""Notes under ``refs/notes/pub``: append-only lines attached to commits, never lost.

dulwich's ``Notes.set_note`` ends with an unconditional ref write and loses concurrent updates
(docs/dulwich.md). Here the notes tree is built with our own tree writer, the notes
commit is written durably, and the ref moves by compare-and-swap; on a lost race the additions
are re-applied on top of the winner's notes. Note contents are sets of lines (union on merge,
each line added at most once), so applying the same additions twice, or merging two writers'
notes, never loses or duplicates anything — the same property git's ``cat_sort_uniq`` strategy
relies on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitpub.core.errors import GitpubError
from gitpub.git.repo import MODE_FILE, MODE_TREE, STORE_IDENTITY, Entry, Repository

NOTES_REF = "refs/notes/pub"
_HEX = frozenset("0123456789abcdef")


def _fanout(repo: Repository, tree: str | None) -> int:
    """The fanout level an existing notes tree uses (2-hex-digit directories per level)."""
    level = 0
    while tree is not None:
        subdirs = [(n, e) for n, e in repo.tree_items(tree)
                   if e.mode == MODE_TREE and len(n) == 2 and set(n) <= _HEX]
        if not subdirs:
            break
        level += 1
        tree = subdirs[0][1].sha
    return level


def _note_path(commit: str, level: int) -> str:
    parts = [commit[2 * i: 2 * i + 2] for i in range(level)]
    return "/".join([*parts, commit[2 * level:]])


def read_note(repo: Repository, commit: str, notes_commit: str | None) -> list[str]:
    """The lines of ``commit``'s note in the notes history at ``notes_commit``."""
    if notes_commit is None:
        return []
    tree = repo.commit(notes_commit).tree
    for level in (_fanout(repo, tree), 0, 1, 2):
        entry = repo.lookup(tree, _note_path(commit, level))
        if entry is not None:
            return repo.blob(entry.sha).decode("utf-8", "replace").splitlines()
    return []


def build_notes_commit(repo: Repository, parent: str | None,
                       additions: Mapping[str, Sequence[str]], message: str) -> str | None:
    """A notes commit on top of ``parent`` with ``additions`` merged in (line union); None if
    every line is already there."""
    tree = None if parent is None else repo.commit(parent).tree
    level = _fanout(repo, tree)
    changes: dict[str, Entry | None] = {}
    for commit, lines in additions.items():
        old = read_note(repo, commit, parent)
        new = old + [ln for ln in dict.fromkeys(lines) if ln not in old]
        if new != old:
            blob = repo.write_blob(("\n".join(new) + "\n").encode())
            changes[_note_path(commit, level)] = Entry(MODE_FILE, blob)
    if not changes:
        return None
    new_tree = repo.write_tree(tree, changes)
    return repo.write_commit(new_tree, [] if parent is None else [parent],
                             message.encode() + b"\n", author=STORE_IDENTITY)


def add_notes(repo: Repository, additions: Mapping[str, Sequence[str]], message: str,
              ref: str = NOTES_REF, attempts: int = 50) -> str | None:
    """Add lines to notes under ``ref`` by compare-and-swap; the new notes tip (or the old one
    when nothing was new)."""
    for _ in range(attempts):
        old = repo.read_ref(ref)
        new = build_notes_commit(repo, old, additions, message)
        if new is None:
            return old
        if repo.cas_ref(ref, old, new, f"gitpub: {message}"):
            return new
    raise GitpubError(f"could not update {ref}: {attempts} concurrent updates in a row")
