"""What several commands share: delivering a set of jobs, driving their channels, the hints.

Above ``delivery`` and ``channels`` (which know nothing of each other): a published job's
channels are driven right after its delivery, in the same run.
"""

from __future__ import annotations

from collections.abc import Sequence

from gitpub.channels.drive import Driver, Report
from gitpub.core.errors import CorruptStateError
from gitpub.core.states import State
from gitpub.delivery.deliver import BranchMissingError, Deliverer
from gitpub.git.remote import RemoteConfigError
from gitpub.pipeline.advice import next_step
from gitpub.runtime.contain import Failures
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job
from gitpub.store.maintenance import pack_refs_if_needed


def next_steps(ctx: Context, jobs: Sequence[Job]) -> dict[str, str]:
    return {j.job_id: hint for j in jobs if (hint := next_step(ctx, j)) is not None}


def unfinished(ctx: Context, failures: Failures, states: frozenset[State], *,
                scan: bool = False) -> list[Job]:
    """The unfinished jobs in ``states``, oldest first, from the active index (``scan``: from
    every job ref, the index rebuilt on the way); unreadable ones go to ``failures``."""
    jobs = []
    for item in ctx.store.iter_jobs(finished=scan):
        if isinstance(item, CorruptStateError):
            failures.add(None, item)
        elif item.state in states:
            jobs.append(item)
    if scan:
        for job_id in ctx.store.rebuild_index(jobs):
            ctx.progress(f"job {job_id} was missing from the active index: indexed again")
    return sorted(jobs, key=lambda j: j.record.created_at)


def deliver_one(ctx: Context, job: Job, deliverer: Deliverer, failures: Failures) -> Job:
    """The job delivered as far as it goes; a failure is the job's (see ``contain``). A
    misconfigured remote or a missing branch is not the job's error: it stops the command
    (exit 2) and changes nothing."""
    return failures.contain(ctx, job, deliverer.deliver,
                            stop=(BranchMissingError, RemoteConfigError))


def deliver_all(ctx: Context, jobs: Sequence[Job], deliverer: Deliverer,
                 failures: Failures) -> list[Job]:
    """Each job delivered as far as it goes; a job that fails is reported and left as it
    stands (or in REVIEW, see ``contain``), and the others go on."""
    if jobs:
        deliverer.remote.check()  # no such remote, not a repository: exit 2, nothing changed
    return [deliver_one(ctx, job, deliverer, failures) for job in jobs]


def maintain(ctx: Context, failures: Failures, *, sweep: bool = False) -> None:
    """Housekeeping after delivering (``sweep``: also stale lock files nobody ran into): a
    failure there is reported, never fatal."""
    try:
        if sweep:
            ctx.repo.sweep_stale_locks()
        pack_refs_if_needed(ctx.repo)
    except Exception as e:
        failures.add(None, e)


def driver_for(ctx: Context) -> Driver:
    return Driver(ctx)


def distribute(ctx: Context, driver: Driver, done: Sequence[Job], errors: list[str], *,
                only_named: bool = False) -> tuple[list[Job], dict[str, Report]]:
    """After delivery: drive the channels of the published jobs (``done``, and unless
    ``only_named`` every job whose distribution is unsettled). Returns the jobs to show (as
    they are now) and their channel reports."""
    reports, failed = driver.drive_all(done, only_named=only_named)
    errors += failed
    by_id = {r.job_id: r for r in reports}
    shown = {j.job_id: j for j in done}
    for job_id in by_id:
        fresh = ctx.store.load(job_id)
        if fresh is not None:
            shown[job_id] = fresh
    return list(shown.values()), by_id
