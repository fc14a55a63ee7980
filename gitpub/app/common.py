"""What the commands that deliver share: delivering a set of jobs, folding finished jobs into
the archive, the hints. Driving the published jobs' channels (``app.distribution``) comes right
after a delivery, in the same run: above ``delivery`` and ``channels``, which know nothing of
each other.

Folding (``fold_if_due``) is part of the ordinary flow: every command that delivers (``push``,
``sync``, ``prepare --push``, ``reconcile``) folds the finished jobs into the archive once
``archive_after`` finished job refs piled up (counted without the network), so the refs — and
what every fetch and push of the store costs — stay proportional to the unfinished jobs
without anyone running ``reconcile`` (issue 23 point 8; ``bench/jobstore.py`` measures it). A
fold that cannot run now (the remote does not answer, another gitpub here holds the delivery
lock, the remote's archive is damaged) is said and left to the next run; it is housekeeping,
so it never changes a command's exit code unless it fails unexpectedly.
"""

from __future__ import annotations

from collections.abc import Sequence

from gitpub.app.distribution import settled
from gitpub.core.errors import CorruptStateError
from gitpub.core.sanitize import sanitize
from gitpub.core.states import State
from gitpub.delivery.deliver import BranchMissingError, Deliverer
from gitpub.delivery.fold import Folded, due, fold
from gitpub.delivery.lock import delivery_lock
from gitpub.git.locks import LockedError
from gitpub.git.remote import Remote, RemoteConfigError, RemoteError
from gitpub.pipeline.advice import next_step
from gitpub.runtime.contain import Failures
from gitpub.runtime.context import Context
from gitpub.store.jobs import KEPT_PREFIXES, Job
from gitpub.store.maintenance import pack_refs_if_needed
from gitpub.store.mirror import store_prefix


def read_first(ctx: Context, remote: Remote) -> tuple[str | None, str | None]:
    """A publishing command's first read of refs, in one ``for-each-ref``: (the remote
    branch's tracking ref, the local branch), read exactly, and the listings the command
    keeps from then on (``git.refs``): this clone's active index, job refs and distribution
    index (``KEPT_PREFIXES``), and the remote's job store as last fetched. What the command
    reads of them later costs no git (the job's ref before its claim is read afresh)."""
    ctx.repo.local_prefixes = KEPT_PREFIXES
    tracking, branch = remote.tracking_ref, f"refs/heads/{ctx.config.branch}"
    seen = ctx.repo.read_refs([tracking, branch], also=[*KEPT_PREFIXES, store_prefix(remote)])
    return seen[tracking], seen[branch]


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


def fold_if_due(ctx: Context, deliverer: Deliverer, failures: Failures, *,
                everything: bool = False) -> Folded | None:
    """Fold the finished jobs into the archive when ``archive_after`` of them piled up: as many
    as a publish may take on (``delivery.fold.flow_limit``), or (``everything``, as
    ``reconcile`` does) all; what the fold did, or None when it did not run."""
    shared = deliverer.shared
    if not due(shared, ctx.config.archive_after):
        return None
    try:
        with delivery_lock(ctx.repo, progress=ctx.progress):
            result = fold(shared, settled(ctx), flow=not everything)
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
    elif result.left:
        ctx.progress(f"archive: {result.left} more finished job ref(s) left for the next runs; "
                     "`git pub reconcile` folds them all")
    return result
