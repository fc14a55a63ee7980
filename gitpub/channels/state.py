"""Channel state in the shared job store: documents in the job's state commits, each written
on the remote first by compare-and-swap (``channels.shared``).

A published job that has channels carries, beside ``job.json``::

    payload.json           the frozen payload (``payload``): every send sends these bytes
    channels/<name>.json   one record per channel (``model.ChannelRecord``)
    live.json              the live check (``model.LiveRecord``), when ``site.live`` is set

Each change is one state commit of the job (on the PUBLISHED job, with its event in the job's
history), pushed to the remote's ``refs/pub/jobs/<id>`` from the value this clone last fetched,
in one atomic push with the ledgers it changes (``channels.lease``: the counters of the sends
started and confirmed, the lease and rate window of a send) and, before a send, the intent's
claim; this clone's own ref follows. So every clone reads and builds on the same channel state,
and the remote orders all writers of a job. On top of that every write names the record it
replaces: when the job moved meanwhile we fetch, sync and re-read, and write only if *our*
channel's record is still the one we decided on — a worker whose lease expired, and whose
channel another worker (of any clone) turned ``unknown`` in between, finds a different record
and writes nothing (the fencing of reference §5).

An intent (SENDING, RECONCILING) must land on the remote before its side effect, or there is
no side effect. An outcome is never lost: a remote that does not take it now (unreachable, no
answer) leaves it recorded here, ahead of the remote, and the next write of the job pushes it.

An index, ``refs/pub/distributing/<job-id>``, lists the jobs whose distribution this clone
drives and that are not settled. It is created *before* a job is delivered (so a crash between
"published" and "channels initialized" is rediscovered) and removed once every channel is
final; like the job store's active index it is derived data, never the truth about a job.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from gitpub.channels.claim import CLAIMS
from gitpub.channels.lease import (
    FOLDABLE_KEY,
    LEDGER_FILE,
    Ledger,
    Ledgers,
    ledger_name,
    settled_path,
)
from gitpub.channels.model import (
    ChannelRecord,
    ChannelRecordError,
    LiveRecord,
    LiveStatus,
    Status,
    parse_channel,
    parse_live,
)
from gitpub.channels.payload import parse_payload
from gitpub.channels.shared import Change, Landing, Offline, Upstream, Writer
from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CorruptStateError, LostRace
from gitpub.core.sanitize import sanitize
from gitpub.core.states import Stage
from gitpub.git.push import PushOutcome, PushResult
from gitpub.git.remote import RemoteConfigError, RemoteError
from gitpub.git.repo import MODE_FILE, Entry
from gitpub.store.jobs import DISTRIBUTING_PREFIX, Job, JobStore
from gitpub.store.mirror import store_prefix
from gitpub.store.shared import SharedView

INDEX_PREFIX = DISTRIBUTING_PREFIX
PAYLOAD_FILE = "payload.json"
LIVE_FILE = "live.json"
CHANNELS_DIR = "channels"
#: Claims a ``fold_settled_claims`` call looks at.
FOLD_BATCH = 200
#: Compare-and-swap rounds against other writers of the job before this run gives up on it.
WRITE_ROUNDS = 12
_FILE_RE = re.compile(r"([a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?)\.json")

LedgerEdit = Callable[[Ledger], Ledger]
#: A ledger's key: (channel, account as the records keep it).
Account = tuple[str, str]


def _same(ledger: Ledger) -> Ledger:
    return ledger


def _counting(edit: LedgerEdit, sends: int, confirmed: int) -> LedgerEdit:
    return lambda ledger: edit(ledger).counted(sends, confirmed)


def _settling(edit: LedgerEdit, intents: list[str]) -> LedgerEdit:
    return lambda ledger: edit(ledger).settling(intents)


def _quiet(message: str) -> None:
    """Progress nobody asked to see."""


def channel_file(name: str) -> str:
    return f"{CHANNELS_DIR}/{name}.json"


@dataclass(frozen=True)
class Distribution:
    """A job's channels as recorded: the payload, every channel record, the live check."""

    payload: bytes
    channels: Mapping[str, ChannelRecord]
    live: LiveRecord | None

    @property
    def payload_sha256(self) -> str:
        return hashlib.sha256(self.payload).hexdigest()

    @property
    def is_live(self) -> bool:
        return self.live is None or self.live.status == LiveStatus.LIVE

    @property
    def settled(self) -> bool:
        """Nothing left to drive: every channel final, and the page found live (or given up
        on: then the channels waiting for it needed a person, who resolved them)."""
        checked = self.live is None or self.live.status in (LiveStatus.LIVE,
                                                             LiveStatus.GAVE_UP)
        return checked and all(r.final for r in self.channels.values())


@dataclass(frozen=True)
class Attempt:
    """One try at a write: the state commit made, and what its push did."""

    staged: Job
    landing: Landing
    job: str  # the job ref's change (its name below refs/pub/)
    ledgers: tuple[str, ...]
    claim: str | None

    @property
    def landed(self) -> bool:
        return self.landing.landed

    @property
    def job_landed(self) -> bool:
        return self.landing.sent(self.job)

    @property
    def refused(self) -> bool:
        """Refused by the server for another reason than a lost race (a hook, a protected
        ref): trying again would not help."""
        return any(o.result == PushResult.REJECTED for o in self.landing.blamed().values())

    def lost(self, name: str | None) -> bool:
        """Whether ``name`` lost its compare-and-swap (another writer moved it)."""
        blamed = self.landing.blamed()
        return name is not None and name in blamed and blamed[name].result == PushResult.RACE


_UNREAD = object()


def freshest(store: JobStore, prefix: str, job: Job, theirs: object = _UNREAD) -> Job:
    """``job`` as this clone knows it best without the network: the remote's value as last
    fetched when that is ahead of this clone's (another clone moved its channels on).
    ``theirs``: that value when the caller listed it already (None: the remote has none)."""
    view = SharedView(store, prefix)
    if theirs is _UNREAD:
        theirs = view.remote_value(job.job_id)
    if not isinstance(theirs, str):
        return job
    if theirs is None or theirs == job.commit or not view.descends(theirs, job.commit):
        return job
    try:
        return view.load(job.job_id, theirs)
    except CorruptStateError:
        return job


class ChannelState:
    """Reading and writing channel documents of the jobs in ``store``."""

    def __init__(self, store: JobStore, upstream: Upstream | None = None,
                 progress: Callable[[str], None] = _quiet) -> None:
        self.store = store
        self.repo = store.repo
        self.progress = progress
        self.writer: Writer | None = None
        self.view: SharedView | None = None
        self.ledgers: Ledgers | None = None
        if upstream is not None:
            prefix = store_prefix(upstream.remote)
            self.writer = Writer(upstream, progress)
            self.view = SharedView(store, prefix, sanitize(upstream.remote.remote))
            self.ledgers = Ledgers(store.repo, prefix)

    # -- reading ---------------------------------------------------------------------------

    def load(self, job: Job) -> Distribution | None:
        """The job's distribution, None if it has none yet; unreadable state raises, naming
        the job and the document."""
        try:
            return self._load(job)
        except (ChannelRecordError, ValueError) as e:
            raise CorruptStateError(
                f"job {job.job_id}: channel state is unreadable: {e} (in state commit "
                f"{job.commit})",
                hint="nothing was sent or changed; inspect `git show "
                     f"{JobStore.ref_name(job.job_id)}:channels/` and repair the record",
            ) from None

    def _load(self, job: Job) -> Distribution | None:
        payload = self.store.read_file(job, PAYLOAD_FILE)
        tree = self.store.subtree(job, CHANNELS_DIR)
        live_raw = self.store.read_file(job, LIVE_FILE)
        if payload is None:
            if tree is not None or live_raw is not None:
                raise ChannelRecordError("channel records without payload.json")
            return None
        parse_payload(payload)
        digest = hashlib.sha256(payload).hexdigest()
        channels: dict[str, ChannelRecord] = {}
        for name, entry in ([] if tree is None else self.repo.tree_items(tree)):
            match = _FILE_RE.fullmatch(name)
            if match is None or entry.mode != 0o100644:
                raise ChannelRecordError(f"unexpected entry channels/{name}")
            try:
                record = parse_channel(self.repo.blob(entry.sha))
            except ChannelRecordError as e:
                raise ChannelRecordError(f"channels/{name}: {e}") from None
            if record.channel != match.group(1):
                raise ChannelRecordError(f"channels/{name} names channel {record.channel!r}")
            if record.payload_sha256 != digest:
                raise ChannelRecordError(f"channels/{name} was frozen with payload "
                                         f"{record.payload_sha256}, payload.json is {digest}")
            channels[record.channel] = record
        live = None
        if live_raw is not None:
            try:
                live = parse_live(live_raw)
            except ChannelRecordError as e:
                raise ChannelRecordError(f"live.json: {e}") from None
        return Distribution(payload, dict(sorted(channels.items())), live)

    # -- writing (through the remote: ``channels.shared``) ---------------------------------

    def _writer(self) -> Writer:
        if self.writer is None:
            raise AssertionError("channel state is written through the remote's store only")
        return self.writer

    def base(self, job_id: str) -> tuple[str | None, str | None]:
        """The remote's value of the job's ref as last fetched (None: it has none), and the
        state its counters were counted on (that value, else the archive's entry)."""
        writer = self._writer()
        theirs = writer.value(f"jobs/{job_id}")
        if theirs is not None:
            return theirs, theirs
        entry = self.view.archived(job_id) if self.view is not None else None
        return None, None if entry is None else entry.state_commit

    def attempt(self, job: Job, records: Mapping[str, ChannelRecord], phase: Stage,
                reason: str, *, payload: bytes | None = None, live: LiveRecord | None = None,
                edits: Mapping[Account, LedgerEdit] | None = None,
                claim: Change | None = None, landed_point: str | None = None) -> Attempt:
        """One try at recording ``records`` (and ``payload``/``live``) on top of ``job``: the
        state commit pushed to the remote's job ref by compare-and-swap, in one atomic push
        with the ledgers' changes (``edits`` by ledger name, and the counters of what the
        records change: sends started, records confirmed) and ``claim``; this clone's ref
        follows when it landed (``landed_point``: a crash point between the two). ``job``
        must be synced with the remote (the same, or ahead of it)."""
        writer = self._writer()
        theirs, counted = self.base(job.job_id)
        if not self.built_on(job, theirs):
            return self._behind(job, theirs)
        files: dict[str, bytes] = {channel_file(n): r.to_json() for n, r in records.items()}
        if payload is not None:
            files[PAYLOAD_FILE] = payload
        if live is not None:
            files[LIVE_FILE] = live.to_json()
        staged = self.store.stage(job, job.record, phase=phase, reason=reason, files=files)
        ledgers, folded = self._ledger_changes(job, counted, records, dict(edits or {}),
                                               keep=None if claim is None else claim.name)
        job_change = Change(f"jobs/{job.job_id}", staged.commit, theirs)
        changes = [*ledgers, job_change, *([] if claim is None else [claim]), *folded]
        landing = writer.push(changes)
        if landing.sent(job_change.name):
            if landed_point is not None and landing.landed:
                crash_point(landed_point)
            self.advance(job, staged)
        self._forget_claims(c.name for c in folded if landing.sent(c.name))
        return Attempt(staged, landing, job_change.name, tuple(c.name for c in ledgers),
                       None if claim is None else claim.name)

    def built_on(self, job: Job, theirs: str | None) -> bool:
        """Whether ``job`` is the remote's value ``theirs`` (as last fetched) or goes on from
        it. A compare-and-swap from ``theirs`` to a commit that does not descend from it would
        overwrite what another writer recorded — another process of this clone may have moved
        the tracking ref since ``job`` was read (a worker stopped past its lease, resumed)."""
        if theirs is None or theirs == job.commit:
            return True
        return self.view is not None and self.view.descends(job.commit, theirs)

    def _behind(self, job: Job, theirs: str | None) -> Attempt:
        """An attempt that pushed nothing: ``job`` is behind (or beside) the remote's value,
        a lost race like any other (the caller fetches, syncs and decides again)."""
        name = f"jobs/{job.job_id}"
        detail = f"moved to {theirs} since this job was read at {job.commit}"
        return Attempt(job, Landing({name: PushOutcome(PushResult.RACE, detail)}), name, (),
                       None)

    def fold_settled_claims(self, limit: int = FOLD_BATCH) -> int:
        """Claims still on the remote (as fetched) whose intent settled there — left by a
        gitpub that kept every claim, or by a fold whose claim deletion did not land (a server
        without atomic push) — folded into their account's ledger, one push per account (at
        most ``limit`` claims a call); how many went. A claim whose job or record cannot be
        read, or is not settled, stays. Raises ``Offline``."""
        writer = self._writer()
        assert self.view is not None
        prefix = store_prefix(writer.remote) + CLAIMS
        found: dict[Account, list[tuple[str, str]]] = {}
        for key, sha in sorted(self.repo.list_refs(prefix).items())[:limit]:
            record = self._settled(key, sha) if FOLDABLE_KEY.fullmatch(key) else None
            if record is not None:
                found.setdefault((record.channel, record.account), []).append((key, sha))
        folded = 0
        for account, claims in found.items():
            try:
                ledger = self._ledger_change(account, _settling(_same, [k for k, _ in claims]))
            except CorruptStateError:
                continue  # that account's sends stop on it, and say so
            changes = [*([] if ledger is None else [ledger]),
                       *(Change(CLAIMS + k, None, sha) for k, sha in claims)]
            landing = writer.push(changes)
            gone = [c.name for c in changes[1 if ledger else 0:] if landing.sent(c.name)]
            self._forget_claims(gone)
            folded += len(gone)
        return folded

    def _settled(self, key: str, claim: str) -> ChannelRecord | None:
        """The settled record of intent ``key`` in the job its claim commit names, as the
        remote has it (its job ref as fetched, else its archive entry); None otherwise."""
        try:
            message = self.repo.commit(claim).message.decode("utf-8", "replace")
            match = re.search(r"^job ([0-9a-f-]{36})$", message, re.M)
            if match is None or self.view is None:
                return None
            job_id = match.group(1)
            sha = self._writer().value(f"jobs/{job_id}")
            if sha is None:
                entry = self.view.archived(job_id)
                sha = None if entry is None else entry.state_commit
            dist = None if sha is None else self.load(self.store.load_at(job_id, sha))
        except CorruptStateError:
            return None
        record = next((r for r in (dist.channels.values() if dist else ())
                       if r.intent_key == key), None)
        return record if record is not None and record.final else None

    def forget_claims(self, dist: Distribution) -> None:
        """This clone's own copies of the claims of ``dist``'s settled intents (made by an
        attempt of this clone, whoever settled the intent since)."""
        self._forget_claims(CLAIMS + r.intent_key for r in dist.channels.values()
                            if r.final and FOLDABLE_KEY.fullmatch(r.intent_key))

    def _forget_claims(self, names: Iterable[str]) -> None:
        """This clone's own copies of claims folded into their ledger (``channels.claim``)."""
        for name in names:
            ref = "refs/pub/" + name
            sha = self.repo.read_ref(ref)
            if sha is not None:
                self.repo.delete_ref(ref, sha)

    def push_ledgers(self, edits: Mapping[Account, LedgerEdit]) -> Landing:
        """Ledger changes alone (a lease given back after a write that did not land)."""
        changes = [c for c in (self._ledger_change(k, e) for k, e in edits.items())
                   if c is not None]
        return self._writer().push(changes)

    def _ledger_changes(self, job: Job, counted: str | None,
                        records: Mapping[str, ChannelRecord],
                        edits: dict[Account, LedgerEdit],
                        keep: str | None = None) -> tuple[list[Change], list[Change]]:
        """The ledger changes of one write: ``edits``, and the counters of every channel whose
        record on the remote (``counted``: the state last counted there) differs from the one
        this write leaves (sends started: attempts gained; confirmed: newly confirmed). And the
        claims this write folds: every settled record's claim still on the remote (as
        fetched) is deleted by compare-and-swap and its intent goes into its account's ledger
        (``channels.claim``; ``keep``: a claim this write pushes itself)."""
        before = self._records_at(job, counted)
        after = dict(self._records_at(job, job.commit))
        after.update(records)
        folded: list[Change] = []
        settled: dict[Account, list[str]] = {}
        for new in after.values():
            name = CLAIMS + new.intent_key
            seen = self._writer().value(name) if new.final and name != keep and \
                FOLDABLE_KEY.fullmatch(new.intent_key) else None
            if seen is not None:
                folded.append(Change(name, None, seen))
                settled.setdefault((new.channel, new.account), []).append(new.intent_key)
        for key, intents in settled.items():
            edits[key] = _settling(edits.get(key, _same), intents)
        deltas: dict[Account, tuple[int, int]] = {}
        for name, new in after.items():
            old = before.get(name)
            if old == new:
                continue
            sends = max(0, new.attempts - (old.attempts if old is not None else 0))
            confirmed = int(new.status == Status.CONFIRMED and (
                old is None or old.status != Status.CONFIRMED))
            if sends or confirmed:
                key = (new.channel, new.account)
                a, c = deltas.get(key, (0, 0))
                deltas[key] = (a + sends, c + confirmed)
        for key, (sends, confirmed) in deltas.items():
            edits[key] = _counting(edits.get(key, _same), sends, confirmed)
        return [c for c in (self._ledger_change(k, e) for k, e in edits.items())
                if c is not None], folded

    def _ledger_change(self, account: Account, edit: LedgerEdit) -> Change | None:
        """The account's ledger after ``edit``, as a new ledger commit (``channels.lease``):
        ``ledger.json``, and the intents it folds in added to the settled ones."""
        assert self.ledgers is not None
        sha, ledger = self.ledgers.read(*account)
        new = edit(ledger)
        fresh = [k for k in dict.fromkeys(new.folding) if not self.ledgers.is_settled(ledger, k)]
        new = replace(new, folding=(), settled=new.settled + len(fresh))
        if new == ledger:
            return None
        files: dict[str, Entry | None] = {LEDGER_FILE: Entry(MODE_FILE,
                                                             self.repo.write_blob(new.to_blob()))}
        if fresh:
            empty = self.repo.write_blob(b"")
            files.update({settled_path(k): Entry(MODE_FILE, empty) for k in fresh})
        tree = self.repo.write_tree(ledger.tree, files)
        message = sanitize(f"gitpub: channel ledger {new.channel} ({new.account})\n").encode()
        return Change(ledger_name(*account), self.repo.write_commit(tree, [], message), sha)

    def _records_at(self, job: Job, sha: str | None) -> Mapping[str, ChannelRecord]:
        if sha is None:
            return {}
        if sha == job.commit:
            dist = self.load(job)
        else:
            try:
                dist = self.load(self.store.load_at(job.job_id, sha))
            except CorruptStateError:
                return {}  # the remote's damaged record: what it counted is unknowable
        return {} if dist is None else dist.channels

    def advance(self, prev: Job, staged: Job) -> Job:
        """This clone's ref of the job moved to ``staged`` (it landed on the remote, or is an
        outcome recorded here until the remote takes it), unless something newer is here
        already (another process of this clone adopted it, or went on from it)."""
        try:
            return self.store.advance(prev, staged)
        except LostRace:
            current = self.store.load(prev.job_id)
            if current is not None and self.view is not None and \
                    current.commit != staged.commit and \
                    self.view.descends(staged.commit, current.commit):
                with contextlib.suppress(LostRace):
                    self.store.adopt(prev.job_id, current.commit, staged.commit)
            return staged

    def update(self, job: Job, name: str, expected: ChannelRecord | None,
               new: ChannelRecord, phase: Stage, reason: str,
               edits: Mapping[Account, LedgerEdit] | None = None) -> Job | None:
        """Record an outcome or a decision (no side effect waits on it): replace ``expected``
        by ``new`` if ``name``'s record is still ``expected`` (else None: someone else moved
        it — we are fenced off), with the ledgers' ``edits``. A lost compare-and-swap is
        fetched, synced and tried again; a remote that cannot take it now leaves it recorded
        here (ahead of the remote: pushed by the next write), so an outcome is never lost
        (the ledger's lease then expires by itself)."""
        return self._update(job, lambda d: d.channels.get(name) == expected,
                            {channel_file(name): new.to_json()}, {name: new}, None, phase,
                            reason, edits)

    def update_live(self, job: Job, expected: LiveRecord, new: LiveRecord,
                    reason: str) -> Job | None:
        return self._update(job, lambda d: d.live == expected, {LIVE_FILE: new.to_json()},
                            {}, new, Stage.LIVE, reason, None)

    def _update(self, job: Job, unchanged: Callable[[Distribution], bool],
                files: Mapping[str, bytes], records: Mapping[str, ChannelRecord],
                live: LiveRecord | None, phase: Stage, reason: str,
                edits: Mapping[Account, LedgerEdit] | None) -> Job | None:
        for _ in range(WRITE_ROUNDS):
            dist = self.load(job)
            if dist is None or not unchanged(dist):
                return None
            try:
                tried = self.attempt(job, records, phase, reason, live=live, edits=edits)
                if tried.job_landed:  # (without atomic push a ledger may lag: it expires)
                    return tried.staged
                if tried.refused:
                    return self.record_here(job, files, phase, reason, tried.landing.detail())
                fresh = self.resync(job)
            except Offline as e:
                return self.record_here(job, files, phase, reason, e.detail)
            if fresh is None:
                return None
            job = fresh
        raise LostRace(JobStore.ref_name(job.job_id))

    def record_here(self, job: Job, files: Mapping[str, bytes], phase: Stage, reason: str,
                    why: str) -> Job | None:
        """An outcome the remote does not take now, recorded here (by compare-and-swap of
        this clone's ref; None if it moved); the next write of the job pushes it."""
        staged = self.store.stage(job, job.record, phase=phase, reason=reason, files=files)
        self.progress(f"job {job.job_id[:13]}: recorded here only, the remote did not take "
                      f"it now ({sanitize(why)}); the next run shares it")
        try:
            return self.store.advance(job, staged)
        except LostRace:
            return None

    def resync(self, job: Job) -> Job | None:
        """After a lost compare-and-swap: fetch, then the job as the remote's value makes it
        (None: not this clone's to write any more). Raises ``Offline``."""
        upstream = self._writer().upstream
        try:
            upstream.refresh()
        except (RemoteError, RemoteConfigError) as e:
            raise Offline(e.message) from None
        fresh = self.store.load(job.job_id)
        return None if fresh is None else upstream.sync(fresh)

    def ahead(self, job: Job) -> bool:
        """Whether this clone's value of the job is ahead of the remote's as last fetched
        (an outcome recorded here while the remote did not take it)."""
        theirs = self.repo.read_ref(self.view.remote_ref(job.job_id)) \
            if self.view is not None else None
        return theirs is not None and theirs != job.commit and self.view is not None and \
            self.view.descends(job.commit, theirs)

    def share(self, job: Job) -> Job:
        """This clone's state of the job pushed where it is ahead of the remote's (an outcome
        recorded here while the remote did not answer, or state an earlier gitpub kept per
        clone). Raises ``Offline``; a lost race is left to the next write's sync."""
        if not self.ahead(job):
            return job
        # Ahead of the tracking ref as last read: maybe only of a stale one (another process
        # of this clone landed this very value since, and its tracking ref, or this process's
        # kept copy of it, lags). Pushing then would be "up to date" for the job's ref — git
        # checks no lease on a ref that already has the new value — while the ledger's
        # counters, built on the stale value, would count its sends a second time. So the
        # remote's value is fetched first, and the job shared only if it is still ahead.
        try:
            self._writer().upstream.refresh()
        except (RemoteError, RemoteConfigError) as e:
            raise Offline(e.message) from None
        if not self.ahead(job):
            return job
        theirs, counted = self.base(job.job_id)
        ledgers, folded = self._ledger_changes(job, counted, {}, {})
        landing = self._writer().push([*ledgers, Change(f"jobs/{job.job_id}", job.commit,
                                                        theirs), *folded])
        self._forget_claims(c.name for c in folded if landing.sent(c.name))
        return job

    def initialize(self, job: Job, payload: bytes, records: Mapping[str, ChannelRecord],
                   live: LiveRecord | None, reason: str) -> Job:
        """Freeze the payload and record every channel pending, in one state commit on the
        remote. A lost race may be someone else's initialization: fetch, sync, re-read.
        Raises ``Offline`` (nothing recorded: the next run initializes)."""
        for _ in range(WRITE_ROUNDS):
            if self.load(job) is not None:
                return job
            tried = self.attempt(job, records, Stage.CHANNELS, reason, payload=payload,
                                 live=live)
            if tried.landed:
                return tried.staged
            if tried.refused:
                raise Offline(tried.landing.detail())
            fresh = self.resync(job)
            if fresh is None:
                return job
            job = fresh
        raise LostRace(JobStore.ref_name(job.job_id))

    def update_channel(self, job: Job, expected: ChannelRecord, new: ChannelRecord,
                       phase: Stage, reason: str) -> Job | None:
        return self.update(job, new.channel, expected, new, phase, reason)

    # -- the index of unsettled distributions ----------------------------------------------

    def expect(self, job: Job) -> None:
        """Put ``job`` in the index (before it is delivered: see the module docstring)."""
        ref = INDEX_PREFIX + job.job_id
        if self.repo.read_ref(ref) is None:
            self.repo.cas_ref(ref, None, job.commit, "gitpub: distribution expected")

    def is_indexed(self, job_id: str) -> bool:
        return self.repo.read_ref(INDEX_PREFIX + job_id) is not None

    def indexed(self) -> list[str]:
        return sorted(self.repo.list_refs(INDEX_PREFIX))

    def unindex(self, job_id: str) -> None:
        ref = INDEX_PREFIX + job_id
        current = self.repo.read_ref(ref)
        if current is not None:
            self.repo.delete_ref(ref, current)
