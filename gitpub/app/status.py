"""``git pub status`` and ``git pub log``: reading jobs, here or on the remote. Nothing that
writes objects is loaded (no dulwich), nor the channel code unless a job can have channels."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gitpub.app.results import History, Jobs, Progress, Shown
from gitpub.core.errors import CorruptStateError
from gitpub.core.states import TERMINAL, State
from gitpub.pipeline.advice import next_step
from gitpub.runtime.contain import Failures
from gitpub.runtime.session import open_session
from gitpub.store.jobs import DISTRIBUTING_PREFIX, Job

if TYPE_CHECKING:
    from gitpub.channels.drive import Report


def status(where: Path, progress: Progress, job_ref: str | None,
           show_all: bool) -> Shown | Jobs:
    """One job, or the unfinished ones (``show_all``: every job); a published job whose
    channels are not settled yet is unfinished too. Channel records are shown as they are
    (the channel code is loaded only when a job can have some: a published one, or one in the
    distribution index)."""
    with open_session(where, progress) as ctx:
        if job_ref is not None:
            from gitpub.delivery.anywhere import find_anywhere  # (delivery: a named job only)

            job = find_anywhere(ctx, job_ref)
            if job.state != State.PUBLISHED:
                return Shown(job, next_step(ctx, job), None)
            from gitpub.channels.drive import channel_reports

            return Shown(job, next_step(ctx, job),
                         channel_reports(ctx, [job], strict=True).get(job.job_id))
        jobs: list[Job] = []
        failures = Failures()
        errors = failures.errors
        for item in ctx.store.iter_jobs(finished=show_all):
            if isinstance(item, CorruptStateError):
                failures.add(None, item)
            elif show_all or item.state not in TERMINAL:
                jobs.append(item)
        channels: dict[str, Report] = {}
        if any(j.state == State.PUBLISHED for j in jobs) or \
                (not show_all and ctx.repo.list_refs(DISTRIBUTING_PREFIX)):
            from gitpub.channels.drive import channel_reports, unsettled

            if not show_all:
                jobs += unsettled(ctx, {j.job_id for j in jobs}, errors)
            channels = channel_reports(ctx, jobs, errors=errors)
        jobs.sort(key=lambda j: j.record.created_at)
        hints = {j.job_id: h for j in jobs if (h := next_step(ctx, j)) is not None}
        return Jobs(tuple(jobs), tuple(errors), hints=hints, channels=channels,
                    tracebacks=tuple(failures.tracebacks), unconfirmed=tuple(failures.later))


def log(where: Path, progress: Progress, job_ref: str) -> History:
    from gitpub.delivery.anywhere import find_anywhere

    with open_session(where, progress) as ctx:
        job = find_anywhere(ctx, job_ref)
        return History(job, tuple(ctx.store.history(job)))
