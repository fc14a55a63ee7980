"""``git pub resolve JOB --channel NAME --confirmed URL | --not-sent | --skip``: a person's way
out of a channel that automation cannot finish (unknown, needs_manual, not sent).

- ``--confirmed URL``: the person found the post (or made it): confirmed, with the URL as
  evidence (``evidence: person``);
- ``--not-sent``: the person checked that nothing went out: pending again, with a fresh attempt
  budget, under the *same* intent key (the next run sends it);
- ``--skip``: this channel will not be sent: skipped (an optional channel never blocks the job
  anyway; a required one then no longer does either).

A channel being sent right now (sending, reconciling, under a live lease) cannot be resolved;
one left in flight by a worker that is gone (or whose lease expired) is unknown and can be. The
write names the record it replaces, so a person and a worker never both win.
"""

from __future__ import annotations

import time
from typing import Literal
from urllib.parse import urlsplit

from gitpub.channels.decide import expired
from gitpub.channels.lease import live_holder
from gitpub.channels.model import IN_FLIGHT, RESOLVABLE, Status
from gitpub.channels.state import ChannelState
from gitpub.core.errors import UsageError
from gitpub.core.sanitize import sanitize
from gitpub.core.states import Stage, State
from gitpub.store.jobs import Job, JobStore

Decision = Literal["confirmed", "not_sent", "skip"]


def resolve_channel(store: JobStore, job: Job, name: str, decision: Decision,
                    url: str | None = None) -> Job:
    state = ChannelState(store)
    dist = state.load(job) if job.state == State.PUBLISHED else None
    if dist is None or name not in dist.channels:
        known = ", ".join(dist.channels) if dist else "none"
        raise UsageError(f"job {job.job_id} has no channel {name!r} (channels: {known})",
                         hint="`git pub status JOB` shows the job's channels")
    record = dist.channels[name]
    now = time.time()
    if record.status in IN_FLIGHT and live_holder(record.holder, now):
        raise UsageError(f"channel {name} of job {job.job_id} is {record.status.value} right "
                         "now", hint="wait for that worker, or run `git pub reconcile` first")
    # In flight under a lease that expired or whose worker is gone: its outcome is unknown.
    current = expired(record, now) if record.status in IN_FLIGHT else record
    if current.status not in RESOLVABLE or (decision == "not_sent"
                                            and current.status == Status.PENDING):
        raise UsageError(f"channel {name} of job {job.job_id} is {record.status.value}: "
                         "nothing to resolve")
    if decision == "confirmed":
        parts = urlsplit(url or "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--confirmed needs the post's http(s) URL, got {url!r}")
        new = current.evolve(status=Status.CONFIRMED, url=sanitize(url or ""), evidence="person",
                            holder=None, next_attempt_at=None, updated_at=now, code=None,
                            detail="confirmed by a person")
    elif decision == "not_sent":
        new = current.evolve(status=Status.PENDING, attempts=0, reconciles=0,
                            next_attempt_at=None, unknown_since=None, code=None, retryable=None,
                            updated_at=now, detail="a person checked: not sent; sending again")
    else:
        new = current.evolve(status=Status.SKIPPED, next_attempt_at=None, updated_at=now,
                            detail="skipped by a person")
    written = state.update_channel(job, record, new, Stage.RESOLVE,
                                   f"{name}: {new.detail} (was {record.status.value})")
    if written is None:
        raise UsageError(f"channel {name} of job {job.job_id} changed meanwhile",
                         hint="look at `git pub status JOB` and run the command again")
    return written
