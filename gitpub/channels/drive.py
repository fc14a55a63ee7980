"""The driver: takes the channels of published jobs as far as they can go now, from any clone.

Channel state is shared through the remote (``channels.state``, ``channels.shared``): before it
decides anything, a run fetches the job store once and syncs each job with the remote's value,
so every clone decides on the same records. For one job: freeze the payload and record every
channel ``pending`` (once, right after the blog commit is confirmed: the first clone to land it
on the remote wins); run the live check if configured; then, channel by channel: decide
(``decide.next_action``), record the intent, act, record the outcome. Write order for a send:

1. one atomic push, each of its refs a compare-and-swap on the remote: the account's ledger
   (``lease``: the lease taken — one sender per account across every clone — and the send
   counted in the rate window), the SENDING record (the holder's token, the attempt, the
   payload's hash) on the job's ref, and the intent's claim (``claim``). Without all three
   nothing is sent: a lost race is fetched and decided again; another clone's claim makes the
   outcome ``unknown``; a remote that cannot be asked leaves the channel as it was;
2. the send itself, only if the lease still covers it;
3. one atomic push of the outcome — only if the record is still our SENDING (else we were
   fenced off: a worker that found our lease expired has turned it ``unknown``, and
   reconciliation decides) — with the lease given back. A remote that does not take it now
   leaves it recorded here; the next run pushes it.

A process killed between 1 and 3 leaves SENDING on the remote under a lease whose owner is
gone: whichever clone comes next makes it ``unknown`` and reconciles it (probe, or a resend
with the same key), never sends it as new. Optional channels are driven the same way; none of
this touches the blog.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from gitpub.channels import decide
from gitpub.channels.adapters import Adapter, CommandAdapter, Intent, code
from gitpub.channels.claim import CLAIMS, Claims
from gitpub.channels.decide import Action
from gitpub.channels.lease import Ledger, LedgerMoved, live_holder, rate_wait
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
from gitpub.channels.shared import Offline, Upstream
from gitpub.channels.state import Account, Attempt, ChannelState, Distribution, freshest
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
from gitpub.core.files import pub_dir
from gitpub.core.sanitize import sanitize
from gitpub.core.states import TERMINAL, Kind, Stage, State
from gitpub.git.remote import RemoteConfigError, RemoteError
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job
from gitpub.store.lease import shown_owner
from gitpub.store.mirror import store_prefix

_O = TypeVar("_O", bound=Outcome | None)

#: Steps one run takes on one channel (e.g. expire → reconcile → confirmed, a lost race).
MAX_STEPS = 6
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


class _Lost(Exception):
    """The remote's store holds another request under the job's key: not ours to write."""


@dataclass
class Driver:
    ctx: Context
    upstream: Upstream
    #: The job store was fetched in this run already (by the delivery before it).
    fresh: bool = False
    state: ChannelState = field(init=False)
    claims: Claims = field(init=False)

    def __post_init__(self) -> None:
        self.state = ChannelState(self.ctx.store, self.upstream, self.ctx.progress)
        self.owner = self.ctx.store.worker.owner
        self.claims = Claims(self.ctx.repo, self.upstream.remote, self.owner)

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
        clone delivered the same request). Its channels are driven here on the remote's
        records: what the other clone sent is confirmed here too, and a send still to make is
        made by whichever clone claims it first — never a second post. (A job this clone
        published before channels were configured is not one.)"""
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

    def fold_settled_claims(self) -> int:
        """``reconcile``: claims still on the remote whose send settled (a gitpub that kept
        every claim left them) folded into their accounts' ledgers; how many. Quietly none
        when the remote cannot be asked: the next run goes on."""
        prefix = store_prefix(self.upstream.remote) + CLAIMS
        if not self.ctx.repo.list_refs(prefix):
            return 0
        with contextlib.suppress(Offline, RemoteError, RemoteConfigError):
            if not self.fresh:
                self.upstream.refresh()
                self.fresh = True
            return self.state.fold_settled_claims()
        return 0

    def drive_all(self, named: Sequence[Job] = (), *,
                  only_named: bool = False) -> tuple[list[Report], list[str]]:
        """``named`` and (unless ``only_named``) every indexed job: their reports, and the
        errors of those that could not be read (one bad job never stops the others). The job
        store is fetched once, only when some job has channels to drive."""
        ids = dict.fromkeys([j.job_id for j in named]
                            + ([] if only_named else self.state.indexed()))
        reports, errors = [], []
        for job_id in ids:
            try:
                job = self.ctx.store.load(job_id)
                report = None if job is None else self._drive_synced(job)
            except GitpubError as e:
                errors.append(sanitize(e.message))
                continue
            if report is not None:
                reports.append(report)
        return reports, errors

    def _drive_synced(self, job: Job) -> Report | None:
        """``drive`` on the job as the remote has it; without the remote, its records as
        they are here, with a note."""
        if not self._needs_remote(job):
            return self.drive(job)
        try:
            if not self.fresh:
                self.upstream.refresh()
                self.fresh = True
            synced = self.upstream.sync(job)
        except (RemoteError, RemoteConfigError) as e:
            return self._waiting(job, sanitize(e.message))
        if synced is None:
            raise GitpubError(f"job {job.job_id}: the remote's store holds another request "
                              "under its key: its channels are not driven here")
        return self.drive(synced)

    def _needs_remote(self, job: Job) -> bool:
        """Whether driving ``job`` may write (so it must be synced with the remote first)."""
        if job.state != State.PUBLISHED or job.record.kind != Kind.PUBLISH:
            return False
        dist = self.state.load(job)
        if dist is None:
            return self.enabled and self.state.is_indexed(job.job_id)
        return not dist.settled or self.state.ahead(job)

    def _waiting(self, job: Job, why: str) -> Report:
        dist = self.state.load(job)
        notes = (f"the remote's store could not be read ({why}): channels wait for the "
                 "next run",)
        return Report(job.job_id, dist, notes)

    # -- one job ---------------------------------------------------------------------------

    def drive(self, job: Job) -> Report | None:
        """Take ``job``'s channels as far as they go now; None: it has no distribution.
        ``job`` is synced with the remote's store."""
        if job.state == State.SKIPPED or job.record.kind != Kind.PUBLISH:
            self.state.unindex(job.job_id)
            return None
        if job.state != State.PUBLISHED:
            return None  # not yet: it stays indexed
        notes: list[str] = []
        errors: list[str] = []
        blocked: list[str] = []
        dist = self.state.load(job)
        try:
            if dist is None:
                if not self.enabled or not self.state.is_indexed(job.job_id):
                    return None
                job = self._initialize(job)
                dist = self.state.load(job)
                if dist is None:
                    self.state.unindex(job.job_id)  # nothing to announce (no article)
                    return None
            job = self.state.share(job)
            if dist.live is not None:
                job, note = check_live(self.ctx, self.state, job, dist)
                notes += [note] if note else []
            for name in list(dist.channels):
                try:
                    job = self._channel(job, name, notes, blocked)
                except CorruptStateError as e:
                    errors.append(sanitize(e.message))
        except Offline as e:
            notes.append(f"the remote did not take channel state now ({e.detail}): nothing "
                         "was sent that is not recorded there; the next run goes on")
        except _Lost:
            errors.append(f"job {job.job_id}: the remote's store holds another request under "
                          "its key: this clone stopped driving its channels")
        job = self._reload(job)
        dist = self.state.load(job)
        if dist is not None and dist.settled:
            self.state.unindex(job.job_id)
            self.state.forget_claims(dist)
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
            payload_sha256=digest, status=Status.PENDING, created_at=now, updated_at=now,
            target=decide.target_of(spec))

    # -- one channel -----------------------------------------------------------------------

    def _channel(self, job: Job, name: str, notes: list[str], blocked: list[str]) -> Job:
        for _ in range(MAX_STEPS):
            dist = self.state.load(job)
            assert dist is not None
            record = dist.channels[name]
            if record.final or record.waits_for_person:
                return job
            spec = self.ctx.config.channel(name)
            if spec is None or not same_intent(job, spec, record):
                return self._orphaned(job, record, spec, notes, blocked)
            now = time.time()
            if record.status in IN_FLIGHT:
                assert record.holder is not None
                if live_holder(record.holder, now, spec.lease_seconds):
                    notes.append(f"{name}: being sent by {shown_owner(record.holder.owner)} "
                                 f"(its lease runs {record.holder.expires_at - now:.0f}s more)")
                    return job
                job = self._write(job, record, decide.expired(record, now), Stage.RECONCILE,
                                  f"{name}: {record.status.value} under a lost lease: outcome "
                                  "unknown")
                continue
            if record.status == Status.PENDING and record.after == "live" and not dist.is_live:
                notes.append(f"{name}: waits for the live check")
                return job
            if record.status == Status.UNKNOWN and not decide.can_look(spec):
                # Nothing to wait for: without a probe only a person can look.
                job = self._write(job, record, decide.after_reconcile(record, None, spec, now),
                                  Stage.RECONCILE, f"{name}: no probe configured")
                continue
            action = decide.next_action(record, _NOBODY, now, dist.is_live)
            if action is None or not decide.due(record, now):
                return job
            job, more = self._act(job, spec, dist, record, action, notes)
            if not more:
                return job
        return job

    def _write(self, job: Job, expected: ChannelRecord, new: ChannelRecord, phase: Stage,
               reason: str) -> Job:
        """A decision recorded (no side effect waits on it); fenced off: the job as it is."""
        written = self.state.update_channel(job, expected, new, phase, reason)
        return self._reload(job) if written is None else written

    def _orphaned(self, job: Job, record: ChannelRecord, spec: ChannelSpec | None,
                  notes: list[str], blocked: list[str]) -> Job:
        """A channel this clone's configuration no longer has (or gives another account or
        kind) is never sent or reconciled from here: its record needs a person, visibly —
        whatever it was (nothing sent, unknown, or left in flight by a worker that is gone).
        A person decides: ``--skip``, ``--confirmed URL``, or ``--not-sent`` on a clone that
        has the channel."""
        what = "is no longer configured" if spec is None else "changed its account, kind or URL"
        name = record.channel
        if record.status in IN_FLIGHT and live_holder(record.holder, time.time()):
            notes.append(f"{name}: channel {what}; a send in flight finishes first")
            return job
        now = time.time()
        base = decide.expired(record, now) if record.status in IN_FLIGHT else record
        new = decide.orphaned(base, now, what)
        job = self._write(job, record, new, Stage.RECONCILE,
                          f"{name}: the channel {what} in this clone's .gitpub.yaml "
                          f"(it was {record.status.value}): a person decides")
        notes.append(f"{name}: channel {what}: resolve it with `git pub resolve "
                     f"{job.job_id[:13]} --channel {name} --skip | --confirmed URL | "
                     "--not-sent`")
        if record.required:
            blocked.append(name)
        return job

    def _act(self, job: Job, spec: ChannelSpec, dist: Distribution, record: ChannelRecord,
             action: Action, notes: list[str], again: int = 3) -> tuple[Job, bool]:
        """Send (or reconcile) under the account's lease: the intent on the remote first (see
        the module docstring). ``(job, go on with this channel)``. ``again``: how many more
        times to decide again when the ledger moves under the decision."""
        assert self.state.ledgers is not None and self.state.writer is not None
        name, now = spec.name, time.time()
        key: Account = (name, record.account)
        _, ledger = self.state.ledgers.read(*key)
        if live_holder(ledger.holder, now, spec.lease_seconds):
            assert ledger.holder is not None
            notes.append(f"{name}: another worker holds the {spec.account} lease "
                         f"({shown_owner(ledger.holder.owner)})")
            return job, False
        sends = action == Action.SEND
        if sends and self.state.ledgers.is_settled(ledger, record.intent_key):
            return self._settled_elsewhere(job, spec, record, now, notes), True
        counts = sends or spec.kind == "webhook"  # a webhook's reconciliation resends
        if counts:
            wait = rate_wait(ledger, spec.rate, now)
            if wait > 0:
                return self._rate_limited(job, spec, record, now, wait, notes), False
        holder = Holder(uuid.uuid4().hex, self.owner, now + spec.lease_seconds)
        how = "probe" if spec.kind == "command" else "resend with the same key"
        if sends:
            start = decide.sending(record, holder, now)
            seen = self.state.writer.value(CLAIMS + record.intent_key)
            claim = self.claims.change(job.job_id, record, seen)
            reason = (f"{name}: sending, attempt {start.attempts} (intent {record.intent_key}, "
                      f"payload sha256 {record.payload_sha256})")
            phase, point = Stage.SEND, "channels.sending-recorded"
        else:
            start = decide.reconciling(record, holder, now, how)
            claim, reason = None, f"{name}: reconciling: {how}"
            phase, point = Stage.RECONCILE, "channels.reconciling-recorded"

        def take(current: Ledger) -> Ledger:
            # The write is built on the ledger as fetched *now*, and its compare-and-swap is
            # against that value: another process of this clone may have fetched a newer one
            # since the decision above. The decision must hold on it too, or be made again.
            if current != ledger and (
                    live_holder(current.holder, now, spec.lease_seconds)
                    or (counts and rate_wait(current, spec.rate, now) > 0)
                    or (sends and self.state.ledgers is not None
                        and self.state.ledgers.is_settled(current, record.intent_key))):
                raise LedgerMoved(name)
            return current.taken(holder, now, spec.rate, count=counts)

        if sends:
            crash_point("channels.decided")
        try:
            tried = self.state.attempt(job, {name: start}, phase, reason, edits={key: take},
                                       claim=claim, landed_point=point)
        except LedgerMoved:
            if again <= 0:
                notes.append(f"{name}: the {spec.account} ledger kept moving; the next run "
                             "decides again")
                return job, False
            return self._act(job, spec, dist, record, action, notes, again - 1)
        release = _releasing(holder.token, now if counts else None)
        if not tried.landed:
            return self._not_started(job, spec, record, start, tried, key, release, notes)
        job = tried.staged
        if sends:
            crash_point("channels.claimed")
        if not self._covers(spec, holder):
            notes.append(f"{name}: not sent: the lease would run out during the send")
            after = (decide.after_send(start, _lease_expiring(), spec, time.time()) if sends
                     else decide.after_reconcile(start, _lease_expiring(), spec, time.time()))
            return self._finish(job, start, after, key, release, phase, notes), False
        adapter = adapter_for(spec, pub_dir(self.ctx.repo.common_dir) / "scratch")
        intent = self._intent(job, spec, record)
        if sends:
            self.ctx.progress(f"channel {name}: sending {job.job_id[:13]} "
                              f"(attempt {start.attempts})")
            outcome = contained(lambda: adapter.send(dist.payload, intent))
            crash_point("channels.sent")
            after = decide.after_send(start, outcome, spec, time.time())
        else:
            self.ctx.progress(f"channel {name}: reconciling {job.job_id[:13]} ({how})")
            found = contained(lambda: adapter.reconcile(dist.payload, intent))
            after = decide.after_reconcile(start, found, spec, time.time())
        # The send went out (or not): from here on its lease counts it, whatever happens.
        job = self._finish(job, start, after, key, _releasing(holder.token, None), phase, notes)
        if sends:
            crash_point("channels.outcome-recorded")
        return job, True

    def _not_started(self, job: Job, spec: ChannelSpec, record: ChannelRecord,
                     start: ChannelRecord, tried: Attempt, key: Account,
                     release: Callable[[Ledger], Ledger],
                     notes: list[str]) -> tuple[Job, bool]:
        """The intent's push did not land whole: nothing is sent. A lost compare-and-swap
        (the job, or the account's ledger, moved on the remote) is fetched and decided again;
        another clone's claim, or a remote that refuses a ref, is the channel's outcome."""
        name = spec.name
        if any(tried.landing.sent(n) for n in tried.ledgers):
            self._give_back(key, release)  # without atomic push: the lease alone landed
        blamed = tried.landing.blamed()
        claimed = tried.claim is not None and tried.claim in blamed
        if not tried.refused and not claimed:
            fresh = self.state.resync(job)
            if fresh is None:
                raise _Lost(job.job_id)
            return fresh, True
        detail = tried.landing.detail()
        if claimed and not tried.refused:
            outcome: Outcome = Unknown("claimed_elsewhere")
            detail = f"another clone claimed it on the remote ({detail})"
        else:
            outcome = NotSent(False, "claim_refused" if tried.claim is not None
                              else "lease_refused")
            detail = f"the remote refused it ({detail})"
        notes.append(f"{name}: not sent: {detail}")
        now = time.time()
        if tried.job_landed:  # without atomic push: SENDING landed, the rest did not
            after = decide.after_send(start, outcome, spec, now) if start.status == \
                Status.SENDING else decide.after_reconcile(start, outcome, spec, now)
            return self._finish(tried.staged, start, after, key, release,
                                Stage.SEND, notes), False
        if record.status == Status.UNKNOWN:  # a reconciliation's resend was refused
            after = decide.after_reconcile(start, outcome, spec, now)
        else:
            after = decide.after_send(start, outcome, spec, now)
        job = self._write(job, record, after, Stage.SEND,
                          f"{name}: not sent, no claim on the remote: {detail}")
        return job, isinstance(outcome, Unknown)  # without a probe, a person at once

    def _finish(self, job: Job, start: ChannelRecord, after: ChannelRecord, key: Account,
                release: Callable[[Ledger], Ledger], phase: Stage,
                notes: list[str]) -> Job:
        """The outcome after ``start``, with the lease given back, unless someone else moved
        the record meanwhile (fenced off: nothing recorded, the lease given back alone)."""
        name = start.channel
        written = self.state.update(job, name, start, after, phase,
                                    f"{name}: {after.status.value}: {after.detail}",
                                    edits={key: release})
        if written is None:
            notes.append(f"{name}: fenced off: the outcome ({after.status.value}) was not "
                         "recorded, another worker took over")
            self._give_back(key, release)
            return self._reload(job)
        return written

    def _give_back(self, key: Account, release: Callable[[Ledger], Ledger]) -> None:
        with contextlib.suppress(Offline, CorruptStateError):  # else it expires by itself
            self.state.push_ledgers({key: release})

    def _settled_elsewhere(self, job: Job, spec: ChannelSpec, record: ChannelRecord,
                           now: float, notes: list[str]) -> Job:
        """The intent settled on the remote already (its claim folded into the account's
        ledger) though this record says it is to be sent (the job's shared record was lost,
        or never reached this clone): another clone may have sent it — unknown, reconciled
        (probe, or the same-key resend), never sent as new."""
        detail = "another clone settled this intent on the remote (the account's ledger)"
        notes.append(f"{spec.name}: not sent: {detail}")
        after = decide.after_send(record, Unknown("claimed_elsewhere"), spec, now)
        # Nothing was sent here, so there is no platform to give time: look at once.
        after = dataclasses.replace(after, next_attempt_at=now)
        return self._write(job, record, after, Stage.SEND, f"{spec.name}: not sent, "
                                                           f"{detail}")

    def _rate_limited(self, job: Job, spec: ChannelSpec, record: ChannelRecord, now: float,
                      wait: float, notes: list[str]) -> Job:
        """The account's rate allows no send now: the record says when it may go (every
        clone counts in the same window), and nothing is tried before."""
        notes.append(f"{spec.name}: rate limit {spec.rate}: next send in {wait:.0f}s")
        new = decide.rate_limited(record, now, now + wait, str(spec.rate))
        return self._write(job, record, new, Stage.SEND, f"{spec.name}: {new.detail}")

    def _covers(self, spec: ChannelSpec, holder: Holder) -> bool:
        """Whether the lease taken still covers the whole send and the outcome's write."""
        margin = min(WRITE_MARGIN, (spec.lease_seconds - spec.timeout) / 2)
        return holder.expires_at > time.time() + spec.timeout + margin

    @staticmethod
    def _intent(job: Job, spec: ChannelSpec, record: ChannelRecord) -> Intent:
        # The account as configured (the record keeps it sanitized: it may carry a secret).
        return Intent(record.intent_key, job.job_id, record.channel, spec.account,
                      record.operation, record.payload_sha256)

    def _reload(self, job: Job) -> Job:
        fresh = self.ctx.store.load(job.job_id)
        assert fresh is not None
        return fresh


def _releasing(token: str, uncount: float | None) -> Callable[[Ledger], Ledger]:
    def release(ledger: Ledger) -> Ledger:
        return ledger.released(token, uncount)

    return release


#: A holder that is nobody's: what the next action would be before we hold the lease.
_NOBODY = Holder("", "", 0.0)


def adapter_for(spec: ChannelSpec, scratch_root: Path) -> Adapter:
    """The adapter of ``spec``'s kind."""
    if spec.kind == "webhook":
        return WebhookAdapter(spec)
    return CommandAdapter(spec, scratch_root)


def same_intent(job: Job, spec: ChannelSpec, record: ChannelRecord) -> bool:
    """Whether ``spec`` is still the channel ``record`` was made for: its kind, the intent key
    of its name and (raw, unsanitized) account, and where it sends (a webhook's URL: a same-key
    resend of an unknown outcome goes to the platform that may hold the post, or nowhere)."""
    return spec.kind == record.kind and record.intent_key == decide.intent_key(
        job.job_id, spec.name, spec.account, record.operation) and (
        record.target is None or record.target == decide.target_of(spec))


def contained(act: Callable[[], _O]) -> _O | Unknown:
    """An adapter's answer; an exception it let escape (a bug, hostile input) is ``unknown``:
    the request may have left, and the SENDING record must still get its outcome."""
    try:
        return act()
    except Exception as e:
        return Unknown(code(f"adapter_error {type(e).__name__}", "adapter_error"))


def _lease_expiring() -> NotSent:
    return NotSent(True, "lease_expiring")


# -- looking without acting ------------------------------------------------------------------

def channel_reports(ctx: Context, jobs: Sequence[Job], *, strict: bool = False,
                    errors: list[str] | None = None) -> dict[str, Report]:
    """The channel records of ``jobs`` as they are (for ``status``), each job's as this clone
    knows it best (``state.freshest``: the remote's as last fetched, when it is ahead); an
    unreadable one raises (``strict``) or goes to ``errors``."""
    state = ChannelState(ctx.store)
    prefix = store_prefix(ctx.remote())
    reports: dict[str, Report] = {}
    # The remote's job values in one listing, not a git per job (``status --all``).
    theirs = ctx.repo.list_refs(prefix + "jobs/") if len(jobs) > 1 else None
    for job in jobs:
        if job.state != State.PUBLISHED:
            continue
        try:
            fresh = freshest(ctx.store, prefix, job) if theirs is None else \
                freshest(ctx.store, prefix, job, theirs.get(job.job_id))
            dist = state.load(fresh)
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
