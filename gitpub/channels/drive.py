"""The driver: takes the channels of published jobs as far as they can go now.

For one job: freeze the payload and record every channel ``pending`` (once, right after the
blog commit is confirmed); run the live check if configured; then, channel by channel, under the
(channel, account) lease: decide (``decide.next_action``), record the intent, act, record the
outcome. Write order for a send, each a compare-and-swap of the job's ref:

1. the account's lease (its own ref) — one sender per account, the rate window counted;
2. SENDING, with the lease holder's token, the attempt and the payload's hash;
3. the intent's claim on the remote (``claim``): without it nothing is sent — another clone's
   claim makes the outcome ``unknown``, a remote that cannot be asked ``not_sent``;
4. the send itself, only if the lease still covers it;
5. the outcome — only if the record is still our SENDING (else we were fenced off: a worker
   that found our lease expired has turned it ``unknown``, and reconciliation decides).

A process killed between 2 and 5 leaves SENDING under a lease whose owner is gone: the next
holder makes it ``unknown`` and reconciles it (probe, or a resend with the same key), never
sends it as new. Optional channels are driven the same way; none of this touches the blog.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from gitpub.channels import decide
from gitpub.channels.adapters import Adapter, CommandAdapter, Intent, code
from gitpub.channels.claim import Claimed, Claims, Verdict
from gitpub.channels.decide import Action
from gitpub.channels.lease import AccountLease, LeaseLost, Leases, live_holder, rate_wait
from gitpub.channels.live import check_live, new_live_record
from gitpub.channels.model import (
    IN_FLIGHT,
    OPERATION_CREATE,
    ChannelRecord,
    Holder,
    NotSent,
    Outcome,
    Status,
    Unknown,
)
from gitpub.channels.payload import article_path, build_payload, payload_sha256
from gitpub.channels.state import ChannelState, Distribution
from gitpub.channels.webhook import WebhookAdapter
from gitpub.config.model import ChannelSpec
from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import (
    EXIT_NEEDS_PERSON,
    EXIT_OK,
    EXIT_UNCONFIRMED,
    CorruptStateError,
    GitpubError,
)
from gitpub.core.sanitize import sanitize
from gitpub.core.states import TERMINAL, Kind, Stage, State
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job

_O = TypeVar("_O", bound=Outcome | None)

#: Steps one run takes on one channel (e.g. expire → reconcile → confirmed).
MAX_STEPS = 4
#: Seconds the lease must still cover after a send's timeout, for the outcome's write.
WRITE_MARGIN = 5.0


@dataclass(frozen=True)
class Report:
    """A job's distribution after a run: its records, and what stopped which channel."""

    job_id: str
    distribution: Distribution | None
    notes: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()  # required channels a person must act on

    @property
    def exit_code(self) -> int:
        dist = self.distribution
        if dist is None:
            return EXIT_OK
        required = [r for r in dist.channels.values() if r.required]
        live = dist.live
        if self.blocked or any(r.waits_for_person for r in required) or (
                live is not None and live.status == "gave_up"):
            return EXIT_NEEDS_PERSON
        if any(not r.final for r in required) or not dist.is_live:
            return EXIT_UNCONFIRMED
        return EXIT_OK


@dataclass
class Driver:
    ctx: Context
    state: ChannelState = field(init=False)
    leases: Leases = field(init=False)
    claims: Claims = field(init=False)

    def __post_init__(self) -> None:
        self.state = ChannelState(self.ctx.store)
        self.leases = Leases(self.ctx.repo)
        self.claims = Claims(self.ctx.repo, self.ctx.remote(), self.leases.owner)

    @property
    def enabled(self) -> bool:
        return bool(self.ctx.config.channels) or self.ctx.config.site.live is not None

    # -- which jobs ------------------------------------------------------------------------

    def expect(self, jobs: Sequence[Job]) -> None:
        """Index the jobs about to be delivered that will have a distribution (before the
        delivery, so a crash right after "published" is rediscovered). A job published before
        channels were configured is never announced after the fact."""
        if not self.enabled:
            return
        for job in jobs:
            if job.record.kind == Kind.PUBLISH and job.state not in TERMINAL and \
                    article_path(self.ctx.config, job.record) is not None:
                self.state.expect(job)

    def found_published(self, job: Job) -> None:
        """Index a job that ``prepare`` found published already (its history search: another
        clone delivered the same request). Its channels are driven here like those of a job
        published here — each send behind the intent's claim on the remote, so the other
        clone's claim is seen: a probe finds its post, or a person decides; never a second
        post. (A job this clone published before channels were configured is not one.)"""
        if self.enabled and job.state == State.PUBLISHED and \
                job.record.kind == Kind.PUBLISH and \
                article_path(self.ctx.config, job.record) is not None:
            self.state.expect(job)

    def rediscover(self, errors: list[str]) -> list[str]:
        """Put back in the index every published job whose distribution is recorded and not
        settled but that the index lost (it is derived data: ``reconcile`` never trusts it);
        the ids put back. Reads every job ref."""
        if not self.enabled:
            return []
        indexed = set(self.state.indexed())
        found = []
        for item in self.ctx.store.iter_jobs(finished=True):
            if isinstance(item, CorruptStateError) or item.state != State.PUBLISHED \
                    or item.job_id in indexed or item.record.kind != Kind.PUBLISH:
                continue  # an unreadable job is reported by the delivery's own scan
            try:
                dist = self.state.load(item)
            except CorruptStateError as e:
                errors.append(sanitize(e.message))
                continue
            if dist is not None and not dist.settled:
                self.state.expect(item)
                found.append(item.job_id)
                self.ctx.progress(f"job {item.job_id[:13]}: its unsettled channels were "
                                  "missing from the distribution index: indexed again")
        return found

    def drive_all(self, named: Sequence[Job] = (), *,
                  only_named: bool = False) -> tuple[list[Report], list[str]]:
        """``named`` and (unless ``only_named``) every indexed job: their reports, and the
        errors of those that could not be read (one bad job never stops the others)."""
        ids = dict.fromkeys([j.job_id for j in named]
                            + ([] if only_named else self.state.indexed()))
        reports, errors = [], []
        for job_id in ids:
            try:
                job = self.ctx.store.load(job_id)
                report = None if job is None else self.drive(job)
            except GitpubError as e:
                errors.append(sanitize(e.message))
                continue
            if report is not None:
                reports.append(report)
        return reports, errors

    # -- one job ---------------------------------------------------------------------------

    def drive(self, job: Job) -> Report | None:
        """Take ``job``'s channels as far as they go now; None: it has no distribution."""
        if job.state == State.SKIPPED or job.record.kind != Kind.PUBLISH:
            self.state.unindex(job.job_id)
            return None
        if job.state != State.PUBLISHED:
            return None  # not yet: it stays indexed
        dist = self.state.load(job)
        if dist is None:
            if not self.enabled or not self.state.is_indexed(job.job_id):
                return None
            job = self._initialize(job)
            dist = self.state.load(job)
            if dist is None:
                self.state.unindex(job.job_id)  # nothing to announce (no article)
                return None
        notes: list[str] = []
        errors: list[str] = []
        blocked: list[str] = []
        if dist.live is not None:
            job, note = check_live(self.ctx, self.state, job, dist)
            notes += [note] if note else []
        for name in list(dist.channels):
            try:
                job = self._channel(job, name, notes, blocked)
            except CorruptStateError as e:
                errors.append(sanitize(e.message))
        dist = self.state.load(job)
        assert dist is not None
        if dist.settled:
            self.state.unindex(job.job_id)
        return Report(job.job_id, dist, tuple(notes), tuple(errors), tuple(blocked))

    def _initialize(self, job: Job) -> Job:
        config, record = self.ctx.config, job.record
        path = article_path(config, record)
        data = None if path is None else self.ctx.store.read_file(job, f"artifacts/{path}")
        if path is None or data is None or (not config.channels and config.site.url is None):
            return job
        payload = build_payload(config, record, path, data)
        digest, now = payload_sha256(payload), time.time()
        records = {spec.name: self._new_record(job, spec, digest, now)
                   for spec in config.channels}
        live = None
        if config.site.live is not None:
            live = new_live_record(payload, now)
        names = ", ".join(records) or "none"
        job = self.state.initialize(
            job, payload, records, live,
            reason=f"payload frozen (sha256 {digest}); channels pending: {names}"
                   + ("; live check pending" if live else ""))
        crash_point("channels.initialized")
        return job

    @staticmethod
    def _new_record(job: Job, spec: ChannelSpec, digest: str, now: float) -> ChannelRecord:
        return ChannelRecord(
            channel=spec.name, account=sanitize(spec.account), kind=spec.kind,
            required=spec.required, after=spec.after, operation=OPERATION_CREATE,
            intent_key=decide.intent_key(job.job_id, spec.name, spec.account,
                                         OPERATION_CREATE),
            payload_sha256=digest, status=Status.PENDING, created_at=now, updated_at=now)

    # -- one channel -----------------------------------------------------------------------

    def _channel(self, job: Job, name: str, notes: list[str], blocked: list[str]) -> Job:
        dist = self.state.load(job)
        assert dist is not None
        record = dist.channels[name]
        if record.final or record.waits_for_person:
            return job
        spec = self.ctx.config.channel(name)
        if spec is None or not same_intent(job, spec, record):
            what = "is no longer configured" if spec is None else "changed its account or kind"
            job = self._orphaned(job, record, what)
            notes.append(f"{name}: channel {what}: resolve it with `git pub resolve "
                         f"{job.job_id[:13]} --channel {name} ...`")
            if record.required:
                blocked.append(name)
            return job
        if record.status == Status.PENDING and record.after == "live" and not dist.is_live:
            notes.append(f"{name}: waits for the live check")
            return job
        if not decide.due(record, time.time()) and record.status not in (Status.SENDING,
                                                                          Status.RECONCILING):
            return job
        # Count the send when taking the lease if the record says one is due (saves a write).
        sends = decide.next_action(record, _NOBODY, time.time(), dist.is_live) == Action.SEND
        lease = self.leases.acquire(spec, count_send=sends)
        if lease is None:
            notes.append(f"{name}: another worker holds the {spec.account} lease")
            return job
        held = _Held(lease)
        try:
            return self._steps(job, spec, held, notes)
        except LeaseLost:
            notes.append(f"{name}: lease lost (expired): stopped; reconciliation decides")
            return self._reload(job)
        finally:
            self.leases.release(held.lease)

    def _orphaned(self, job: Job, record: ChannelRecord, what: str) -> Job:
        """A channel whose configuration is gone cannot be sent or reconciled any more; one
        left in flight by a worker that is gone turns ``unknown`` (a person resolves it)."""
        if record.status not in IN_FLIGHT or live_holder(record.holder, time.time()):
            return job
        now = time.time()
        after = decide.manual(decide.expired(record, now), now,
                              f"the channel {what} while {record.status.value} (its worker is "
                              "gone): check the platform, then `git pub resolve`")
        written = self.state.update_channel(
            job, record, after, Stage.RECONCILE,
            f"{record.channel}: {record.status.value} under a lost lease, and the channel "
            f"{what}: outcome unknown, a person resolves it")
        return job if written is None else written

    def _steps(self, job: Job, spec: ChannelSpec, held: _Held, notes: list[str]) -> Job:
        for _ in range(MAX_STEPS):
            dist = self.state.load(job)
            assert dist is not None
            record = dist.channels[spec.name]
            now = time.time()
            action = decide.next_action(record, held.lease.holder, now, dist.is_live)
            if action is None:
                return job
            if action == Action.EXPIRE:
                step = self.state.update_channel(
                    job, record, decide.expired(record, now), Stage.RECONCILE,
                    f"{spec.name}: {record.status.value} under a lost lease: outcome unknown")
            elif action == Action.SEND:
                step, held.lease = self._send(job, spec, held.lease, dist, record, notes)
            else:
                step, held.lease = self._reconcile(job, spec, held.lease, dist, record, notes)
            if step is None:
                return self._reload(job)
            job = step
        return job

    def _rate_limited(self, spec: ChannelSpec, lease: AccountLease, notes: list[str]) -> bool:
        if lease.counted:
            return False  # counted when the lease was taken: the rate allowed it
        wait = rate_wait(lease.ledger, spec.rate, time.time())
        if wait > 0:
            notes.append(f"{spec.name}: rate limit {spec.rate}: next send in {wait:.0f}s")
        return wait > 0

    def _covers(self, spec: ChannelSpec, lease: AccountLease) -> bool:
        margin = min(WRITE_MARGIN, (spec.lease_seconds - spec.timeout) / 2)
        return self.leases.still_ours(lease, spec.timeout + margin)

    @staticmethod
    def _intent(job: Job, spec: ChannelSpec, record: ChannelRecord) -> Intent:
        # The account as configured (the record keeps it sanitized: it may carry a secret).
        return Intent(record.intent_key, job.job_id, record.channel, spec.account,
                      record.operation, record.payload_sha256)

    def _send(self, job: Job, spec: ChannelSpec, lease: AccountLease, dist: Distribution,
              record: ChannelRecord, notes: list[str]) -> tuple[Job | None, AccountLease]:
        if self._rate_limited(spec, lease, notes):
            return None, lease
        lease = self.leases.note_send(lease)
        start = decide.sending(record, lease.holder, time.time())
        job_or_none = self.state.update_channel(
            job, record, start, Stage.SEND,
            f"{spec.name}: sending, attempt {start.attempts} (intent {record.intent_key}, "
            f"payload sha256 {record.payload_sha256})")
        if job_or_none is None:
            return None, lease
        job = job_or_none
        crash_point("channels.sending-recorded")
        verdict = self.claims.claim(job.job_id, record)
        crash_point("channels.claimed")
        if verdict.claimed != Claimed.OURS:
            notes.append(f"{spec.name}: not sent: {verdict.detail}")
            after = decide.after_send(start, _unclaimed(verdict), spec, time.time())
            return self.state.update_channel(
                job, start, after, Stage.SEND,
                f"{spec.name}: not sent, no claim on the remote: {verdict.detail}"), lease
        if not self._covers(spec, lease):
            # Our lease would run out during the send: send nothing, say so if still ours.
            notes.append(f"{spec.name}: not sent: the lease would run out during the send")
            after = decide.after_send(start, _lease_expiring(), spec, time.time())
            return self.state.update_channel(job, start, after, Stage.SEND,
                                             f"{spec.name}: not sent: lease expiring"), lease
        adapter = adapter_for(spec, self.ctx.repo.pub_dir / "scratch")
        self.ctx.progress(f"channel {spec.name}: sending {job.job_id[:13]} "
                          f"(attempt {start.attempts})")
        outcome = contained(lambda: adapter.send(dist.payload, self._intent(job, spec, record)))
        crash_point("channels.sent")
        after = decide.after_send(start, outcome, spec, time.time())
        written = self.state.update_channel(
            job, start, after, Stage.SEND, f"{spec.name}: {after.status.value}: {after.detail}")
        if written is None:
            notes.append(f"{spec.name}: fenced off: the outcome ({after.status.value}) was not "
                         "recorded, another worker took over")
            return None, lease
        crash_point("channels.outcome-recorded")
        return written, lease

    def _reconcile(self, job: Job, spec: ChannelSpec, lease: AccountLease, dist: Distribution,
                   record: ChannelRecord, notes: list[str]) -> tuple[Job | None, AccountLease]:
        now = time.time()
        if not decide.can_look(spec):
            after = decide.after_reconcile(record, None, spec, now)
            return self.state.update_channel(job, record, after, Stage.RECONCILE,
                                             f"{spec.name}: {after.detail}"), lease
        how = "probe" if spec.kind == "command" else "resend with the same key"
        if spec.kind == "webhook":
            if self._rate_limited(spec, lease, notes):
                return None, lease
            lease = self.leases.note_send(lease)
        start = decide.reconciling(record, lease.holder, now, how)
        job_or_none = self.state.update_channel(job, record, start, Stage.RECONCILE,
                                                f"{spec.name}: reconciling: {how}")
        if job_or_none is None:
            return None, lease
        job = job_or_none
        crash_point("channels.reconciling-recorded")
        if not self._covers(spec, lease):
            after = decide.after_reconcile(start, _lease_expiring(), spec, time.time())
            return self.state.update_channel(job, start, after, Stage.RECONCILE,
                                             f"{spec.name}: lease expiring"), lease
        adapter = adapter_for(spec, self.ctx.repo.pub_dir / "scratch")
        self.ctx.progress(f"channel {spec.name}: reconciling {job.job_id[:13]} ({how})")
        outcome = contained(lambda: adapter.reconcile(dist.payload,
                                                      self._intent(job, spec, record)))
        after = decide.after_reconcile(start, outcome, spec, time.time())
        written = self.state.update_channel(job, start, after, Stage.RECONCILE,
                                            f"{spec.name}: {after.status.value}: {after.detail}")
        if written is None:
            notes.append(f"{spec.name}: fenced off while reconciling")
        return written, lease

    def _reload(self, job: Job) -> Job:
        fresh = self.ctx.store.load(job.job_id)
        assert fresh is not None
        return fresh


#: A holder that is nobody's: what the next action would be before we hold the lease.
_NOBODY = Holder("", "", 0.0)


@dataclass
class _Held:
    """The lease as it is now (each counted send moves the lease ref)."""

    lease: AccountLease


def adapter_for(spec: ChannelSpec, scratch_root: Path) -> Adapter:
    """The adapter of ``spec``'s kind."""
    if spec.kind == "webhook":
        return WebhookAdapter(spec)
    return CommandAdapter(spec, scratch_root)


def same_intent(job: Job, spec: ChannelSpec, record: ChannelRecord) -> bool:
    """Whether ``spec`` is still the channel ``record`` was made for: its kind, and the intent
    key of its name and (raw, unsanitized) account."""
    return spec.kind == record.kind and record.intent_key == decide.intent_key(
        job.job_id, spec.name, spec.account, record.operation)


def contained(act: Callable[[], _O]) -> _O | Unknown:
    """An adapter's answer; an exception it let escape (a bug, hostile input) is ``unknown``:
    the request may have left, and the SENDING record must still get its outcome."""
    try:
        return act()
    except Exception as e:
        return Unknown(code(f"adapter_error {type(e).__name__}", "adapter_error"))


def _unclaimed(verdict: Verdict) -> Outcome:
    """What sending nothing, for want of the intent's claim, means."""
    if verdict.claimed == Claimed.THEIRS:
        return Unknown("claimed_elsewhere")  # another clone may have sent it: reconcile
    return NotSent(verdict.claimed == Claimed.FAILED, f"claim_{verdict.claimed.value}")


def _lease_expiring() -> NotSent:
    return NotSent(True, "lease_expiring")


# -- looking without acting ------------------------------------------------------------------

def channel_reports(ctx: Context, jobs: Sequence[Job], *, strict: bool = False,
                    errors: list[str] | None = None) -> dict[str, Report]:
    """The channel records of ``jobs`` as they are (for ``status``); an unreadable one raises
    (``strict``) or goes to ``errors``."""
    state = ChannelState(ctx.store)
    reports: dict[str, Report] = {}
    for job in jobs:
        if job.state != State.PUBLISHED:
            continue
        try:
            dist = state.load(job)
        except CorruptStateError as e:
            if strict or errors is None:
                raise
            errors.append(e.message)
            continue
        if dist is not None:
            reports[job.job_id] = Report(job.job_id, dist)
    return reports


def unsettled(ctx: Context, exclude: set[str], errors: list[str]) -> list[Job]:
    """The published jobs whose distribution is not settled (from the index)."""
    found = []
    for job_id in ChannelState(ctx.store).indexed():
        if job_id in exclude:
            continue
        try:
            job = ctx.store.load(job_id)
        except CorruptStateError as e:
            errors.append(e.message)
            continue
        if job is not None and job.state == State.PUBLISHED:
            found.append(job)
    return found
