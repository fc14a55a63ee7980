"""Containment: one job's failure is that job's, never the command's.

A command that handles several jobs (``push``, ``reconcile``, ``sync``, ``status``) runs each job
inside ``Failures.contain``. Whatever goes wrong there — an expected ``GitpubError``, corrupt
state, or an unexpected exception (a bug, a full disk) — is recorded *for that job*: its id and a
sanitized one-line cause, and the command goes on with the next job; the exit code aggregates.

A ``TryLaterError`` (a local git that did not finish in time, a process that holds the job)
is no error of the job's: it goes to ``later``, which the command reports as not confirmed
(exit 5, "run the same command again later"), and the job stays exactly as it was recorded —
its next run goes on from there.

An unexpected exception also moves the job to REVIEW with ``failure_code: internal_error`` when
that is safe: the job's record is readable, it is not settled already, no other live worker holds
its lease, and its outcome is not unknown (a job in PUSHING may be on the remote: it stays there
for the next probe). A person then sees it in ``status`` and decides (``resolve``); the job's
history keeps everything that happened before. Corrupt state is never written over: it is
reported and left exactly as it is. ``--debug`` shows the traceback of each unexpected error.
"""

from __future__ import annotations

from collections.abc import Callable

from gitpub.core.errors import CorruptStateError, GitpubError, LostRace, TryLaterError
from gitpub.core.sanitize import sanitize
from gitpub.core.states import SETTLED, FailureCode, Stage, State
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job

#: States an internal error does not move to REVIEW: settled ones, and PUSHING, whose outcome
#: is unknown until the next probe (REVIEW is never probed).
_KEEP = SETTLED | {State.PUSHING}
_MAX_CAUSE = 300


def one_line(text: str) -> str:
    """``text`` sanitized, on one line, cut to a readable length."""
    line = " ".join(sanitize(text).split())
    return line if len(line) <= _MAX_CAUSE else line[: _MAX_CAUSE - 3] + "..."


def describe(error: BaseException) -> str:
    if isinstance(error, GitpubError):
        return one_line(error.message)
    return one_line(f"internal error: {type(error).__name__}: {error}")


class Failures:
    """What went wrong, job by job, in one command."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.tracebacks: list[str] = []  # of unexpected errors (--debug)
        #: What stopped a job for now only (``TryLaterError``): not confirmed, exit 5.
        self.later: list[str] = []

    def add(self, job_id: str | None, error: BaseException) -> str:
        cause = describe(error)
        prefix = f"job {job_id}"
        (self.later if isinstance(error, TryLaterError) else self.errors).append(
            cause if job_id is None or cause.startswith(prefix) else f"{prefix}: {cause}")
        if not isinstance(error, GitpubError):
            import traceback  # only for an unexpected error

            self.tracebacks.append(sanitize("".join(traceback.format_exception(error))))
        return cause

    def contain(self, ctx: Context, job: Job, action: Callable[[Job], Job], *,
                stop: tuple[type[Exception], ...] = ()) -> Job:
        """``action(job)``; on any failure, the failure recorded and the job as it now stands.
        An error in ``stop`` is not the job's but the command's: it propagates."""
        try:
            return action(job)
        except stop:
            raise
        except CorruptStateError as e:
            self.add(job.job_id, e)
            return job
        except GitpubError as e:
            self.add(job.job_id, e)
            return _current(ctx, job)
        except Exception as e:  # a bug or the machine: contained to this job
            cause = self.add(job.job_id, e)
            return _to_review(ctx, job, cause)


def _current(ctx: Context, job: Job) -> Job:
    try:
        return ctx.store.load(job.job_id) or job
    except Exception:
        return job


def _to_review(ctx: Context, job: Job, cause: str) -> Job:
    """The job in REVIEW (``internal_error``) where that is safe, else as it stands."""
    fresh = _current(ctx, job)
    if fresh.state in _KEEP or ctx.store.held_by_other(fresh):
        return fresh
    record = fresh.record.evolve(state=State.REVIEW, failure_code=FailureCode.INTERNAL_ERROR,
                                 failure_detail=cause)
    try:
        return ctx.store.transition(fresh, record, phase=Stage.INTERNAL,
                                    reason=f"stopped for a person: {cause}")
    except LostRace:
        return _current(ctx, job)
    except Exception:  # recording it failed too (the same fault): reported, left as it is
        return fresh
