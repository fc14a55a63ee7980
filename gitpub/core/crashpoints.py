"""Named crash points: the places where a process may die between two durable writes.

Setting ``GITPUB_CRASH_AT=<name>`` makes the process SIGKILL itself when it reaches that point
(``<name>:<n>`` waits for the n-th time). This is how the tests prove that every promise holds
whatever step the process dies at. ``GITPUB_CRASH_TRACE=<file>`` appends the name of every point
reached, so a test can check that each registered point is really on a code path.
"""

from __future__ import annotations

import os
import signal

#: Every crash point, in pipeline order. Tests iterate over this tuple.
CRASH_POINTS: tuple[str, ...] = (
    "prepare.job-created",
    "prepare.base-snapshotted",
    "prepare.draft-ran",
    "prepare.draft-recorded",
    "prepare.judge-ran",
    "prepare.judge-recorded",
    "prepare.gates-ran",
    "prepare.ready-recorded",
    "commit.committing-recorded",
    "commit.objects-written",
    "commit.committed-recorded",
    "delivery.fetched",
    "delivery.recheck-ran",
    "delivery.pushing-recorded",
    "delivery.pushed",
    "delivery.published-recorded",
    "delivery.retry-recorded",
    "sync.uncommitted-adopted",
    "sync.local-rebuilt",
    "checkout.worktree-updated",
)

_counts: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Die here, now, without cleanup, if the environment asks for it."""
    assert name in CRASH_POINTS, name
    trace = os.environ.get("GITPUB_CRASH_TRACE")
    if trace:
        with open(trace, "a", encoding="utf-8") as f:
            f.write(name + "\n")
    wanted = os.environ.get("GITPUB_CRASH_AT")
    if not wanted:
        return
    point, _, nth = wanted.partition(":")
    if point != name:
        return
    _counts[name] = _counts.get(name, 0) + 1
    if _counts[name] >= int(nth or "1"):
        os.kill(os.getpid(), signal.SIGKILL)
