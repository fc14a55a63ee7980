"""Walking history as git's ``tips ^base`` does: in-process for short walks, with C git for long.

``walk_since`` searches the commits after a job's base for its publication (``verify.probe``):
the walk covers only what a rebase or another writer could have added since the base, so its
cost follows the number of commits since the job was prepared, not the length of the history.
``log_scan`` is one ``git log`` for walks that may be long (``git pub confirm`` in CI).
"""

from __future__ import annotations

import heapq
import tempfile
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
class LogScan:
    """A ``git log`` walk: how many commits it covered, and the (sha, message) of those whose
    message contains one of the needles (case-insensitively), newest first."""

    count: int
    shas: bytes  # every walked commit id, NUL-separated (to test membership, not to iterate)
    candidates: tuple[tuple[str, bytes], ...]

    def has(self, sha: str) -> bool:
        field = sha.encode() + b"\0"
        return self.shas.startswith(field) or b"\0" + field in self.shas


def log_scan(repo: Repository, tips: Sequence[str], excludes: Sequence[str],
             needles: Sequence[bytes]) -> LogScan:
    """Every commit reachable from ``tips`` and not from ``excludes`` (``git log tips
    ^excludes``): one C git walk, so the cost is C git's (its object cache, the commit-graph
    when there is one), not a Python walk's; the messages are filtered in bulk, not one by
    one."""
    repo.pub_dir.mkdir(parents=True, exist_ok=True)
    # Into a file, read at once: a pipe read 32 KiB at a time costs more than the walk's
    # formatting for a long history.
    with tempfile.NamedTemporaryFile(dir=repo.pub_dir, prefix="log-", suffix=".tmp") as f:
        args = ["-c", "log.showSignature=false", "log", "-z", "--no-notes", "--no-decorate",
                f"--output={f.name}", "--format=%H%x00%B", *tips,
                *[f"^{x}" for x in excludes], "--"]
        proc = repo.git(*args)
        if proc.returncode != 0:
            raise CorruptStateError("git log failed: "
                                    + proc.stderr.decode("utf-8", "replace").strip()[-300:])
        out = f.read()
    low = out.lower()
    found: dict[int, None] = {}
    for needle in needles:
        pos = low.find(needle.lower())
        while pos >= 0:
            found[out.rfind(b"\0", 0, pos) + 1] = None  # the start of that commit's message
            pos = low.find(needle.lower(), pos + 1)
    candidates = []
    for start in sorted(found):
        end = out.find(b"\0", start)
        sha = out[start - 41:start - 1].decode("ascii")
        candidates.append((sha, out[start:end]))
    return LogScan(out.count(b"\0") // 2, out, tuple(candidates))


def shallow_commits(repo: Repository) -> frozenset[str]:
    """The shallow boundary of a shallow clone (commits whose parents are not here)."""
    try:
        text = (repo.common_dir / "shallow").read_text(encoding="ascii")
    except FileNotFoundError:
        return frozenset()
    return frozenset(text.split())
