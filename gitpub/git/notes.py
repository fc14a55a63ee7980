"""Notes under ``refs/notes/pub``: append-only lines attached to commits, never lost.

dulwich's ``Notes.set_note`` ends with an unconditional ref write and loses concurrent updates
(docs/dulwich.md). Here the notes tree is built with our own tree writer, the notes
commit is written durably, and the ref moves by compare-and-swap; on a lost race the additions
are re-applied on top of the winner's notes. Note contents are sets of lines (union on merge,
each line added at most once), so applying the same additions twice, or merging two writers'
notes, never loses or duplicates anything — the same property git's ``cat_sort_uniq`` strategy
relies on.

Notes are written with at least one level of fanout (``ab/cdef…``), as git does for large notes
trees, so reading or adding one note reads two small trees, not one tree with an entry for every
note ever written: the cost does not grow with the history. Notes found elsewhere (a flat tree
written by another tool) are read where they are and moved when lines are added to them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gitpub.core.errors import GitpubError
from gitpub.git.repo import MODE_FILE, MODE_TREE, STORE_IDENTITY, Entry, Repository

NOTES_REF = "refs/notes/pub"
_HEX = frozenset("0123456789abcdef")


class OversizedNotes(GitpubError):
    """A note, or a notes commit, larger than the reader's bound: not read. Whoever can push
    can push ``refs/notes/pub``; a reader that must stay cheap (``confirm`` in CI) reads
    nothing larger than it bounds."""


def check_size(repo: Repository, sha: str, limit: int | None, what: str) -> None:
    """Raise ``OversizedNotes`` when object ``sha`` (``what``, for the message) is larger than
    ``limit`` bytes (None: no bound)."""
    if limit is None:
        return
    size = repo.object_size(sha)
    if size is not None and size > limit:
        raise OversizedNotes(
            f"{what} in {NOTES_REF} is {size} bytes, larger than the {limit} bytes gitpub "
            "reads of one note or notes commit: not read",
            hint=f"someone pushed it to {NOTES_REF}; look at it (`git log -p --notes=pub`), "
                 f"then push {NOTES_REF} without it (`git notes --ref=pub remove COMMIT`, or "
                 "the notes commit before it) and run again")


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


def _find(repo: Repository, tree: str, commit: str, level: int) -> tuple[str, Entry] | None:
    for lvl in dict.fromkeys((level, 0, 1, 2)):
        path = _note_path(commit, lvl)
        entry = repo.lookup(tree, path)
        if entry is not None:
            return path, entry
    return None


def read_note(repo: Repository, commit: str, notes_commit: str | None,
              max_bytes: int | None = None) -> list[str]:
    """The lines of ``commit``'s note in the notes history at ``notes_commit``; with
    ``max_bytes``, ``OversizedNotes`` rather than reading a note or notes commit larger."""
    if notes_commit is None:
        return []
    check_size(repo, notes_commit, max_bytes, f"notes commit {notes_commit}")
    tree = repo.commit(notes_commit).tree
    found = _find(repo, tree, commit, _fanout(repo, tree))
    if found is None:
        return []
    check_size(repo, found[1].sha, max_bytes, f"the note of {commit} (notes commit "
                                              f"{notes_commit})")
    return repo.blob(found[1].sha).decode("utf-8", "replace").splitlines()


def build_notes_commit(repo: Repository, parent: str | None,
                       additions: Mapping[str, Sequence[str]],
                       message: str | Callable[[str], str], *,
                       allow_empty: bool = False, max_bytes: int | None = None) -> str | None:
    """A notes commit on top of ``parent`` with ``additions`` merged in (line union); None if
    every line is already there (unless ``allow_empty``: the message itself is news).
    ``message`` may be a function of the new notes tree (a message that authenticates it).
    Its objects are made durable together (one round of directory syncs, not one per
    object): nothing points at them before it returns. ``max_bytes``: as ``read_note``."""
    with repo.batch():
        return _build_notes_commit(repo, parent, additions, message, allow_empty, max_bytes)


def _build_notes_commit(repo: Repository, parent: str | None,
                        additions: Mapping[str, Sequence[str]],
                        message: str | Callable[[str], str], allow_empty: bool,
                        max_bytes: int | None) -> str | None:
    if parent is not None:
        check_size(repo, parent, max_bytes, f"notes commit {parent}")
    tree = None if parent is None else repo.commit(parent).tree
    level = max(1, _fanout(repo, tree))
    changes: dict[str, Entry | None] = {}
    for commit, lines in additions.items():
        found = None if tree is None else _find(repo, tree, commit, level)
        if found is not None:
            check_size(repo, found[1].sha, max_bytes, f"the note of {commit} (notes commit "
                                                      f"{parent})")
        old = [] if found is None else \
            repo.blob(found[1].sha).decode("utf-8", "replace").splitlines()
        new = old + [ln for ln in dict.fromkeys(lines) if ln not in old]
        if new != old:
            blob = repo.write_blob(("\n".join(new) + "\n").encode())
            path = _note_path(commit, level)
            if found is not None and found[0] != path:
                changes[found[0]] = None  # one note per commit: move it to our fanout
            changes[path] = Entry(MODE_FILE, blob)
    if not changes and not (allow_empty and tree is not None):
        return None
    new_tree = repo.write_tree(tree, changes) if changes else tree
    assert new_tree is not None
    text = message(new_tree) if callable(message) else message
    return repo.write_commit(new_tree, [] if parent is None else [parent],
                             text.encode() + b"\n", author=STORE_IDENTITY)


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
