"""Paths as git sees them: whether git would refuse a path, and what a tree holds along it.

``path_problem`` is gitpub's rule (``gitpub.core.paths``: every spelling of ``.git`` that
``core.protectNTFS``/``core.protectHFS`` reject, and what no clone can check out), with
dulwich's own validators (``validate_path_element_ntfs``/``_hfs``, what dulwich refuses to
check out) as a second opinion on every component: a path either of them refuses is refused.
Compared with C git (``tests/test_paths.py``), dulwich's validators catch every ``.git``
spelling of git's ``t1014`` and ``verify_path`` cases, but not the mode-dependent ones (a
symbolic link named ``.gitmodules``) nor anything beyond ``.git``; the core rules cover those.

``submodule_at`` and ``case_twins_in`` look at a base tree: a file below a gitlink would be
written into another repository's directory, and a name that differs from an existing one only
in case is the same file on a case-insensitive file system.
"""

from __future__ import annotations

import os

from gitpub.core import paths
from gitpub.git.repo import MODE_TREE, Repository

MODE_GITLINK = 0o160000


def dulwich_refuses(component: str) -> bool:
    """Whether dulwich's NTFS or HFS+ validator refuses the path component."""
    if cannot_be_refused(component):
        return False
    # Imported here: dulwich.index brings dulwich's object store (~15 ms), which is needed only
    # for a component that could be a spelling of ``.git`` (``cannot_be_refused``).
    from dulwich.index import validate_path_element_hfs, validate_path_element_ntfs

    raw = component.encode("utf-8", "surrogateescape")
    return not (validate_path_element_ntfs(raw) and validate_path_element_hfs(raw))


def cannot_be_refused(component: str) -> bool:
    """A sound pre-check of ``dulwich_refuses``: True only for a component neither of dulwich's
    validators can refuse (``tests/test_paths.py`` holds it to them).

    Outside Windows (where they also refuse backslashes and device names), they refuse only a
    component that, once the HFS+-ignorable code points are dropped and it is lower-cased (NTFS:
    trailing dots and spaces dropped too; HFS+: NFD-normalised), is ``.git``, ``git~1``, ``.``,
    ``..`` or empty, or that starts a ``\\``-separated segment with ``.git``/``git~1`` and then
    only dots, spaces or a ``:``. Each of those, read without the ignorable code points, is ASCII
    and either holds ``git`` (in any case) or is only dots and spaces: any other ASCII text is
    safe. Other text (a non-ASCII letter might normalise to an ASCII one) is left to dulwich."""
    if os.name == "nt":
        return False
    visible = component if component.isascii() else \
        "".join(char for char in component if char not in paths.HFS_IGNORABLE)
    return visible.isascii() and "git" not in visible.lower() and visible.rstrip(". ") != ""


def path_problem(path: str) -> str | None:
    """Why git, or gitpub, refuses to let a job write ``path``; None if it may."""
    problem = paths.path_problem(path)
    if problem is not None:
        return problem
    for part in path.split("/"):
        if dulwich_refuses(part):
            return (f"{part!r} is refused by git's checks for .git "
                    "(core.protectNTFS/core.protectHFS)")
    return None


def submodule_at(repo: Repository, tree: str, path: str) -> str | None:
    """The submodule (gitlink) in ``tree`` at ``path`` or at one of its parent directories."""
    parts = path.split("/")
    for depth in range(1, len(parts) + 1):
        prefix = "/".join(parts[:depth])
        entry = repo.lookup(tree, prefix)
        if entry is None or entry.mode not in (MODE_TREE, MODE_GITLINK):
            return None
        if entry.mode == MODE_GITLINK:
            return prefix
    return None


def _same_key(name: str, part: str, low: str, key: str) -> bool:
    """``case_key(name) == key`` (``key`` being ``part``'s), quickly for ASCII names: their key
    is their lower case (a directory of 50,000 files is compared once per rebase)."""
    if name.isascii() and part.isascii():
        return name.lower() == low
    return paths.case_key(name) == key


def case_twins_in(repo: Repository, tree: str, path: str) -> list[str]:
    """Paths in ``tree`` that a case-insensitive file system would confuse with ``path``: at
    the first level where ``path``'s component has a twin that differs (``Posts`` for
    ``posts/a.md``, ``posts/Hello.md`` for ``posts/hello.md``), every such twin."""
    prefix, current = "", tree
    for part in path.split("/"):
        key, low = paths.case_key(part), part.lower()
        items = repo.tree_items(current)
        twins = [f"{prefix}{name}" for name, _ in items
                 if name != part and _same_key(name, part, low, key)]
        if twins:
            return twins
        entry = next((e for name, e in items if name == part), None)
        if entry is None or entry.mode != MODE_TREE:
            return []
        prefix, current = f"{prefix}{part}/", entry.sha
    return []
