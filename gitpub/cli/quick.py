"""``status``, ``log`` and ``confirm`` without click: the commands people, agents and CI run
most, started fast.

click costs ~20 ms to import and the option definitions of every command more; ``status`` must
start in a small multiple of a bare interpreter (``bench/startup.py``), and CI starts
``confirm`` on every push. So the plain forms of these commands — ``[-C PATH]… [--json]
[--debug] status [--all] [JOB]``, ``… log JOB`` and ``… confirm [--no-push-notes] [--range
A..B]``, options in any order — are recognised here (``parse``) and run without click
(``run``); every other form (``-h``, ``--``, an unknown option, a second JOB, ``--range=R``,
a value that starts with ``-``, ``confirm --accept``) goes to the option parser, which gives
its usage, or its usage error, as always. Both ways run the same functions (``status``,
``log``, ``confirm``: the click commands call them too), report errors through the same
``cli.guard``, and a test runs each plain form both ways and compares the bytes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gitpub.core.errors import EXIT_ERROR, EXIT_OK, UsageError

TYPE_CHECKING = False  # typing costs ~1.5 ms to import; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Sequence

    from gitpub.cli.output import Output

#: The commands ``cli.main`` defines (the hook commands are added there when used); a test
#: keeps the two equal. A usage error's hint names the first of them on the command line.
COMMANDS = ("init", "prepare", "status", "log", "push", "sync", "doctor", "reconcile",
            "resolve", "metrics", "confirm", "demo")
_COMMON = frozenset({"--json", "--debug"})
_FLAGS = {"status": _COMMON | {"--all"}, "log": _COMMON, "confirm": _COMMON | {"--no-push-notes"}}


class Request:
    """A plain ``status``, ``log`` or ``confirm`` command line, parsed."""

    def __init__(self, command: str, paths: list[str], job: str | None, show_all: bool,
                 as_json: bool, debug: bool, rev_range: str | None = None,
                 push_notes: bool = True) -> None:
        self.command, self.paths, self.job = command, paths, job
        self.show_all, self.json, self.debug = show_all, as_json, debug
        self.rev_range, self.push_notes = rev_range, push_notes


def parse(args: Sequence[str]) -> Request | None:
    """The plain ``status``/``log``/``confirm`` command line ``args`` describes, or None
    (click's)."""
    paths: list[str] = []
    i = 0
    while i < len(args) and args[i] in _COMMON | {"-C"}:
        if args[i] == "-C":
            if i + 1 == len(args) or not _plain(args[i + 1]):
                return None
            paths.append(args[i + 1])
            i += 1
        i += 1
    if i == len(args) or args[i] not in _FLAGS:
        return None
    command, rest = args[i], list(args[i + 1:])
    rev_range = None
    if command == "confirm":
        if rest.count("--range") > 1:
            return None
        if "--range" in rest:
            at = rest.index("--range")
            if at + 1 == len(rest) or not _plain(rest[at + 1]):
                return None
            rev_range = rest[at + 1]
            del rest[at:at + 2]
        if any(not a.startswith("-") for a in rest):
            return None  # confirm takes no argument: the option parser says so
    if any(a.startswith("-") and a not in _FLAGS[command] for a in rest):
        return None
    jobs = [a for a in rest if not a.startswith("-")]
    if not all(_plain(j) for j in jobs) or len(jobs) > 1 or (command == "log" and not jobs):
        return None
    debug = "--debug" in args or os.environ.get("GITPUB_DEBUG") == "1"
    return Request(command, paths, jobs[0] if jobs else None, "--all" in rest,
                   "--json" in args, debug, rev_range, "--no-push-notes" not in rest)


def _plain(value: str) -> bool:
    return bool(value) and not value.startswith("-")


def run(request: Request, args: Sequence[str]) -> int:
    """Run a parsed ``status``/``log``, every outcome reported as ``cli.main`` reports it."""
    from gitpub.cli.guard import guarded

    return guarded(lambda: _run(request), args, COMMANDS)


def _run(request: Request) -> int:
    from gitpub.cli.output import Output

    for p in request.paths:  # as the option parser's -C does
        try:
            os.chdir(p)
        except OSError as e:
            raise UsageError(f"cannot change to {p!r}: {e.strerror}") from None
    out = Output(json=request.json)
    if request.command == "confirm":
        return confirm(out, request.rev_range, request.push_notes)
    if request.command == "log":
        assert request.job is not None
        return log(out, request.job)
    return status(out, request.debug, request.job, request.show_all)


def status(out: Output, debug: bool, job: str | None, show_all: bool) -> int:
    """``git pub status [--all] [JOB]``: shows, and returns the exit code."""
    from gitpub.app import commands
    from gitpub.cli import render

    result = commands.status(Path.cwd(), out.progress, job, show_all)
    if not isinstance(result, commands.Jobs):
        report = result.channels
        out.emit(render.job_json(result.job, hint=result.hint) | render.channels_json(report),
                 render.with_hint("\n".join([render.describe_job(result.job),
                                             *render.channels_text(report, "  ")]),
                                  result.hint))
        return EXIT_OK
    if debug:  # the traceback of every unexpected error a job met (on stderr)
        for text in result.tracebacks:
            sys.stderr.write(text)
    out.emit(render.jobs_json(result),
             render.jobs_text(result, "no jobs" if show_all else "no unfinished jobs"))
    return EXIT_ERROR if result.errors else EXIT_OK


def log(out: Output, job: str) -> int:
    """``git pub log JOB``: shows the job's event history."""
    from gitpub.app import commands
    from gitpub.cli import render

    history = commands.log(Path.cwd(), out.progress, job)
    out.emit(render.history_json(history), render.history_text(history))
    return EXIT_OK


def _settled() -> None:
    """The objects the imports made are kept out of the collector's way (``gc.freeze``):
    they live as long as the process, and each collection — and the interpreter's exit —
    would walk them all again (measured: 50 ms of a first ``confirm``'s exit)."""
    import gc

    gc.freeze()


def confirm(out: Output, rev_range: str | None, push_notes: bool, accept: str | None = None,
            reason: str | None = None) -> int:
    """``git pub confirm``: shows the report, and returns the exit code (1 while a BAD verdict
    is open)."""
    from gitpub.app import ci
    from gitpub.cli import confirm_view

    _settled()
    report = ci.confirm(Path.cwd(), out.progress, rev_range, push_notes, accept, reason)
    out.emit(confirm_view.confirm_json(report),
             confirm_view.confirm_text(report, accepting=accept))
    return EXIT_ERROR if report.failed else EXIT_OK
