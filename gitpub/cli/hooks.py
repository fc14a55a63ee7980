"""``git pub hooks install|uninstall`` and ``git pub hook-impl`` (what the shims fall back to)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gitpub.app.hooks import HOOKS, hooks_install, hooks_uninstall, run_hook
from gitpub.cli.options import common_options, out_for, where
from gitpub.core.errors import EXIT_OK

if TYPE_CHECKING:
    from gitpub.app.hooks import HookState


def describe_install(states: Sequence[HookState]) -> str:
    lines = []
    for s in states:
        chained = f" (runs {Path(s.legacy).name} first)" if s.legacy else ""
        lines.append(f"{'installed' if s.changed else 'up to date'}: {s.path}{chained}")
    return "\n".join(lines)


def describe_uninstall(states: Sequence[HookState]) -> str:
    lines = []
    for s in states:
        if s.changed:
            lines.append(f"{'restored the earlier hook' if s.legacy else 'removed'}: {s.path}")
        else:
            left = "not gitpub's, left alone" if os.path.lexists(s.path) else "not installed"
            lines.append(f"{left}: {s.path}")
    return "\n".join(lines)


@click.group("hooks")
def hooks_group() -> None:
    """Install or remove gitpub's pre-push and post-commit hooks."""


@hooks_group.command("install")
@click.option("--hooks-path-ok", is_flag=True,
              help="Install into the directory core.hooksPath names, when it is set.")
@common_options
@click.pass_context
def install_command(ctx: click.Context, hooks_path_ok: bool) -> None:
    """Install the hooks (idempotent); an existing hook is kept and runs first.

    Refuses when core.hooksPath names a directory other than the repository's own hooks
    directory (usually one shared with other repositories or people), unless --hooks-path-ok.
    """
    states = hooks_install(where(), hooks_path_ok)
    out_for(ctx).emit({"hooks": [asdict(s) for s in states]}, describe_install(states))
    ctx.exit(EXIT_OK)


@hooks_group.command("uninstall")
@common_options
@click.pass_context
def uninstall_command(ctx: click.Context) -> None:
    """Remove gitpub's hooks and put back the hooks they chained."""
    states = hooks_uninstall(where())
    out_for(ctx).emit({"hooks": [asdict(s) for s in states]}, describe_uninstall(states))
    ctx.exit(EXIT_OK)


@click.command("hook-impl", hidden=True,
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False,
                                 "help_option_names": ["-h", "--help"]})
@click.argument("hook", type=click.Choice(HOOKS))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def hook_impl_command(ctx: click.Context, hook: str, args: tuple[str, ...]) -> None:
    """Run a hook (what the shims and the pre-commit framework call)."""
    ctx.exit(run_hook(hook, list(args)))  # in the working directory, which -C has set
