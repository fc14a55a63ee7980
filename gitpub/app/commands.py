"""The commands: each takes plain arguments, does its work and returns a result value.

The command line (``gitpub.cli``) parses options, calls one of these and renders what it
returns, as text or as ``--json``; nothing here prints, except progress through the callback it
is given. A command that handles several jobs goes on past a job it cannot handle: that job's
error is part of the result, and the exit code aggregates.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gitpub.app.session import find_job, open_session
from gitpub.app.sources import read_sources
from gitpub.app.targets import check_targets
from gitpub.core.errors import (
    EXIT_ERROR,
    EXIT_KEY_REUSED,
    EXIT_NEEDS_PERSON,
    EXIT_OK,
    EXIT_UNCONFIRMED,
    CorruptStateError,
    GitpubError,
    UsageError,
)
from gitpub.core.sanitize import sanitize
from gitpub.core.states import LOCAL, TERMINAL, State, exit_code_for
from gitpub.pipeline.context import Context
from gitpub.pipeline.prepare import prepare as run_prepare
from gitpub.pipeline.request import Request
from gitpub.store.jobs import Event, Job
from gitpub.store.maintenance import pack_refs_if_needed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gitpub.app.initialize import Initialized
    from gitpub.delivery.deliver import Deliverer
    from gitpub.delivery.handplan import Outcome
    from gitpub.delivery.sync import Pending
    from gitpub.hooks.install import HookState
    from gitpub.verify.confirm import ConfirmReport

Progress = Callable[[str], None]


def aggregate_exit(jobs: Sequence[Job]) -> int:
    """3 if any job's key was used elsewhere for other content, else 4 if any job needs a
    person, else 5 if any is not confirmed yet, else 0."""
    codes = [exit_code_for(j.state, j.record.failure_code) for j in jobs]
    for code in (EXIT_KEY_REUSED, EXIT_NEEDS_PERSON, EXIT_UNCONFIRMED):
        if code in codes:
            return code
    return EXIT_OK


# -- results -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Prepared:
    job: Job
    created: bool
    note: str | None = None  # what happened to the local checkout (with --push)

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.job.state, self.job.record.failure_code)


@dataclass(frozen=True)
class Jobs:
    """Jobs as they stand after a command, the notes on them, and the jobs it could not read
    or handle (an error each, naming the job)."""

    jobs: tuple[Job, ...]
    errors: tuple[str, ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict)  # job id -> local checkout
    pending: Pending | None = None  # reconcile: hand edits waiting for `git pub sync`
    remark: str | None = None  # sync: what happened to hand edits that made no job
    commits: tuple[Outcome, ...] = ()  # sync: what became of each unpushed commit
    local: str | None = None  # sync: what happened to the local branch

    @property
    def exit_code(self) -> int:
        if self.errors:
            return EXIT_ERROR
        jobs = aggregate_exit(self.jobs)
        if jobs != EXIT_OK:
            return jobs if jobs != EXIT_UNCONFIRMED or not self._needs_person else EXIT_NEEDS_PERSON
        if self._needs_person:
            return EXIT_NEEDS_PERSON
        return EXIT_UNCONFIRMED if any(c.status == "pending" for c in self.commits) else EXIT_OK

    @property
    def _needs_person(self) -> bool:
        """sync: a commit a person must act on (refused, conflicting, in review, blocked)."""
        return any(c.status.needs_person for c in self.commits)


@dataclass(frozen=True)
class History:
    job: Job
    events: tuple[Event, ...]


# -- preparing and looking -----------------------------------------------------------------

def prepare(where: Path, progress: Progress, key: str | None, targets: Sequence[str],
            sources: Sequence[str], push: bool = False) -> Prepared:
    keep = frozenset({State.LOCAL_COMMITTED}) if push else frozenset()
    with open_session(where, progress, keep_lease_in=keep) as ctx:
        drafted = ctx.config.draft is not None
        check_targets(targets, ctx.repo.prefix, ctx.repo.work_tree)
        paths, srcs = read_sources(targets, sources, drafted)
        job, created = run_prepare(ctx, Request(tuple(paths), tuple(srcs), drafted, key))
        if not push:
            return Prepared(job, created, _no_base_note(ctx, job))
        # Deliver it now, in this process: one interpreter start instead of two.
        from gitpub.delivery.deliver import Deliverer

        deliverer = Deliverer(ctx, ctx.remote(), now_please=True)
        job = deliverer.deliver(job)
        return Prepared(job, created, deliverer.notes.get(job.job_id))


def _no_base_note(ctx: Context, job: Job) -> str | None:
    """A job committed on no base at all: its branch exists neither fetched nor locally."""
    if job.state != State.LOCAL_COMMITTED or job.record.base_commit is not None:
        return None
    config = ctx.config
    return (f"no base: neither refs/remotes/{config.remote}/{config.branch} nor "
            f"refs/heads/{config.branch} exists (fetch, or check `branch:` in .gitpub.yaml); "
            "`git pub push` creates no branch unless given --create-branch")


def status(where: Path, progress: Progress, job_ref: str | None,
           show_all: bool) -> Job | Jobs:
    """One job, or the unfinished ones (``show_all``: every job)."""
    with open_session(where, progress) as ctx:
        if job_ref is not None:
            return find_job(ctx.store, job_ref)
        jobs: list[Job] = []
        errors: list[str] = []
        for item in ctx.store.iter_jobs(finished=show_all):
            if isinstance(item, CorruptStateError):
                errors.append(item.message)
            elif show_all or item.state not in TERMINAL:
                jobs.append(item)
    jobs.sort(key=lambda j: j.record.created_at)
    return Jobs(tuple(jobs), tuple(errors))


def log(where: Path, progress: Progress, job_ref: str) -> History:
    with open_session(where, progress) as ctx:
        job = find_job(ctx.store, job_ref)
        return History(job, tuple(ctx.store.history(job)))


def init(where: Path, remote: str | None = None, branch: str | None = None) -> Initialized:
    """Write ``.gitpub.yaml`` for this repository if absent; install the hooks."""
    from gitpub.app.initialize import init as run_init

    return run_init(where, remote, branch)


# -- delivering ----------------------------------------------------------------------------

def _unfinished(ctx: Context, errors: list[str], states: frozenset[State]) -> list[Job]:
    """The unfinished jobs in ``states``, oldest first; unreadable ones go to ``errors``."""
    jobs = []
    for item in ctx.store.iter_jobs(finished=False):
        if isinstance(item, CorruptStateError):
            errors.append(item.message)
        elif item.state in states:
            jobs.append(item)
    return sorted(jobs, key=lambda j: j.record.created_at)


def _deliver_one(job: Job, deliverer: Deliverer, errors: list[str]) -> Job:
    """The job delivered as far as it goes; on an error, the job as it was (error recorded)."""
    from gitpub.delivery.deliver import BranchMissingError

    try:
        return deliverer.deliver(job)
    except BranchMissingError:
        raise  # the configuration is wrong for every job: stop (exit 2), change nothing
    except GitpubError as e:  # one bad job must not stop the others
        errors.append(f"job {job.job_id}: {sanitize(e.message)}")
        return job


def _deliver_all(jobs: Sequence[Job], deliverer: Deliverer, errors: list[str]) -> list[Job]:
    return [_deliver_one(job, deliverer, errors) for job in jobs]


def push(where: Path, progress: Progress, job_refs: Sequence[str],
         create_branch: bool = False) -> Jobs:
    from gitpub.delivery.deliver import DELIVERABLE, Deliverer

    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote(), now_please=bool(job_refs),
                              create_branch=create_branch)
        errors: list[str] = []
        if job_refs:
            jobs = [find_job(ctx.store, ref) for ref in job_refs]
        else:
            jobs = _unfinished(ctx, errors, DELIVERABLE | LOCAL)
        done = _deliver_all(jobs, deliverer, errors)
        pack_refs_if_needed(ctx.repo)
    return Jobs(tuple(done), tuple(errors), dict(deliverer.notes))


def reconcile(where: Path, progress: Progress) -> Jobs:
    """Recover every unfinished job: local phases, unknown push outcomes, expired leases,
    due retries, probes of FAILED jobs. Goes on past a bad job."""
    from gitpub.delivery.deliver import Deliverer
    from gitpub.delivery.sync import settle_outbox

    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote())
        errors: list[str] = []
        everything = frozenset(State) - TERMINAL
        done = _deliver_all(_unfinished(ctx, errors, everything), deliverer, errors)
        pending = settle_outbox(ctx, ctx.repo.read_ref(deliverer.remote.tracking_ref))
        pack_refs_if_needed(ctx.repo)
    return Jobs(tuple(done), tuple(errors), dict(deliverer.notes), pending=pending)


def resolve(where: Path, progress: Progress, job_ref: str,
            action: Literal["retry", "abandon"]) -> Jobs:
    from gitpub.delivery.deliver import Deliverer
    from gitpub.delivery.resolve import resolve as resolve_job
    from gitpub.git.remote import RemoteError

    with open_session(where, progress) as ctx:
        job = resolve_job(ctx.store, find_job(ctx.store, job_ref), action)
        deliverer = Deliverer(ctx, ctx.remote(), now_please=True)
        errors: list[str] = []
        if action == "retry":
            if job.state == State.RECEIVED:
                with contextlib.suppress(RemoteError):
                    deliverer.remote.fetch()  # re-snapshot against the current remote
            job = _deliver_one(job, deliverer, errors)
    return Jobs((job,), tuple(errors), dict(deliverer.notes))


def sync(where: Path, progress: Progress) -> Jobs:
    """Deliver every deliverable job, then the local branch's hand commits and uncommitted
    content changes (``delivery.sync``): whole, or not at all."""
    from gitpub.delivery.deliver import DELIVERABLE, Deliverer
    from gitpub.delivery.sync import settle_outbox, supersede, sync_changes
    from gitpub.git.remote import RemoteError

    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote())
        errors: list[str] = []
        try:
            tip: str | None = deliverer.remote.fetch()
            unreachable = None
        except RemoteError as e:
            tip, unreachable = None, e.message
        stale = supersede(ctx, tip) if unreachable is None else []
        done = _deliver_all(_unfinished(ctx, errors, DELIVERABLE | LOCAL), deliverer, errors)
        if unreachable is not None:
            errors.append(f"hand edits not synced: {unreachable}")
            return Jobs(tuple(done), tuple(errors), dict(deliverer.notes))
        tip = ctx.repo.read_ref(deliverer.remote.tracking_ref)
        report = sync_changes(ctx, tip, lambda job: _deliver_one(job, deliverer, errors))
        settle_outbox(ctx, ctx.repo.read_ref(deliverer.remote.tracking_ref))
    touched = {j.job_id: j for j in [*stale, *done, *report.jobs]}
    return Jobs(tuple(touched.values()), tuple(errors), dict(deliverer.notes),
                remark="; ".join(report.notes) or None, commits=tuple(report.outcomes),
                local=report.local)


# -- CI and hooks --------------------------------------------------------------------------

def confirm(where: Path, progress: Progress, rev_range: str | None,
            push_notes: bool, accept: str | None = None,
            reason: str | None = None) -> ConfirmReport:
    """Verify the remote branch (CI); with ``accept``, record a person's acceptance of the BAD
    verdict on that commit instead."""
    from gitpub.verify.confirm import accept as accept_bad
    from gitpub.verify.confirm import confirm as run_confirm

    if (accept is None) != (reason is None):
        raise UsageError("--accept SHA and --reason TEXT go together")
    with open_session(where, progress) as ctx:
        if accept is not None and reason is not None:
            who = ctx.repo.user_identity()
            return accept_bad(ctx.repo, ctx.remote(), accept, reason,
                              f"{who.name} <{who.email}>", push_notes=push_notes)
        return run_confirm(ctx.repo, ctx.config, ctx.remote(), rev_range=rev_range,
                           push_notes=push_notes, progress=progress)


def hooks_install(where: Path, hooks_path_ok: bool) -> list[HookState]:
    from gitpub.hooks.install import install

    return install(where, hooks_path_ok=hooks_path_ok)


def hooks_uninstall(where: Path) -> list[HookState]:
    from gitpub.hooks.install import uninstall

    return uninstall(where)
