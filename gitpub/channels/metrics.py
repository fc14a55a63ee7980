"""``git pub metrics``: business outcomes in the Prometheus text format (version 0.0.4).

What the reference's section 10 asks to watch: how long the oldest pending job and the oldest
pending channel send have waited, how many outcomes are unknown and for how long, the backlog
that needs a person, the jobs waiting for review (``delivery.review``), idempotency-key reuse
refused, and per channel how many sends were attempted and how many confirmed. Everything is
computed from git at the time of the call, without the network, so a scrape after a crash is as
true as any: the gauges from this clone's jobs (each published job's channels as this clone
knows them best: the remote's records as last fetched, when they are ahead), the two counters
from the accounts' ledgers on the remote (``channels.lease``, as last fetched) — counted once
per send by whichever clone made it, in the same atomic push as the record, and never lowered:
not by a person's ``--not-sent`` (which starts a record's attempts again), not by folding
finished jobs into the archive.
Written by hand (no runtime dependency); the tests parse it with prometheus_client's parser.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from gitpub.channels.lease import Ledgers
from gitpub.channels.model import IN_FLIGHT, LiveStatus, Status
from gitpub.channels.state import ChannelState, Distribution, freshest
from gitpub.core.errors import CorruptStateError
from gitpub.core.states import NEEDS_PERSON, SETTLED, FailureCode, State
from gitpub.store.jobs import Job, JobStore


@dataclass
class Snapshot:
    """The numbers, gathered in one pass over the store."""

    now: float
    pending_jobs: list[float] = field(default_factory=list)  # ages
    pending_sends: list[float] = field(default_factory=list)
    unknown: dict[str, list[float]] = field(default_factory=lambda: {"channel": [],
                                                                      "push": []})
    needs_person: Counter[tuple[str, str]] = field(default_factory=Counter)
    key_reused: int = 0
    in_review: list[float] = field(default_factory=list)  # ages (since each was created)
    confirmed: Counter[str] = field(default_factory=Counter)
    attempted: Counter[str] = field(default_factory=Counter)
    unreadable: int = 0

    def add_job(self, job: Job) -> None:
        record = job.record
        age = max(0.0, self.now - record.created_at)
        if job.state not in SETTLED:
            self.pending_jobs.append(age)
        if job.state == State.PUSHING:
            self.unknown["push"].append(max(0.0, self.now - record.updated_at))
        if job.state == State.IN_REVIEW:
            self.in_review.append(age)
        if job.state in NEEDS_PERSON or job.state == State.FAILED:
            self.needs_person["job", job.state.value] += 1
        if record.failure_code == FailureCode.KEY_REUSED:
            self.key_reused += 1

    def add_distribution(self, dist: Distribution) -> None:
        for r in dist.channels.values():
            if r.status in (Status.UNKNOWN, Status.RECONCILING) or (
                    r.status == Status.SENDING and r.holder is not None
                    and r.holder.expires_at <= self.now):
                self.unknown["channel"].append(self.now - (r.unknown_since or r.updated_at))
            elif r.status in IN_FLIGHT or r.status == Status.PENDING or (
                    r.status == Status.NOT_SENT and r.next_attempt_at is not None):
                self.pending_sends.append(max(0.0, self.now - r.created_at))
            if r.waits_for_person:
                self.needs_person["channel", r.status.value] += 1
        if dist.live is not None and dist.live.status == LiveStatus.GAVE_UP:
            self.needs_person["live", LiveStatus.GAVE_UP.value] += 1


def gather(store: JobStore, prefix: str, now: float | None = None) -> Snapshot:
    """The numbers of ``store`` (``prefix``: the remote's tracking prefix, for the ledgers and
    the remote's records as last fetched)."""
    snap = Snapshot(time.time() if now is None else now)
    state = ChannelState(store)
    for item in store.iter_jobs(finished=True):
        if isinstance(item, CorruptStateError):
            snap.unreadable += 1
            continue
        snap.add_job(item)
        if item.state == State.PUBLISHED:
            try:
                dist = state.load(freshest(store, prefix, item))
            except CorruptStateError:
                snap.unreadable += 1
                continue
            if dist is not None:
                snap.add_distribution(dist)
    for ledger in Ledgers(store.repo, prefix).all().values():
        if isinstance(ledger, CorruptStateError):
            continue  # reported by the channel's next send, which stops on it
        snap.attempted[ledger.channel] += ledger.attempted
        snap.confirmed[ledger.channel] += ledger.confirmed
    return snap


def _label(value: str) -> str:
    """A label value escaped as the exposition format wants (backslash, quote, newline)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: float) -> str:
    return repr(float(value)) if value != int(value) else f"{int(value)}"


def _family(name: str, kind: str, help_text: str,
            samples: Iterable[tuple[str, float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    suffix = "_total" if kind == "counter" else ""
    lines += [f"{name}{suffix}{labels} {_num(v)}" for labels, v in samples]
    return lines


def render(snap: Snapshot) -> str:
    """The exposition text of ``snap``."""
    unknown = snap.unknown
    out: list[str] = []
    out += _family("gitpub_pending_jobs", "gauge", "Jobs automation has not finished yet.",
                   [("", len(snap.pending_jobs))])
    out += _family("gitpub_oldest_pending_job_age_seconds", "gauge",
                   "Age of the oldest job automation has not finished (0: none).",
                   [("", max(snap.pending_jobs, default=0.0))])
    out += _family("gitpub_pending_channel_sends", "gauge",
                   "Channel sends not made yet (pending, retrying, in flight).",
                   [("", len(snap.pending_sends))])
    out += _family("gitpub_oldest_pending_channel_send_age_seconds", "gauge",
                   "Age of the oldest channel send not made yet (0: none).",
                   [("", max(snap.pending_sends, default=0.0))])
    out += _family("gitpub_unknown_outcomes", "gauge",
                   "Side effects whose outcome is unknown (channel sends, pushes).",
                   [(f'{{kind="{k}"}}', len(v)) for k, v in sorted(unknown.items())])
    out += _family("gitpub_oldest_unknown_outcome_age_seconds", "gauge",
                   "How long the oldest unknown outcome has been unknown (0: none).",
                   [(f'{{kind="{k}"}}', max(v, default=0.0)) for k, v in sorted(unknown.items())])
    backlog = snap.needs_person or Counter({("job", "REVIEW"): 0})
    out += _family("gitpub_needs_person", "gauge", "Jobs, channels and live checks waiting "
                   "for a person.", [(f'{{kind="{k}",state="{s}"}}', n)
                                     for (k, s), n in sorted(backlog.items())])
    out += _family("gitpub_in_review", "gauge", "Jobs whose pull/merge request waits for a "
                   "person to merge or close it (delivery.mode: pull_request).",
                   [("", len(snap.in_review))])
    out += _family("gitpub_oldest_in_review_age_seconds", "gauge",
                   "Age of the oldest job waiting for review (0: none).",
                   [("", max(snap.in_review, default=0.0))])
    out += _family("gitpub_key_reuse_refusals", "counter",
                   "Idempotency keys reused with different content, refused.",
                   [("", snap.key_reused)])
    out += _family("gitpub_channel_attempted", "counter", "Channel sends attempted.",
                   [(f'{{channel="{_label(c)}"}}', n) for c, n in sorted(snap.attempted.items())])
    out += _family("gitpub_channel_confirmed", "counter", "Channel sends confirmed.",
                   [(f'{{channel="{_label(c)}"}}', n) for c, n in sorted(snap.confirmed.items())])
    out += _family("gitpub_unreadable_jobs", "gauge", "Jobs whose state cannot be read.",
                   [("", snap.unreadable)])
    return "\n".join(out) + "\n"
