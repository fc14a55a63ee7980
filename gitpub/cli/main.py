"""The command line: option parsing only; the work is in ``app``.

``git pub …`` runs the ``git-pub`` executable. ``-C PATH`` works as in git. Every command takes
``--json`` (one JSON object on stdout) and ``--debug`` (tracebacks for unexpected errors).
Exit codes: 0 done, 1 error, 2 usage, 3 key reused with different content, 4 needs a person,
5 delivery not confirmed yet.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from gitpub import __version__
from gitpub.app import commands as app
from gitpub.core.errors import EXIT_ERROR, EXIT_USAGE, GitpubError
from gitpub.core.sanitize import sanitize

F = TypeVar("F", bound=Callable[..., Any])


class _State:
    def __init__(self) -> None:
        self.where = Path.cwd()
        self.json = False
        self.debug = False


def _common(f: F) -> F:
    """``--json`` and ``--debug`` on every command (they may also come before it)."""

    def set_json(ctx: click.Context, _p: click.Parameter, value: bool) -> None:
        if value:
            ctx.ensure_object(_State).json = True

    def set_debug(ctx: click.Context, _p: click.Parameter, value: bool) -> None:
        if value:
            ctx.ensure_object(_State).debug = True

    f = click.option("--json", "json_", is_flag=True, expose_value=False, callback=set_json,
                     help="Print one JSON object on stdout.")(f)
    f = click.option("--debug", is_flag=True, expose_value=False, callback=set_debug,
                     help="Show tracebacks of unexpected errors.")(f)
    return f


def _out(ctx: click.Context) -> app.Output:
    return app.Output(json=ctx.ensure_object(_State).json)


def _where(ctx: click.Context) -> Path:
    return ctx.ensure_object(_State).where


class _Group(click.Group):
    """The top-level group; the hook commands are loaded on first use (import cost)."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _LAZY:
            _register_hooks()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        _register_hooks()
        return super().list_commands(ctx)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "paths", multiple=True, metavar="PATH",
              help="Run as if started in PATH (as git -C).")
@click.version_option(__version__, "--version", prog_name="git-pub",
                      message="git-pub %(version)s")
@_common
@click.pass_context
def cli(ctx: click.Context, paths: tuple[str, ...]) -> None:
    """Crash-safe publishing of content into git repositories."""
    state = ctx.ensure_object(_State)
    where = Path.cwd()
    for p in paths:
        where = where / p
    state.where = where


@cli.command()
@_common
@click.pass_context
def init(ctx: click.Context) -> None:
    """Write a commented .gitpub.yaml if absent (idempotent)."""
    ctx.exit(app.cmd_init(_where(ctx), _out(ctx)))


@cli.command()
@click.option("--key", help="Idempotency key: the same key always names the same job.")
@click.option("--to", "targets", multiple=True, required=True, metavar="PATH",
              help="Repository path to write (repeat for several files; end with / for a "
                   "directory SOURCE).")
@click.option("--push", "push_now", is_flag=True,
              help="Then deliver the job at once, as `git pub push JOB` would.")
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@_common
@click.pass_context
def prepare(ctx: click.Context, key: str | None, targets: tuple[str, ...], push_now: bool,
            sources: tuple[str, ...]) -> None:
    """Create or find the job for KEY and run the pipeline (SOURCE may be -)."""
    ctx.exit(app.cmd_prepare(_where(ctx), _out(ctx), key, targets, sources, push_now))


@cli.command()
@click.argument("job", required=False)
@click.option("--all", "show_all", is_flag=True, help="Include finished jobs.")
@_common
@click.pass_context
def status(ctx: click.Context, job: str | None, show_all: bool) -> None:
    """Show one job, or every job not yet finished."""
    ctx.exit(app.cmd_status(_where(ctx), _out(ctx), job, show_all))


@cli.command()
@click.argument("job")
@_common
@click.pass_context
def log(ctx: click.Context, job: str) -> None:
    """Show a job's event history."""
    ctx.exit(app.cmd_log(_where(ctx), _out(ctx), job))


@cli.command()
@click.argument("jobs", nargs=-1, metavar="[JOB]...")
@_common
@click.pass_context
def push(ctx: click.Context, jobs: tuple[str, ...]) -> None:
    """Deliver the given jobs, or every deliverable job: fetch, re-check, rebase, push,
    confirm."""
    ctx.exit(app.cmd_push(_where(ctx), _out(ctx), jobs))


@cli.command()
@_common
@click.pass_context
def sync(ctx: click.Context) -> None:
    """Deliver every pending job and every content change that belongs to no job."""
    ctx.exit(app.cmd_sync(_where(ctx), _out(ctx)))


@cli.command()
@_common
@click.pass_context
def reconcile(ctx: click.Context) -> None:
    """Recover every unfinished job after a crash (safe to run at any time)."""
    ctx.exit(app.cmd_reconcile(_where(ctx), _out(ctx)))


@cli.command()
@click.argument("job")
@click.option("--retry", "action", flag_value="retry", help="Run the job again.")
@click.option("--abandon", "action", flag_value="abandon", help="Give the job up.")
@_common
@click.pass_context
def resolve(ctx: click.Context, job: str, action: str | None) -> None:
    """The way out of REVIEW, CONFLICT and FAILED."""
    if action not in ("retry", "abandon"):
        raise click.UsageError("give --retry or --abandon")
    ctx.exit(app.cmd_resolve(_where(ctx), _out(ctx), job,
                             "retry" if action == "retry" else "abandon"))


@cli.command()
@click.option("--range", "rev_range", metavar="A..B",
              help="Verify these commits instead of those since the last confirmed point.")
@click.option("--no-push-notes", is_flag=True, help="Write the notes locally only.")
@_common
@click.pass_context
def confirm(ctx: click.Context, rev_range: str | None, no_push_notes: bool) -> None:
    """For CI: verify the trailers and manifests of commits on the remote branch."""
    ctx.exit(app.cmd_confirm(_where(ctx), _out(ctx), rev_range, not no_push_notes))


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the demo directory.")
@_common
@click.pass_context
def demo(ctx: click.Context, keep: bool) -> None:
    """Run an end-to-end demo in a throwaway repository with a local bare remote."""
    from gitpub.cli.demo import run_demo

    ctx.exit(run_demo(keep=keep))


_LAZY = ("hooks", "hook-impl")


def _register_hooks() -> None:
    """Add the hook commands, importing their module only when they are used or listed."""
    if "hooks" in cli.commands:
        return
    from gitpub.hooks.install import hook_impl_command, hooks_group

    cli.add_command(hooks_group)
    cli.add_command(hook_impl_command)


def main(argv: Sequence[str] | None = None) -> int:
    """The entry point: runs a command and turns every outcome into an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("GITPUB_DEBUG") == "1"
    as_json = "--json" in args
    try:
        rv = cli.main(args=args, prog_name="git-pub", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except click.ClickException as e:
        e.show()
        return EXIT_USAGE
    except click.exceptions.Abort:
        return 130
    except KeyboardInterrupt:
        return 130
    except GitpubError as e:
        _report(e.message, e.hint, as_json)
        return e.exit_code
    except Exception as e:
        if debug:
            traceback.print_exc()
        _report(f"unexpected error: {type(e).__name__}: {e}",
                "rerun with --debug for details", as_json)
        return EXIT_ERROR


def _report(message: str, hint: str | None, as_json: bool) -> None:
    message = sanitize(message)
    hint = None if hint is None else sanitize(hint)
    if as_json:
        import json

        print(json.dumps({"error": message, "hint": hint}, ensure_ascii=False))
    print(f"git-pub: error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
