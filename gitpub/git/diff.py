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
from dataclasses import dataclass

from gitpub.git.repo import MODE_TREE, Repository

ZERO = "0" * 40


class DiffError(Exception):
    """C git could not compare a commit with its first parent (unreadable objects)."""


@dataclass(frozen=True)
class Change:
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
        return all(m in (0, MODE_TREE) for m in (self.old_mode, self.new_mode))

    @property
    def new_tree(self) -> str | None:
        """The tree this change brings, if it brings one."""
        return self.new_sha if self.new_mode == MODE_TREE and self.new_sha != ZERO else None


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
    reports that."""
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
        out.update(first_parent_changes(repo, [sha]))
    return out
