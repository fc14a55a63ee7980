"""Every outcome of a run as an exit code and one error format.

A ``GitpubError`` is its one line and its ``hint:`` (or the fallback hint, below), a lost race
is exit 5 with a hint, anything unexpected is one line (a traceback only with ``--debug``), ^C
is 130; the working directory that ``-C`` changed is restored.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Collection, Sequence

from gitpub.cli.output import report_error
from gitpub.core.errors import (
    CONFIG_FILE,
    EXIT_ERROR,
    EXIT_UNCONFIRMED,
    ConfigError,
    CorruptStateError,
    GitpubError,
    LostRace,
    TryLaterError,
    UsageError,
)

#: The exit status of a run interrupted by ^C, as shells report it.
EXIT_INTERRUPTED = 130


def fallback_hint(error: GitpubError, args: Sequence[str], commands: Collection[str]) -> str:
    """The next step for an error raised without a hint of its own: every non-OK outcome
    says what to do, even where the code that failed could not know. ``commands``: the
    command names the command line knows (for a usage error: `git pub CMD -h`)."""
    if isinstance(error, ConfigError):
        return (f"fix {error.source or CONFIG_FILE} (a committed file: commit and push the fix); "
                "`git pub doctor` checks the configuration")
    if isinstance(error, CorruptStateError):
        return ("nothing was changed; `git pub doctor` names unreadable job state (left as "
                "it is, for repair)")
    if isinstance(error, TryLaterError):
        return "nothing was changed; run the same command again later"
    if isinstance(error, UsageError):
        command = next((a for a in args if a in commands), None)
        return f"`git pub {command} -h` shows the usage" if command \
            else "`git pub -h` lists the commands"
    return "`git pub doctor` checks the repository; rerun with --debug for details"


def guarded(body: Callable[[], int], args: Sequence[str], commands: Collection[str]) -> int:
    """``body()``'s exit code; whatever it raises, reported as the command line reports it.
    A reader that went away (``git pub status | head -1``: a broken pipe, while the command
    wrote or while it reported an error) ends the run quietly with exit 1, as click ends it
    (``click.BaseCommand.main``)."""
    try:
        return _guarded(body, args, commands)
    except BrokenPipeError:
        _silence_broken_streams()
        return EXIT_ERROR


def _silence_broken_streams() -> None:
    """Point stdout and stderr at the null device: the interpreter flushes them at exit, and
    a flush into the broken pipe would print ``Exception ignored … BrokenPipeError``."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(AttributeError, OSError, ValueError):  # not a file
                os.dup2(null, stream.fileno())
    finally:
        os.close(null)


def _guarded(body: Callable[[], int], args: Sequence[str], commands: Collection[str]) -> int:
    debug = "--debug" in args or os.environ.get("GITPUB_DEBUG") == "1"
    as_json = "--json" in args
    start = os.getcwd()
    try:
        return body()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except GitpubError as e:
        report_error(e.message, e.hint or fallback_hint(e, args, commands), as_json,
                     e.exit_code)
        return e.exit_code
    except LostRace as e:  # another process moved a job between our read and our write
        report_error(f"another process changed {e} while this command ran; nothing of this "
                     "command's change to it was recorded",
                     "run the same command again: it reads the job afresh (`git pub status` "
                     "shows where it stands now)", as_json, EXIT_UNCONFIRMED)
        return EXIT_UNCONFIRMED
    except BrokenPipeError:
        raise  # not the command's failure: ``guarded`` ends the run quietly
    except Exception as e:
        if debug:
            import traceback

            traceback.print_exc()
        report_error(f"unexpected error: {type(e).__name__}: {e}",
                     "rerun with --debug for details", as_json, EXIT_ERROR)
        return EXIT_ERROR
    finally:
        os.chdir(start)  # -C changed it; a caller in the same process keeps its own
