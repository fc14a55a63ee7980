"""``git pub resolve JOB --channel NAME --confirmed URL | --not-sent | --skip``: a person's way
out of a channel that automation cannot finish (unknown, needs_manual, not sent).

- ``--confirmed URL``: the person found the post (or made it): confirmed, with the URL as
  evidence (``evidence: person``);
- ``--not-sent``: the person checked that nothing went out: pending again, with a fresh attempt
  budget, under the *same* intent key (the next run sends it); the intent's claim on the
  remote goes in the same push, so that whichever clone sends it next may claim it;
- ``--skip``: this channel will not be sent: skipped (an optional channel never blocks the job
  anyway; a required one then no longer does either).

A channel being sent right now (sending, reconciling, under a live lease) cannot be resolved;
one left in flight by a worker that is gone (or whose lease expired) is unknown and can be. The
decision is recorded on the remote first, like every channel write (``channels.state``), so it
stands for every clone; the write names the record it replaces, so a person and a worker —
of any clone — never both win. A remote that cannot be asked records nothing (exit 5).
"""

from __future__ import annotations

import time
from typing import Literal
from urllib.parse import urlsplit

from gitpub.channels.claim import CLAIMS, Claims
from gitpub.channels.decide import expired
from gitpub.channels.lease import live_holder
from gitpub.channels.model import IN_FLIGHT, RESOLVABLE, ChannelRecord, Status
from gitpub.channels.shared import Offline
from gitpub.channels.state import WRITE_ROUNDS, ChannelState
from gitpub.core.errors import TryLaterError, UsageError
from gitpub.core.sanitize import sanitize
from gitpub.core.states import Stage, State
from gitpub.store.jobs import Job

Decision = Literal["confirmed", "not_sent", "skip"]


def resolve_channel(state: ChannelState, job: Job, name: str, decision: Decision,
                    url: str | None = None, target: str | None = None) -> Job:
    """Record a person's ``decision`` on channel ``name`` of ``job`` (synced with the remote's
    store). ``target``: where this clone sends the channel (``decide.target_of``): a
    ``not_sent`` decision sends it there from now on. Raises ``UsageError`` (nothing to
    resolve, changed meanwhile) and ``TryLaterError`` (the remote could not be asked: nothing
    recorded)."""
    try:
        for _ in range(WRITE_ROUNDS):
            written = _try(state, job, name, decision, url, target)
            if isinstance(written, Job):
                return written
            fresh = state.resync(job)
            if fresh is None:
                break
            job = fresh
    except Offline as e:
        raise TryLaterError(f"channel {name} of job {job.job_id}: the remote could not be "
                            f"asked ({e.detail}): nothing was recorded",
                            hint="run the command again once the remote answers") from None
    raise UsageError(f"channel {name} of job {job.job_id} changed meanwhile",
                     hint="look at `git pub status JOB` and run the command again")


def _try(state: ChannelState, job: Job, name: str, decision: Decision,
         url: str | None, target: str | None) -> Job | None:
    """One try; None: the job moved on the remote (fetch, sync, try again)."""
    dist = state.load(job) if job.state == State.PUBLISHED else None
    if dist is None or name not in dist.channels:
        known = ", ".join(dist.channels) if dist else "none"
        raise UsageError(f"job {job.job_id} has no channel {name!r} (channels: {known})",
                         hint="`git pub status JOB` shows the job's channels")
    record = dist.channels[name]
    new = decided(record, job, decision, url, time.time())
    if decision == "not_sent" and target is not None:
        new = new.evolve(target=target)  # a person checked there was no post: send it here
    claim = None
    if decision == "not_sent":
        assert state.writer is not None
        seen = state.writer.value(CLAIMS + record.intent_key)
        claim = None if seen is None else Claims.released(record.intent_key, seen)
    tried = state.attempt(job, {name: new}, Stage.RESOLVE,
                          f"{name}: {new.detail} (was {record.status.value})", claim=claim)
    if tried.landed:
        return tried.staged
    if tried.refused:
        raise TryLaterError(f"channel {name} of job {job.job_id}: the remote refused the "
                            f"decision ({tried.landing.detail()}): nothing was recorded",
                            hint="allow pushes to refs/pub/* for this account")
    return None


def decided(record: ChannelRecord, job: Job, decision: Decision, url: str | None,
            now: float) -> ChannelRecord:
    """The record after a person's ``decision``; ``UsageError`` when it cannot be taken."""
    name = record.channel
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
        return current.evolve(status=Status.CONFIRMED, url=sanitize(url or ""),
                              evidence="person", holder=None, next_attempt_at=None,
                              updated_at=now, code=None, detail="confirmed by a person")
    if decision == "not_sent":
        return current.evolve(status=Status.PENDING, attempts=0, reconciles=0,
                              next_attempt_at=None, unknown_since=None, code=None,
                              retryable=None, updated_at=now,
                              detail="a person checked: not sent; sending again")
    return current.evolve(status=Status.SKIPPED, next_attempt_at=None, updated_at=now,
                          detail="skipped by a person")
