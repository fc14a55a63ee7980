"""``git pub push`` and ``git pub reconcile``: deliver jobs (and recover every unfinished
one), then drive the published jobs' channels.

Both fold finished jobs into the archive when due (``app.common.fold_if_due``): ``push`` as
many as a publish may take on (``delivery.fold.flow_limit``), ``reconcile`` all.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gitpub.app.common import (
    deliver_all,
    fold_if_due,
    maintain,
    next_steps,
    read_first,
    unfinished,
)
from gitpub.app.distribution import distribute, driver_for
from gitpub.app.results import Jobs, Progress
from gitpub.core.errors import GitpubError, UsageError
from gitpub.core.states import LOCAL, TERMINAL, State
from gitpub.delivery.anywhere import find_anywhere, find_here, take_over
from gitpub.delivery.checkout import finish_interrupted_move
from gitpub.delivery.deliver import PUSHABLE, Deliverer
from gitpub.git.remote import RemoteConfigError
from gitpub.runtime.contain import Failures
from gitpub.runtime.context import Context
from gitpub.runtime.session import open_session
from gitpub.store.jobs import Job


def push(where: Path, progress: Progress, job_refs: Sequence[str],
         create_branch: bool = False) -> Jobs:
    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote(), now_please=bool(job_refs),
                              create_branch=create_branch)
        _finish_move(ctx, deliverer, read_first(ctx, deliverer.remote))
        failures = Failures()
        errors = failures.errors
        if job_refs:
            jobs = [_named(ctx, ref) for ref in job_refs]
        else:
            jobs = unfinished(ctx, failures, PUSHABLE | LOCAL)
        driver = driver_for(ctx)
        driver.expect(jobs)
        done = deliver_all(ctx, jobs, deliverer, failures)
        done, channels = distribute(ctx, driver, done, errors, only_named=bool(job_refs),
                                    deliverer=deliverer)
        fold_if_due(ctx, deliverer, failures)
        maintain(ctx, failures)
        return Jobs(tuple(done), tuple(errors), dict(deliverer.notes), hints=next_steps(ctx, done),
                    channels=channels, tracebacks=tuple(failures.tracebacks),
                    unconfirmed=tuple(failures.later),
                    held=tuple(j.job_id for j in done if deliverer.left_to_others(j)))


def _finish_move(ctx: Context, deliverer: Deliverer,
                 seen: tuple[str | None, str | None] | None = None) -> None:
    """A run killed between updating the worktree and moving the local branch to a published
    commit (``checkout.worktree-updated``), or between recording PUBLISHED and the move
    (``delivery.published-recorded``): the move is finished first. ``seen``: (the tracking
    ref, the branch) as the command read them just now."""
    if seen is None:
        tracking, branch = deliverer.remote.tracking_ref, f"refs/heads/{ctx.config.branch}"
        read = ctx.repo.read_refs([tracking, branch])  # one git for both
        seen = read[tracking], read[branch]
    tip, local = seen
    if tip is None or local in (tip, None):
        return  # the usual case: nothing was left half-way
    note = finish_interrupted_move(ctx.repo, ctx.config.branch, tip, local) or \
        deliverer.bring_along(tip)
    if note is not None:
        ctx.progress(note)


def _named(ctx: Context, ref: str) -> Job:
    """A job named on the command line: this clone's; or, only for a job in review (which no
    take-over moves: it waits for a reviewer, not for a writer), the remote's, adopted here
    so that any clone may check its request."""
    try:
        return find_here(ctx, ref)
    except UsageError as missing:
        if not missing.message.startswith("no job"):
            raise
        found = find_anywhere(ctx, ref)
        if found.state != State.IN_REVIEW:
            raise missing from None
        return ctx.store.adopt(found.job_id, None, found.commit)


def reconcile(where: Path, progress: Progress) -> Jobs:
    """Recover every unfinished job: local phases, unknown push outcomes, expired leases,
    due retries, probes of FAILED jobs. Scans every job ref (the active index is derived data,
    rebuilt here, never trusted) and goes on past a bad job. With a misconfigured remote, the
    local phases are still recovered, then the configuration error is reported."""
    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote())
        _finish_move(ctx, deliverer)
        failures = Failures()
        errors = failures.errors
        everything = frozenset(State) - TERMINAL
        jobs = unfinished(ctx, failures, everything, scan=True)
        taken, not_taken = take_over(ctx, deliverer.shared, failures)
        jobs += taken
        driver = driver_for(ctx)
        driver.expect(jobs)
        driver.rediscover(errors)
        try:
            done = deliver_all(ctx, jobs, deliverer, failures)
        except RemoteConfigError:
            from gitpub.pipeline.prepare import drive  # push loads no prepare pipeline

            for job in jobs:
                if job.state in LOCAL:
                    failures.contain(ctx, job, lambda j: drive(ctx, j))
            raise
        done, channels = distribute(ctx, driver, done, errors, deliverer=deliverer)
        try:
            driver.fold_settled_claims()
        except GitpubError as e:
            failures.add(None, e)
        pending = None
        from gitpub.delivery.sync import settle_outbox  # reconcile's only: push loads none of it

        try:
            pending = settle_outbox(ctx, ctx.repo.read_ref(deliverer.remote.tracking_ref))
        except Exception as e:
            failures.add(None, e)
        fold_if_due(ctx, deliverer, failures, everything=True)
        maintain(ctx, failures, sweep=True)
        return Jobs(tuple(done), tuple(errors), dict(deliverer.notes), pending=pending,
                    hints=next_steps(ctx, done), channels=channels,
                    tracebacks=tuple(failures.tracebacks), unconfirmed=(
                        *failures.later, *([] if not_taken is None else [not_taken])),
                    held=tuple(j.job_id for j in done if deliverer.left_to_others(j)))
