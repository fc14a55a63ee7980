"""Delivery through review (``delivery: {mode: pull_request}``): the job's commit goes to a
review branch and a pull/merge request, and the job rests in IN_REVIEW until a person merges
or closes it (docs/review.md).

The steps, each crash-safe in the way the push path is:

1. **the review branch**: the job's commit, built onto the branch's tip exactly as for a push
   (``Deliverer._push_once``), goes to ``<branch_prefix><job id>`` on the remote — atomically
   with the staged IN_REVIEW state (``Shared.deliver`` with another content update), the branch
   by compare-and-swap (absent, or at the commit this job last put there). A branch that holds
   another commit is someone else's: CONFLICT (``review_branch_taken``), never overwritten. A
   PUSHING job whose commit is found on its review branch (a crash after the push, without
   atomic push) goes on to IN_REVIEW without pushing again;
2. **the request** (forges with an API): the IN_REVIEW state with no request number is the
   durable intent. The request of the head branch is *looked for first* (``Forge.find``), and
   opened only when there is none; so a crash after the forge opened it, or a lost reply, finds
   it on the next run and never opens a second one. Its number and address are recorded. Forge
   ``branch`` has no API: the compare URL (``compare_url``) is recorded and printed instead;
3. **the check** (every ``push`` and ``reconcile``, at most ``checks_per_run`` jobs per run):
   the forge is asked how the request stands, *then* the branch is fetched and probed — by
   trailers (a merge commit, a fast-forward, a rebase, a squash that kept the message) and, for
   a job that went to review only, by content (``verify.content``: a squash with the forge's
   own message). Found → PUBLISHED, whatever the forge says. Not found: the request merged →
   REVIEW (``review_merged_other``: what was merged is not the job's content); closed →
   REVIEW (``review_closed``); open → the job stays IN_REVIEW and its address is shown.

The proof is always the branch's content, never the forge's word; the forge only says when to
stop waiting. The token is read from the environment for one command (``token_env``), given
to the sanitizer as a secret, and sent in one header only (``forge.http``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol

from gitpub.config.model import DeliverySpec
from gitpub.core.crashpoints import crash_point
from gitpub.core.manifest import Manifest, ManifestError
from gitpub.core.record import JobRecord, Review
from gitpub.core.sanitize import remember_secret, sanitize
from gitpub.core.states import FailureCode, Kind, Stage, State
from gitpub.delivery.shared import Shared
from gitpub.forge.apis import Forge, forge_for
from gitpub.forge.model import ForgeError, Request, RequestState, Settings
from gitpub.git.push import PushResult, Update
from gitpub.git.remote import Remote, RemoteConfigError, RemoteError
from gitpub.git.repo import Entry
from gitpub.pipeline.jobs import reload
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job
from gitpub.verify.commit import Verdict
from gitpub.verify.content import content_publication
from gitpub.verify.probe import ProbeResult, job_prefixes

S = State


class Delivery(Protocol):
    """What a review asks of the delivery it is part of: ``delivery.deliver.Deliverer``, which
    hands itself to its ``Reviewer``. Declared here, where it is used, so that this module
    needs nothing from ``deliver`` (which imports it)."""

    ctx: Context
    remote: Remote
    now_please: bool
    shared: Shared  # the remote's job store: sync, the atomic delivery

    def probe_job(self, job: Job, tip: str | None) -> ProbeResult: ...
    def published(self, job: Job, remote_commit: str, staged: Job | None = None) -> Job: ...
    def key_reused(self, job: Job, theirs: Verdict) -> Job: ...
    def transient(self, job: Job, detail: str) -> Job: ...


class ForgeConfigError(RemoteConfigError):
    """The forge cannot work as configured (no token, a token it refuses, no such
    repository): retrying would not help; the command stops (exit 2) and the job stays where
    it is (IN_REVIEW: its branch is pushed, its request is opened by the next run)."""


def review_for(spec: DeliverySpec, job_id: str, base: str) -> Review:
    """A new job's review: its branch, and where its request merges."""
    assert spec.forge is not None
    return Review(spec.forge, spec.branch_prefix + job_id, base)


def compare_url(spec: DeliverySpec, review: Review) -> str | None:
    if spec.compare_url is None:
        return None
    return spec.compare_url.format(base=review.base, head=review.branch)


def request_text(record: JobRecord, subject: str) -> tuple[str, str]:
    """The title and body of a job's request: the commit's subject, and what it publishes."""
    files = "\n".join(f"- `{p}`" for p in record.target_paths[:50])
    body = (f"Published by gitpub (job `{record.job_id}`). Merge it as you like — merge "
            "commit, rebase or squash: gitpub recognises the job's content on the branch.\n\n"
            f"Files:\n{files}\n")
    return sanitize(subject)[:200] or f"gitpub job {record.job_id}", sanitize(body)


@dataclass
class Reviewer:
    """Delivery through review, for one command (see the module docstring)."""

    deliverer: Delivery
    checks_left: int = field(init=False)
    _forge: Forge | None = field(default=None, init=False)
    _said_budget: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.checks_left = self.spec.checks_per_run

    @property
    def spec(self) -> DeliverySpec:
        return self.deliverer.ctx.config.delivery

    def applies(self, job: Job) -> bool:
        """Whether ``job`` goes through review: the configuration says so (a hand commit's
        sync job never does: it is delivered exactly, as it was made), or it went already."""
        if job.record.review is not None:
            return True
        return self.spec.reviewed and job.record.kind != Kind.SYNC

    def forge(self) -> Forge | None:
        """The forge's API for this command (None for forge ``branch``); the token read from
        the environment once. Raises ``ForgeConfigError`` when it is not there."""
        spec = self.spec
        if spec.forge in (None, "branch"):
            return None
        if self._forge is None:
            name = spec.token_variable or ""
            token = os.environ.get(name, "")
            if not token:
                raise ForgeConfigError(
                    f"delivery through {spec.forge}: the environment variable {name} holds no "
                    "token: no request can be opened or checked",
                    hint=f"export {name}=<a token that may open pull requests on "
                         f"{spec.repository}> (or name another variable with "
                         "delivery.token_env)")
            remember_secret(token, "forge-token")
            api, repository = spec.api_url, spec.repository
            assert api is not None and repository is not None  # the configuration's rules
            self._forge = forge_for(Settings(spec.forge or "", api.rstrip("/"), repository,
                                             token, spec.timeout))
        return self._forge

    # -- 1. the review branch ----------------------------------------------------------------

    def send(self, job: Job, record: JobRecord, commit: str, tip: str | None,
             files: dict[str, bytes], entries: dict[str, Entry | None], note: str) -> Job:
        """Put ``commit`` (built onto ``tip`` for ``record``, the job's next record) on the
        job's review branch with the IN_REVIEW state, then open its request. ``files`` and
        ``entries`` go into the job's state with it (a regenerated font, a merged page)."""
        d = self.deliverer
        store, remote = d.ctx.store, d.remote
        self.forge()  # no token: stop before anything is pushed
        review = record.review or review_for(self.spec, job.job_id, d.ctx.config.branch)
        if review.number is not None:  # sent again (``resolve --retry``): a new request
            review = review._replace(number=None, url=None)
        ref = f"refs/heads/{review.branch}"
        try:
            there = remote.list_refs([ref]).get(ref)
        except RemoteError as e:
            return d.transient(job, f"the review branch {review.branch} cannot be read: "
                                    f"{e.message}")
        earlier = job.record.local_commit if job.state == S.PUSHING else None
        if there is not None and there == earlier:  # pushed, not recorded: go on from there
            job = store.transition(
                job, self._in_review(job.record, review, there),
                phase=Stage.REVIEW, reason=f"{there} is on the review branch {review.branch} "
                                           "already (an interrupted push)")
            return self.open(job, fresh=True)[0]
        if there is not None and there != review.head:
            detail = (f"the review branch {review.branch} on {remote.remote} holds {there}, "
                      "which is not this job's: it is never overwritten")
            return store.transition(
                job, job.record.evolve(state=S.CONFLICT,
                                       failure_code=FailureCode.REVIEW_BRANCH_TAKEN,
                                       failure_detail=detail, next_retry_at=None),
                phase=Stage.REVIEW, reason=detail)
        pushing = store.transition(
            job, record.evolve(state=S.PUSHING, local_commit=commit, review=review),
            phase=Stage.PUSH, reason=f"pushing {commit} (onto {tip or '(new branch)'}) to the "
                                     f"review branch {review.branch}{note}",
            keep_alive=[commit], files=files, entries=entries)
        crash_point("review.pushing-recorded")
        d.ctx.progress(f"pushing {job.job_id[:13]} to {remote.remote}/{review.branch} for "
                       "review")
        staged = store.stage(
            pushing, self._in_review(pushing.record, review, commit),
            phase=Stage.REVIEW, reason=f"{commit} on the review branch {review.branch} (pushed "
                                       "with this state)")
        try:
            outcome = d.shared.deliver(pushing, commit, staged,
                                       content=Update(ref, commit, there or ""))
        except RemoteConfigError as e:
            store.transition(pushing, pushing.record.evolve(state=S.LOCAL_COMMITTED),
                             phase=Stage.PUSH, reason=f"push refused, nothing sent: {e.message}")
            raise
        crash_point("review.pushed")
        if outcome.result != PushResult.SENT:
            kind = {PushResult.RACE: "rejected", PushResult.REJECTED: "rejected"}.get(
                outcome.result, "outcome unknown")
            return d.transient(pushing, f"push to the review branch {review.branch} {kind}: "
                                        f"{outcome.detail}")
        job = store.advance(pushing, staged)
        return self.open(job, fresh=True)[0]

    def _in_review(self, record: JobRecord, review: Review, commit: str) -> JobRecord:
        """``record`` in review with ``commit`` on its review branch."""
        return record.evolve(state=S.IN_REVIEW, review=self._head(review, commit),
                             failure_code=None, failure_detail=None, next_retry_at=None)

    def _head(self, review: Review, commit: str) -> Review:
        url = review.url
        if review.forge == "branch" and url is None:
            url = compare_url(self.spec, review)
        return review._replace(head=commit, url=url)

    # -- 2. the request ----------------------------------------------------------------------

    def open(self, job: Job, *, fresh: bool = False) -> tuple[Job, Request | None]:
        """The job's request, found or opened, recorded (see the module docstring); the job
        and the request, or None when the forge did not answer (the next run looks again).
        ``fresh``: the commit was just sent to the branch: a request of the branch that was
        closed unmerged is an earlier one (before ``resolve --retry``), not this sending's."""
        d = self.deliverer
        review = job.record.review
        assert review is not None
        forge = self.forge()
        if forge is None:
            where = review.url or f"the branch {review.branch} on {d.remote.remote}"
            d.ctx.progress(f"{job.job_id[:13]}: waiting for review: open a request for "
                           f"{where} (into {review.base})")
            return job, None
        try:
            request = forge.find(review.branch, review.base, review.head)
            if request is not None and fresh and request.state == RequestState.CLOSED:
                request = None
            if request is None:
                request = self._create(forge, job, review)
        except ForgeError as e:
            return self._forge_failed(job, e, "open its request"), None
        crash_point("review.request-opened")
        if review.number == request.number and review.url == request.url:
            return job, request
        job = d.ctx.store.transition(
            job, job.record.evolve(review=review._replace(number=request.number,
                                                          url=request.url)),
            phase=Stage.REVIEW, reason=f"request #{request.number} for {review.branch} into "
                                       f"{review.base}: {request.url} ({request.state.value})")
        d.ctx.progress(f"{job.job_id[:13]}: review requested: {request.url}")
        return job, request

    def _create(self, forge: Forge, job: Job, review: Review) -> Request:
        subject = "gitpub job " + job.job_id
        if review.head is not None and self.deliverer.ctx.repo.has_object(review.head):
            message = self.deliverer.ctx.repo.commit(review.head).message
            subject = message.decode("utf-8", "replace").split("\n", 1)[0].strip() or subject
        title, body = request_text(job.record, subject)
        try:
            return forge.create(review.branch, review.base, title, body)
        except ForgeError as e:
            if e.kind != "exists":
                raise
            found = forge.find(review.branch, review.base, review.head)
            if found is None:
                raise
            return found

    def _forge_failed(self, job: Job, error: ForgeError, what: str) -> Job:
        d = self.deliverer
        if error.kind == "denied":
            raise self._denied(job, error, what)
        if error.kind == "refused":
            detail = f"{self.spec.forge} refused to {what}: {error.detail}"
            return d.ctx.store.transition(
                job, job.record.evolve(state=S.REVIEW, failure_code=FailureCode.REVIEW_REFUSED,
                                       failure_detail=detail),
                phase=Stage.REVIEW, reason=detail)
        d.ctx.progress(f"{job.job_id[:13]}: could not {what} now ({error.detail}); the next "
                       "run asks again")
        return job

    def still_open(self, job: Job) -> str | None:
        """What of the job's review could still publish it — its request, open on the forge,
        or (forge ``branch``, no API to ask) its review branch — or None. Abandoning a job
        waits for that to be closed: a merge after the abandon would publish it anyway."""
        d, review = self.deliverer, job.record.review
        if review is None:
            return None
        forge = self.forge()
        if forge is None:
            ref = f"refs/heads/{review.branch}"
            if d.remote.list_refs([ref]).get(ref) is None:
                return None
            return (f"its review branch {review.branch} is still on {d.remote.remote}: delete "
                    f"it (`git push {d.remote.remote} --delete {review.branch}`) once no "
                    "request for it is open")
        try:
            request = forge.get(review.number) if review.number is not None else \
                forge.find(review.branch, review.base, review.head)
        except ForgeError as e:
            if e.kind == "denied":
                raise self._denied(job, e, "look at its request") from None
            return f"{self.spec.forge} did not say whether its request is open ({e.detail})"
        if request is None or request.state != RequestState.OPEN:
            return None
        return f"its request {request.url} is open: close it on {self.spec.forge} first"

    def _denied(self, job: Job, error: ForgeError, what: str) -> ForgeConfigError:
        return ForgeConfigError(
            f"{self.spec.forge} refused to {what} for job {job.job_id}: {error.detail}",
            hint=f"check delivery.repository ({self.spec.repository}) and that the token in "
                 f"{self.spec.token_variable} may open pull requests there")

    # -- 3. the check ------------------------------------------------------------------------

    def check(self, job: Job) -> Job:
        """An IN_REVIEW job moved on as far as the forge and the branch say (see the module
        docstring); at most ``checks_per_run`` per command."""
        d = self.deliverer
        if not d.now_please and self.checks_left <= 0:
            if not self._said_budget:
                self._said_budget = True
                d.ctx.progress(f"checked {self.spec.checks_per_run} review(s) in this run "
                               "(delivery.checks_per_run): the others are checked by the next")
            return job
        self.checks_left -= 1
        review = job.record.review
        assert review is not None
        request: Request | None = None
        forge = self.forge()
        if forge is not None and review.number is None:
            job, request = self.open(job)
        elif forge is not None and review.number is not None:
            try:
                request = forge.get(review.number)
            except ForgeError as e:
                job = self._forge_failed(job, e, f"show request #{review.number}")
        if job.state != S.IN_REVIEW:
            return job
        try:
            tip = d.shared.fetch()
        except RemoteError as e:
            d.ctx.progress(f"{job.job_id[:13]}: the review is not checked now: {e.message}")
            return job
        job = d.shared.sync(reload(d.ctx.store, job))
        if job.state != S.IN_REVIEW or job.job_id in d.shared.lost:
            return job
        found = d.probe_job(job, tip)
        if found.published is not None:
            return d.published(job, found.published)
        if found.reused is not None:
            return d.key_reused(job, found.reused)
        return self._waiting(job, request)

    def _waiting(self, job: Job, request: Request | None) -> Job:
        d, review = self.deliverer, job.record.review
        assert review is not None
        where = f"{d.remote.remote}/{d.ctx.config.branch}"
        if request is not None and request.state == RequestState.MERGED:
            detail = (f"request #{request.number} ({request.url}) was merged, but no commit on "
                      f"{where} holds exactly this job's files: what was merged is not the "
                      "job's content")
            code = FailureCode.REVIEW_MERGED_OTHER
        elif request is not None and request.state == RequestState.CLOSED:
            detail = f"request #{request.number} ({request.url}) was closed without a merge"
            code = FailureCode.REVIEW_CLOSED
        else:
            d.ctx.progress(f"{job.job_id[:13]}: waiting for review: "
                           f"{review.url or review.branch}")
            return job
        return d.ctx.store.transition(
            job, job.record.evolve(state=S.REVIEW, failure_code=code, failure_detail=detail),
            phase=Stage.REVIEW, reason=detail)


def by_content(ctx: Context, job: Job, tip: str) -> str | None:
    """The job's publication on the branch by content (``verify.content``), for a job that
    went to review; None otherwise."""
    if job.record.review is None:
        return None
    raw = ctx.store.read_file(job, "manifest")
    try:
        manifest = None if raw is None else Manifest.parse(raw)
    except ManifestError:
        return None
    if manifest is None:
        return None
    prefixes = job_prefixes(ctx.repo, job.record, ctx.config.trailer_prefix)
    return content_publication(ctx.repo, [tip], job.record.base_commit, manifest, prefixes)
