"""Walking history as git's ``tips ^base`` does: in-process for short walks, with C git for long.

``walk_since`` searches the commits after a job's base for its publication (``verify.probe``):
the walk covers only what a rebase or another writer could have added since the base, so its
cost follows the number of commits since the job was prepared, not the length of the history.
``log_range`` is one ``git log`` for walks that may be long (``git pub confirm`` in CI).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from gitpub.core.errors import CorruptStateError
from gitpub.git.repo import CommitInfo, Repository


def walk_since(
    repo: Repository, tips: Sequence[str], base: str | None
) -> Iterator[tuple[str, bytes]]:
    """(sha, message) of every commit reachable from ``tips`` and not from ``base`` — git's
    ``tips ^base`` — newest first.

    Two colours, as git's revision walk does: commits reached from ``base`` are uninteresting
    and so are all their ancestors; the walk goes newest-first by commit date and stops when
    only uninteresting commits are left to expand. So the work follows the commits since the
    base, not the length of the history. Dates only order the walk, they never cut it off: a
    commit with a skewed clock can make the walk expand a few commits more, never fewer (an
    extra commit searched for trailers is harmless; a missed one would not be).
    """
    infos: dict[str, CommitInfo | None] = {}

    def info(sha: str) -> CommitInfo | None:
        if sha not in infos:
            infos[sha] = repo.commit(sha) if repo.has_object(sha) else None  # shallow edge
        return infos[sha]

    uninteresting: set[str] = set()
    done: dict[str, bool] = {}  # sha -> the colour it was expanded with
    heap: list[tuple[int, str, bool]] = []
    pending = 0  # interesting entries in the heap

    def push(sha: str, boring: bool) -> None:
        nonlocal pending
        found = info(sha)
        if found is None or done.get(sha) in (True, boring):
            return
        if boring:
            uninteresting.add(sha)
        else:
            pending += 1
        heapq.heappush(heap, (-found.commit_time, sha, boring))

    if base is not None:
        push(base, True)
    for tip in tips:
        push(tip, False)
    while pending > 0 and heap:
        _, sha, boring = heapq.heappop(heap)
        if not boring:
            pending -= 1
        boring = boring or sha in uninteresting
        if done.get(sha) in (True, boring):
            continue
        done[sha] = boring
        found = info(sha)
        assert found is not None
        if not boring:
            yield sha, found.message
        for parent in found.parents:
            push(parent, boring)


@dataclass(frozen=True)
class Logged:
    """One commit of a ``git log`` walk: its id, parents and raw message (``%B``)."""

    sha: str
    parents: tuple[str, ...]
    message: bytes


def log_range(repo: Repository, tips: Sequence[str], excludes: Sequence[str]) -> list[Logged]:
    """Every commit reachable from ``tips`` and not from ``excludes`` (``git log tips
    ^excludes``), newest first, with parents and message: one C git walk, so the cost is C
    git's (its object cache, the commit-graph when there is one), not a Python walk's."""
    args = ["-c", "log.showSignature=false", "log", "-z", "--no-notes", "--no-decorate",
            "--format=%H %P%x00%B", *tips, *[f"^{x}" for x in excludes], "--"]
    proc = repo.git(*args)
    if proc.returncode != 0:
        raise CorruptStateError("git log failed: "
                                + proc.stderr.decode("utf-8", "replace").strip()[-300:])
    fields = proc.stdout.split(b"\0")
    out = []
    for i in range(0, len(fields) - 1, 2):
        head = fields[i].decode("ascii").split()
        out.append(Logged(head[0], tuple(head[1:]), fields[i + 1]))
    return out


def shallow_commits(repo: Repository) -> frozenset[str]:
    """The shallow boundary of a shallow clone (commits whose parents are not here)."""
    try:
        text = (repo.common_dir / "shallow").read_text(encoding="ascii")
    except FileNotFoundError:
        return frozenset()
    return frozenset(text.split())
