"""What several commands share: delivering a set of jobs, driving their channels, folding
finished jobs into the archive, the hints.

Above ``delivery`` and ``channels`` (which know nothing of each other): a published job's
channels are driven right after its delivery, in the same run.

Folding (``fold_if_due``) is part of the ordinary flow: every command that delivers (``push``,
``sync``, ``prepare --push``, ``reconcile``) folds the finished jobs into the archive once
``archive_after`` finished job refs piled up (counted without the network), so the refs — and
what every fetch and push of the store costs — stay proportional to the unfinished jobs
without anyone running ``reconcile`` (issue 23 point 8; ``bench/jobstore.py`` measures it). A
fold that cannot run now (the remote does not answer, another gitpub here holds the delivery
lock, the remote's archive is damaged) is said and left to the next run; it is housekeeping,
so it never changes a command's exit code unless it fails unexpectedly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gitpub.core.errors import CorruptStateError, GitpubError, LostRace
from gitpub.core.sanitize import sanitize
from gitpub.core.states import Kind, State
from gitpub.delivery.deliver import BranchMissingError, Deliverer
from gitpub.delivery.fold import Folded, due, fold
from gitpub.delivery.lock import delivery_lock
from gitpub.delivery.shared import Shared
from gitpub.git.locks import LockedError
from gitpub.git.remote import Remote, RemoteConfigError, RemoteError
from gitpub.pipeline.advice import next_step
from gitpub.runtime.contain import Failures
from gitpub.runtime.context import Context
from gitpub.store.jobs import DISTRIBUTING_PREFIX, KEPT_PREFIXES, Job
from gitpub.store.maintenance import pack_refs_if_needed

if TYPE_CHECKING:
    from gitpub.channels.drive import Driver, Report

#: What a job's state tree holds once it has a distribution (``channels.state``: the frozen
#: payload, the channel records, the live check), named here so that a command can tell
#: without loading the channel code that a job has none.
CHANNEL_FILES = ("payload.json", "channels", "live.json")


def read_first(ctx: Context, remote: Remote) -> tuple[str | None, str | None]:
    """A publishing command's first read of refs, in one ``for-each-ref``: (the remote
    branch's tracking ref, the local branch), read exactly, and the listings the command
    keeps from then on (``git.refs``): this clone's active index, job refs and distribution
    index (``KEPT_PREFIXES``), and the remote's job store as last fetched. What the command
    reads of them later costs no git (the job's ref before its claim is read afresh)."""
    ctx.repo.local_prefixes = KEPT_PREFIXES
    tracking, branch = remote.tracking_ref, f"refs/heads/{ctx.config.branch}"
    seen = ctx.repo.read_refs([tracking, branch], also=[*KEPT_PREFIXES, remote.store_prefix])
    return seen[tracking], seen[branch]


def next_steps(ctx: Context, jobs: Sequence[Job]) -> dict[str, str]:
    return {j.job_id: hint for j in jobs if (hint := next_step(ctx, j)) is not None}


def unfinished(ctx: Context, failures: Failures, states: frozenset[State], *,
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


def deliver_one(ctx: Context, job: Job, deliverer: Deliverer, failures: Failures) -> Job:
    """The job delivered as far as it goes; a failure is the job's (see ``contain``). A
    misconfigured remote or a missing branch is not the job's error: it stops the command
    (exit 2) and changes nothing."""
    return failures.contain(ctx, job, deliverer.deliver,
                            stop=(BranchMissingError, RemoteConfigError))


def deliver_all(ctx: Context, jobs: Sequence[Job], deliverer: Deliverer,
                 failures: Failures) -> list[Job]:
    """Each job delivered as far as it goes; a job that fails is reported and left as it
    stands (or in REVIEW, see ``contain``), and the others go on."""
    if jobs:
        deliverer.remote.check()  # no such remote, not a repository: exit 2, nothing changed
    return [deliver_one(ctx, job, deliverer, failures) for job in jobs]


def maintain(ctx: Context, failures: Failures, *, sweep: bool = False) -> None:
    """Housekeeping after delivering (``sweep``: also stale lock files nobody ran into): a
    failure there is reported, never fatal."""
    try:
        if sweep:
            ctx.repo.sweep_stale_locks()
        pack_refs_if_needed(ctx.repo)
    except Exception as e:
        failures.add(None, e)


class ChannelUpstream:
    """The remote's job store as the channel code needs it (``channels.shared.Upstream``):
    fetched, and each job synced with the remote's value by the delivery's own rules
    (``delivery.shared.Shared.sync``: a record is adopted only as a proven publication;
    another request under the key is never written over)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.shared = Shared(ctx, ctx.remote())

    @property
    def remote(self) -> Remote:
        return self.shared.remote

    def refresh(self) -> None:
        self.shared.fetch()

    def sync(self, job: Job) -> Job | None:
        for _ in range(5):
            try:
                synced = self.shared.sync(job)
            except LostRace:  # another process of this clone moved it: again, from there
                fresh = self.ctx.store.load(job.job_id)
                if fresh is None:
                    return None
                job = fresh
                continue
            return None if synced.job_id in self.shared.lost else synced
        raise LostRace(self.ctx.store.ref_name(job.job_id))


class Channels:
    """The channel driver of one command (``channels.drive.Driver``), loaded only when there
    is channel work: channels (or a live check) configured, a distribution index entry, or a
    named job whose state holds channel records. Without any, the driver would only read the
    index and the named jobs and find nothing to do: that much is done here, without loading
    the channel code (a third of a command's imports)."""

    def __init__(self, ctx: Context, *, fetched: bool = False) -> None:
        self.ctx = ctx
        self._fresh = fetched
        self._driver: Driver | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.ctx.config.channels) or self.ctx.config.site.live is not None

    @property
    def fresh(self) -> bool:
        """The job store was fetched in this run already (by the delivery before it)."""
        return self._driver.fresh if self._driver is not None else self._fresh

    @fresh.setter
    def fresh(self, value: bool) -> None:
        self._fresh = value
        if self._driver is not None:
            self._driver.fresh = value

    def driver(self) -> Driver:
        if self._driver is None:
            from gitpub.channels.drive import Driver

            self._driver = Driver(self.ctx, ChannelUpstream(self.ctx), fresh=self._fresh)
        return self._driver

    def expect(self, jobs: Sequence[Job]) -> None:
        if self.enabled:
            self.driver().expect(jobs)

    def found_published(self, job: Job) -> None:
        if self.enabled:
            self.driver().found_published(job)

    def rediscover(self, errors: list[str]) -> list[str]:
        return self.driver().rediscover(errors) if self.enabled else []

    def fold_settled_claims(self) -> int:
        return self.driver().fold_settled_claims()

    def drive_all(self, named: Sequence[Job] = (), *,
                  only_named: bool = False) -> tuple[list[Report], list[str]]:
        """``Driver.drive_all``; without channel work in sight, the same reads (the index, each
        named job as it is now) and nothing else."""
        if self._driver is not None or self.enabled or \
                (not only_named and self.ctx.repo.list_refs(DISTRIBUTING_PREFIX)):
            return self.driver().drive_all(named, only_named=only_named)
        errors: list[str] = []
        for job in dict.fromkeys(j.job_id for j in named):
            try:
                current = self.ctx.store.load(job)
                if current is None:
                    continue
                if any(self.ctx.repo.lookup(current.tree, name) is not None
                       for name in CHANNEL_FILES):
                    return self.driver().drive_all(named, only_named=only_named)
                if current.state == State.SKIPPED or current.record.kind != Kind.PUBLISH:
                    self._unindex(job)  # as the driver does: it has no distribution to come
            except GitpubError as e:
                errors.append(sanitize(e.message))
        return [], errors

    def _unindex(self, job_id: str) -> None:
        ref = DISTRIBUTING_PREFIX + job_id
        current = self.ctx.repo.read_ref(ref)
        if current is not None:
            self.ctx.repo.delete_ref(ref, current)


def driver_for(ctx: Context, *, fetched: bool = False) -> Channels:
    """The channel driver of this command (``fetched``: the job store was fetched in this
    run already, by the delivery)."""
    return Channels(ctx, fetched=fetched)


def distribute(ctx: Context, driver: Channels, done: Sequence[Job], errors: list[str], *,
                only_named: bool = False,
                deliverer: Deliverer | None = None) -> tuple[list[Job], dict[str, Report]]:
    """After delivery: drive the channels of the published jobs (``done``, and unless
    ``only_named`` every job whose distribution is unsettled). Returns the jobs to show (as
    they are now) and their channel reports. ``deliverer``: the delivery of this run (when it
    fetched the job store, the channels do not fetch it again)."""
    if deliverer is not None and deliverer.shared.fetched:
        driver.fresh = True
    reports, failed = driver.drive_all(done, only_named=only_named)
    errors += failed
    by_id = {r.job_id: r for r in reports}
    shown = {j.job_id: j for j in done}
    for job_id in by_id:
        fresh = ctx.store.load(job_id)
        if fresh is not None:
            shown[job_id] = fresh
    return list(shown.values()), by_id


def settled(ctx: Context) -> Callable[[Job], bool]:
    """``job -> bool``: whether a finished job's distribution is settled — SKIPPED, or
    PUBLISHED with no channel left to drive (none recorded, or every one final) and not in
    this clone's distribution index (its channels are about to be recorded). The index is read
    once, at the first PUBLISHED job asked about (a fold asks about thousands)."""
    from gitpub.channels.state import ChannelState

    channels = ChannelState(ctx.store)
    distributing: set[str] = set()
    read: list[bool] = []

    def check(job: Job) -> bool:
        if job.state == State.SKIPPED:
            return True
        if not read:
            distributing.update(name.removeprefix(DISTRIBUTING_PREFIX) for name in
                                ctx.repo.read_together([DISTRIBUTING_PREFIX]))
            read.append(True)
        if job.job_id in distributing:
            return False
        try:
            dist = channels.load(job)
        except CorruptStateError:
            return False
        return dist is None or dist.settled

    return check


def fold_if_due(ctx: Context, deliverer: Deliverer, failures: Failures, *,
                everything: bool = False) -> Folded | None:
    """Fold the finished jobs into the archive when ``archive_after`` of them piled up: as many
    as a publish may take on (``delivery.fold.flow_limit``), or (``everything``, as
    ``reconcile`` does) all; what the fold did, or None when it did not run."""
    shared = deliverer.shared
    if not due(shared, ctx.config.archive_after):
        return None
    try:
        with delivery_lock(ctx.repo, progress=ctx.progress):
            result = fold(shared, settled(ctx), flow=not everything)
    except LockedError:
        ctx.progress("no fold into the archive in this run: another gitpub here holds the "
                     "delivery lock")
        return None
    except RemoteConfigError:
        return None  # said once, by the delivery (exit 2) or the take-over
    except RemoteError as e:
        ctx.progress(f"no fold into the archive in this run: {sanitize(e.message)}")
        return None
    except Exception as e:  # a bug or the machine: reported, the jobs' results stand
        failures.add(None, e)
        return None
    for why in result.skipped:
        ctx.progress(f"archive: {why}")
    if result.changed:
        ctx.progress(f"archive: {result.archived} finished job(s) folded, {result.deleted} "
                     f"job ref(s) deleted on the remote, {result.pruned} here")
    if result.stopped:
        ctx.progress(f"archive: the fold stopped: {result.stopped}; the next run goes on")
    elif result.left:
        ctx.progress(f"archive: {result.left} more finished job ref(s) left for the next runs; "
                     "`git pub reconcile` folds them all")
    return result
