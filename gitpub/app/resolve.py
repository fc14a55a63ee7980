"""``git pub resolve``: a person's way out of REVIEW, CONFLICT or FAILED, abandoning a job,
or deciding a channel's outcome."""

from __future__ import annotations

from pathlib import Path

from gitpub.app.common import distribute, driver_for, next_steps
from gitpub.app.results import Jobs, Progress
from gitpub.channels.resolve import Decision
from gitpub.channels.resolve import resolve_channel as resolve_one
from gitpub.delivery.anywhere import find_here, find_job_or_adopt, share
from gitpub.delivery.resolve import Action, Resolution
from gitpub.delivery.resolve import resolve as resolve_job
from gitpub.pipeline.sources import read_merged
from gitpub.runtime.session import open_session

__all__ = ["Action", "resolve", "resolve_channel"]


def resolve(where: Path, progress: Progress, job_ref: str, action: Action,
            from_file: str | None = None, push: bool = False,
            allow_empty: bool = False) -> Jobs:
    """A person's way out of REVIEW, CONFLICT or FAILED, or abandoning a job (see
    ``delivery.resolve``); the merged content of ``--from`` is read from ``from_file``."""
    merged = None if from_file is None else read_merged(from_file, allow_empty)
    with open_session(where, progress) as ctx:
        job = find_job_or_adopt(ctx, job_ref)
        driver = driver_for(ctx)
        driver.expect([job])  # a retry may publish it: its channels follow
        result = resolve_job(ctx, job, Resolution(action, merged, from_file, push))
        share(ctx, result.job)
        notes = {} if result.note is None else {result.job.job_id: result.note}
        errors: list[str] = []
        (shown,), channels = distribute(ctx, driver, [result.job], errors, only_named=True)
        return Jobs((shown,), tuple(errors), notes, hints=next_steps(ctx, [shown]),
                    channels=channels)


def resolve_channel(where: Path, progress: Progress, job_ref: str, channel: str,
                    decision: Decision, url: str | None) -> Jobs:
    """A person's decision on one channel, recorded; then the job's channels are driven."""
    with open_session(where, progress) as ctx:
        job = resolve_one(ctx.store, find_here(ctx, job_ref), channel, decision, url)
        errors: list[str] = []
        done, channels = distribute(ctx, driver_for(ctx), [job], errors, only_named=True)
        return Jobs(tuple(done), tuple(errors), hints=next_steps(ctx, done), channels=channels)
