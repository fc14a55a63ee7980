"""What a commit changes against its first parent, as C git computes it.

The verifier judges what a clone checks out, so it asks C git, not dulwich's tree diff: on a
tree dulwich and git read differently (duplicate entries: dulwich keeps one, git both) the two
diffs differ, and git's is the one that reaches every working tree. One
``git diff-tree --stdin -r -t --no-renames -z --always --root`` serves any number of commits
(``first_parent_changes``), so a long walk pays one process, not one per commit. ``-t`` lists
the trees on the way as well: what the commit adds as directories is checked too. A few commits
whose trees are all sound (the probe's one) are compared without a process, by
``git.treediff``, which gives C git's answer on such trees (and None on any other).
"""

from __future__ import annotations

from collections.abc import Sequence

from gitpub.core.errors import CorruptStateError
from gitpub.git.repo import CommitInfo, Repository
from gitpub.git.treediff import ZERO, Change, tree_changes

#: How many commits are compared here (``git.treediff``) before one C git serves them all.
IN_PROCESS = 4

__all__ = ["ZERO", "Change", "DiffError", "changes_of", "first_parent_changes",
           "git_first_parent_changes"]


class DiffError(Exception):
    """C git could not compare a commit with its first parent (unreadable objects)."""


def _parse(out: bytes) -> dict[str, list[Change]]:
    """``--stdin -z`` output: a commit id, then its ``:modes ids status NUL path NUL`` records."""
    found: dict[str, list[Change]] = {}
    tokens = out.split(b"\0")
    current: list[Change] | None = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith(b":"):
            if current is None or i + 1 >= len(tokens):
                raise DiffError("unexpected output of git diff-tree")
            old_mode, new_mode, old_sha, new_sha, status = token[1:].decode("ascii").split(" ")
            path = tokens[i + 1].decode("utf-8", "surrogateescape")
            current.append(Change(path, int(old_mode, 8), int(new_mode, 8), old_sha, new_sha,
                                  status[:1]))
            i += 2
            continue
        if token:
            current = found.setdefault(token.decode("ascii").strip(), [])
        i += 1
    return found


def first_parent_changes(repo: Repository, commits: Sequence[str]) -> dict[str, list[Change]]:
    """For each commit, everything it changes against its first parent (against the empty tree
    for a root commit). A commit C git cannot compare is missing from the answer; its verifier
    reports that. A few commits (the probe's one) are compared here when their trees are sound
    (``git.treediff``: the same answer without a process); many, or any whose trees are not,
    by one ``git diff-tree --stdin``."""
    unique = list(dict.fromkeys(commits))
    out: dict[str, list[Change]] = {}
    rest = unique
    if len(unique) <= IN_PROCESS:
        rest = []
        for sha in unique:
            found = _here(repo, sha)
            if found is None:
                rest.append(sha)
            else:
                out[sha] = found
    out.update(git_first_parent_changes(repo, rest))
    return out


def changes_of(repo: Repository, info: CommitInfo) -> list[Change] | None:
    """``first_parent_changes`` of the one commit ``info`` (None: C git cannot compare it)."""
    found = _here(repo, info.sha, info)
    return found if found is not None else git_first_parent_changes(repo, [info.sha]).get(
        info.sha)


def _here(repo: Repository, sha: str, info: CommitInfo | None = None) -> list[Change] | None:
    """``git.treediff``'s answer for one commit; None: ask C git (a tree not sound, an object
    missing or unreadable: C git then says whether it can compare the commit at all)."""
    try:
        info = info or repo.commit(sha)
        if not info.parents:
            return tree_changes(repo, None, info.tree)
        if not repo.has_object(info.parents[0]):
            return None
        return tree_changes(repo, repo.commit(info.parents[0]).tree, info.tree)
    except CorruptStateError:
        return None


def git_first_parent_changes(repo: Repository, commits: Sequence[str]
                             ) -> dict[str, list[Change]]:
    """``first_parent_changes`` as C git computes it: one ``git diff-tree --stdin``."""
    if not commits:
        return {}
    lines = []
    for sha in dict.fromkeys(commits):
        parents = repo.commit(sha).parents
        lines.append(f"{sha} {parents[0]}" if parents else sha)
    proc = repo.git("diff-tree", "--stdin", "-r", "-t", "--no-renames", "-z", "--always",
                    "--root", input=("\n".join(lines) + "\n").encode())
    if proc.returncode == 0:
        return _parse(proc.stdout)
    if len(lines) == 1:
        return {}
    out: dict[str, list[Change]] = {}
    for sha in dict.fromkeys(commits):  # find which one git cannot read: the others are fine
        out.update(git_first_parent_changes(repo, [sha]))
    return out
