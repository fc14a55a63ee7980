"""When finished jobs are folded into the archive: at the end of ``reconcile``, when due.

``reconcile`` is the maintenance pass every operator runs periodically (a cron job on at least
one writer, see docs/several-writers.md), and it fetches the job store anyway; so
that is where folding happens (``delivery.fold``), once ``archive_after`` finished job refs
piled up (counted here without the network). ``push`` and ``prepare`` never fold: a publish
costs what it did, however big the archive is. A fold that cannot run now (the remote does not
answer, another gitpub here holds the delivery lock) is said and left to the next run; it is
housekeeping, so it never changes ``reconcile``'s exit code unless it fails unexpectedly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from gitpub.app.contain import Failures
from gitpub.channels.state import ChannelState
from gitpub.core.errors import CorruptStateError
from gitpub.core.sanitize import sanitize
from gitpub.core.states import State
from gitpub.delivery.fold import Folded, due, fold
from gitpub.delivery.lock import delivery_lock
from gitpub.git.locks import LockedError
from gitpub.git.remote import RemoteConfigError, RemoteError
from gitpub.pipeline.context import Context
from gitpub.store.jobs import DISTRIBUTING_PREFIX, Job

if TYPE_CHECKING:
    from gitpub.delivery.deliver import Deliverer


def settled(ctx: Context) -> Callable[[Job], bool]:
    """``job -> bool``: whether a finished job's distribution is settled — SKIPPED, or
    PUBLISHED with no channel left to drive (none recorded, or every one final) and not in
    this clone's distribution index (its channels are about to be recorded)."""
    channels = ChannelState(ctx.store)

    def check(job: Job) -> bool:
        if job.state == State.SKIPPED:
            return True
        if ctx.repo.read_ref(DISTRIBUTING_PREFIX + job.job_id) is not None:
            return False
        try:
            dist = channels.load(job)
        except CorruptStateError:
            return False
        return dist is None or dist.settled

    return check


def fold_if_due(ctx: Context, deliverer: Deliverer, failures: Failures) -> Folded | None:
    """Fold the finished jobs into the archive when ``archive_after`` of them piled up; what
    the fold did, or None when it did not run."""
    shared = deliverer.shared
    if not due(shared, ctx.config.archive_after):
        return None
    try:
        with delivery_lock(ctx.repo, progress=ctx.progress):
            result = fold(shared, settled(ctx))
    except LockedError:
        ctx.progress("no fold into the archive in this run: another gitpub here holds the "
                     "delivery lock")
        return None
    except RemoteConfigError:
        return None  # said once, by the delivery (exit 2) or the take-over
    except RemoteError as e:
        ctx.progress(f"no fold into the archive in this run: {sanitize(e.message)}")
        return None
    except Exception as e:  # a bug or the machine: reported, the jobs' results stand
        failures.add(None, e)
        return None
    for why in result.skipped:
        ctx.progress(f"archive: {why}")
    if result.changed:
        ctx.progress(f"archive: {result.archived} finished job(s) folded, {result.deleted} "
                     f"job ref(s) deleted on the remote, {result.pruned} here")
    if result.stopped:
        ctx.progress(f"archive: the fold stopped: {result.stopped}; the next run goes on")
    return result
