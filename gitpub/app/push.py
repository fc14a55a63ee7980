"""``git pub push`` and ``git pub reconcile``: deliver jobs (and recover every unfinished
one), then drive the published jobs' channels.

Folding finished jobs into the archive (``fold_if_due``) happens at the end of ``reconcile``,
when due. ``reconcile`` is the maintenance pass every operator runs periodically (a cron job on
at least one writer, see docs/several-writers.md), and it fetches the job store anyway; so that
is where folding happens (``delivery.fold``), once ``archive_after`` finished job refs piled up
(counted here without the network). ``push`` and ``prepare`` never fold: a publish
costs what it did, however big the archive is. A fold that cannot run now (the remote does not
answer, another gitpub here holds the delivery lock) is said and left to the next run; it is
housekeeping, so it never changes ``reconcile``'s exit code unless it fails unexpectedly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from gitpub.app.common import deliver_all, distribute, driver_for, maintain, next_steps, unfinished
from gitpub.app.results import Jobs, Progress
from gitpub.channels.state import ChannelState
from gitpub.core.errors import CorruptStateError
from gitpub.core.sanitize import sanitize
from gitpub.core.states import LOCAL, TERMINAL, State
from gitpub.delivery.anywhere import find_here, take_over
from gitpub.delivery.deliver import DELIVERABLE, Deliverer
from gitpub.delivery.fold import Folded, due, fold
from gitpub.delivery.lock import delivery_lock
from gitpub.delivery.sync import settle_outbox
from gitpub.git.locks import LockedError
from gitpub.git.remote import RemoteConfigError, RemoteError
from gitpub.pipeline.prepare import drive
from gitpub.runtime.contain import Failures
from gitpub.runtime.context import Context
from gitpub.runtime.session import open_session
from gitpub.store.jobs import DISTRIBUTING_PREFIX, Job


def push(where: Path, progress: Progress, job_refs: Sequence[str],
         create_branch: bool = False) -> Jobs:
    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote(), now_please=bool(job_refs),
                              create_branch=create_branch)
        failures = Failures()
        errors = failures.errors
        if job_refs:
            jobs = [find_here(ctx, ref) for ref in job_refs]
        else:
            jobs = unfinished(ctx, failures, DELIVERABLE | LOCAL)
        driver = driver_for(ctx)
        driver.expect(jobs)
        done = deliver_all(ctx, jobs, deliverer, failures)
        done, channels = distribute(ctx, driver, done, errors, only_named=bool(job_refs))
        maintain(ctx, failures)
        return Jobs(tuple(done), tuple(errors), dict(deliverer.notes), hints=next_steps(ctx, done),
                    channels=channels, tracebacks=tuple(failures.tracebacks),
                    held=tuple(j.job_id for j in done if deliverer.left_to_others(j)))


def reconcile(where: Path, progress: Progress) -> Jobs:
    """Recover every unfinished job: local phases, unknown push outcomes, expired leases,
    due retries, probes of FAILED jobs. Scans every job ref (the active index is derived data,
    rebuilt here, never trusted) and goes on past a bad job. With a misconfigured remote, the
    local phases are still recovered, then the configuration error is reported."""
    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote())
        failures = Failures()
        errors = failures.errors
        everything = frozenset(State) - TERMINAL
        jobs = unfinished(ctx, failures, everything, scan=True)
        taken, not_taken = take_over(ctx, deliverer, failures)
        jobs += taken
        driver = driver_for(ctx)
        driver.expect(jobs)
        driver.rediscover(errors)
        try:
            done = deliver_all(ctx, jobs, deliverer, failures)
        except RemoteConfigError:
            for job in jobs:
                if job.state in LOCAL:
                    failures.contain(ctx, job, lambda j: drive(ctx, j))
            raise
        done, channels = distribute(ctx, driver, done, errors)
        pending = None
        try:
            pending = settle_outbox(ctx, ctx.repo.read_ref(deliverer.remote.tracking_ref))
        except Exception as e:
            failures.add(None, e)
        fold_if_due(ctx, deliverer, failures)
        maintain(ctx, failures, sweep=True)
        return Jobs(tuple(done), tuple(errors), dict(deliverer.notes), pending=pending,
                    hints=next_steps(ctx, done), channels=channels,
                    tracebacks=tuple(failures.tracebacks), unconfirmed=tuple(
                        [] if not_taken is None else [not_taken]),
                    held=tuple(j.job_id for j in done if deliverer.left_to_others(j)))


# -- folding finished jobs into the archive (reconcile) ----------------------------------------



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
