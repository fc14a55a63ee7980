"""Channel state as values: what each status means, which moves are legal, strict parsing.

A channel of a published job is a branch of the job with its own state (docs/design.md §11).
Its record is the versioned document ``channels/<name>.json`` in the job's state commit::

    pending ──► sending ──► confirmed                       (sent, with the platform's evidence)
                   │    ├─► not_sent ──► sending …          (retryable, after a backoff)
                   │    │             └► (a person)         (not retryable, or attempts spent)
                   │    └─► unknown ──► reconciling ──► confirmed
                   │                         │      └─► unknown … ──► needs_manual
                   └─ lease expired / holder gone ─► unknown (never back to pending)
    any but confirmed ──► skipped (a person);  unknown | not_sent | needs_manual ──► pending or
    confirmed (a person: ``git pub resolve --not-sent`` / ``--confirmed URL``)
    pending | not_sent ──► not_sent | unknown       (the send never started: the intent's claim
                                                     on the remote failed, or is another clone's)
    pending | not_sent | unknown ──► needs_manual   (the channel is no longer configured here)

A send has three outcomes (``Sent``, ``NotSent``, ``Unknown``): *not sent* only with evidence that
nothing went out; *unknown* is everything else and is never re-sent blindly — it is reconciled
by looking for evidence (a probe, or a webhook resent with the same idempotency key).

Reading is strict: a record that is not JSON, of an unknown version, with an unknown field, a
field of the wrong type or an unknown status is corrupt (``ChannelRecordError``), reported by the
store naming the job and never overwritten.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import MISSING, asdict, dataclass, fields, replace
from enum import StrEnum
from typing import Any

FORMAT_VERSION = 1
OPERATION_CREATE = "create"


class ChannelRecordError(ValueError):
    pass


class Status(StrEnum):
    PENDING = "pending"  # nothing sent yet; waits for its turn (rate, live check)
    SENDING = "sending"  # recorded, with the payload's hash, before the send: outcome unknown
    NOT_SENT = "not_sent"  # evidence that nothing went out (retryable: tried again later)
    UNKNOWN = "unknown"  # may or may not have gone out: to be reconciled, never re-sent blindly
    RECONCILING = "reconciling"  # a probe (or a webhook resend with the same key) is running
    CONFIRMED = "confirmed"  # sent, with the platform's evidence (remote id and/or URL)
    NEEDS_MANUAL = "needs_manual"  # reconciliation found no evidence in its bounded wait
    SKIPPED = "skipped"  # a person decided this channel will not be sent


S = Status
FINAL = frozenset({S.CONFIRMED, S.SKIPPED})
#: A worker holds the (channel, account) lease and may be talking to the platform.
IN_FLIGHT = frozenset({S.SENDING, S.RECONCILING})
#: What a person may change: every status but the final ones (and those in flight).
RESOLVABLE = frozenset({S.PENDING, S.NOT_SENT, S.UNKNOWN, S.NEEDS_MANUAL})

ALLOWED: dict[Status, frozenset[Status]] = {
    S.PENDING: frozenset({S.SENDING, S.SKIPPED, S.NOT_SENT, S.UNKNOWN, S.NEEDS_MANUAL}),
    S.SENDING: frozenset({S.CONFIRMED, S.NOT_SENT, S.UNKNOWN}),
    S.NOT_SENT: frozenset({S.SENDING, S.PENDING, S.CONFIRMED, S.SKIPPED, S.UNKNOWN,
                           S.NEEDS_MANUAL}),
    S.UNKNOWN: frozenset({S.RECONCILING, S.NEEDS_MANUAL, S.PENDING, S.CONFIRMED, S.SKIPPED}),
    S.RECONCILING: frozenset({S.CONFIRMED, S.UNKNOWN, S.NEEDS_MANUAL}),
    S.NEEDS_MANUAL: frozenset({S.PENDING, S.CONFIRMED, S.SKIPPED}),
    S.CONFIRMED: frozenset(),
    S.SKIPPED: frozenset(),
}


class IllegalChannelMove(Exception):
    pass


def check_move(old: Status, new: Status) -> None:
    if old == new or new in ALLOWED[old]:
        return
    raise IllegalChannelMove(f"channel {old} -> {new} is not a legal move")


# -- outcomes ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sent:
    """The platform took it: its evidence (an id, a URL, or the HTTP status that said so)."""

    remote_id: str | None
    url: str | None
    evidence: str


@dataclass(frozen=True)
class NotSent:
    """Nothing went out (the adapter has evidence); ``retry_after``: the platform's wish."""

    retryable: bool
    code: str
    retry_after: float | None = None


@dataclass(frozen=True)
class Unknown:
    """It may or may not have gone out."""

    code: str


Outcome = Sent | NotSent | Unknown


# -- records -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Holder:
    """The lease a worker held when it recorded SENDING or RECONCILING (the fencing token)."""

    token: str
    owner: str
    expires_at: float


@dataclass(frozen=True)
class ChannelRecord:
    """One channel of one job. ``intent_key`` names (job, channel, account, operation) and is
    the idempotency key every send of this intent carries; ``payload_sha256`` is the hash of the
    frozen payload, checked before every send."""

    channel: str
    account: str
    kind: str
    required: bool
    after: str  # "publish" or "live": what the first send waits for
    operation: str
    intent_key: str
    payload_sha256: str
    status: Status
    created_at: float
    updated_at: float
    attempts: int = 0  # sends started (each recorded as SENDING first)
    reconciles: int = 0  # probes or same-key resends of an unknown outcome
    next_attempt_at: float | None = None  # not before (backoff, Retry-After); None: now
    unknown_since: float | None = None  # when the outcome first became unknown
    holder: Holder | None = None  # set in SENDING/RECONCILING only
    remote_id: str | None = None
    url: str | None = None
    evidence: str | None = None  # how we know it is confirmed (send, probe, resend, person)
    code: str | None = None  # the last outcome's code (sanitized)
    retryable: bool | None = None  # of the last not_sent
    detail: str | None = None  # the last event, for people (sanitized)
    #: Where sends of this intent go, as a digest (``decide.target_of``: a webhook's URL);
    #: a clone configured to send elsewhere does not resend there. None: a command channel,
    #: or a record an older gitpub made. Written only when set.
    target: str | None = None
    format: int = FORMAT_VERSION

    def evolve(self, **changes: Any) -> ChannelRecord:
        if "status" in changes:
            check_move(self.status, changes["status"])
        return replace(self, **changes)

    @property
    def final(self) -> bool:
        return self.status in FINAL

    @property
    def waits_for_person(self) -> bool:
        """Automation will not move it any more: a person must decide."""
        return self.status == S.NEEDS_MANUAL or (
            self.status == S.NOT_SENT and self.next_attempt_at is None)

    def to_json(self) -> bytes:
        data = asdict(self)
        data["status"] = self.status.value
        if data["target"] is None:
            del data["target"]  # as an older gitpub wrote it, and can read it
        return (json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1,
                           allow_nan=False) + "\n").encode()

    def hint(self, job: str, now: float) -> str | None:
        """What comes next for this channel, for people (None: it is settled)."""
        when = _when(self.next_attempt_at, now)
        if self.final:
            return None
        if self.waits_for_person:
            return (f"check the platform, then `git pub resolve {job} --channel {self.channel} "
                    "--confirmed URL | --not-sent | --skip`")
        if self.status in IN_FLIGHT:
            if self.holder is not None and self.holder.expires_at > now:
                return "being sent right now; `git pub status` shows the outcome once recorded"
            return ("its worker is gone: the outcome is unknown; `git pub reconcile` looks for "
                    "the post (probe, or the same-key resend), never sending it blindly again")
        if self.status == S.UNKNOWN:
            return ("the outcome is unknown: `git pub reconcile` looks for the post (probe, or "
                    "the same-key resend), never sending it blindly again"
                    + (f"; next look {when}" if when else ""))
        if when:
            return f"next send {when}, by `git pub push`, `sync` or `reconcile`"
        return "`git pub push` or `git pub reconcile` sends it"

    def public(self, job: str = "JOB", now: float | None = None) -> dict[str, Any]:
        """The ``--json`` view (no lease details), with the ``hint`` for ``job``."""
        data = asdict(self)
        data["status"] = self.status.value
        data.pop("holder")
        data.pop("format")
        data.pop("target")
        data["needs_person"] = self.waits_for_person
        data["hint"] = self.hint(job, time.time() if now is None else now)
        return data


def _when(at: float | None, now: float) -> str | None:
    """``at`` for people: the UTC time and how far ahead (None: not in the future)."""
    if at is None or at <= now:
        return None
    stamp = utc_stamp(at)
    return f"at {stamp} (in {max(1, round(at - now))}s)"


_TYPES: dict[str, tuple[type, ...]] = {
    "channel": (str,), "account": (str,), "kind": (str,), "required": (bool,),
    "after": (str,), "operation": (str,), "intent_key": (str,), "payload_sha256": (str,),
    "created_at": (int, float), "updated_at": (int, float), "attempts": (int,),
    "reconciles": (int,), "next_attempt_at": (int, float, type(None)),
    "unknown_since": (int, float, type(None)), "remote_id": (str, type(None)),
    "url": (str, type(None)), "evidence": (str, type(None)), "code": (str, type(None)),
    "retryable": (bool, type(None)), "detail": (str, type(None)), "target": (str, type(None)),
}


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise ChannelRecordError(what)


def _typed(data: dict[str, Any], types: dict[str, tuple[type, ...]]) -> None:
    for name, allowed in types.items():
        if name in data:
            value = data[name]
            ok = isinstance(value, allowed) and not (isinstance(value, bool)
                                                     and bool not in allowed)
            _check(ok, f"field {name} has the wrong type ({type(value).__name__})")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


#: The largest integer a record holds (a counter, a time): beyond it a document is forged or
#: broken (and would overflow a float or a C time).
MAX_INT = 2**53


def _finite(text: str) -> float:
    value = float(text)  # 1e400 is a valid JSON number, and infinity in Python
    if not math.isfinite(value) or abs(value) > MAX_INT:
        raise ValueError(f"{text} is out of range")
    return value


def _bounded(text: str) -> int:
    value = int(text)
    if abs(value) > MAX_INT:
        raise ValueError(f"{text[:20]}... is out of range")
    return value


def utc_stamp(at: float) -> str:
    """``at`` as a UTC time for people; one beyond the calendar (a forged or broken value)
    says so instead of raising."""
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
    except (OverflowError, OSError, ValueError):
        return "a time beyond the calendar"


def load_object(raw: bytes, what: str, version: int = FORMAT_VERSION) -> dict[str, Any]:
    """A JSON object of format ``version``, or ``ChannelRecordError`` saying what is wrong."""
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant,
                          parse_float=_finite, parse_int=_bounded)
    except (UnicodeDecodeError, ValueError) as e:
        raise ChannelRecordError(f"{what} is not valid JSON ({e})") from None
    _check(isinstance(data, dict), f"{what} is not an object")
    _check(type(data.get("format")) is int and data["format"] == version,
           f"unknown {what} format {data.get('format')!r}")
    return data  # type: ignore[no-any-return]


def parse_channel(raw: bytes) -> ChannelRecord:
    """Strictly parse a channel record."""
    data = load_object(raw, "channel record")
    known = {f.name for f in fields(ChannelRecord)}
    unknown = sorted(set(data) - known)
    _check(not unknown, f"unknown fields in channel record: {', '.join(unknown)}")
    required = [f.name for f in fields(ChannelRecord)
                if f.name not in data and f.default is MISSING]
    _check(not required, f"missing fields in channel record: {', '.join(required)}")
    _typed(data, _TYPES)
    try:
        status = Status(data["status"])
    except ValueError:
        raise ChannelRecordError(f"unknown channel status {data['status']!r}") from None
    holder = data.get("holder")
    if holder is not None:
        _check(isinstance(holder, dict) and set(holder) == {"token", "owner", "expires_at"}
               and isinstance(holder["token"], str) and isinstance(holder["owner"], str)
               and isinstance(holder["expires_at"], int | float), "bad holder")
        holder = Holder(holder["token"], holder["owner"], float(holder["expires_at"]))
    _check((holder is not None) == (status in IN_FLIGHT),
           f"a {status} record {'without' if holder is None else 'with'} a lease holder")
    for name in ("attempts", "reconciles"):
        _check(data.get(name, 0) >= 0, f"field {name} is negative")
    simple = {k: data[k] for k in _TYPES if k in data}
    return ChannelRecord(status=status, holder=holder, **simple)


# -- the live check ------------------------------------------------------------------------

class LiveStatus(StrEnum):
    PENDING = "pending"  # not checked yet
    NOT_LIVE_YET = "not_live_yet"  # checked: the page does not show the article yet
    LIVE = "live"  # the canonical URL answered 200 with the article
    GAVE_UP = "gave_up"  # not live within give_up seconds of publication: a person must look


@dataclass(frozen=True)
class LiveRecord:
    """``live.json``: whether the published article is public at its canonical URL."""

    url: str
    status: LiveStatus
    created_at: float
    updated_at: float
    checks: int = 0
    detail: str | None = None  # the last answer (sanitized), e.g. "HTTP 404"
    live_at: float | None = None
    format: int = FORMAT_VERSION

    def evolve(self, **changes: Any) -> LiveRecord:
        return replace(self, **changes)

    def to_json(self) -> bytes:
        data = asdict(self)
        data["status"] = self.status.value
        return (json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n").encode()

    def public(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        data.pop("format")
        return data


_LIVE_TYPES: dict[str, tuple[type, ...]] = {
    "url": (str,), "created_at": (int, float), "updated_at": (int, float), "checks": (int,),
    "detail": (str, type(None)), "live_at": (int, float, type(None)),
}


def parse_live(raw: bytes) -> LiveRecord:
    data = load_object(raw, "live record")
    known = {f.name for f in fields(LiveRecord)}
    unknown = sorted(set(data) - known)
    _check(not unknown, f"unknown fields in live record: {', '.join(unknown)}")
    missing = sorted(k for k in ("url", "status", "created_at", "updated_at") if k not in data)
    _check(not missing, f"missing fields in live record: {', '.join(missing)}")
    _typed(data, _LIVE_TYPES)
    try:
        status = LiveStatus(data["status"])
    except ValueError:
        raise ChannelRecordError(f"unknown live status {data['status']!r}") from None
    return LiveRecord(status=status, **{k: data[k] for k in _LIVE_TYPES if k in data})
