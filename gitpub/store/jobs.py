"""The job store: one ref per job under ``refs/pub/jobs/``, moved only by compare-and-swap.

Each ref points at the job's latest *state commit*. A state commit's tree holds::

    job.json          the versioned job record (see ``record``)
    source/…          the sanitized input, as received
    artifacts/…       every file the job will write, at its repository path (immutable once READY)
    manifest          the canonical manifest of the artifacts

and its first parent is the previous state commit, so ``git log --first-parent refs/pub/jobs/ID``
is the job's event history: one commit per transition, its message saying why. A state commit
may have more parents: the job's content commit is made a parent of the state commit that
records it, which is what keeps it alive and makes "commit made" and "state recorded" one atomic
step (one ref update).

Write order is always objects (fsynced) → one ``set_if_equals`` on the job's ref. A writer that
loses the swap gets ``LostRace`` and re-reads; nothing it wrote is reachable, so nothing is
half-done. The job id is derived from the idempotency key (uuid5), so "a key maps to exactly one
job" is the atomicity of creating one ref: two racers on one key race on the same ref name.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import NamedTuple

from gitpub.core.errors import CorruptStateError, GitpubError, LostRace, TryLaterError
from gitpub.core.record import JobRecord, Lease, RecordError, parse_record
from gitpub.core.sanitize import sanitize
from gitpub.core.states import RESTING, TERMINAL, Stage, State, check_transition
from gitpub.git.catfile import GitTooOld
from gitpub.git.refs import ANY_VALUE
from gitpub.git.repo import MODE_FILE, CommitInfo, Entry, RefUpdate, Repository
from gitpub.store.lease import Worker, held_by_other, shown_owner

JOBS_PREFIX = "refs/pub/jobs/"
#: An index of the jobs not yet finished, so that status, push and reconcile cost what is
#: unfinished, not the whole store. Created before a job's ref and removed only after it reached
#: a terminal state, it is always a superset of the unfinished jobs; a stale entry is skipped
#: and cleaned up lazily. Derived data: never the truth about a job.
ACTIVE_PREFIX = "refs/pub/active/"
#: Local states of a job that lost to the remote's (same request, another node's history): kept
#: for inspection (``git log``), never read by gitpub.
SUPERSEDED_PREFIX = "refs/pub/superseded/"
#: The jobs whose channel distribution is not settled (``gitpub.channels.state`` keeps it; named
#: here so that ``status`` can tell without loading the channel code that there is none).
DISTRIBUTING_PREFIX = "refs/pub/distributing/"
#: What a publishing command lists once, at its start, and keeps (``git.refs``,
#: ``local_prefixes``): every move of these refs is a compare-and-swap here.
KEPT_PREFIXES = (ACTIVE_PREFIX, JOBS_PREFIX, DISTRIBUTING_PREFIX)
_JOB_NAMESPACE = "6f1c2f0e-5b1e-4c55-9a43-3c8f9d0e7a21"
EVENT_VERSION = 1


def job_id_for_key(key: str) -> str:
    """The job id a key names: deterministic, so every writer agrees on it without a lookup."""
    return str(uuid.uuid5(uuid.UUID(_JOB_NAMESPACE), key))


class Job(NamedTuple):
    """A job as read from the store: its record and where that record lives (a frozen value,
    as the git layer's)."""

    record: JobRecord
    commit: str  # the state commit the job's ref points at
    tree: str

    @property
    def job_id(self) -> str:
        return self.record.job_id

    @property
    def state(self) -> State:
        return self.record.state


class Event(NamedTuple):
    """One transition of a job's history: its state commit, when, from and to, and why."""

    commit: str
    time: float
    from_state: str | None
    to_state: str
    phase: str
    reason: str


def taken_over(old: Lease) -> str:
    """The event of a take-over: whose lease, and why it no longer held."""
    why = ("its lease expired" if old.expires_at <= time.time()
           else "its process is gone")
    return f"taken over from {shown_owner(old.owner)}: {why}"


class JobStore:
    """Jobs in one repository, written on behalf of one ``worker`` (lease holder).

    Every write renews the worker's lease on the job, and a write into a resting state releases
    it (see ``lease``).
    """

    def __init__(self, repo: Repository, worker: Worker | None = None, *,
                 keep_lease_in: frozenset[State] = frozenset()) -> None:
        self.repo = repo
        self.worker = worker or Worker.current()
        #: Resting states in which this worker keeps its lease because it goes on at once
        #: (``prepare --push``: no release-and-retake write between prepare and push).
        self.keep_lease_in = keep_lease_in

    @staticmethod
    def ref_name(job_id: str) -> str:
        return JOBS_PREFIX + job_id

    # -- reading ---------------------------------------------------------------------------

    def load(self, job_id: str, *, fresh: bool = False) -> Job | None:
        """The job, or None if there is no such ref. Unreadable state raises, naming the job.
        ``fresh``: its ref as it is now, where the command keeps it (``git.refs``: a read that
        decides a race)."""
        ref = self.ref_name(job_id)
        try:
            sha = self.repo.read_ref_now(ref) if fresh else self.repo.read_ref(ref)
        except CorruptStateError as e:
            raise self._unreadable(job_id, e) from None
        return None if sha is None else self._load_listed(job_id, sha)

    def _load_listed(self, job_id: str, sha: str) -> Job:
        """``load`` of a job whose ref was just listed at ``sha``."""
        try:
            return self._load_commit(job_id, sha)
        except CorruptStateError as e:
            raise self._unreadable(job_id, e) from None

    def _unreadable(self, job_id: str, e: CorruptStateError) -> CorruptStateError:
        return CorruptStateError(
            f"job {job_id}: state is unreadable: {e.message}",
            hint=f"nothing was changed; inspect `git log -p {self.ref_name(job_id)}` "
            "and repair or delete that ref")

    def load_at(self, job_id: str, sha: str) -> Job:
        """The job as state commit ``sha`` records it (another node's value of its ref, an
        archived final state). Unreadable state raises, naming the job."""
        try:
            return self._load_commit(job_id, sha)
        except CorruptStateError as e:
            raise CorruptStateError(f"job {job_id}: state commit {sha} is unreadable: "
                                    f"{e.message}", hint="`git fsck` lists the damage") from None

    def _load_commit(self, job_id: str, sha: str) -> Job:
        info = self.repo.commit(sha)
        entry = self.repo.lookup(info.tree, "job.json")
        if entry is None:
            raise CorruptStateError(f"state commit {sha} has no job.json")
        try:
            record = parse_record(self.repo.blob(entry.sha))
        except RecordError as e:
            raise CorruptStateError(f"{e} (in state commit {sha})") from None
        if record.job_id != job_id:
            raise CorruptStateError(f"record names job {record.job_id!r}, not {job_id!r}")
        return Job(record, sha, info.tree)

    def job_ids(self) -> list[str]:
        """Every job's id, a job whose ref file is damaged included."""
        return self.repo.ref_names(JOBS_PREFIX)

    def iter_jobs(self, *, finished: bool = True,
                  tidy: bool = True) -> Iterator[Job | CorruptStateError]:
        """Every job (``finished=False``: only those not yet terminal, from the active index);
        an unreadable one is yielded as its error so callers can go on. ``tidy=False`` writes
        nothing (a dry run): stale index entries are skipped but not removed."""
        active = self.repo.list_refs(ACTIVE_PREFIX) if not finished else {}
        # Every job ref in one listing (all of them, or the active ones in batches): a ref
        # read per job costs a git each, and git reads the whole refs/pub/jobs/ directory for
        # each (quadratic in loose job refs). A ref the listing leaves out (damaged, or made
        # since) is read on its own, as ``load`` reads it.
        ids = self.job_ids() if finished else sorted(active)
        listed = {JOBS_PREFIX + k: v for k, v in self.repo.list_refs(JOBS_PREFIX).items()} \
            if finished else self._read_refs(ids)
        for job_id in ids:
            try:
                sha = listed.get(self.ref_name(job_id))
                job = self.load(job_id) if sha is None else self._load_listed(job_id, sha)
            except CorruptStateError as e:
                yield e
                continue
            except (TryLaterError, GitTooOld):
                raise  # a git that does not answer (now), or cannot: no verdict on any job
            except Exception as e:  # whatever the damage, it is this job's, not the listing's
                yield CorruptStateError(f"job {job_id}: state cannot be read: "
                                        f"{type(e).__name__}: {e}")
                continue
            if job is None:
                continue  # being created right now, or a creator died before the job ref
            if not finished and job.state in TERMINAL:
                if tidy:
                    with contextlib.suppress(GitpubError):  # a stale entry: cleaned up lazily
                        self.repo.delete_ref(ACTIVE_PREFIX + job_id, active[job_id])
                continue
            yield job

    def _read_refs(self, ids: Sequence[str]) -> dict[str, str]:
        """The refs of the jobs ``ids`` that read well, in one ``for-each-ref`` per thousand
        (a ref moved after it is read is a compare-and-swap that fails later, as when it moves
        after its own read)."""
        known: dict[str, str] = {}
        for i in range(0, len(ids), 1000):
            known.update(self.repo.read_together([self.ref_name(j) for j in ids[i:i + 1000]]))
        return known

    def rebuild_index(self, jobs: Iterable[Job]) -> list[str]:
        """Make the active index list every unfinished job of ``jobs`` (read from their refs);
        the ids of those it had lost. A finished job's entry goes (see ``iter_jobs``)."""
        active = self.repo.list_refs(ACTIVE_PREFIX)
        added = []
        for job in jobs:
            if job.state in TERMINAL or job.job_id in active:
                continue
            with contextlib.suppress(GitpubError):
                if self.repo.cas_ref(ACTIVE_PREFIX + job.job_id, None, job.commit,
                                     "gitpub: active (re-indexed)"):
                    added.append(job.job_id)
        return added

    def read_file(self, job: Job, path: str) -> bytes | None:
        entry = self.repo.lookup(job.tree, path)
        return None if entry is None else self.repo.blob(entry.sha)

    def subtree(self, job: Job, path: str) -> str | None:
        entry = self.repo.lookup(job.tree, path)
        return None if entry is None else entry.sha

    def history(self, job: Job) -> list[Event]:
        """The job's events, oldest first."""
        events = [self._event(info) for info in self.repo.first_parent_chain(job.commit)]
        events.reverse()
        return events

    @staticmethod
    def _event(info: CommitInfo) -> Event:
        _, _, body = info.message.partition(b"\n\n")
        try:
            data = json.loads(body.decode("utf-8"))
            return Event(info.sha, float(data["time"]), data.get("from"), str(data["to"]),
                         str(data.get("phase", "")), str(data.get("reason", "")))
        except (ValueError, KeyError, TypeError):
            subject = info.message.split(b"\n", 1)[0].decode("utf-8", "replace")
            return Event(info.sha, info.commit_time, None, "?", "", subject)

    # -- leases ----------------------------------------------------------------------------

    def held_by_other(self, job: Job) -> bool:
        return held_by_other(job.record.lease, self.worker)

    def acquire(self, job: Job) -> Job | None:
        """``job`` with our lease on it, or None when another live worker holds it (or took it
        while we tried): then leave the job alone."""
        if self.worker.holds(job.record.lease):
            return job
        if self.held_by_other(job):
            return None
        old = job.record.lease
        reason = "lease taken" if old is None else taken_over(old)
        try:
            return self._write(job, job.record, {}, {}, (), Stage.LEASE, reason,
                               keep_lease=True)
        except LostRace:
            return None

    # -- writing ---------------------------------------------------------------------------

    def create(self, record: JobRecord, files: Mapping[str, bytes], reason: str,
               keep_alive: Sequence[str] = ()) -> Job:
        """Record a new job; ``LostRace`` if a job with this id already exists. ``keep_alive``
        commits become parents of the first state commit (a sync job's hand commit)."""
        return self._write(None, record, files, {}, keep_alive, Stage.RECEIVED, reason)

    def transition(
        self,
        job: Job,
        record: JobRecord,
        *,
        phase: Stage,
        reason: str,
        files: Mapping[str, bytes] | None = None,
        entries: Mapping[str, Entry | None] | None = None,
        keep_alive: Sequence[str] = (),
        keep_lease: bool | None = None,
    ) -> Job:
        """Advance ``job`` to ``record`` by one compare-and-swap; ``LostRace`` if it moved.

        The lease is renewed, or released when the job comes to rest (``keep_lease`` overrides:
        a worker that goes on with the job at once keeps it).
        """
        check_transition(job.state, record.state)
        if keep_lease is None:
            keep_lease = record.state not in RESTING or record.state in self.keep_lease_in
        return self._write(job, record, files or {}, entries or {}, keep_alive, phase, reason,
                           keep_lease=keep_lease)

    def _write(
        self,
        prev: Job | None,
        record: JobRecord,
        files: Mapping[str, bytes],
        entries: Mapping[str, Entry | None],
        keep_alive: Sequence[str],
        phase: Stage,
        reason: str,
        *,
        keep_lease: bool = True,
    ) -> Job:
        staged = self._stage(prev, record, files, entries, keep_alive, phase, reason,
                             keep_lease=keep_lease)
        return self.advance(prev, staged)

    def stage(self, job: Job, record: JobRecord, *, phase: Stage, reason: str,
              keep_lease: bool | None = None, files: Mapping[str, bytes] | None = None) -> Job:
        """The state commit that would record ``record`` (and ``files``) after ``job``, written
        (objects only, durable) but not recorded: nothing points at it until ``advance`` (or a
        push that moves the job's ref on the remote — the atomic delivery sends it with the
        content, a channel write sends it first)."""
        check_transition(job.state, record.state)
        if keep_lease is None:
            keep_lease = record.state not in RESTING or record.state in self.keep_lease_in
        return self._stage(job, record, files or {}, {}, (), phase, reason,
                           keep_lease=keep_lease)

    def _stage(self, prev: Job | None, record: JobRecord, files: Mapping[str, bytes],
               entries: Mapping[str, Entry | None], keep_alive: Sequence[str], phase: Stage,
               reason: str, *, keep_lease: bool) -> Job:
        now = time.time()
        record = record.evolve(updated_at=now,
                               lease=self.worker.lease(now) if keep_lease else None)
        with self.repo.batch():  # one round of fsyncs for all of this transition's objects
            commit, tree = self._objects(prev, record, files, entries, keep_alive, phase,
                                         reason, now)
        return Job(record, commit, tree)

    def advance(self, prev: Job | None, staged: Job) -> Job:
        """Record ``staged`` (a state commit whose first parent is ``prev``'s) as the job's
        state: one compare-and-swap of its ref; ``LostRace`` if it moved."""
        record = staged.record
        ref = self.ref_name(record.job_id)
        active = ACTIVE_PREFIX + record.job_id
        move = RefUpdate(ref, staged.commit, None if prev is None else prev.commit)
        message = f"gitpub: {record.state.value}"
        # The index entry and the job's ref in one transaction where they can be (one git
        # fewer): created with a new job, deleted with its terminal state. When the entry is
        # not as expected (it exists already, or moved), each on its own, as before: the entry
        # first, the job's ref, then the entry goes.
        if prev is None:
            if self.repo.update_refs([RefUpdate(active, staged.commit, None), move], message):
                return staged
            self.repo.cas_ref(active, None, staged.commit, "gitpub: active")  # before the job
        elif record.state in TERMINAL:
            # The entry goes with the terminal state, whatever it holds (derived data): no
            # read of it first. A damaged entry makes git refuse the pair: then the state
            # first, and the entry is reported afterwards.
            with contextlib.suppress(CorruptStateError):
                if self.repo.update_refs([move, RefUpdate(active, None, ANY_VALUE)], message):
                    return staged
        if not self.repo.update_refs([move], message):
            raise LostRace(ref)
        if record.state in TERMINAL:
            self._unindex(record.job_id)
        return staged

    def _unindex(self, job_id: str) -> None:
        active = ACTIVE_PREFIX + job_id
        current = self.repo.read_ref(active)
        if current is not None:
            self.repo.delete_ref(active, current)

    def adopt(self, job_id: str, local: str | None, value: str) -> Job:
        """Make the job's ref here ``value`` — its state as another node recorded it on the
        remote (no new commit: the remote's history becomes this job's) — by compare-and-swap
        from ``local`` (None: no such job here yet); ``LostRace`` if it moved meanwhile."""
        job = self.load_at(job_id, value)
        active = ACTIVE_PREFIX + job_id
        if job.state not in TERMINAL and self.repo.read_ref(active) is None:
            self.repo.cas_ref(active, None, value, "gitpub: active (adopted)")
        if not self.repo.cas_ref(self.ref_name(job_id), local, value, "gitpub: adopted"):
            raise LostRace(self.ref_name(job_id))
        if job.state in TERMINAL:
            self._unindex(job_id)
        return job

    def keep_superseded(self, job: Job) -> str:
        """Keep ``job``'s state (about to be replaced by the remote's) under an inspectable
        ref, ``refs/pub/superseded/<id>/<commit>``; its name."""
        name = f"{SUPERSEDED_PREFIX}{job.job_id}/{job.commit[:12]}"
        self.repo.cas_ref(name, None, job.commit, "gitpub: superseded by the remote's state")
        return name

    def _objects(self, prev: Job | None, record: JobRecord, files: Mapping[str, bytes],
                 entries: Mapping[str, Entry | None], keep_alive: Sequence[str], phase: Stage,
                 reason: str, now: float) -> tuple[str, str]:
        """Write a state commit's objects; (commit, tree). Nothing points at them yet."""
        changes: dict[str, Entry | None] = dict(entries)
        for path, data in files.items():
            changes[path] = Entry(MODE_FILE, self.repo.write_blob(data))
        changes["job.json"] = Entry(MODE_FILE, self.repo.write_blob(record.to_json()))
        tree = self.repo.write_tree(None if prev is None else prev.tree, changes)
        reason = sanitize(reason)
        event = {
            "v": EVENT_VERSION,
            "from": None if prev is None else prev.state.value,
            "to": record.state.value,
            "phase": str(phase),
            "reason": reason,
            "time": now,
        }
        summary = " ".join(reason.split())[:72]
        message = f"{record.state.value}: {phase}: {summary}\n\n{json.dumps(event)}\n".encode()
        gone = [sha for sha in keep_alive if not self.repo.still_has(sha)]
        if gone:  # recorded, it would be a broken link in the job's history for good
            raise TryLaterError(
                f"object {gone[0]}, written by this command, is gone before it was recorded "
                "(a `git gc --prune=now` meanwhile?): nothing was recorded",
                hint="run the command again: it is written anew")
        parents = ([] if prev is None else [prev.commit]) + list(keep_alive)
        commit = self.repo.write_commit(tree, parents, message, when=int(now))
        return commit, tree
