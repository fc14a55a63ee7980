"""Channel state in the job store: documents in the job's state commit, written by its CAS.

A published job that has channels carries, beside ``job.json``::

    payload.json           the frozen payload (``payload``): every send sends these bytes
    channels/<name>.json   one record per channel (``model.ChannelRecord``)
    live.json              the live check (``model.LiveRecord``), when ``site.live`` is set

Each change is one state commit of the job (``JobStore.transition`` on the PUBLISHED job, with
its event in the job's history), so it is a compare-and-swap of the job's ref like any other
transition. On top of that every write names the record it replaces: when the job's ref moved
meanwhile we re-read, and write only if *our* channel's record is still the one we decided on —
a worker whose lease expired, and whose channel another worker turned ``unknown`` in between,
finds a different record and writes nothing (the fencing of reference §5).

An index, ``refs/pub/distributing/<job-id>``, lists the jobs whose distribution is not settled.
It is created *before* a job is delivered (so a crash between "published" and "channels
initialized" is rediscovered) and removed once every channel is final; like the job store's
active index it is derived data, never the truth about a job.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gitpub.channels.model import (
    ChannelRecord,
    ChannelRecordError,
    LiveRecord,
    LiveStatus,
    parse_channel,
    parse_live,
)
from gitpub.channels.payload import parse_payload
from gitpub.core.errors import CorruptStateError, LostRace
from gitpub.core.states import Stage
from gitpub.store.jobs import DISTRIBUTING_PREFIX, Job, JobStore

INDEX_PREFIX = DISTRIBUTING_PREFIX
PAYLOAD_FILE = "payload.json"
LIVE_FILE = "live.json"
CHANNELS_DIR = "channels"
#: Compare-and-swap rounds against writers of the job's other channels before we give up.
WRITE_ROUNDS = 50
_FILE_RE = re.compile(r"([a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?)\.json")


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


class ChannelState:
    """Reading and writing channel documents of the jobs in ``store``."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self.repo = store.repo

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

    # -- writing ---------------------------------------------------------------------------

    def initialize(self, job: Job, payload: bytes, records: Mapping[str, ChannelRecord],
                   live: LiveRecord | None, reason: str) -> Job:
        """Freeze the payload and record every channel pending, in one state commit. A lost
        race is someone else's initialization (or another channel's write): re-read."""
        files = {PAYLOAD_FILE: payload}
        files.update({channel_file(n): r.to_json() for n, r in records.items()})
        if live is not None:
            files[LIVE_FILE] = live.to_json()
        for _ in range(WRITE_ROUNDS):
            if self.load(job) is not None:
                return job
            try:
                return self.store.transition(job, job.record, phase=Stage.CHANNELS,
                                             reason=reason, files=files)
            except LostRace:
                job = self._reload(job)
        raise LostRace(JobStore.ref_name(job.job_id))

    def update_channel(self, job: Job, expected: ChannelRecord, new: ChannelRecord,
                       phase: Stage, reason: str) -> Job | None:
        """Replace ``expected`` by ``new``; None (nothing written) when the record is no
        longer ``expected``: someone else moved this channel — we are fenced off."""
        return self._update(job, channel_file(new.channel),
                            lambda d: d.channels.get(new.channel) == expected,
                            new.to_json(), phase, reason)

    def update_live(self, job: Job, expected: LiveRecord, new: LiveRecord,
                    reason: str) -> Job | None:
        return self._update(job, LIVE_FILE, lambda d: d.live == expected, new.to_json(),
                            Stage.LIVE, reason)

    def _update(self, job: Job, path: str, unchanged: Callable[[Distribution], bool],
                data: bytes, phase: Stage, reason: str) -> Job | None:
        for _ in range(WRITE_ROUNDS):
            dist = self.load(job)
            if dist is None or not unchanged(dist):
                return None
            try:
                return self.store.transition(job, job.record, phase=phase, reason=reason,
                                             files={path: data})
            except LostRace:
                job = self._reload(job)
        raise LostRace(JobStore.ref_name(job.job_id))

    def _reload(self, job: Job) -> Job:
        fresh = self.store.load(job.job_id)
        assert fresh is not None, "a job's ref never disappears under us"
        return fresh

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
