"""What the commands return: frozen values the command line renders, and their exit codes.

A command takes plain arguments, does its work and returns one of these; nothing in ``app``
prints, except progress through the callback it is given. A command that handles several jobs
goes on past a job it cannot handle: that job's error is part of the result, and the exit code
aggregates (``aggregate_exit``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from gitpub.core.errors import (
    EXIT_ERROR,
    EXIT_KEY_REUSED,
    EXIT_NEEDS_PERSON,
    EXIT_OK,
    EXIT_UNCONFIRMED,
)
from gitpub.core.states import exit_code_for

if TYPE_CHECKING:
    from gitpub.channels.drive import Report as ChannelReport
    from gitpub.delivery.handplan import Outcome
    from gitpub.delivery.sync import Pending
    from gitpub.store.jobs import Event, Job
__all__ = ["ChannelReport", "Event", "History", "Job", "Jobs", "Prepared", "Progress", "Shown",
           "aggregate_exit"]  # Job, Event, ChannelReport: for the command line's types

Progress = Callable[[str], None]


def aggregate_exit(jobs: Sequence[Job], extra: Sequence[int] = ()) -> int:
    """3 if any job's key was used elsewhere for other content, else 4 if any job (or channel:
    ``extra``) needs a person, else 5 if any is not confirmed yet, else 0."""
    codes = [exit_code_for(j.state, j.record.failure_code) for j in jobs] + list(extra)
    for code in (EXIT_KEY_REUSED, EXIT_NEEDS_PERSON, EXIT_UNCONFIRMED):
        if code in codes:
            return code
    return EXIT_OK


class Prepared(NamedTuple):
    job: Job
    created: bool
    note: str | None = None  # what happened to the local checkout (with --push)
    hint: str | None = None  # what to do next
    channels: ChannelReport | None = None  # with --push: the published job's channels
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
    channels: ChannelReport | None = None  # a published job's channels, as recorded


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
    channels: Mapping[str, ChannelReport] = {}  # job id -> its channels
    tracebacks: tuple[str, ...] = ()  # of the unexpected errors among ``errors`` (--debug)
    #: Jobs left unfinished to another worker (fenced, or held): not confirmed (exit 5).
    held: tuple[str, ...] = ()
    #: sync: why the uncommitted content changes were not committed (exit 4: a person acts).
    refusal: str | None = None

    @property
    def exit_code(self) -> int:
        if self.errors or any(r.errors for r in self.channels.values()):
            return EXIT_ERROR
        code = aggregate_exit(self.jobs, [r.exit_code for r in self.channels.values()])
        if code in (EXIT_KEY_REUSED, EXIT_NEEDS_PERSON):
            return code
        if self.refusal or any(c.status.needs_person for c in self.commits):
            return EXIT_NEEDS_PERSON  # sync: a commit a person must act on
        if code == EXIT_UNCONFIRMED or self.unconfirmed or self.held or any(
                c.status == "pending" for c in self.commits):
            return EXIT_UNCONFIRMED
        return code


class History(NamedTuple):
    """A job and its events, oldest first."""

    job: Job
    events: tuple[Event, ...]
