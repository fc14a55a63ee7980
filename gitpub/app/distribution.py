"""Driving the channels of published jobs, for the commands that publish (``prepare``,
``push``, ``sync``, ``resolve``, ``reconcile``).

Apart from ``app.common`` (the delivery of jobs): ``prepare`` without ``--push`` drives no
delivery, so it loads none of the delivery code; the channel code itself (``channels.drive``,
a third of a command's imports) is loaded only when there is channel work (``Channels``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gitpub.core.errors import CorruptStateError, GitpubError, LostRace
from gitpub.core.sanitize import sanitize
from gitpub.core.states import Kind, State
from gitpub.git.remote import Remote
from gitpub.runtime.context import Context
from gitpub.store.jobs import DISTRIBUTING_PREFIX, Job

if TYPE_CHECKING:
    from gitpub.channels.drive import Driver, Report
    from gitpub.delivery.deliver import Deliverer
    from gitpub.delivery.shared import Shared

#: What a job's state tree holds once it has a distribution (``channels.state``: the frozen
#: payload, the channel records, the live check), named here so that a command can tell
#: without loading the channel code that a job has none.
CHANNEL_FILES = ("payload.json", "channels", "live.json")


class ChannelUpstream:
    """The remote's job store as the channel code needs it (``channels.shared.Upstream``):
    fetched, and each job synced with the remote's value by the delivery's own rules
    (``delivery.shared.Shared.sync``: a record is adopted only as a proven publication;
    another request under the key is never written over)."""

    def __init__(self, ctx: Context) -> None:
        from gitpub.delivery.shared import Shared  # only with channel work to drive

        self.ctx = ctx
        self.shared: Shared = Shared(ctx, ctx.remote())

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
    once, at the first PUBLISHED job asked about (a fold asks about thousands), as it is then:
    never as a publishing command kept it from its start (``git.refs``), for no
    compare-and-swap on it checks the fold's decision."""
    from gitpub.channels.state import ChannelState

    channels = ChannelState(ctx.store)
    distributing: set[str] = set()
    read: list[bool] = []

    def check(job: Job) -> bool:
        if job.state == State.SKIPPED:
            return True
        if not read:
            distributing.update(name.removeprefix(DISTRIBUTING_PREFIX) for name in
                                ctx.repo.read_together([DISTRIBUTING_PREFIX], fresh=True))
            read.append(True)
        if job.job_id in distributing:
            return False
        try:
            dist = channels.load(job)
        except CorruptStateError:
            return False
        return dist is None or dist.settled

    return check
