"""``git pub sync``: the relay for everything pending — every deliverable job, then the local
branch's hand commits and uncommitted content changes, whole or not at all."""

from __future__ import annotations

from pathlib import Path

from gitpub.app.common import (
    deliver_all,
    deliver_one,
    fold_if_due,
    next_steps,
    read_first,
    unfinished,
)
from gitpub.app.distribution import distribute, driver_for
from gitpub.app.results import Jobs, Progress
from gitpub.core.states import LOCAL
from gitpub.delivery.deliver import PUSHABLE, Deliverer
from gitpub.delivery.sync import settle_outbox, supersede, sync_changes
from gitpub.git.remote import RemoteError
from gitpub.runtime.contain import Failures
from gitpub.runtime.session import open_session
from gitpub.store.fetchdir import fetch_branch


def sync(where: Path, progress: Progress) -> Jobs:
    """Deliver every deliverable job, then the local branch's hand commits and uncommitted
    content changes (``delivery.sync``): whole, or not at all."""
    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote())
        deliverer.remote.check()  # no such remote, not a repository: exit 2, nothing changed
        read_first(ctx, deliverer.remote)
        failures = Failures()
        errors = failures.errors
        try:
            tip: str | None = fetch_branch(deliverer.remote)
            unreachable = None
        except RemoteError as e:  # a transient: as a job in RETRY_WAIT, run again later
            tip, unreachable = None, e.message
        stale = supersede(ctx, tip) if unreachable is None else []
        jobs = unfinished(ctx, failures, PUSHABLE | LOCAL)
        driver = driver_for(ctx)
        driver.expect(jobs)
        done = deliver_all(ctx, jobs, deliverer, failures)
        done, channels = distribute(ctx, driver, done, errors, deliverer=deliverer)
        if unreachable is not None:
            return Jobs(tuple(done), tuple(errors), dict(deliverer.notes),
                        hints=next_steps(ctx, done),
                        unconfirmed=(*failures.later, f"hand edits not synced: {unreachable}"),
                        channels=channels, tracebacks=tuple(failures.tracebacks))
        tip = ctx.repo.read_ref(deliverer.remote.tracking_ref)
        report = sync_changes(ctx, tip,
                              lambda job: deliver_one(ctx, job, deliverer, failures))
        try:
            settle_outbox(ctx, ctx.repo.read_ref(deliverer.remote.tracking_ref))
        except Exception as e:
            failures.add(None, e)
        fold_if_due(ctx, deliverer, failures)
        touched = list({j.job_id: j for j in [*stale, *done, *report.jobs]}.values())
        hints = next_steps(ctx, touched)
    return Jobs(tuple(touched), tuple(errors), dict(deliverer.notes),
                remark="; ".join(report.notes) or None, commits=tuple(report.outcomes),
                local=report.local, hints=hints, channels=channels, refusal=report.refusal,
                tracebacks=tuple(failures.tracebacks), unconfirmed=tuple(failures.later))
