"""The commands: each takes plain arguments, does its work and returns a result value.

The command line (``gitpub.cli``) parses options, calls one of these and renders what it
returns, as text or as ``--json``; nothing here prints, except progress through the callback it
is given. A command that handles several jobs goes on past a job it cannot handle: that job's
error is part of the result, and the exit code aggregates.

The pipeline, the delivery machinery (which write objects: dulwich) and the channel code are
imported by the commands that run them, where they run: ``status`` and ``log`` start without
them (together they cost more than everything ``status`` loads).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from gitpub.app.advice import next_step
from gitpub.app.anywhere import find_anywhere, find_here, find_job_or_adopt, share, take_over
from gitpub.app.contain import Failures
from gitpub.app.initialize import Initialized
from gitpub.app.initialize import init as run_init
from gitpub.app.session import open_session
from gitpub.app.targets import check_targets
from gitpub.core.errors import (
    EXIT_ERROR,
    EXIT_KEY_REUSED,
    EXIT_NEEDS_PERSON,
    EXIT_OK,
    EXIT_UNCONFIRMED,
    CorruptStateError,
)
from gitpub.core.states import LOCAL, TERMINAL, State, exit_code_for
from gitpub.git.remote import RemoteConfigError, RemoteError
from gitpub.hooks.install import HookState
from gitpub.hooks.install import install as install_hooks
from gitpub.hooks.install import uninstall as uninstall_hooks
from gitpub.pipeline.context import Context
from gitpub.store.jobs import DISTRIBUTING_PREFIX, Event, Job
from gitpub.store.maintenance import pack_refs_if_needed

if TYPE_CHECKING:
    from gitpub.channels.drive import Driver, Report
    from gitpub.channels.resolve import Decision
    from gitpub.delivery.deliver import Deliverer
    from gitpub.delivery.handplan import Outcome
    from gitpub.delivery.resolve import Action
    from gitpub.delivery.sync import Pending

Progress = Callable[[str], None]


def aggregate_exit(jobs: Sequence[Job], extra: Sequence[int] = ()) -> int:
    """3 if any job's key was used elsewhere for other content, else 4 if any job (or channel:
    ``extra``) needs a person, else 5 if any is not confirmed yet, else 0."""
    codes = [exit_code_for(j.state, j.record.failure_code) for j in jobs] + list(extra)
    for code in (EXIT_KEY_REUSED, EXIT_NEEDS_PERSON, EXIT_UNCONFIRMED):
        if code in codes:
            return code
    return EXIT_OK


# -- results: frozen values (``NamedTuple``s: every command defines them at its start) ------

class Prepared(NamedTuple):
    job: Job
    created: bool
    note: str | None = None  # what happened to the local checkout (with --push)
    hint: str | None = None  # what to do next
    channels: Report | None = None  # with --push: the published job's channels
    held: bool = False  # with --push: left unfinished to another worker (exit 5)

    @property
    def exit_code(self) -> int:
        if self.channels is not None and self.channels.errors:
            return EXIT_ERROR
        code = aggregate_exit([self.job],
                              [] if self.channels is None else [self.channels.exit_code])
        return EXIT_UNCONFIRMED if self.held and code == EXIT_OK else code


class Shown(NamedTuple):
    """One job, and what to do next with it."""

    job: Job
    hint: str | None = None
    channels: Report | None = None  # a published job's channels, as recorded


class Jobs(NamedTuple):
    """Jobs as they stand after a command, the notes on them, and the jobs it could not read
    or handle (an error each, naming the job)."""

    jobs: tuple[Job, ...]
    errors: tuple[str, ...] = ()
    notes: Mapping[str, str] = {}  # job id -> local checkout (read only, as every default)
    pending: Pending | None = None  # reconcile: hand edits waiting for `git pub sync`
    remark: str | None = None  # sync: what happened to hand edits that made no job
    commits: tuple[Outcome, ...] = ()  # sync: what became of each unpushed commit
    local: str | None = None  # sync: what happened to the local branch
    hints: Mapping[str, str] = {}  # job id -> what to do next
    #: Work that is not confirmed yet and needs another run (sync: hand edits not delivered
    #: because the remote did not answer): exit 5, as a job in RETRY_WAIT.
    unconfirmed: tuple[str, ...] = ()
    channels: Mapping[str, Report] = {}  # job id -> its channels
    tracebacks: tuple[str, ...] = ()  # of the unexpected errors among ``errors`` (--debug)
    #: Jobs left unfinished to another worker (fenced, or held): not confirmed (exit 5).
    held: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        if self.errors or any(r.errors for r in self.channels.values()):
            return EXIT_ERROR
        code = aggregate_exit(self.jobs, [r.exit_code for r in self.channels.values()])
        if code in (EXIT_KEY_REUSED, EXIT_NEEDS_PERSON):
            return code
        if any(c.status.needs_person for c in self.commits):
            return EXIT_NEEDS_PERSON  # sync: a commit a person must act on
        if code == EXIT_UNCONFIRMED or self.unconfirmed or self.held or any(
                c.status == "pending" for c in self.commits):
            return EXIT_UNCONFIRMED
        return code


def _hints(ctx: Context, jobs: Sequence[Job]) -> dict[str, str]:
    return {j.job_id: hint for j in jobs if (hint := next_step(ctx, j)) is not None}


class History(NamedTuple):
    """A job and its events, oldest first."""

    job: Job
    events: tuple[Event, ...]


# -- preparing and looking -----------------------------------------------------------------

def prepare(where: Path, progress: Progress, key: str | None, targets: Sequence[str],
            sources: Sequence[str], push: bool = False) -> Prepared:
    from gitpub.app.sources import read_sources
    from gitpub.pipeline.prepare import prepare as run_prepare
    from gitpub.pipeline.request import Request

    keep = frozenset({State.LOCAL_COMMITTED}) if push else frozenset()
    with open_session(where, progress, keep_lease_in=keep) as ctx:
        drafted = ctx.config.draft is not None
        check_targets(targets, ctx.repo.prefix, ctx.repo.work_tree)
        paths, srcs = read_sources(targets, sources, drafted)
        job, created = run_prepare(ctx, Request(tuple(paths), tuple(srcs), drafted, key))
        if created and job.state == State.PUBLISHED:  # published by another clone already
            _driver(ctx).found_published(job)
        if not push:
            return Prepared(job, created, _no_base_note(ctx, job), next_step(ctx, job))
        # Deliver it now, in this process: one interpreter start instead of two.
        from gitpub.delivery.deliver import Deliverer

        deliverer = Deliverer(ctx, ctx.remote(), now_please=True)
        driver = _driver(ctx)
        driver.expect([job])
        job = deliverer.deliver(job)
        reports, failed = driver.drive_all([job], only_named=True)
        job = ctx.store.load(job.job_id) or job
        report = reports[0] if reports else None
        if failed:
            from gitpub.channels.drive import Report

            report = Report(job.job_id, None, errors=tuple(failed))
        return Prepared(job, created, deliverer.notes.get(job.job_id), next_step(ctx, job),
                        report, deliverer.left_to_others(job))


def _no_base_note(ctx: Context, job: Job) -> str | None:
    """A job committed on no base at all: its branch exists neither fetched nor locally."""
    if job.state != State.LOCAL_COMMITTED or job.record.base_commit is not None:
        return None
    config = ctx.config
    return (f"no base: neither refs/remotes/{config.remote}/{config.branch} nor "
            f"refs/heads/{config.branch} exists (fetch, or check `branch:` in .gitpub.yaml); "
            "`git pub push` creates no branch unless given --create-branch")


def status(where: Path, progress: Progress, job_ref: str | None,
           show_all: bool) -> Shown | Jobs:
    """One job, or the unfinished ones (``show_all``: every job); a published job whose
    channels are not settled yet is unfinished too. Channel records are shown as they are
    (the channel code is loaded only when a job can have some: a published one, or one in the
    distribution index)."""
    with open_session(where, progress) as ctx:
        if job_ref is not None:
            job = find_anywhere(ctx, job_ref)
            if job.state != State.PUBLISHED:
                return Shown(job, next_step(ctx, job), None)
            from gitpub.channels.drive import channel_reports

            return Shown(job, next_step(ctx, job),
                         channel_reports(ctx, [job], strict=True).get(job.job_id))
        jobs: list[Job] = []
        failures = Failures()
        errors = failures.errors
        for item in ctx.store.iter_jobs(finished=show_all):
            if isinstance(item, CorruptStateError):
                failures.add(None, item)
            elif show_all or item.state not in TERMINAL:
                jobs.append(item)
        channels: dict[str, Report] = {}
        if any(j.state == State.PUBLISHED for j in jobs) or \
                (not show_all and ctx.repo.list_refs(DISTRIBUTING_PREFIX)):
            from gitpub.channels.drive import channel_reports, unsettled

            if not show_all:
                jobs += unsettled(ctx, {j.job_id for j in jobs}, errors)
            channels = channel_reports(ctx, jobs, errors=errors)
        jobs.sort(key=lambda j: j.record.created_at)
        return Jobs(tuple(jobs), tuple(errors), hints=_hints(ctx, jobs), channels=channels,
                    tracebacks=tuple(failures.tracebacks))


def log(where: Path, progress: Progress, job_ref: str) -> History:
    with open_session(where, progress) as ctx:
        job = find_anywhere(ctx, job_ref)
        return History(job, tuple(ctx.store.history(job)))


def init(where: Path, remote: str | None = None, branch: str | None = None) -> Initialized:
    """Write ``.gitpub.yaml`` for this repository if absent; install the hooks."""
    return run_init(where, remote, branch)


# -- delivering ----------------------------------------------------------------------------

def _unfinished(ctx: Context, failures: Failures, states: frozenset[State], *,
                scan: bool = False) -> list[Job]:
    """The unfinished jobs in ``states``, oldest first, from the active index (``scan``: from
    every job ref, the index rebuilt on the way); unreadable ones go to ``failures``."""
    jobs = []
    for item in ctx.store.iter_jobs(finished=scan):
        if isinstance(item, CorruptStateError):
            failures.add(None, item)
        elif item.state in states:
            jobs.append(item)
    if scan:
        for job_id in ctx.store.rebuild_index(jobs):
            ctx.progress(f"job {job_id} was missing from the active index: indexed again")
    return sorted(jobs, key=lambda j: j.record.created_at)


def _deliver_one(ctx: Context, job: Job, deliverer: Deliverer, failures: Failures) -> Job:
    """The job delivered as far as it goes; a failure is the job's (see ``contain``). A
    misconfigured remote or a missing branch is not the job's error: it stops the command
    (exit 2) and changes nothing."""
    from gitpub.delivery.deliver import BranchMissingError

    return failures.contain(ctx, job, deliverer.deliver,
                            stop=(BranchMissingError, RemoteConfigError))


def _deliver_all(ctx: Context, jobs: Sequence[Job], deliverer: Deliverer,
                 failures: Failures) -> list[Job]:
    """Each job delivered as far as it goes; a job that fails is reported and left as it
    stands (or in REVIEW, see ``contain``), and the others go on."""
    if jobs:
        deliverer.remote.check()  # no such remote, not a repository: exit 2, nothing changed
    return [_deliver_one(ctx, job, deliverer, failures) for job in jobs]


def _maintain(ctx: Context, failures: Failures, *, sweep: bool = False) -> None:
    """Housekeeping after delivering (``sweep``: also stale lock files nobody ran into): a
    failure there is reported, never fatal."""
    try:
        if sweep:
            ctx.repo.sweep_stale_locks()
        pack_refs_if_needed(ctx.repo)
    except Exception as e:
        failures.add(None, e)


def _driver(ctx: Context) -> Driver:
    from gitpub.channels.drive import Driver

    return Driver(ctx)


def _distribute(ctx: Context, driver: Driver, done: Sequence[Job], errors: list[str], *,
                only_named: bool = False) -> tuple[list[Job], dict[str, Report]]:
    """After delivery: drive the channels of the published jobs (``done``, and unless
    ``only_named`` every job whose distribution is unsettled). Returns the jobs to show (as
    they are now) and their channel reports."""
    reports, failed = driver.drive_all(done, only_named=only_named)
    errors += failed
    by_id = {r.job_id: r for r in reports}
    shown = {j.job_id: j for j in done}
    for job_id in by_id:
        fresh = ctx.store.load(job_id)
        if fresh is not None:
            shown[job_id] = fresh
    return list(shown.values()), by_id


def push(where: Path, progress: Progress, job_refs: Sequence[str],
         create_branch: bool = False) -> Jobs:
    from gitpub.delivery.deliver import DELIVERABLE, Deliverer

    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote(), now_please=bool(job_refs),
                              create_branch=create_branch)
        failures = Failures()
        errors = failures.errors
        if job_refs:
            jobs = [find_here(ctx, ref) for ref in job_refs]
        else:
            jobs = _unfinished(ctx, failures, DELIVERABLE | LOCAL)
        driver = _driver(ctx)
        driver.expect(jobs)
        done = _deliver_all(ctx, jobs, deliverer, failures)
        done, channels = _distribute(ctx, driver, done, errors, only_named=bool(job_refs))
        _maintain(ctx, failures)
        return Jobs(tuple(done), tuple(errors), dict(deliverer.notes), hints=_hints(ctx, done),
                    channels=channels, tracebacks=tuple(failures.tracebacks),
                    held=tuple(j.job_id for j in done if deliverer.left_to_others(j)))


def reconcile(where: Path, progress: Progress) -> Jobs:
    """Recover every unfinished job: local phases, unknown push outcomes, expired leases,
    due retries, probes of FAILED jobs. Scans every job ref (the active index is derived data,
    rebuilt here, never trusted) and goes on past a bad job. With a misconfigured remote, the
    local phases are still recovered, then the configuration error is reported."""
    from gitpub.app.archiving import fold_if_due
    from gitpub.delivery.deliver import Deliverer
    from gitpub.delivery.sync import settle_outbox
    from gitpub.pipeline.prepare import drive

    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote())
        failures = Failures()
        errors = failures.errors
        everything = frozenset(State) - TERMINAL
        jobs = _unfinished(ctx, failures, everything, scan=True)
        taken, not_taken = take_over(ctx, deliverer, failures)
        jobs += taken
        driver = _driver(ctx)
        driver.expect(jobs)
        driver.rediscover(errors)
        try:
            done = _deliver_all(ctx, jobs, deliverer, failures)
        except RemoteConfigError:
            for job in jobs:
                if job.state in LOCAL:
                    failures.contain(ctx, job, lambda j: drive(ctx, j))
            raise
        done, channels = _distribute(ctx, driver, done, errors)
        pending = None
        try:
            pending = settle_outbox(ctx, ctx.repo.read_ref(deliverer.remote.tracking_ref))
        except Exception as e:
            failures.add(None, e)
        fold_if_due(ctx, deliverer, failures)
        _maintain(ctx, failures, sweep=True)
        return Jobs(tuple(done), tuple(errors), dict(deliverer.notes), pending=pending,
                    hints=_hints(ctx, done), channels=channels,
                    tracebacks=tuple(failures.tracebacks), unconfirmed=tuple(
                        [] if not_taken is None else [not_taken]),
                    held=tuple(j.job_id for j in done if deliverer.left_to_others(j)))


def resolve(where: Path, progress: Progress, job_ref: str, action: Action,
            from_file: str | None = None, push: bool = False,
            allow_empty: bool = False) -> Jobs:
    """A person's way out of REVIEW, CONFLICT or FAILED, or abandoning a job (see
    ``delivery.resolve``); the merged content of ``--from`` is read from ``from_file``."""
    from gitpub.app.sources import read_merged
    from gitpub.delivery.resolve import Resolution
    from gitpub.delivery.resolve import resolve as resolve_job

    merged = None if from_file is None else read_merged(from_file, allow_empty)
    with open_session(where, progress) as ctx:
        job = find_job_or_adopt(ctx, job_ref)
        driver = _driver(ctx)
        driver.expect([job])  # a retry may publish it: its channels follow
        result = resolve_job(ctx, job, Resolution(action, merged, from_file, push))
        share(ctx, result.job)
        notes = {} if result.note is None else {result.job.job_id: result.note}
        errors: list[str] = []
        (shown,), channels = _distribute(ctx, driver, [result.job], errors, only_named=True)
        return Jobs((shown,), tuple(errors), notes, hints=_hints(ctx, [shown]),
                    channels=channels)


def resolve_channel(where: Path, progress: Progress, job_ref: str, channel: str,
                    decision: Decision, url: str | None) -> Jobs:
    """A person's decision on one channel, recorded; then the job's channels are driven."""
    from gitpub.channels.resolve import resolve_channel as resolve_one

    with open_session(where, progress) as ctx:
        job = resolve_one(ctx.store, find_here(ctx, job_ref), channel, decision, url)
        errors: list[str] = []
        done, channels = _distribute(ctx, _driver(ctx), [job], errors, only_named=True)
        return Jobs(tuple(done), tuple(errors), hints=_hints(ctx, done), channels=channels)


def metrics(where: Path, progress: Progress) -> str:
    """The Prometheus text of ``git pub metrics``."""
    from gitpub.channels.metrics import gather, render

    with open_session(where, progress) as ctx:
        return render(gather(ctx.store))


def sync(where: Path, progress: Progress) -> Jobs:
    """Deliver every deliverable job, then the local branch's hand commits and uncommitted
    content changes (``delivery.sync``): whole, or not at all."""
    from gitpub.delivery.deliver import DELIVERABLE, Deliverer
    from gitpub.delivery.sync import settle_outbox, supersede, sync_changes

    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote())
        deliverer.remote.check()  # no such remote, not a repository: exit 2, nothing changed
        failures = Failures()
        errors = failures.errors
        try:
            tip: str | None = deliverer.remote.fetch()
            unreachable = None
        except RemoteError as e:  # a transient: as a job in RETRY_WAIT, run again later
            tip, unreachable = None, e.message
        stale = supersede(ctx, tip) if unreachable is None else []
        jobs = _unfinished(ctx, failures, DELIVERABLE | LOCAL)
        driver = _driver(ctx)
        driver.expect(jobs)
        done = _deliver_all(ctx, jobs, deliverer, failures)
        done, channels = _distribute(ctx, driver, done, errors)
        if unreachable is not None:
            return Jobs(tuple(done), tuple(errors), dict(deliverer.notes),
                        hints=_hints(ctx, done),
                        unconfirmed=(f"hand edits not synced: {unreachable}",),
                        channels=channels, tracebacks=tuple(failures.tracebacks))
        tip = ctx.repo.read_ref(deliverer.remote.tracking_ref)
        report = sync_changes(ctx, tip,
                              lambda job: _deliver_one(ctx, job, deliverer, failures))
        try:
            settle_outbox(ctx, ctx.repo.read_ref(deliverer.remote.tracking_ref))
        except Exception as e:
            failures.add(None, e)
        touched = list({j.job_id: j for j in [*stale, *done, *report.jobs]}.values())
        hints = _hints(ctx, touched)
    return Jobs(tuple(touched), tuple(errors), dict(deliverer.notes),
                remark="; ".join(report.notes) or None, commits=tuple(report.outcomes),
                local=report.local, hints=hints, channels=channels,
                tracebacks=tuple(failures.tracebacks))


# -- CI and hooks --------------------------------------------------------------------------

def hooks_install(where: Path, hooks_path_ok: bool) -> list[HookState]:
    return install_hooks(where, hooks_path_ok=hooks_path_ok)


def hooks_uninstall(where: Path) -> list[HookState]:
    return uninstall_hooks(where)
