"""What the pipeline and the delivery both do to a job in their phases: read it again, send it
to REVIEW, and say which known non-secrets a phase let through.

Apart from ``pipeline.prepare``: a delivery that re-prepares nothing (``push`` of a committed
job) loads none of the prepare pipeline (its gates, front matter parsers, font code).
"""

from __future__ import annotations

from collections.abc import Sequence

from gitpub.core.errors import CorruptStateError
from gitpub.core.sanitize import sanitize
from gitpub.core.states import FailureCode, Stage, State
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job, JobStore


def reload(store: JobStore, job: Job, *, fresh: bool = False) -> Job:
    """``job`` as its ref has it now (``fresh``: read afresh where the command keeps its
    refs, ``git.refs``: a wait for another worker, whose moves are no compare-and-swap of
    ours). A job's ref never disappears by our doing: if it is gone, someone deleted it by
    hand, which is corrupt state, not "no job"."""
    found = store.load(job.job_id, fresh=fresh)
    if found is None:
        raise CorruptStateError(
            f"job {job.job_id}: its ref {store.ref_name(job.job_id)} disappeared "
            f"(it was at {job.commit})",
            hint=f"restore it with `git update-ref {store.ref_name(job.job_id)} {job.commit}`")
    return found


def to_review(ctx: Context, job: Job, phase: Stage, code: FailureCode,
              problems: Sequence[str]) -> Job:
    detail = sanitize("; ".join(problems))
    return ctx.store.transition(
        job, job.record.evolve(state=State.REVIEW, failure_code=code, failure_detail=detail),
        phase=phase, reason=detail)


def uses(allowed: Sequence[str]) -> str:
    """The known non-secrets let through, for the event's reason (never their values)."""
    return f"; allowed as known non-secrets: {'; '.join(allowed)}" if allowed else ""
