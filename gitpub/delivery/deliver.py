"""Delivery: LOCAL_COMMITTED → PUSHING → PUBLISHED, with every failure made explicit.

One round, for one job, under the per-repository delivery lock (the network segment only):

1. fetch the remote branch;
2. probe: if the remote history since the job's base has the job's publication — a commit with
   the job's id and manifest hash *whose content is the manifest's* (``verify.commit``) — the
   job is PUBLISHED, whatever we believed before (a lost push reply, a crash after the push, a
   person who pushed it by hand). Nothing is pushed twice. A publication of the job's id with
   other content means the key was used elsewhere: REVIEW (``key_reused``), and never a second
   commit with that id. A claim that is no publication (copied trailers) is ignored. A job
   whose base's own history was not searched yet (``pipeline.prepare``: a base that was not
   the remote's) has that search now, once;
3. re-check: new remote article changes whose fingerprint was not checked yet go once to the
   dedup judge (RECHECK_CANDIDATES: SKIP → SKIPPED, KEEP → go on, anything else → REVIEW);
4. compare-and-swap of the targets against the remote tip. An UPDATE target whose file another
   writer changed is merged three-way when the changes do not overlap (``pipeline.merging``:
   the merged content passes the gates again, a new manifest describes it, REVIEW when a gate
   fails); a remote that already holds every file as the job would leave it (the same edit
   made elsewhere) → SKIPPED (``already_on_remote``: nothing to publish, no empty commit); an
   overlapping change, binary content, or a NEW path that now exists with other content →
   CONFLICT: their version stays as it is;
5. rebase in memory: the job's files written onto the remote tip's tree (the targets passed their
   CAS, so this *is* the three-way merge), a new commit with the same message and trailers
   (a new manifest hash after a merge or a font regeneration);
6. record PUSHING with that exact commit, *then* push it as a fast-forward (never forced);
7. sent (the remote's own report says the branch is now at our commit) → confirm the
   trailers on that commit → PUBLISHED; rejected as not-a-fast-forward → another round
   (bounded); unknown (network error, timeout, lost reply) or any other failure → RETRY_WAIT with
   exponential backoff and jitter, FAILED(delivery_exhausted) when the attempt budget is spent.

An attempt is used only by a delivery that is due: a RETRY_WAIT job whose backoff has not ended
(or a FAILED one between its hourly probes) is only probed (a lost reply is recognised early),
and a failed fetch leaves it exactly as it is — unless it is named on the command line, or the
remote's URL changed since the failed attempt (then it is due now).
A remote that cannot work as configured (``RemoteConfigError``: no such remote, not a
repository, credentials refused) is not a transient: it propagates, no attempt is used, and a job
whose push the remote refused that way goes back to LOCAL_COMMITTED (nothing was sent).

A FAILED job is only probed afterwards (step 2, at most hourly unless asked for by name), never
rebuilt. Steps 3 to 7 run under the job's lease; a worker that lost it stops at its next write.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field

from gitpub.config.model import font_outputs
from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CorruptStateError, LostRace, UsageError
from gitpub.core.manifest import Manifest, ManifestEntry, ManifestError, content_sha256
from gitpub.core.record import JobRecord
from gitpub.core.sanitize import sanitize
from gitpub.core.states import LOCAL, SETTLED, Answer, FailureCode, Kind, Phase, Stage, State
from gitpub.delivery.checkout import fast_forward_local
from gitpub.delivery.lock import delivery_lock
from gitpub.delivery.review import Reviewer, by_content
from gitpub.delivery.shared import Shared
from gitpub.git.remote import PushResult, Remote, RemoteConfigError, RemoteError, default_branch
from gitpub.git.repo import MODE_FILE, Entry
from gitpub.pipeline.commit import (
    Artifacts,
    change_problems,
    read_artifacts,
    rebuild_commit,
    target_problems,
    unsound_base,
)
from gitpub.pipeline.history import first_history_check
from gitpub.pipeline.jobs import reload, to_review
from gitpub.pipeline.merging import Merged, Present, Review, merge_edits
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job
from gitpub.verify.commit import DEFAULT_PREFIX, Verdict, verify_commit
from gitpub.verify.probe import ProbeResult, probe

S = State
#: Rebase rounds one run may spend racing other writers before backing off.
MAX_REBASE_ROUNDS = 8
#: How often a FAILED job is probed when nobody asks for it by name.
FAILED_PROBE_INTERVAL = 3600.0
DELIVERABLE = frozenset({S.LOCAL_COMMITTED, S.RECHECK_CANDIDATES, S.PUSHING, S.RETRY_WAIT,
                         S.FAILED})
#: What a push looks at besides the deliverable jobs: requests waiting for review (checked).
PUSHABLE = DELIVERABLE | {S.IN_REVIEW}


class BranchMissingError(UsageError):
    """The configured branch does not exist on the remote: a push would create it. Never done
    unasked (a wrong ``branch:`` would publish into a new branch nobody reads); the job is left
    as it was and the command stops with the usage exit code."""


def parentless(remote: Remote, job: Job) -> BranchMissingError:
    """``--create-branch`` for a job prepared on no base: its commit has no parent, and a
    branch started from it would hold nothing but the job's files (issue 24 point 4)."""
    return BranchMissingError(
        f"--create-branch: job {job.job_id[:13]} was prepared on no base, so "
        f"{sanitize(remote.remote)}/{sanitize(remote.branch)} would start from a commit without "
        "a parent, holding only the job's files; no branch was created",
        hint=f"create the branch from your history first (`git push {sanitize(remote.remote)} "
             f"HEAD:{sanitize(remote.branch)}`), then `git pub resolve {job.job_id[:13]} "
             "--abandon` and prepare the article again")


def branch_missing(remote: Remote) -> BranchMissingError:
    actual = default_branch(remote.repo, remote.remote)
    fix = (f"the remote's default branch is {actual!r}: set `branch: {actual}` in .gitpub.yaml"
           if actual and actual != remote.branch else "check `branch:` in .gitpub.yaml")
    return BranchMissingError(
        f"the remote {remote.remote!r} has no branch {remote.branch!r}: nothing was pushed",
        hint=f"{fix}; to create the branch, run `git pub push --create-branch`")


def backoff(attempt: int, base: float, cap: float, jitter: float) -> float:
    """Seconds to wait after the ``attempt``-th failure: exponential, capped, jittered."""
    delay = min(cap, base * 2 ** max(0, attempt - 1))
    return float(max(0.0, delay * (1 + jitter * random.uniform(-1, 1))))


@dataclass
class Deliverer:
    ctx: Context
    remote: Remote
    now_please: bool = False  # the user named the jobs: retry and probe now, not when due
    create_branch: bool = False  # the user asked for the branch to be created if missing
    notes: dict[str, str] = field(default_factory=dict)  # job id -> what happened locally
    #: job id -> commits on the remote that carry its id and are not its publication
    forged: dict[str, tuple[str, ...]] = field(default_factory=dict)
    shared: Shared = field(init=False)  # the remote's job store: claims, fencing, pushes
    review: Reviewer = field(init=False)  # delivery through a pull/merge request

    def __post_init__(self) -> None:
        self.shared = Shared(self.ctx, self.remote)
        self.review = Reviewer(self)

    # -- entry point -------------------------------------------------------------------------

    def deliver(self, job: Job) -> Job:
        """Take one job as far as it can go now. Never raises for a lost race."""
        if job.job_id in self.shared.lost:
            return job  # fenced: this node does not write it again in this run
        if job.state in LOCAL:
            from gitpub.pipeline.prepare import drive  # the prepare pipeline: only to re-prepare

            job = drive(self.ctx, job)
        if job.state == S.IN_REVIEW:
            return self._check_review(job)
        if job.state not in DELIVERABLE and job.state not in LOCAL and self.shared.fetched:
            try:  # the store was fetched (reconcile): a person may have resolved it elsewhere
                return self.shared.sync(job)
            except LostRace:
                return reload(self.ctx.store, job)
        if job.state not in DELIVERABLE or self.waits(job):
            return job
        try:
            with delivery_lock(self.ctx.repo, progress=self.ctx.progress):
                job = self._rounds(job)
                if job.state in SETTLED and self.shared.fetched:
                    self.shared.publish_states([job])
                return job
        except LostRace:
            return reload(self.ctx.store, job)

    def _check_review(self, job: Job) -> Job:
        """An IN_REVIEW job: its request and the branch checked (``delivery.review``)."""
        try:
            with delivery_lock(self.ctx.repo, progress=self.ctx.progress):
                checked = self.review.check(job)
                if checked.commit != job.commit and checked.state in SETTLED and \
                        self.shared.fetched:
                    self.shared.publish_states([checked])
                return checked
        except LostRace:
            return reload(self.ctx.store, job)

    def left_to_others(self, job: Job) -> bool:
        """Whether ``job`` is unfinished because another worker has it: this node lost it
        (fenced), or another live worker holds it (here or on the remote). Not confirmed:
        the command exits 5 (run again later), never 0 for a job it did not deliver."""
        if job.state in SETTLED:
            return False
        return job.job_id in self.shared.lost or job.job_id in self.shared.held or \
            self.ctx.store.held_by_other(job)

    def waits(self, job: Job) -> bool:
        """A sync job waits while the job of the hand commit before it may still land: the
        commits reach the remote in the order they were made."""
        after = job.record.sync_after
        if after is None:
            return False
        before = self.ctx.store.load(after)
        return before is not None and (before.state in LOCAL or before.state in DELIVERABLE)

    # -- the rounds --------------------------------------------------------------------------

    def _rounds(self, job: Job) -> Job:
        due = self.due(job)
        for _ in range(MAX_REBASE_ROUNDS):
            try:
                tip = self.shared.fetch()
            except RemoteError as e:  # an attempt is used only by a delivery that was due
                return self.transient(job, e.message) if due else job
            crash_point("delivery.fetched")
            if tip is None and not self.create_branch:
                raise branch_missing(self.remote)
            if tip is None and job.record.base_commit is None:
                raise parentless(self.remote, job)
            job = self.shared.sync(self._fresh(job))
            if job.job_id in self.shared.lost or job.state not in DELIVERABLE:
                return job
            if self.shared.held_elsewhere(job):
                return job  # another live worker delivers it: not our business
            found = self.probe_job(job, tip)
            job, found = first_history_check(self.ctx, job, tip, found)  # once per job
            if found.published is not None:
                return self.published(job, found.published)
            if found.reused is not None:
                return self.key_reused(job, found.reused)
            self._tell_forged(job, found)
            self.forged[job.job_id] = tuple(v.commit for v in found.forged)
            gone = self._hand_commit_gone(job, tip)
            if gone is not None:
                self.notes[job.job_id] = gone
                return job
            if not self.due(job):
                return job
            if job.state == S.FAILED:
                return self.ctx.store.transition(
                    job, job.record.evolve(
                        next_retry_at=time.time() + FAILED_PROBE_INTERVAL),
                    phase=Stage.PROBE, reason="probe: not on the remote; next probe in an hour")
            leased = self.ctx.store.acquire(job)
            if leased is None:
                return job  # another worker here delivers it: not our business
            try:
                claimed = self.shared.claim(leased)
            except RemoteError as e:  # the claim's outcome is unknown: as any push's
                return self.transient(leased, e.message)
            if claimed is None:
                return reload(self.ctx.store, leased)  # lost to another node: fenced
            job = self._recheck(claimed, tip)
            if job.state not in DELIVERABLE:
                return job
            # A new branch starts from the job's own base, never from an empty tree.
            job, again = self._push_once(job, tip if tip is not None else job.record.base_commit)
            if not again:
                return job
        return self.transient(job, f"the remote branch moved {MAX_REBASE_ROUNDS} times "
                                    "while we rebased")

    def _fresh(self, job: Job) -> Job:
        """``job`` as its ref has it now, read afresh where the command keeps its refs
        (``git.refs``): what the claim and the push rest on."""
        found = self.ctx.store.load(job.job_id, fresh=True)
        return reload(self.ctx.store, job) if found is None else found  # None: it says why

    def fetch_and_probe(self, job: Job) -> tuple[str | None, str | None]:
        """Fetch the remote branch and job store now: (the branch's tip, the job's publication
        commit or None). Raises ``RemoteError`` / ``RemoteConfigError``; changes no job but by
        adopting what the remote's job store says about it."""
        tip = self.shared.fetch()
        job = self.shared.sync(reload(self.ctx.store, job))
        if job.state == S.PUBLISHED and job.record.remote_commit is not None:
            return tip, job.record.remote_commit
        return tip, self.probe_job(job, tip).published

    def probe_job(self, job: Job, tip: str | None) -> ProbeResult:
        if tip is None:
            return ProbeResult()
        raw = self.ctx.store.read_file(job, "manifest")
        try:
            manifest = None if raw is None else Manifest.parse(raw)
        except ManifestError:
            manifest = None  # then only an exact manifest hash is the same request
        found = probe(self.ctx.repo, [tip], job.record, self.ctx.config.trailer_prefix,
                      manifest=manifest, derived=font_outputs(self.ctx.config))
        if found.published is None and found.reused is None and job.record.review is not None:
            # merged through review: maybe squashed under the forge's own message
            by = by_content(self.ctx, job, tip)
            if by is not None:
                return ProbeResult(published=by, forged=found.forged)
        return found

    def _hand_commit_gone(self, job: Job, tip: str | None) -> str | None:
        """Why a hand commit's job is not delivered (None: it is): its commit is no longer
        among this clone's unpushed commits of the branch (amended, rebased, dropped, pushed
        by hand, or never on this clone's branch). What it delivers would not be what the
        branch holds now; ``sync`` supersedes it where the branch is the author's."""
        record, repo = job.record, self.ctx.repo
        if record.kind != Kind.SYNC or record.sync_commit is None or tip is None:
            return None
        from gitpub.delivery.handplan import unpushed  # a hand commit's job only

        local = repo.read_ref(f"refs/heads/{self.ctx.config.branch}")
        rows = None if local is None else unpushed(repo, local, tip)
        if rows is not None and any(sha == record.sync_commit for sha, _ in rows):
            return None
        return (f"not delivered: its hand commit {record.sync_commit[:12]} is no longer among "
                f"local {self.ctx.config.branch}'s unpushed commits here (amended, rebased, "
                "dropped or pushed by hand?); `git pub sync` in the clone that made it "
                "delivers what the branch holds now and supersedes this job")

    def _tell_forged(self, job: Job, found: ProbeResult) -> None:
        for v in found.forged:
            self.ctx.progress(f"{job.job_id[:13]}: {v.commit[:12]} on the remote carries this "
                              f"job's id but is not its publication ({'; '.join(v.problems)}); "
                              "ignored")

    def due(self, job: Job) -> bool:
        """Whether a delivery attempt of ``job`` is due now (see the module docstring)."""
        if job.state not in (S.RETRY_WAIT, S.FAILED) or self.now_please:
            return True
        failed_against = job.record.retry_remote
        if failed_against is not None and failed_against != self.remote.fingerprint():
            return True  # the remote's URL changed since the failure: try the new one now
        return (job.record.next_retry_at or 0) <= time.time()

    def _push_once(self, job: Job, tip: str | None) -> tuple[Job, bool]:
        """Rebase, record, push. Returns the job and whether to go another round."""
        store, repo, record = self.ctx.store, self.ctx.repo, job.record
        tip_tree = None if tip is None else repo.commit(tip).tree
        hand = record.kind == Kind.SYNC  # a hand commit: delivered exactly, fonts included
        fonts = frozenset() if hand else font_outputs(self.ctx.config) & set(record.target_paths)
        unsound = unsound_base(repo, tip_tree, record.target_paths)
        if unsound is not None:
            return store.transition(
                job, record.evolve(state=S.CONFLICT, failure_code=FailureCode.TREE_UNSOUND,
                                   failure_detail=unsound, next_retry_at=None),
                phase=Stage.REBASE, reason=f"cannot rebase onto {tip}: {unsound}"), False
        articles = [t for t in record.targets if t.path not in fonts]
        problems = target_problems(repo, tip_tree, articles)
        try:
            artifacts = read_artifacts(store, job) if problems and not hand else None
        except ManifestError as e:
            return to_review(self.ctx, job, Stage.REBASE, FailureCode.ARTIFACTS_UNSAFE,
                             [str(e)]), False
        files: dict[str, bytes] = {}
        entries: dict[str, Entry | None] = {}
        note = ""
        if artifacts is not None:  # edits to the same page: merged when they do not overlap
            merged = merge_edits(self.ctx, job, record, artifacts, tip, articles,
                                 derived=bool(fonts))
            if isinstance(merged, Review):
                return to_review(self.ctx, job, Stage.REBASE, merged.code,
                                 merged.problems), False
            if isinstance(merged, Present):  # the same edit is there: nothing to publish
                return self._already_on_remote(job, record, tip, merged), False
            if isinstance(merged, Merged):
                artifacts, record, problems = merged.artifacts, merged.record, []
                files, entries = dict(merged.files), dict(merged.entries)
                note = "; " + merged.describe()
            else:
                problems = merged
        if problems:
            detail = "; ".join(problems)
            return store.transition(
                job, record.evolve(state=S.CONFLICT, failure_code=FailureCode.TARGET_CHANGED,
                                   failure_detail=detail),
                phase=Stage.REBASE, reason=f"cannot rebase onto {tip}: {detail}"), False
        try:
            artifacts = artifacts or read_artifacts(store, job)
        except ManifestError as e:
            return to_review(self.ctx, job, Stage.REBASE, FailureCode.ARTIFACTS_UNSAFE,
                             [str(e)]), False
        if fonts:
            resolved = self._regenerate_fonts(job, record, tip, artifacts, fonts)
            if isinstance(resolved, Job):
                return resolved, False
            artifacts, record, regenerated = resolved
            files |= regenerated
            if regenerated:
                note += "; font-only resolution: regenerated " + ", ".join(
                    sorted(p for p in regenerated if p != "manifest"))
            left = {p: e for p, e in artifacts.entries.items() if p not in fonts}
            if not left and all(tip_tree is not None and repo.lookup(tip_tree, p) == e
                                for p, e in artifacts.entries.items()):
                # every article was there already, and the tip's subsets are what the job's
                # would be: nothing to publish (a font left behind is published alone)
                return self._already_on_remote(job, job.record, tip, Present(
                    tuple(sorted({t.path for t in job.record.targets})))), False
        try:
            commit = rebuild_commit(repo, record, artifacts, tip,
                                    self.ctx.config.trailer_prefix)
        except ManifestError as e:
            return to_review(self.ctx, job, Stage.REBASE, FailureCode.ARTIFACTS_UNSAFE,
                             [str(e)]), False
        inexact = change_problems(repo, tip_tree, repo.commit(commit).tree,
                                  artifacts.manifest) if hand else []
        if inexact:
            detail = "; ".join(inexact)
            return store.transition(
                job, record.evolve(state=S.CONFLICT, failure_code=FailureCode.TARGET_BLOCKED,
                                   failure_detail=detail),
                phase=Stage.REBASE, reason=f"cannot rebase onto {tip}: {detail}"), False
        verdict = verify_commit(repo, commit, self._prefixes())
        problem = self._not_its_publication(job, record, commit, verdict)
        if problem is not None:
            return self.transient(job, problem), False
        if self.review.applies(job):
            return self.review.send(job, record, commit, tip, files, entries, note), False
        job = store.transition(
            job, record.evolve(state=S.PUSHING, local_commit=commit),
            phase=Stage.PUSH, reason=f"pushing {commit} onto {tip or '(new branch)'}{note}",
            keep_alive=[commit], files=files, entries=entries)
        crash_point("delivery.pushing-recorded")
        self.ctx.progress(f"pushing {job.job_id[:13]} to {self.remote.remote}/"
                          f"{self.remote.branch}")
        staged = store.stage(job, self._published_record(job, commit), phase=Stage.CONFIRM,
                             reason=f"remote branch has {commit}: the job's trailers and "
                                    "content (pushed with this state)")
        try:
            outcome = self.shared.deliver(job, commit, staged,
                                          verified_onto=self._verified_onto(commit, tip))
        except RemoteConfigError as e:  # refused before anything was sent: no attempt used
            store.transition(job, job.record.evolve(state=S.LOCAL_COMMITTED), phase=Stage.PUSH,
                             reason=f"push refused, nothing sent: {e.message}")
            raise
        crash_point("delivery.pushed")
        if outcome.result == PushResult.SENT:
            return self.published(job, commit, staged), False
        if outcome.result == PushResult.RACE:
            job = store.transition(
                job, job.record.evolve(state=S.LOCAL_COMMITTED),
                phase=Stage.PUSH, reason=f"rejected ({outcome.detail}): the remote moved; "
                                     "rebasing again", keep_lease=True)
            return job, True
        kind = "rejected" if outcome.result == PushResult.REJECTED else "outcome unknown"
        return self.transient(job, f"push {kind}: {outcome.detail}"), False

    def _already_on_remote(self, job: Job, record: JobRecord, tip: str | None,
                           present: Present) -> Job:
        """SKIPPED (``already_on_remote``): the remote holds every file of the job as the job
        would leave it — unless commits on the remote carry this job's id without being its
        publication: then whoever made them may have put the files there, and a person looks
        (CONFLICT, as any change of the job's targets by another writer)."""
        forged = self.forged.get(job.job_id, ())
        if forged:
            detail = (f"the remote holds this job's files, but through commits that carry its "
                      f"id and are not its publication ({', '.join(c[:12] for c in forged)}): "
                      "a person checks them")
            return self.ctx.store.transition(
                job, record.evolve(state=S.CONFLICT, failure_code=FailureCode.TARGET_CHANGED,
                                   failure_detail=detail),
                phase=Stage.REBASE, reason=f"at {tip}: {detail}")
        detail = present.describe()
        self.ctx.progress(f"{job.job_id[:13]}: {detail}")
        return self.ctx.store.transition(
            job, record.evolve(state=S.SKIPPED, failure_code=FailureCode.ALREADY_ON_REMOTE,
                               failure_detail=detail, next_retry_at=None),
            phase=Stage.REBASE, reason=f"at {tip}: {detail}")

    def _prefixes(self) -> list[str]:
        """The prefixes a built commit is verified under: the configured one and, as pre-push
        always checks it, the default (a commit claiming under both is not a proof)."""
        return list(dict.fromkeys([self.ctx.config.trailer_prefix, DEFAULT_PREFIX]))

    @staticmethod
    def _not_its_publication(job: Job, record: JobRecord, commit: str,
                             verdict: Verdict | None) -> str | None:
        """Why the commit just built would not be the job's publication (checked before it is
        pushed, since its PUBLISHED state goes with it); None when it is."""
        if verdict is not None and verdict.ok and verdict.job_id == job.job_id and \
                verdict.manifest_sha256 == record.manifest_sha256:
            return None
        why = "; ".join(verdict.problems) if verdict is not None else "no job trailers"
        return f"built {commit}, but it is not the job's publication ({why})"

    @staticmethod
    def _published_record(job: Job, remote_commit: str) -> JobRecord:
        return job.record.evolve(state=S.PUBLISHED, remote_commit=remote_commit,
                                 failure_code=None, failure_detail=None, next_retry_at=None)

    def _verified_onto(self, commit: str, tip: str | None) -> str | None:
        """``tip``, when pushing ``commit`` onto it sends that one commit (``tip`` is its only
        parent). The commit was verified as the job's publication just before, under the
        prefixes pre-push checks (``_prefixes``): what gitpub's pre-push hook would check,
        checked where everything is loaded, so that the hook need not start an interpreter
        to check it again (``core.pushmark``). None otherwise: the hook then checks the push
        in full, as any other."""
        if tip is None or self.ctx.repo.commit(commit).parents != (tip,):
            return None
        return tip

    def _regenerate_fonts(self, job: Job, record: JobRecord, tip: str | None,
                          artifacts: Artifacts, fonts: frozenset[str]
                          ) -> Job | tuple[Artifacts, JobRecord, dict[str, bytes]]:
        """The job's font outputs recomputed from the merged article set (the tip's articles
        plus the job's): the font-only conflict resolved by construction. Returns the new
        artifacts, record and changed files (for the job's state: ``manifest`` and
        ``artifacts/<output>``), or the job in REVIEW when a subset cannot be made."""
        from gitpub.pipeline.prepare import derive_fonts  # only for a job with font outputs

        repo = self.ctx.repo
        own = {p: repo.blob(e.sha) for p, e in artifacts.entries.items() if p not in fonts}
        derived = derive_fonts(self.ctx, tip, own)
        if derived.problems:
            return to_review(self.ctx, job, Stage.FONTS, FailureCode.FONT_FAILED, derived.problems)
        current = {e.path: e.sha256 for e in artifacts.manifest.entries}
        changed = {out: data for out, data in derived.outputs.items()
                   if out in fonts and content_sha256(data) != current.get(out)}
        if not changed:
            return artifacts, record, {}
        entries = dict(artifacts.entries)
        kept = [e for e in artifacts.manifest.entries if e.path not in changed]
        for out, data in changed.items():
            entries[out] = Entry(MODE_FILE, repo.write_blob(data))
        manifest = Manifest.of(kept + [ManifestEntry(out, MODE_FILE, content_sha256(data))
                                       for out, data in changed.items()])
        record = record.evolve(manifest_sha256=manifest.sha256(),
                               phases=record.phases | {Phase.FONTS: derived.summary()})
        return (Artifacts(entries, manifest), record,
                {"manifest": manifest.serialize(),
                 **{f"artifacts/{out}": data for out, data in changed.items()}})

    # -- outcomes ----------------------------------------------------------------------------

    def published(self, job: Job, remote_commit: str, staged: Job | None = None) -> Job:
        """Record PUBLISHED (the remote has ``remote_commit`` with the job's trailers and
        content; ``staged``: the very state commit the remote got with it) and bring the local
        branch along when that is safe."""
        current = None if staged is not None else self.ctx.store.load(job.job_id)
        if staged is not None:
            job = self.ctx.store.advance(job, staged)
        elif current is not None and current.state == S.PUBLISHED and \
                current.record.remote_commit == remote_commit:
            job = current  # adopted from the remote's job store already (``Shared.sync``)
        else:
            how = "the job's trailers and content"
            if job.record.review is not None and self._claimless(remote_commit):
                how = "the job's content (merged through review, without its trailers)"
            job = self.ctx.store.transition(
                job, self._published_record(job, remote_commit), phase=Stage.CONFIRM,
                reason=f"remote branch has {remote_commit}: {how}")
        crash_point("delivery.published-recorded")
        if job.record.kind != Kind.SYNC:  # sync moves the branch itself (see sync.py)
            self.notes[job.job_id] = fast_forward_local(self.ctx.repo, self.ctx.config.branch,
                                                        remote_commit)
        return job

    def bring_along(self, tip: str | None) -> str | None:
        """A run killed between recording PUBLISHED and moving the local branch
        (``delivery.published-recorded``) left the branch on the published commit's parent:
        it is moved now, as that run would have moved it (``published``). Only then: the
        remote tip is the commit of a job this clone recorded PUBLISHED at it — a publish, not
        a sync (sync moves the branch itself) — and the branch stands on its first parent.
        The note, or None when there is nothing to bring along."""
        repo, branch = self.ctx.repo, self.ctx.config.branch
        local = repo.read_ref(f"refs/heads/{branch}")
        if tip is None or local is None or local == tip or not repo.has_object(tip) or \
                repo.commit(tip).parents[:1] != (local,):
            return None
        verdict = verify_commit(repo, tip, self._prefixes())
        try:
            job = None if verdict is None or not verdict.ok else \
                self.ctx.store.load(verdict.job_id)
        except CorruptStateError:
            return None  # a damaged job is reported where the jobs are read; the others go on
        if job is None or job.state != S.PUBLISHED or job.record.kind == Kind.SYNC or \
                job.record.remote_commit != tip:
            return None
        return fast_forward_local(repo, branch, tip)

    def _claimless(self, commit: str) -> bool:
        return verify_commit(self.ctx.repo, commit, self._prefixes()) is None

    def key_reused(self, job: Job, theirs: Verdict) -> Job:
        """The remote has this job id published with other content: the key was used elsewhere
        for another request. Stop (a person decides); never a second commit with the id."""
        detail = (f"the remote branch has {theirs.commit}, a publication of this job id with "
                  f"other content (manifest {theirs.manifest_sha256}): the key was used "
                  "elsewhere")
        return self.ctx.store.transition(
            job, job.record.evolve(state=S.REVIEW, failure_code=FailureCode.KEY_REUSED,
                                   failure_detail=detail, next_retry_at=None),
            phase=Stage.PROBE, reason=detail)

    def transient(self, job: Job, detail: str) -> Job:
        """A failure that may pass: RETRY_WAIT with backoff, or FAILED when the budget is
        spent. A lost race while recording it is someone else's progress: fine."""
        job = reload(self.ctx.store, job)
        if job.state not in DELIVERABLE or self.ctx.store.held_by_other(job):
            return job
        record, policy = job.record, self.ctx.config.retry
        if job.state == S.FAILED:
            return job
        attempt = record.attempt + 1
        if attempt >= record.max_attempts:
            return self.ctx.store.transition(
                job, record.evolve(state=S.FAILED, attempt=attempt,
                                   failure_code=FailureCode.DELIVERY_EXHAUSTED,
                                   failure_detail=detail, retry_remote=self.remote.fingerprint(),
                                   next_retry_at=time.time() + FAILED_PROBE_INTERVAL),
                phase=Stage.RETRY, reason=f"attempt {attempt}/{record.max_attempts}: {detail}; "
                                      "giving up (only probes from now on)")
        wait = backoff(attempt, policy.backoff_base, policy.backoff_max, policy.jitter)
        job = self.ctx.store.transition(
            job, record.evolve(state=S.RETRY_WAIT, attempt=attempt,
                               failure_code=FailureCode.DELIVERY_UNCONFIRMED, failure_detail=detail,
                               retry_remote=self.remote.fingerprint(),
                               next_retry_at=time.time() + wait),
            phase=Stage.RETRY, reason=f"attempt {attempt}/{record.max_attempts}: {detail}; "
                                  f"next try in {wait:.0f}s")
        crash_point("delivery.retry-recorded")
        return job

    # -- dedup re-check of new remote articles -----------------------------------------------

    def _recheck(self, job: Job, tip: str | None) -> Job:
        judge, repo, record = self.ctx.config.judge, self.ctx.repo, job.record
        if record.kind == Kind.SYNC:
            judge = None  # hand edits are not dedup-judged (reference: external_sync)
        since = record.last_recheck_head or record.base_commit
        delta = [] if judge is None or tip is None or since == tip else \
            self._article_delta(since, tip, set(record.target_paths))
        fingerprint = delta_fingerprint(delta)
        if not delta or fingerprint in record.recheck_fingerprints or judge is None:
            if job.state == S.RECHECK_CANDIDATES:
                return self.ctx.store.transition(
                    job, record.evolve(state=S.LOCAL_COMMITTED), phase=Stage.RECHECK,
                    reason="nothing new to re-check", keep_lease=True)
            return job
        job = self.ctx.store.transition(
            job, record.evolve(state=S.RECHECK_CANDIDATES), phase=Stage.RECHECK,
            reason=f"{len(delta)} new remote article change(s) since {since}: dedup re-check")
        changed = [{"path": p, "content": repo.blob(sha).decode("utf-8", "replace")}
                   for p, sha in delta if sha is not None]
        from gitpub.pipeline.prepare import run_judge  # only with new articles to judge

        verdict, problem = run_judge(self.ctx, job, judge, {"remote_changes": changed,
                                                            "remote_tip": tip})
        crash_point("delivery.recheck-ran")
        if verdict is None:
            return to_review(self.ctx, job, Stage.RECHECK, FailureCode.JUDGE_UNDECIDED, [problem])
        if verdict == Answer.SKIP:
            return self.ctx.store.transition(
                job, job.record.evolve(state=S.SKIPPED), phase=Stage.RECHECK,
                reason="the dedup judge answered SKIP after new remote articles")
        return self.ctx.store.transition(
            job, job.record.evolve(
                state=S.LOCAL_COMMITTED, last_recheck_head=tip,
                recheck_fingerprints=(*record.recheck_fingerprints, fingerprint)),
            phase=Stage.RECHECK, reason=f"the dedup judge answered KEEP for delta {fingerprint}",
            keep_lease=True)

    def _article_delta(self, since: str | None, tip: str,
                       ours: set[str]) -> list[tuple[str, str | None]]:
        repo = self.ctx.repo
        old_tree = None if since is None or not repo.has_object(since) else \
            repo.commit(since).tree
        return sorted((p, sha) for p, sha in repo.changed_paths(old_tree, repo.commit(tip).tree)
                      if self.ctx.config.is_article(p) and p not in ours)


def delta_fingerprint(delta: list[tuple[str, str | None]]) -> str:
    """A stable name for a set of remote article changes (path and new blob id)."""
    text = json.dumps(delta, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]
