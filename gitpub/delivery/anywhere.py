"""Jobs of the shared store seen from any clone: found, adopted, shared, taken over.

A job that reached delivery lives on the remote too (``refs/pub/jobs/<id>``, see
``delivery.shared``). ``status <id>``, ``log <id>`` and ``resolve <id>`` look in this clone
first and, only when the job is not here, fetch the remote's job store (``refs/pub/*``, one
fetch with protocol v2 ref prefixes); ``reconcile`` fetches it every time to take over the jobs
of nodes that are gone.
"""

from __future__ import annotations

from gitpub.core.errors import GitpubError, LostRace, TryLaterError, UsageError
from gitpub.core.states import SETTLED, TERMINAL
from gitpub.delivery.lock import delivery_lock
from gitpub.delivery.shared import Shared
from gitpub.git.locks import LockedError
from gitpub.git.remote import RemoteConfigError, RemoteError
from gitpub.runtime.contain import Failures
from gitpub.runtime.context import Context
from gitpub.runtime.session import find_job
from gitpub.store.jobs import Job
from gitpub.store.mirror import store_prefix
from gitpub.store.shared import SharedView


def find_anywhere(ctx: Context, ref: str) -> Job:
    """A job by id or prefix: this clone's, else the archive as last fetched (a finished job
    folded there: no network), else (the network is needed then) the remote's job store's —
    fetched, only ``refs/pub/*`` and the branch — so that any clone shows any job. Read only:
    nothing is adopted here."""
    try:
        return find_here(ctx, ref)
    except UsageError as missing:
        if not missing.message.startswith("no job"):
            raise
        try:
            found = Shared(ctx, ctx.remote()).locate(ref)
        except (RemoteError, RemoteConfigError) as e:
            raise UsageError(f"no job {ref!r} here, and the remote's job store could not be "
                             f"read: {e.message}",
                             hint="`git pub status` lists this clone's jobs") from None
        if found is None:
            raise UsageError(f"no job {ref!r}, neither here nor on the remote",
                             hint="`git pub status` lists the jobs") from None
        return found


def find_here(ctx: Context, ref: str) -> Job:
    """A job by id or prefix from this clone alone: its own refs, else the archive as last
    fetched (a job this clone folded is still named by its id). No network."""
    try:
        return find_job(ctx.store, ref)
    except UsageError as missing:
        if not missing.message.startswith("no job"):
            raise
        archived = _in_archive(ctx, ref)
        if archived is None:
            raise
        return archived


def _in_archive(ctx: Context, ref: str) -> Job | None:
    """The job ``ref`` names in the archive this clone last fetched (one match), or None."""
    view = SharedView(ctx.store, store_prefix(ctx.remote()))
    ids = view.archived_matching(ref)
    if len(ids) > 1:
        raise UsageError(f"job id prefix {ref!r} is ambiguous ({len(ids)} archived jobs)",
                         hint="give more of the id")
    return view.archived_job(ids[0]) if ids else None


def find_job_or_adopt(ctx: Context, ref: str) -> Job:
    """``find_anywhere``, a job found only on the remote adopted here (its ref set to the
    remote's value): a person resolves a job on any clone. A finished job (archived, say) is
    not adopted: there is nothing left to resolve, and ``resolve`` says so."""
    job = find_anywhere(ctx, ref)
    if job.state not in TERMINAL and ctx.store.load(job.job_id) is None:
        job = ctx.store.adopt(job.job_id, None, job.commit)
    return job


def share(ctx: Context, job: Job) -> None:
    """A job a person settled here (abandoned, say) goes to the remote's job store too when
    the remote has it (by compare-and-swap; a remote that does not answer now gets it on a
    later delivery run). When another node moved the job on the remote meanwhile (it took it
    over between this clone's probe and its record), the person's decision did not stand:
    the remote's state is adopted here (ours kept under ``refs/pub/superseded/``) and
    ``TryLaterError`` says so (exit 5) — never "abandoned" for a job another node publishes."""
    shared = Shared(ctx, ctx.remote())
    try:
        if shared.view.remote_value(job.job_id) is None:
            return
        shared.fetch()
        shared.publish_states([job])
        theirs = shared.view.remote_value(job.job_id)
        if job.state not in SETTLED or theirs is None or shared.view.descends(job.commit, theirs):
            return
        there = shared.view.load(job.job_id, theirs).state
        shared.sync(job)
    except (RemoteError, RemoteConfigError, LostRace):
        return
    raise TryLaterError(
        f"job {job.job_id}: another node moved it on the remote meanwhile ({there.value} "
        f"there now): this clone's {job.state.value} does not stand",
        hint=f"`git pub status {job.job_id[:13]}` shows where it stands; decide again there")


def take_over(ctx: Context, shared: Shared,
              failures: Failures) -> tuple[list[Job], str | None]:
    """The remote's unfinished jobs whose holder is gone (``Shared.orphans``), adopted here
    to be delivered like this clone's own: probed first. A remote that does not answer is a
    transient (returned: not confirmed, exit 5); one that is not configured leaves only this
    clone's jobs to recover; a damaged remote job is reported."""
    try:
        with delivery_lock(ctx.repo, progress=ctx.progress):  # the network segment's lock
            shared.fetch()
            taken = [job for job in shared.orphans() if _passes(ctx, job, failures)]
            for damaged in shared.damaged:
                failures.add(None, damaged)
            return taken, None
    except LockedError:
        ctx.progress("no take-over of other nodes' jobs in this run: another gitpub here holds "
                     "the delivery lock")
    except RemoteConfigError:
        pass  # said once, by the delivery of this clone's jobs (exit 2) if it has any
    except RemoteError as e:
        return [], f"no take-over of other nodes' jobs: {e.message}"
    return [], None


def _passes(ctx: Context, job: Job, failures: Failures) -> bool:
    """Whether a job taken over may be delivered here: its artifacts pass this node's scope
    and gates (``regate``); one that cannot be read is reported, not delivered."""
    from gitpub.pipeline.prepare import regate  # a take-over's: push loads no pipeline

    try:
        return regate(ctx, job) is None
    except GitpubError as e:
        failures.add(job.job_id, e)
        return False
