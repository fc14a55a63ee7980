"""The ``git-pub`` executable (and ``python -m gitpub``): a plain confirm command line is read by
``cli.fast``, without click; every other by click (``cli.main``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from gitpub.cli.fast import COMMANDS, parse_confirm, run_confirm
from gitpub.cli.guard import guarded


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command line; its exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = parse_confirm(args, os.environ)
    if command is not None:
        return guarded(lambda: run_confirm(command, args), args, COMMANDS)
    from gitpub.cli.main import main as click_main

    return click_main(args)
