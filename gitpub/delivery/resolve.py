"""``git pub resolve``: the way out of REVIEW, CONFLICT and FAILED, always recorded.

``--abandon`` ends the job (SKIPPED, failure code ``abandoned``). ``--retry``:

- FAILED → LOCAL_COMMITTED with a fresh attempt budget: deliver the *same* artifacts again
  (a failed delivery is never a reason to regenerate content);
- REVIEW or CONFLICT → RECEIVED: the pipeline runs again under the same job, from a new snapshot
  of the base (so a CONFLICT retried after a fetch is checked against the current remote). The
  sanitized source is kept; so is a secret finding in it, which no retry can clear.
"""

from __future__ import annotations

from typing import Literal

from gitpub.core.errors import UsageError
from gitpub.core.record import Target
from gitpub.core.states import FailureCode, Phase, Stage, State
from gitpub.git.repo import Entry
from gitpub.store.jobs import Job, JobStore

S = State
RESOLVABLE = frozenset({S.REVIEW, S.CONFLICT, S.FAILED})


def resolve(store: JobStore, job: Job, action: Literal["retry", "abandon"]) -> Job:
    record = job.record
    if job.state not in RESOLVABLE:
        raise UsageError(f"job {job.job_id} is {job.state.value}: only REVIEW, CONFLICT and "
                         "FAILED jobs can be resolved",
                         hint="`git pub status JOB` shows where it stands")
    if action == "abandon":
        return store.transition(
            job, record.evolve(state=S.SKIPPED, failure_code=FailureCode.ABANDONED,
                               failure_detail=f"abandoned in {job.state.value}: "
                                              f"{record.failure_detail or ''}".strip()),
            phase=Stage.RESOLVE, reason=f"abandoned by a person (was {job.state.value})")
    if job.state == S.FAILED:
        return store.transition(
            job, record.evolve(state=S.LOCAL_COMMITTED, attempt=0, failure_code=None,
                               failure_detail=None, next_retry_at=None),
            phase=Stage.RESOLVE, reason="retry requested: a new delivery budget, same artifacts")
    kept = {k: v for k, v in record.phases.items() if k == Phase.SOURCE_SCAN}
    fresh = record.evolve(
        state=S.RECEIVED, phases=kept, base_commit=None, base_ref=None, requested_base=None,
        targets=tuple(Target(t.path, "new") for t in record.targets), manifest_sha256=None,
        commit_time=None, author=None, local_commit=None, failure_code=None,
        failure_detail=None, last_recheck_head=None, recheck_fingerprints=(), attempt=0,
        next_retry_at=None)
    drop: dict[str, Entry | None] = {"artifacts": None, "manifest": None}
    return store.transition(job, fresh, phase=Stage.RESOLVE, entries=drop,
                            reason=f"retry requested: the pipeline runs again "
                                   f"(was {job.state.value}: {record.failure_code})")
