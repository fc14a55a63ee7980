"""``git pub resolve``: a person's way out of REVIEW, CONFLICT or FAILED, abandoning a job,
or deciding a channel's outcome."""

from __future__ import annotations

from pathlib import Path

from gitpub.app.common import next_steps
from gitpub.app.distribution import distribute, driver_for
from gitpub.app.results import Jobs, Progress
from gitpub.channels.decide import target_of
from gitpub.channels.drive import Driver
from gitpub.channels.resolve import Decision
from gitpub.channels.resolve import resolve_channel as resolve_one
from gitpub.core.errors import TryLaterError, UsageError
from gitpub.core.states import State
from gitpub.delivery.anywhere import find_anywhere, find_here, find_job_or_adopt, share
from gitpub.delivery.resolve import Action, Resolution
from gitpub.delivery.resolve import resolve as resolve_job
from gitpub.git.remote import RemoteConfigError, RemoteError
from gitpub.pipeline.sources import read_merged
from gitpub.runtime.context import Context
from gitpub.runtime.session import open_session
from gitpub.store.jobs import Job

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
    """A person's decision on one channel, recorded on the remote's store (so it stands for
    every clone); then the job's channels are driven. Any clone resolves any job's channel:
    one this clone does not have is found on the remote and adopted here (and driven from
    here from now on)."""
    with open_session(where, progress) as ctx:
        chosen = driver_for(ctx)
        driver = chosen.driver()  # a channel is decided: the channel code is needed
        job = _channel_job(ctx, driver, job_ref)
        spec = ctx.config.channel(channel)
        job = resolve_one(driver.state, job, channel, decision, url,
                          None if spec is None else target_of(spec))
        driver.found_published(job)
        errors: list[str] = []
        done, channels = distribute(ctx, chosen, [job], errors, only_named=True)
        return Jobs(tuple(done), tuple(errors), hints=next_steps(ctx, done), channels=channels)


def _channel_job(ctx: Context, driver: Driver, job_ref: str) -> Job:
    """The published job ``job_ref`` names, synced with the remote's store (fetched): this
    clone's, else the remote's (adopted here). ``TryLaterError`` when the remote cannot be
    read: a channel is decided on the shared records only."""
    try:
        job = find_here(ctx, job_ref)
    except UsageError as missing:
        if not missing.message.startswith("no job"):
            raise
        job = find_anywhere(ctx, job_ref)  # fetches
        if job.state == State.PUBLISHED and ctx.store.load(job.job_id) is None:
            job = ctx.store.adopt(job.job_id, None, job.commit)
    try:
        driver.upstream.refresh()
        driver.fresh = True
        synced = driver.upstream.sync(ctx.store.load(job.job_id) or job)
    except (RemoteError, RemoteConfigError) as e:
        raise TryLaterError(f"job {job.job_id}: the remote's store could not be read "
                            f"({e.message}): channels are decided on its records only",
                            hint="run the command again once the remote answers") from None
    if synced is None:
        raise UsageError(f"job {job.job_id}: the remote's store holds another request under "
                         "its key", hint=f"`git pub status {job.job_id[:13]}` shows it")
    return synced
