"""``git pub prepare``: create or find the job for a key, run the pipeline (``--push``: and
deliver it in the same process)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gitpub.app.distribution import driver_for
from gitpub.app.results import Prepared, Progress
from gitpub.core.states import State
from gitpub.pipeline.advice import next_step
from gitpub.pipeline.prepare import prepare as run_prepare
from gitpub.pipeline.request import Request
from gitpub.pipeline.sources import read_sources
from gitpub.pipeline.targets import check_targets
from gitpub.runtime.contain import Failures
from gitpub.runtime.context import Context
from gitpub.runtime.session import open_session
from gitpub.store.jobs import KEPT_PREFIXES, Job


def prepare(where: Path, progress: Progress, key: str | None, targets: Sequence[str],
            sources: Sequence[str], push: bool = False) -> Prepared:
    keep = frozenset({State.LOCAL_COMMITTED}) if push else frozenset()
    with open_session(where, progress, keep_lease_in=keep) as ctx:
        ctx.repo.local_prefixes = KEPT_PREFIXES  # the job's ref, read once (``git.refs``)
        if push:  # what the delivery and the fold read, listed now in the same git
            from gitpub.app.common import read_first

            read_first(ctx, ctx.remote())
        drafted = ctx.config.draft is not None
        check_targets(targets, ctx.repo.prefix, ctx.repo.work_tree)
        paths, srcs = read_sources(targets, sources, drafted)
        job, created = run_prepare(ctx, Request(tuple(paths), tuple(srcs), drafted, key))
        if created and job.state == State.PUBLISHED:  # published by another clone already
            driver_for(ctx).found_published(job)
        if not push:
            return Prepared(job, created, _no_base_note(ctx, job), next_step(ctx, job))
        # Deliver it now, in this process: one interpreter start instead of two (the delivery
        # code is loaded only here: a plain prepare delivers nothing).
        from gitpub.app.common import fold_if_due
        from gitpub.delivery.deliver import Deliverer

        deliverer = Deliverer(ctx, ctx.remote(), now_please=True)
        driver = driver_for(ctx)
        driver.expect([job])
        job = deliverer.deliver(job)
        driver.fresh = deliverer.shared.fetched
        reports, failed = driver.drive_all([job], only_named=True)
        job = ctx.store.load(job.job_id) or job
        report = reports[0] if reports else None
        if failed:
            from gitpub.channels.drive import Report

            report = Report(job.job_id, None, errors=tuple(failed))
        failures = Failures()
        fold_if_due(ctx, deliverer, failures)
        for error in failures.errors:
            ctx.progress(f"archive: {error}")
        return Prepared(job, created, deliverer.notes.get(job.job_id), next_step(ctx, job),
                        report, deliverer.left_to_others(job))


def _no_base_note(ctx: Context, job: Job) -> str | None:
    """A job committed on no base at all: its branch exists neither fetched nor locally."""
    if job.state != State.LOCAL_COMMITTED or job.record.base_commit is not None:
        return None
    config = ctx.config
    return (f"no base: neither refs/remotes/{config.remote}/{config.branch} nor "
            f"refs/heads/{config.branch} exists (fetch, or check `branch:` in .gitpub.yaml); "
            "`git pub push` creates no branch unless given --create-branch")
