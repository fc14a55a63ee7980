"""Deciding, not acting: what a channel's next step is, and what an outcome makes of it.

Pure functions over records, so the rules of docs/design.md §11 read in one place: a send is
recorded (SENDING, with the lease holder and the payload's hash) before it happens; a record in
flight under someone else's lease is ``unknown`` — never pending again; retryable failures wait
with bounded exponential backoff and jitter (or the platform's ``Retry-After``, if longer);
unknown outcomes are reconciled a bounded number of times, then need a person.
"""

from __future__ import annotations

import hashlib
import math
import random
import uuid
from enum import Enum

from gitpub.channels.model import (
    IN_FLIGHT,
    ChannelRecord,
    Holder,
    NotSent,
    Outcome,
    Sent,
    Status,
    utc_stamp,
)
from gitpub.config.model import ChannelSpec, RetryPolicy
from gitpub.core.sanitize import sanitize

S = Status
#: The longest wait any rule schedules (a day): a platform's ``Retry-After`` included.
MAX_WAIT = 86400.0
_INTENT_NAMESPACE = uuid.UUID("0c7f3f52-8a0d-4d7b-9a53-5f4b1e2d9c61")


class Action(Enum):
    SEND = "send"  # pending, or not sent and due again
    RECONCILE = "reconcile"  # unknown and due: probe, or resend with the same key
    EXPIRE = "expire"  # in flight under a lease that is not ours any more: unknown


def intent_key(job_id: str, channel: str, account: str, operation: str) -> str:
    """The idempotency key of one intent: the same (job, channel, account, operation) always
    gives the same key, on every writer, so every retry carries it."""
    return str(uuid.uuid5(_INTENT_NAMESPACE, "\0".join((job_id, channel, account, operation))))


def target_of(spec: ChannelSpec) -> str | None:
    """Where ``spec`` sends, as a digest (a webhook's URL may carry a token: it is never stored
    as it is): the same URL gives the same digest on every clone. None for a command channel,
    whose command names no place gitpub could compare."""
    if spec.kind != "webhook" or spec.url is None:
        return None
    return hashlib.sha256(b"gitpub channel target\0" + spec.url.encode()).hexdigest()


def backoff(attempt: int, policy: RetryPolicy) -> float:
    """Seconds to wait after the ``attempt``-th failure: exponential, capped, jittered."""
    delay = min(policy.backoff_max, policy.backoff_base * 2 ** max(0, attempt - 1))
    return float(max(0.0, delay * (1 + policy.jitter * random.uniform(-1, 1))))


def wait_for(*candidates: float | None) -> float:
    """The longest of the waits asked for, finite and at most ``MAX_WAIT``."""
    finite = [w for w in candidates if w is not None and math.isfinite(w)]
    if any(w is not None and not math.isfinite(w) for w in candidates):
        finite.append(MAX_WAIT)
    return min(MAX_WAIT, max([0.0, *finite]))


def due(record: ChannelRecord, now: float) -> bool:
    return record.next_attempt_at is None or record.next_attempt_at <= now


def next_action(record: ChannelRecord, ours: Holder, now: float, live: bool) -> Action | None:
    """What the holder of the (channel, account) lease ``ours`` should do with ``record``."""
    if record.status in IN_FLIGHT:
        assert record.holder is not None
        return Action.EXPIRE if record.holder.token != ours.token else None
    if record.status == S.PENDING:
        return Action.SEND if live or record.after != "live" else None
    if record.status == S.NOT_SENT and record.next_attempt_at is not None:
        return Action.SEND if due(record, now) else None
    if record.status == S.UNKNOWN:
        return Action.RECONCILE if due(record, now) else None
    return None


def sending(record: ChannelRecord, holder: Holder, now: float) -> ChannelRecord:
    attempt = record.attempts + 1
    return record.evolve(status=S.SENDING, attempts=attempt, holder=holder,
                         next_attempt_at=None, updated_at=now,
                         detail=f"attempt {attempt}: sending")


def reconciling(record: ChannelRecord, holder: Holder, now: float, how: str) -> ChannelRecord:
    n = record.reconciles + 1
    return record.evolve(status=S.RECONCILING, reconciles=n, holder=holder, updated_at=now,
                         detail=f"reconciliation {n}: {how}")


def expired(record: ChannelRecord, now: float) -> ChannelRecord:
    assert record.holder is not None
    was = record.status.value
    return record.evolve(
        status=S.UNKNOWN, holder=None, unknown_since=record.unknown_since or now,
        next_attempt_at=now, code="lease_lost",
        detail=sanitize(f"its worker ({record.holder.owner}) lost its lease while {was}: "
                        "the outcome is unknown"))


def confirmed(record: ChannelRecord, sent: Sent, now: float) -> ChannelRecord:
    return record.evolve(status=S.CONFIRMED, holder=None, remote_id=sent.remote_id,
                         url=sent.url, evidence=sent.evidence, code=None, retryable=None,
                         next_attempt_at=None, updated_at=now,
                         detail=f"confirmed by {sent.evidence}")


def after_send(record: ChannelRecord, outcome: Outcome, spec: ChannelSpec,
               now: float) -> ChannelRecord:
    """The record after the send started by ``record`` (SENDING) came back with ``outcome``."""
    if isinstance(outcome, Sent):
        return confirmed(record, outcome, now)
    if isinstance(outcome, NotSent):
        again = outcome.retryable and record.attempts < spec.retry.max_attempts
        wait = wait_for(backoff(record.attempts, spec.retry), outcome.retry_after)
        detail = (f"not sent ({outcome.code}); next attempt in {wait:.1f}s" if again
                  else f"not sent ({outcome.code})" + (
                      f"; {record.attempts} attempts spent" if outcome.retryable else ""))
        return record.evolve(status=S.NOT_SENT, holder=None, code=outcome.code,
                             retryable=outcome.retryable, updated_at=now, detail=detail,
                             next_attempt_at=now + wait if again else None)
    # Without a way to look (a command without a probe) a person decides at once.
    wait = backoff(1, spec.retry) if can_look(spec) else 0.0
    return record.evolve(status=S.UNKNOWN, holder=None, code=outcome.code, updated_at=now,
                         unknown_since=record.unknown_since or now, next_attempt_at=now + wait,
                         detail=f"outcome unknown ({outcome.code}): to be reconciled, "
                                "never re-sent blindly")


def can_look(spec: ChannelSpec) -> bool:
    """Whether an unknown outcome can be reconciled without a person."""
    return spec.kind == "webhook" or spec.probe is not None


def after_reconcile(record: ChannelRecord, outcome: Outcome | None, spec: ChannelSpec,
                    now: float) -> ChannelRecord:
    """The record after a reconciliation (RECONCILING) found ``outcome``; None: there is no
    way to look (a command channel without a probe)."""
    if isinstance(outcome, Sent):
        return confirmed(record, outcome, now)
    if outcome is None:
        return manual(record, now, "no probe configured: check the platform, then "
                                   "`git pub resolve`")
    if record.reconciles >= spec.retry.max_attempts:
        return manual(record, now, f"no evidence after {record.reconciles} reconciliation(s) "
                                   f"(last: {_code(outcome)})")
    retry_after = outcome.retry_after if isinstance(outcome, NotSent) else None
    wait = wait_for(backoff(record.reconciles, spec.retry), retry_after)
    return record.evolve(status=S.UNKNOWN, holder=None, code=_code(outcome), updated_at=now,
                         next_attempt_at=now + wait,
                         detail=f"still unknown ({_code(outcome)}); next look in {wait:.1f}s")


def manual(record: ChannelRecord, now: float, why: str) -> ChannelRecord:
    return record.evolve(status=S.NEEDS_MANUAL, holder=None, next_attempt_at=None,
                         updated_at=now, detail=sanitize(why))


def orphaned(record: ChannelRecord, now: float, what: str) -> ChannelRecord:
    """A channel this clone's configuration no longer has (``what`` happened to it): never
    sent or reconciled from here, it needs a person — visibly, whatever its status was."""
    removed = what == "is no longer configured"
    why = (f"the channel {what} in .gitpub.yaml while {record.status.value}"
           + ("" if record.status == S.PENDING and record.attempts == 0 else
              ": check the platform") + ", then `git pub resolve --skip` (or `--confirmed URL`, "
           "or `--not-sent` where the channel is configured)")
    return manual(record, now, why).evolve(
        code="channel_removed" if removed else "channel_changed", retryable=None)


def rate_limited(record: ChannelRecord, now: float, at: float, rate: str) -> ChannelRecord:
    """Not sent yet: the account's rate allows the next send at ``at`` (every clone's sends
    count in the same window)."""
    stamp = utc_stamp(at)
    return record.evolve(next_attempt_at=at, updated_at=now, code="rate_limited",
                         detail=f"rate limit {rate}: next send at {stamp} "
                                f"(in {max(1, round(at - now))}s)")


def _code(outcome: Outcome) -> str:
    return outcome.code if not isinstance(outcome, Sent) else "sent"
