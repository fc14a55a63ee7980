"""Delivery against the shared job store: the remote's job refs are the truth about each job.

Every job that reaches delivery has a ref on the remote, ``refs/pub/jobs/<id>``: its latest
state commit (the same objects as here: the whole event history travels). Every move of it is
a compare-and-swap, ``git push --force-with-lease=refs/pub/jobs/<id>:<the value this node last
saw>`` (empty: it must not exist yet), so the remote orders all writers of a job:

- **sync** (each round, after the fetch): this clone's value against the remote's
  (``store.shared.Relation``) — the same or ahead here: nothing to do; the remote ahead:
  fast-forward here (another node moved the job on); diverged: the remote's is the truth —
  another request under the same key is ``key_reused`` (REVIEW, exit 3, never pushed), the
  same request adopts the remote's value and keeps ours under ``refs/pub/superseded/``;
- **claim** (before the rebase and the push, never at prepare): push the state that carries
  our lease (holder ``host:pid:start``, expiry ``lease_seconds`` ahead). A claim that loses its
  compare-and-swap has lost the job: fetch, sync, stop — this node writes that job no more in
  this run (fencing: a paused or stale node never overwrites a newer state). A job whose lease
  on the remote is another live worker's is left alone (another host's lease counts by its
  expiry only; on this host a dead process frees it at once);
- **the atomic delivery**: one ``git push --atomic`` of the content (a plain fast-forward of
  the branch) and the PUBLISHED state (with the claim as its lease): the article and the record
  of its publication land together or not at all;
- **without atomic push** (a server that does not advertise it), with a warning: the PUSHING
  state first (compare-and-swap on the claim), then the content, then PUBLISHED — each step a
  compare-and-swap. A crash between leaves PUSHING on the remote (an unknown outcome), and
  whoever goes on with the job — this node again or one that took it over — probes the branch
  before anything else, so nothing is pushed twice: the branch's fast-forward and the probe of
  the very tip a push builds on already exclude a second publication.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CorruptStateError, GitpubError, LostRace, UsageError
from gitpub.core.record import Lease
from gitpub.core.sanitize import sanitize
from gitpub.core.states import (
    ALLOWED,
    NEEDS_PERSON,
    SETTLED,
    TERMINAL,
    FailureCode,
    Kind,
    Stage,
    State,
)
from gitpub.delivery.checkout import is_ancestor
from gitpub.git.push import PushOutcome, PushResult, Update
from gitpub.git.remote import Remote, RemoteConfigError, RemoteError
from gitpub.runtime.context import Context
from gitpub.store.fetch import fetch_with_store, note_pushed
from gitpub.store.jobs import JOBS_PREFIX, Job
from gitpub.store.lease import held_by_other, shown_owner
from gitpub.store.mirror import store_prefix
from gitpub.store.shared import Relation, SharedView
from gitpub.verify.commit import verify_commit
from gitpub.verify.content import record_content_problems
from gitpub.verify.probe import job_prefixes

#: A claim is renewed before a push when less than this share of its lease is left.
RENEW_BELOW = 0.5
NO_OBJECT = "0" * 40  # what pre-push reads as the old value of a ref the remote lacks


class StoreRefusedError(RemoteConfigError):
    """The remote refuses gitpub's job store (``refs/pub/*``): nothing can be delivered safely
    until it accepts it (exit 2, no attempt used)."""


def damaged_archive_line(remote: str, value: str) -> str:
    """What a command says of a remote archive that is no archive (``Shared.fetch``)."""
    what = "is gone" if not value else f"is no archive ({value[:12]})"
    return (f"refs/pub/archive on {sanitize(remote)} {what}: the last good archive is kept "
            "here and used; nothing is folded until `git pub doctor --fix` puts it back")


def remote_ref(job_id: str) -> str:
    """The job's ref on the remote (the same name as here)."""
    return JOBS_PREFIX + job_id


@dataclass
class Shared:
    """The remote job store, for one command: what it fetched, claimed and lost."""

    ctx: Context
    remote: Remote
    view: SharedView = field(init=False)
    #: Jobs this node lost a compare-and-swap on, and why: not written again in this run.
    lost: dict[str, str] = field(default_factory=dict)
    #: Jobs left to the live worker that holds them on the remote: job id -> its holder.
    held: dict[str, str] = field(default_factory=dict)
    #: Jobs whose state came from another node's record (their channels are not ours).
    adopted: set[str] = field(default_factory=set)
    #: The value this node last put on the remote for a job, in this run.
    pushed: dict[str, str] = field(default_factory=dict)
    #: Remote jobs that cannot be read (another clone's damage, a forgery): reported.
    damaged: list[CorruptStateError] = field(default_factory=list)
    atomic: bool = True  # until the server says it does not support it
    fetched: bool = False
    #: The remote's ``refs/pub/archive`` when it is no archive ("": gone): the last good one
    #: stays here (``store.fetch.keep_good_archive``), and nothing folds onto the remote's.
    damaged_archive: str | None = None

    def __post_init__(self) -> None:
        self.view = SharedView(self.ctx.store, store_prefix(self.remote),
                               sanitize(self.remote.remote))

    # -- reading the remote ------------------------------------------------------------------

    def fetch(self) -> str | None:
        """Fetch the branch and the job store; the branch's tip (None: no such branch). A
        remote archive that is no archive is said, once per command, and otherwise ignored."""
        fetched = fetch_with_store(self.remote)
        if fetched.damaged_archive is not None and self.damaged_archive is None:
            self.ctx.progress(damaged_archive_line(self.remote.remote, fetched.damaged_archive))
        self.damaged_archive = fetched.damaged_archive
        self.fetched = True
        return fetched.tip

    def remote_value(self, job_id: str) -> str | None:
        return self.view.remote_value(job_id)

    def held_elsewhere(self, job: Job) -> bool:
        """Whether another live worker holds the job on the remote (leave it alone)."""
        sha = self.view.remote_value(job.job_id)
        if sha is None:
            return False
        theirs = job if sha == job.commit else self.view.load(job.job_id, sha)
        lease = theirs.record.lease
        if lease is not None and self._held_by_other(lease):
            self.held[job.job_id] = lease.owner
            return True
        return False

    def _held_by_other(self, lease: Lease) -> bool:
        """A remote lease another live worker holds. One of this very process (an earlier
        command run in it, whose claim outlived its local lease) is ours."""
        worker = self.ctx.store.worker
        return lease.owner != worker.owner and held_by_other(lease, worker)

    # -- sync --------------------------------------------------------------------------------

    def sync(self, job: Job) -> Job:
        """This clone's value of the job reconciled with the remote's (see the module
        docstring). A job moved on the remote by someone else after we wrote it in this run
        has been lost: it is adopted and marked lost."""
        job_id = job.job_id
        theirs = self.view.remote_value(job_id)
        if theirs is None:
            entry = self.view.archived(job_id)
            theirs = None if entry is None else entry.state_commit
        mine = self.pushed.get(job_id)
        if mine is not None and theirs != mine and job_id not in self.lost:
            self.lost[job_id] = "another node moved it on the remote"
            self.ctx.progress(f"{job_id[:13]}: another node moved it on the remote since this "
                              "node wrote it; this node leaves it")
        relation = self.view.relation(job.commit, theirs)
        if relation in (Relation.SAME, Relation.LOCAL_AHEAD, Relation.LOCAL_ONLY):
            return job
        assert theirs is not None
        other = self.view.load(job_id, theirs)
        if other.state == State.PUBLISHED and not self._proven(other):
            return job  # a record is no proof: the claim replaces it by compare-and-swap
        if self._our_publication(job, other):
            return self.ctx.store.adopt(job_id, job.commit, theirs)
        if relation == Relation.REMOTE_AHEAD:
            return self._adopt(job, theirs, None)
        if other.record.request_hash != job.record.request_hash:
            return self._key_reused(job, other)
        kept = self.ctx.store.keep_superseded(job)
        return self._adopt(job, theirs, kept)

    def _adopt(self, job: Job, theirs: str, kept: str | None) -> Job:
        fresh = self.ctx.store.adopt(job.job_id, job.commit, theirs)
        self.adopted.add(job.job_id)
        if kept is not None:
            self.ctx.progress(f"{job.job_id[:13]}: the remote's state of this job replaces "
                              f"this clone's ({fresh.state.value}, kept as {kept})")
        return fresh

    def _our_publication(self, job: Job, other: Job) -> bool:
        """Whether the remote's state is only our own delivery whose outcome this clone did
        not record (the atomic push landed; the reply was lost or the process died): the
        PUBLISHED state staged on top of one of our PUSHING states. What we recorded after it
        (RETRY_WAIT: outcome unknown) is simply overtaken."""
        if other.state != State.PUBLISHED:
            return False
        parents = self.repo_commit_parents(other.commit)
        if not parents:
            return False
        pushing = parents[0]
        if pushing != job.commit and not self.view.descends(job.commit, pushing):
            return False
        return self.ctx.store.load_at(job.job_id, pushing).state == State.PUSHING

    def _proven(self, other: Job) -> bool:
        """Whether the remote's PUBLISHED state of a job is true: its ``remote_commit`` is on
        the fetched branch and is the job's publication (trailers and content,
        ``verify.commit``; a job that went to review: or by content, ``verify.content``). A
        record alone proves nothing (BRIEF §3: anyone who may push
        ``refs/pub/*`` can write one); an unproven one is not adopted, and the job goes on."""
        repo, record = self.ctx.repo, other.record
        commit, tip = record.remote_commit, repo.read_ref(self.remote.tracking_ref)
        try:
            if commit is not None and tip is not None and repo.has_object(commit) and \
                    is_ancestor(repo, commit, tip):
                prefixes = job_prefixes(repo, record, self.ctx.config.trailer_prefix)
                verdict = verify_commit(repo, commit, prefixes)
                if verdict is not None and verdict.ok and verdict.job_id == other.job_id \
                        and verdict.manifest_sha256 == record.manifest_sha256:
                    return True
                if verdict is None and record.review is not None and not \
                        record_content_problems(repo, commit, record,
                                                self.ctx.store.read_file(other, "manifest")):
                    return True  # merged through review under the forge's own message
        except GitpubError:
            pass  # not a commit, unreadable: no proof either
        self.ctx.progress(f"{other.job_id[:13]}: the remote's record says PUBLISHED as "
                          f"{sanitize(str(commit))[:40]}, which is not the job's publication "
                          f"on {self.remote.remote}/{self.remote.branch}: ignored")
        return False

    def repo_commit_parents(self, sha: str) -> tuple[str, ...]:
        return self.ctx.repo.commit(sha).parents

    def _key_reused(self, job: Job, other: Job) -> Job:
        """The key names another request on the remote: this clone's job stops (REVIEW,
        ``key_reused``) and is never pushed."""
        self.lost[job.job_id] = "the key names another request on the remote"
        record = job.record
        if job.state in TERMINAL or (job.state in NEEDS_PERSON and \
                record.failure_code == FailureCode.KEY_REUSED):
            return job
        if State.REVIEW not in _reachable(job.state):
            return job
        detail = (f"the remote's job {job.job_id} (node {sanitize(other.record.node)}, "
                  f"{other.state.value}) is another request under the same key")
        return self.ctx.store.transition(
            job, record.evolve(state=State.REVIEW, failure_code=FailureCode.KEY_REUSED,
                               failure_detail=detail, next_retry_at=None),
            phase=Stage.PROBE, reason=detail)

    # -- claims ------------------------------------------------------------------------------

    def claim(self, job: Job) -> Job | None:
        """The job claimed on the remote by this worker (its lease pushed with its state);
        None when the claim lost its compare-and-swap (the job is someone else's now: synced
        and marked lost). ``job`` carries our lease (``JobStore.acquire``)."""
        theirs = self.view.remote_value(job.job_id)
        if theirs is not None and self._claimed_by_us(theirs, job):
            return job
        if theirs == job.commit:  # ours, but the lease runs out: renew it
            job = self.ctx.store.transition(job, job.record, phase=Stage.LEASE,
                                            reason="lease renewed", keep_lease=True)
        outcome = self._push_state(job.job_id, theirs, job.commit)
        if outcome.result == PushResult.SENT:
            crash_point("delivery.claimed")
            return job
        if outcome.result == PushResult.UNKNOWN:
            raise RemoteError(f"claim of job {job.job_id} on the remote: {outcome.detail}")
        if not self._moved(job.job_id, theirs):
            raise RemoteError(f"the remote refused the claim of job {job.job_id}, and no other "
                              f"node has it there: {outcome.detail}")
        self._lose(job, f"its claim on the remote lost to another node ({outcome.detail})")
        return None

    def _moved(self, job_id: str, seen: str | None) -> bool:
        """Whether the job's remote ref is no longer ``seen`` (fetched now): a claim refused
        as a race was lost to another node only then. Otherwise the server refuses the ref
        for another reason (a ref named ``refs/pub/jobs`` blocks every job ref, a lock it
        keeps): a transient with the server's words, not a lost job."""
        self.fetch()
        return self.view.remote_value(job_id) != seen

    def _claimed_by_us(self, theirs: str, job: Job) -> bool:
        other = job if theirs == job.commit else self.view.load(job.job_id, theirs)
        lease = other.record.lease
        worker = self.ctx.store.worker
        left = 0.0 if lease is None else lease.expires_at - time.time()
        return worker.holds(lease) and left > worker.seconds() * RENEW_BELOW

    def _lose(self, job: Job, why: str) -> None:
        """Fenced: fetch, sync (adopt the winner's state or stop on another request)."""
        self.lost[job.job_id] = why
        self.ctx.progress(f"{job.job_id[:13]}: {why}; this node leaves it")
        try:
            self.fetch()
            self.sync(self.ctx.store.load(job.job_id) or job)
        except (RemoteError, LostRace):
            pass  # the next run syncs it

    def _push_state(self, job_id: str, expected: str | None, value: str) -> PushOutcome:
        ref = remote_ref(job_id)
        pushed = self.remote.push_updates([Update(ref, value, expected or "")], verify=False)
        outcome = pushed.of(ref)
        if outcome.result == PushResult.SENT:
            self._note(job_id, expected, value)
        elif outcome.result == PushResult.REJECTED:
            raise self._refused(outcome)
        return outcome

    def _note(self, job_id: str, old: str | None, new: str | None) -> None:
        if new is not None:
            self.pushed[job_id] = new
        note_pushed(self.remote, "jobs/" + job_id, old, new)

    def _refused(self, outcome: PushOutcome) -> StoreRefusedError:
        return StoreRefusedError(
            f"the remote {sanitize(self.remote.remote)!r} refuses gitpub's job store "
            f"(refs/pub/*): {outcome.detail}",
            hint="allow pushes to refs/pub/* for this account (gitpub keeps job state there); "
                 "no delivery attempt was used")

    # -- delivering --------------------------------------------------------------------------

    def deliver(self, pushing: Job, commit: str, published: Job, *,
                verified_onto: str | None = None, content: Update | None = None
                ) -> PushOutcome:
        """Push ``commit`` (the branch's new tip) and ``published`` (the staged PUBLISHED
        state, child of ``pushing``) — atomically, or in the documented order without atomic
        push. SENT means the content is on the branch. ``verified_onto``: the remote tip over
        which the caller verified ``commit`` (its pre-push hook need not check it again).
        ``content``: another update of the content than the branch's fast-forward (delivery
        through review: the job's review branch, by compare-and-swap; ``published`` is then
        the staged IN_REVIEW state)."""
        ref = remote_ref(pushing.job_id)
        claimed = self.view.remote_value(pushing.job_id)
        if content is None:
            content = Update(f"refs/heads/{self.remote.branch}", commit)
        if self.atomic:
            branch = content.dst
            verified = None if verified_onto is None else \
                {branch: verified_onto, ref: claimed or NO_OBJECT}  # the state ref is ours
            pushed = self.remote.push_updates(
                [content, Update(ref, published.commit, claimed or "")],
                atomic=True, verified=verified)
            if not pushed.atomic_unsupported:
                if pushed.result == PushResult.SENT:
                    self._note(pushing.job_id, claimed, published.commit)
                    return PushOutcome(PushResult.SENT, pushed.of(branch).detail)
                mine, theirs = pushed.of(ref), pushed.of(branch)
                if pushed.result == PushResult.REJECTED and not mine.collateral and \
                        theirs.collateral:
                    raise self._refused(mine)  # the job's ref itself, not the content
                refused = [o for o in (theirs, mine) if o.result != PushResult.SENT]
                worst = next((o for o in refused if not o.collateral), refused[0])
                return PushOutcome(pushed.result, worst.detail)
            self.atomic = False
            self.ctx.progress(f"warning: the remote {self.remote.remote} does not support "
                              "atomic pushes: pushing the job's state and the content one "
                              "after the other (claim, PUSHING, content, PUBLISHED)")
        return self._deliver_in_order(pushing, content, published, claimed, verified_onto)

    def _deliver_in_order(self, pushing: Job, update: Update, published: Job,
                          claimed: str | None, verified_onto: str | None) -> PushOutcome:
        job_id = pushing.job_id
        outcome = self._push_state(job_id, claimed, pushing.commit)
        if outcome.result != PushResult.SENT:
            return outcome  # RACE: the next round's sync finds out who has it
        crash_point("shared.pushing-pushed")
        verified = None if verified_onto is None else {update.dst: verified_onto}
        content = self.remote.push_updates([update], verified=verified).of(update.dst)
        if content.result != PushResult.SENT:
            return content
        crash_point("shared.content-pushed")
        with contextlib.suppress(RemoteError):  # the content is published: a PUSHING left on
            self._push_state(job_id, pushing.commit, published.commit)  # the remote is synced
        return content  # up later (``publish_states``) or probed by whoever goes on

    def publish_states(self, jobs: Sequence[Job]) -> list[str]:
        """Push each job's settled state here to the remote where it is newer than the
        remote's (this clone moved it on: a probe found it published, a person resolved it,
        a re-check skipped it) and nobody else holds it; one push, each ref its own
        compare-and-swap. Best effort: what does not go now goes on a later run. The ids
        pushed."""
        updates: list[tuple[Job, str | None]] = []
        for job in jobs:
            if job.job_id in self.lost or job.state not in SETTLED:
                continue
            theirs = self.view.remote_value(job.job_id)
            if theirs == job.commit:
                continue
            if theirs is None and self.view.archived(job.job_id) is not None:
                continue
            if theirs is not None and (not self.view.descends(job.commit, theirs)
                                       or self.held_elsewhere(job)):
                continue
            updates.append((job, theirs))
        if not updates:
            return []
        try:
            pushed = self.remote.push_updates(
                [Update(remote_ref(j.job_id), j.commit, t or "") for j, t in updates],
                verify=False)
        except RemoteConfigError:
            raise
        except RemoteError:
            return []
        done = []
        for job, theirs in updates:
            if pushed.of(remote_ref(job.job_id)).result == PushResult.SENT:
                self._note(job.job_id, theirs, job.commit)
                done.append(job.job_id)
        return done


    # -- take-over and lookup ----------------------------------------------------------------

    def orphans(self) -> list[Job]:
        """The remote's unfinished jobs that no live worker holds (their lease expired, or
        their holder's process on this host is gone), that this clone does not have yet and
        that wait for no person (REVIEW, CONFLICT and IN_REVIEW are nobody's dead work; a
        job in review is checked by its own node, or anywhere it is named: ``push JOB``) and
        that are no hand commit's (those follow their author's branch: only its clone goes on
        with them):
        adopted here and marked taken over (a local record only, ``JobStore.acquire``: the
        take-over reaches the remote with the claim, after the probe). Needs ``fetch``. A
        damaged remote job this clone does not have is not taken over: it goes to
        ``damaged``, to be reported (this clone's own is reported by its delivery)."""
        taken: list[Job] = []
        store = self.ctx.store
        # This clone's job refs (a damaged one included: the scan of this clone's jobs reports
        # it) in one listing, not a git per remote job (10,000 of them an older gitpub left
        # unfolded: minutes). A job adopted here since is a lost race for ``adopt``.
        here = set(store.job_ids())
        for job_id, item in self.view.remote_jobs():
            if job_id in here:
                continue  # this clone's own: reconciled (or reported) by ``sync``
            if isinstance(item, CorruptStateError):
                self.damaged.append(item)  # not taken over blindly
                continue
            if item.state in TERMINAL or item.state in NEEDS_PERSON or \
                    item.state == State.IN_REVIEW:
                continue  # finished, or resting for a person (who resolves or merges it)
            if item.record.kind == Kind.SYNC:
                # A hand commit's job follows what its author's branch holds now (the person
                # may have amended or dropped the commit): only the clone with that branch
                # can tell, so only its `git pub sync` goes on with it.
                self.ctx.progress(
                    f"{item.job_id[:13]}: a hand commit's job (node "
                    f"{sanitize(item.record.node)}, {item.state.value} on the remote) is not "
                    "taken over: it follows its author's branch, which only that clone has; "
                    "`git pub sync` there delivers it or supersedes it")
                continue
            lease = item.record.lease
            if lease is not None and self._held_by_other(lease):
                self.held[item.job_id] = lease.owner
                continue
            try:
                job = store.adopt(item.job_id, None, item.commit)
                acquired = store.acquire(job)
            except LostRace:
                continue  # someone here got there first
            if acquired is None:
                continue
            holder = "nobody" if lease is None else shown_owner(lease.owner)
            self.ctx.progress(f"{item.job_id[:13]}: taken over from {holder} "
                              f"({item.state.value} on the remote); probing first")
            taken.append(acquired)
        return taken

    def locate(self, ref: str) -> Job | None:
        """A job this clone does not have, by id or unique id prefix, from a fresh fetch of
        the remote's job store (its job refs, else the archive); None when the remote has no
        such job either. Raises ``RemoteError`` / ``RemoteConfigError``, and ``UsageError`` for
        a prefix that names several of the remote's jobs."""
        self.fetch()
        ids = [i for i in self.view.remote_ids() if i == ref or i.startswith(ref)]
        if ref in ids or len(ids) == 1:
            return self.view.remote_job(ref if ref in ids else ids[0])
        if len(ids) > 1:
            raise UsageError(f"job id prefix {sanitize(ref)!r} is ambiguous on the remote "
                             f"({len(ids)} jobs)", hint="give more of the job id")
        archived = self.view.archived_matching(ref)
        if len(archived) > 1:
            raise UsageError(f"job id prefix {sanitize(ref)!r} is ambiguous in the remote's "
                             f"archive ({len(archived)} jobs)", hint="give more of the job id")
        return self.view.archived_job(archived[0]) if archived else None


def _reachable(state: State) -> frozenset[State]:
    return ALLOWED[state] | {state}
