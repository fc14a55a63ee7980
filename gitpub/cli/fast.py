"""``git pub confirm`` read without click (``cli.entry``, the executable, asks here first).

CI runs ``git pub confirm`` on every push, in a new process each time, where click's import
(15-30 ms with what it brings: ``inspect``, ``uuid``, ``platform``…) is a large part of the
run (``bench/confirm_ci.py``: after one new commit, the whole run costs a fraction of
``git log --grep``). So a confirm command line is read here, by hand, when click would read it
the same way — ``-C PATH``, ``--json``, ``--debug`` before the command, then confirm's own
options as separate words (``--remote NAME``) or joined (``--remote=NAME``), each at most
once, no value that starts with ``-`` — and anything else (``-h``, a mistake, a shell
completion request, another command) goes to click (``cli.main``), which reports it as
always. What runs is the same either way: the group's ``-C`` (``cli.main.cli``), then
``confirm_view.run``, under the same error handler (``cli.guard``); a ^C is exit 130 after a
blank line on stderr, as click's ``Abort`` ends it. ``tests/test_cli_fast.py`` holds the two
readings equal.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Mapping, Sequence

from gitpub.cli.guard import EXIT_INTERRUPTED
from gitpub.cli.output import Output
from gitpub.core.errors import UsageError

#: Every command ``cli.main`` knows (a test holds them equal): a usage error's hint names one.
COMMANDS = ("confirm", "demo", "doctor", "hook-impl", "hooks", "init", "log", "metrics",
            "prepare", "push", "reconcile", "resolve", "secrets", "status", "sync")
#: confirm's options that take a value, by the name of the parameter each sets.
VALUED = {"--range": "rev_range", "--remote": "remote", "--branch": "branch",
          "--anchor": "anchor", "--accept": "accept", "--reason": "reason"}
#: confirm's flags, likewise.
FLAGS = {"--no-push-notes": "no_push_notes", "--no-anchor": "no_anchor",
         "--first-run": "first_run"}
#: The options every command (and the group) takes (``cli.options.common_options``).
COMMON = ("--json", "--debug")
#: The variable that asks click for shell completions (``_<PROG_NAME>_COMPLETE``).
COMPLETE_VAR = "_GIT_PUB_COMPLETE"


class Confirm:
    """A confirm command line as click would read it: the ``-C`` paths and the options."""

    def __init__(self, paths: list[str], options: dict[str, str | bool]) -> None:
        self.paths, self.options = paths, options

    def value(self, name: str) -> str | None:
        found = self.options.get(name)
        return found if isinstance(found, str) else None

    def flag(self, name: str) -> bool:
        return self.options.get(name) is True


def parse_confirm(args: Sequence[str], environ: Mapping[str, str]) -> Confirm | None:
    """``args`` as a confirm command, when click would read them the same way; else None."""
    if environ.get(COMPLETE_VAR):
        return None
    paths: list[str] = []
    i = 0
    while i < len(args) and args[i] != "confirm":  # the group's options
        if args[i] in COMMON:
            i += 1
        elif args[i] == "-C" and i + 1 < len(args) and _plain(args[i + 1]):
            paths.append(args[i + 1])
            i += 2
        else:
            return None
    if i == len(args):
        return None
    options: dict[str, str | bool] = {}
    i += 1
    while i < len(args):
        word = args[i]
        name, joined, value = word.partition("=")
        if word in COMMON:
            i += 1
        elif word in FLAGS and FLAGS[word] not in options:
            options[FLAGS[word]] = True
            i += 1
        elif joined and name in VALUED and VALUED[name] not in options and value \
                and _plain(value):
            options[VALUED[name]] = value
            i += 1
        elif word in VALUED and VALUED[word] not in options and i + 1 < len(args) \
                and _plain(args[i + 1]):
            options[VALUED[word]] = args[i + 1]
            i += 2
        else:
            return None
    return Confirm(paths, options)


def _plain(value: str) -> bool:
    """A value click takes as it is wherever it stands (not one that looks like an option)."""
    return not value.startswith("-")


def run_confirm(command: Confirm, args: Sequence[str]) -> int:
    """What click runs for ``command``: the group's ``-C``, then ``confirm``."""
    collecting = gc.isenabled()
    gc.disable()  # loading the verifier allocates much and frees little: no collections
    try:
        import gitpub.app.confirm  # noqa: F401
        from gitpub.cli.confirm_view import run
    finally:
        if collecting:
            gc.enable()
    try:
        for p in command.paths:
            change_to(p)
        return run(Output(json="--json" in args), rev_range=command.value("rev_range"),
                   no_push_notes=command.flag("no_push_notes"), remote=command.value("remote"),
                   branch=command.value("branch"), anchor=command.value("anchor"),
                   no_anchor=command.flag("no_anchor"), first_run=command.flag("first_run"),
                   accept=command.value("accept"), reason=command.value("reason"))
    except (EOFError, KeyboardInterrupt):
        print(file=sys.stderr)  # click's Abort: a blank line closes the terminal's ^C echo
        return EXIT_INTERRUPTED


def change_to(path: str) -> None:
    """``-C PATH``: as git, change to it first."""
    try:
        os.chdir(path)
    except OSError as e:
        raise UsageError(f"cannot change to {path!r}: {e.strerror}") from None
