"""Named crash points: the places where a process may die between two durable writes.

Setting ``GITPUB_CRASH_AT=<name>`` makes the process SIGKILL itself when it reaches that point
(``<name>:<n>`` waits for the n-th time). This is how the tests prove that every promise holds
whatever step the process dies at. ``GITPUB_CRASH_TRACE=<file>`` appends the name of every point
reached, so a test can check that each registered point is really on a code path.
``GITPUB_PAUSE_AT=<name>`` makes the process SIGSTOP itself there instead (a test resumes it
with SIGCONT): a worker frozen at an exact point, as a long GC pause or a suspended laptop
would freeze it.
``GITPUB_FAIL_AT=<name>[:<n>]`` raises ``InjectedFault`` there instead: an unexpected exception
(a bug) at a known place, to prove that one job's failure is contained to that job.

The ``git.*`` points are inside the git layer's writes while a lock file is held (C git has
prepared a ref transaction and holds its locks; dulwich has written an object's ``.lock`` and
not yet renamed it): a kill there (of git too) leaves exactly the stale locks a power cut
leaves.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

#: Every crash point, in pipeline order. Tests iterate over this tuple.
CRASH_POINTS: tuple[str, ...] = (
    "prepare.job-created",
    "prepare.base-snapshotted",
    "prepare.draft-ran",
    "prepare.draft-recorded",
    "prepare.history-checked",
    "prepare.judge-ran",
    "prepare.judge-recorded",
    "prepare.gates-ran",
    "prepare.ready-recorded",
    "commit.committing-recorded",
    "commit.objects-written",
    "commit.committed-recorded",
    "delivery.fetched",
    "delivery.claimed",
    "delivery.recheck-ran",
    "merge.gated",  # two edits of a page merged and the result gated; nothing recorded yet
    "delivery.pushing-recorded",
    "delivery.pushed",
    "delivery.published-recorded",
    "delivery.retry-recorded",
    "review.pushing-recorded",
    "review.pushed",
    "review.request-opened",
    "shared.pushing-pushed",
    "shared.content-pushed",
    "fold.written",
    "fold.archive-pushed",
    "fold.pushed",
    "fold.noted",
    "channels.initialized",
    "channels.decided",  # a send decided on the ledger as fetched; nothing written yet
    "channels.sending-recorded",
    "channels.claimed",
    "channels.sent",
    "channels.outcome-recorded",
    "channels.reconciling-recorded",
    "git.ref-locked",
    "git.object-locked",
    "sync.uncommitted-adopted",
    "sync.local-rebuilt",
    "checkout.worktree-updated",
    "fetch.set-aside",  # a corrupt loose object moved into .git/pub/quarantine, not refetched
    "confirm.notes-pushed",
)

_counts: dict[str, int] = {}
_fail_counts: dict[str, int] = {}


class InjectedFault(RuntimeError):
    """The unexpected exception ``GITPUB_FAIL_AT`` raises (tests only)."""


def _due(variable: str, name: str, counts: dict[str, int]) -> bool:
    """Whether this is the n-th time ``name`` is reached and ``variable`` asks for it then."""
    wanted = os.environ.get(variable)
    if not wanted:
        return False
    point, _, nth = wanted.partition(":")
    if point != name:
        return False
    counts[name] = counts.get(name, 0) + 1
    return counts[name] == int(nth or "1")


def crash_point(name: str, before: Callable[[], object] | None = None) -> None:
    """Die here, now, without cleanup, if the environment asks for it; ``before`` runs first
    (to kill a child that must die with us: C git holding a transaction's locks)."""
    assert name in CRASH_POINTS, name
    trace = os.environ.get("GITPUB_CRASH_TRACE")
    if trace:
        with open(trace, "a", encoding="utf-8") as f:
            f.write(name + "\n")
    for variable, sig in (("GITPUB_CRASH_AT", signal.SIGKILL),
                          ("GITPUB_PAUSE_AT", signal.SIGSTOP)):
        wanted = os.environ.get(variable)
        if not wanted:
            continue
        point, _, nth = wanted.partition(":")
        if point != name:
            continue
        _counts[variable + name] = _counts.get(variable + name, 0) + 1
        if _counts[variable + name] == int(nth or "1") or (
                sig == signal.SIGKILL and _counts[variable + name] > int(nth or "1")):
            if before is not None and sig == signal.SIGKILL:
                before()
            os.kill(os.getpid(), sig)
    if _due("GITPUB_FAIL_AT", name, _fail_counts):
        raise InjectedFault(f"injected fault at {name}")
