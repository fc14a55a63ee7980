"""What a commit changes against its first parent, as C git computes it.

The verifier judges what a clone checks out, so it asks C git, not dulwich's tree diff: on a
tree dulwich and git read differently (duplicate entries: dulwich keeps one, git both) the two
diffs differ, and git's is the one that reaches every working tree. One
``git diff-tree --stdin -r -t --no-renames -z --always --root`` serves any number of commits
(``first_parent_changes``), so a long walk pays one process, not one per commit. ``-t`` lists
the trees on the way as well: what the commit adds as directories is checked too.
"""

from __future__ import annotations

from collections.abc import Sequence

from gitpub.git.reading import parse_raw_diff
from gitpub.git.repo import Change, CommitInfo, Repository

__all__ = ["Change", "DiffError", "changes_of", "first_parent_changes"]


class DiffError(Exception):
    """C git could not compare a commit with its first parent (unreadable objects)."""


def _parse(out: bytes, zero: str) -> dict[str, list[Change]]:
    """``--stdin -z`` output: a commit id, then its ``:modes ids status NUL path NUL``
    records."""
    found: dict[str, list[bytes]] = {}
    tokens = out.split(b"\0")
    current: list[bytes] | None = None
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith(b":"):
            if current is None or i + 1 >= len(tokens):
                raise DiffError("unexpected output of git diff-tree")
            current += [token, tokens[i + 1]]
            i += 2
            continue
        if token:
            current = found.setdefault(token.decode("ascii").strip(), [])
        i += 1
    return {sha: parse_raw_diff(b"\0".join(records), zero) for sha, records in found.items()}


def first_parent_changes(repo: Repository, commits: Sequence[str]) -> dict[str, list[Change]]:
    """For each commit, everything it changes against its first parent (against the empty tree
    for a root commit), as one ``git diff-tree --stdin`` computes it. A commit C git cannot
    compare is missing from the answer; its verifier reports that."""
    unique = list(dict.fromkeys(commits))
    kept = {sha: found for sha in unique if (found := repo.kept_changes(sha)) is not None}
    if len(kept) == len(unique):
        return kept  # objects never change: what git said of them this command still holds
    out = kept | _ask(repo, [sha for sha in unique if sha not in kept])
    for sha in unique:
        if sha in out and sha not in kept:
            repo.keep_changes(sha, out[sha])
    return out


def _ask(repo: Repository, unique: list[str]) -> dict[str, list[Change]]:
    lines = []
    for sha in unique:
        parents = repo.commit(sha).parents
        lines.append(f"{sha} {parents[0]}" if parents else sha)
    proc = repo.git("diff-tree", "--stdin", "-r", "-t", "--no-renames", "-z", "--always",
                    "--root", input=("\n".join(lines) + "\n").encode())
    if proc.returncode == 0:
        return _parse(proc.stdout, repo.object_format.zero)
    if len(unique) == 1:
        return {}
    out: dict[str, list[Change]] = {}
    for sha in unique:  # find which one git cannot read: the others are fine
        out.update(_ask(repo, [sha]))
    return out


def changes_of(repo: Repository, info: CommitInfo) -> list[Change] | None:
    """``first_parent_changes`` of the one commit ``info`` (None: C git cannot compare it)."""
    return first_parent_changes(repo, [info.sha]).get(info.sha)
