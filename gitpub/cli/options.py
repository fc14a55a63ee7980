"""The options every command shares, and what a command needs from the command line.

``--json`` and ``--debug`` are accepted on every command and before it (``git pub --json
status``); ``where`` is the directory the command works in, after ``-C``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gitpub.cli.output import Output

F = TypeVar("F", bound=Callable[..., Any])


class State:
    def __init__(self) -> None:
        self.json = False
        self.debug = False


def common_options(f: F) -> F:
    """``--json`` and ``--debug`` on every command (they may also come before it)."""

    def set_json(ctx: click.Context, _p: click.Parameter, value: bool) -> None:
        if value:
            ctx.ensure_object(State).json = True

    def set_debug(ctx: click.Context, _p: click.Parameter, value: bool) -> None:
        if value:
            ctx.ensure_object(State).debug = True

    f = click.option("--json", "json_", is_flag=True, expose_value=False, callback=set_json,
                     help="Print one JSON object on stdout.")(f)
    f = click.option("--debug", is_flag=True, expose_value=False, callback=set_debug,
                     help="Show tracebacks of unexpected errors.")(f)
    return f


def out_for(ctx: click.Context) -> Output:
    return Output(json=ctx.ensure_object(State).json)


def where() -> Path:
    """The directory the command runs in (``-C`` has already changed to it)."""
    return Path.cwd()
