"""The once-per-job history search, the *history* phase of PREPARING.

Once per job, the base's whole history is searched for the job id (``verify.history``): the
job's own request published there (from another clone) → PUBLISHED, nothing pushed; its id
published with other content → REVIEW (``key_reused``, exit 3). A base that is not the
remote-tracking branch is searched at the first delivery instead (``first_history_check``).
The phase records the tip it searched (``checked <tip>``), so the search runs once.
"""

from __future__ import annotations

from gitpub.config.model import font_outputs
from gitpub.core.crashpoints import crash_point
from gitpub.core.manifest import Manifest, ManifestError
from gitpub.core.record import JobRecord
from gitpub.core.states import FailureCode, Phase, Stage, State
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job
from gitpub.verify.history import commits_mentioning
from gitpub.verify.probe import ProbeResult, judge_claims, prefixes_claiming

HISTORY_CHECKED = "checked "
HISTORY_AT_DELIVERY = "at the first delivery"


def history_checked(record: JobRecord) -> bool:
    return record.phases.get(Phase.HISTORY, "").startswith(HISTORY_CHECKED)


def own_manifest(ctx: Context, job: Job) -> Manifest | None:
    """The job's manifest; before the gates, the manifest of its articles (what ``same_request``
    compares: the derived font files aside)."""
    raw = ctx.store.read_file(job, "manifest")
    try:
        if raw is not None:
            return Manifest.parse(raw)
        tree = ctx.store.subtree(job, "artifacts")
        files = [] if tree is None else ctx.repo.walk_files(tree)
        return Manifest.build((p, e.mode, ctx.repo.blob(e.sha)) for p, e in files)
    except ManifestError:
        return None  # then only an exact manifest hash is the same request


def search_history(ctx: Context, job: Job, tip: str) -> ProbeResult:
    """Every commit of ``tip``'s whole history that mentions the job id, judged as the probe
    judges: the job's publication, a publication of its id with other content, or no proof."""
    repo, record = ctx.repo, job.record
    claims = [(sha, prefixes) for sha in commits_mentioning(repo, tip, record.job_id)
              if (prefixes := prefixes_claiming(repo.commit(sha).message, record.job_id))]
    return judge_claims(repo, claims, record, own_manifest(ctx, job),
                        font_outputs(ctx.config))


def _history_phase(job: Job, tip: str, found: ProbeResult) -> tuple[dict[Phase, str], str]:
    phases = job.record.phases | {Phase.HISTORY: f"{HISTORY_CHECKED}{tip}"}
    reason = f"the history of {tip} searched for the job id"
    if found.forged:
        reason += "; claims that are no publication, ignored: " + "; ".join(
            f"{v.commit[:12]} ({', '.join(v.problems)})" for v in found.forged)
    return phases, reason


def first_history_check(ctx: Context, job: Job, tip: str | None,
                        found: ProbeResult) -> tuple[Job, ProbeResult]:
    """At a delivery: the history search, if the job has not had it (its base was not the
    remote's, or it is older than the search). ``found`` is the probe's (since the base)."""
    if tip is None or history_checked(job.record) or found.published or found.reused \
            or ctx.store.held_by_other(job):
        return job, found
    history = search_history(ctx, job, tip)
    phases, reason = _history_phase(job, tip, history)
    job = ctx.store.transition(job, job.record.evolve(phases=phases), phase=Stage.HISTORY,
                               reason=reason,
                               keep_lease=ctx.store.worker.holds(job.record.lease))
    return job, ProbeResult(history.published, history.reused, found.forged + history.forged)


def history_phase(ctx: Context, job: Job) -> Job:
    """The history phase of PREPARING (see the module docstring)."""
    record = job.record
    base = record.first_base or record.base_commit
    remote_ref = f"refs/remotes/{ctx.config.remote}/{ctx.config.branch}"
    if base is None or record.base_ref != remote_ref:
        return ctx.store.transition(
            job, record.evolve(phases=record.phases | {Phase.HISTORY: HISTORY_AT_DELIVERY}),
            phase=Stage.HISTORY, reason="the base is not the remote's: its history is searched "
                                        "for the job id at the first delivery")
    found = search_history(ctx, job, base)
    phases, reason = _history_phase(job, base, found)
    if found.published is not None:
        return ctx.store.transition(
            job, record.evolve(state=State.PUBLISHED, remote_commit=found.published,
                               phases=phases),
            phase=Stage.HISTORY,
            reason=f"{reason}: {found.published} is already its publication (from another "
                   "clone): nothing to push")
    if found.reused is not None:
        theirs = found.reused
        detail = (f"the remote branch has {theirs.commit}, a publication of this job id with "
                  f"other content (manifest {theirs.manifest_sha256}): the key was used "
                  "elsewhere")
        return ctx.store.transition(
            job, record.evolve(state=State.REVIEW, failure_code=FailureCode.KEY_REUSED,
                               failure_detail=detail, phases=phases),
            phase=Stage.HISTORY, reason=detail)
    job = ctx.store.transition(job, record.evolve(phases=phases), phase=Stage.HISTORY,
                               reason=reason)
    crash_point("prepare.history-checked")
    return job
