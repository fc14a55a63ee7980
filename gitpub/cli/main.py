"""The command line: option parsing and rendering only; the work is in ``gitpub.app``.

``git pub …`` runs the ``git-pub`` executable. ``-C PATH`` works as in git: gitpub changes to
PATH first, so every relative path on the command line (a SOURCE, a ``--from`` file) is read
relative to it. Every command takes ``--json`` (one JSON object on stdout) and ``--debug``
(tracebacks for unexpected errors). Exit codes: 0 done, 1 error, 2 usage, 3 key reused with
different content, 4 needs a person, 5 delivery not confirmed yet.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence

import click

from gitpub import __version__
from gitpub.app import commands
from gitpub.cli import render
from gitpub.cli.options import State, common_options, out_for, where
from gitpub.cli.output import Output, report_error
from gitpub.core.errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, GitpubError, UsageError

#: The exit status of a run interrupted by ^C, as shells report it.
EXIT_INTERRUPTED = 130


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
@common_options
@click.pass_context
def cli(ctx: click.Context, paths: tuple[str, ...]) -> None:
    """Crash-safe publishing of content into git repositories."""
    ctx.ensure_object(State)
    for p in paths:
        try:
            os.chdir(p)
        except OSError as e:
            raise UsageError(f"cannot change to {p!r}: {e.strerror}") from None


@cli.command()
@click.option("--remote", metavar="NAME",
              help="The remote to publish to (default: origin, or the only remote).")
@click.option("--branch", metavar="NAME",
              help="The branch to publish to (default: the remote's default branch).")
@common_options
@click.pass_context
def init(ctx: click.Context, remote: str | None, branch: str | None) -> None:
    """Write a .gitpub.yaml for this repository if absent (idempotent); install the hooks."""
    result = commands.init(where(), remote, branch)
    error = result.hooks_error
    out_for(ctx).emit({"config": str(result.config), "created": result.created,
                       "remote": result.remote, "branch": result.branch,
                       "articles": list(result.articles), "hooks": list(result.hooks),
                       "hooks_error": None if error is None else error.message,
                       "next_steps": render.init_next_steps(result)},
                      render.init_text(result))
    ctx.exit(EXIT_OK)


@cli.command()
@click.option("--key", help="Idempotency key: the same key always names the same job.")
@click.option("--to", "targets", multiple=True, required=True, metavar="PATH",
              help="Repository path to write (repeat for several files; end with / for a "
                   "directory SOURCE).")
@click.option("--push", "push_now", is_flag=True,
              help="Then deliver the job at once, as `git pub push JOB` would.")
@click.argument("sources", nargs=-1, required=True, metavar="SOURCE...")
@common_options
@click.pass_context
def prepare(ctx: click.Context, key: str | None, targets: tuple[str, ...], push_now: bool,
            sources: tuple[str, ...]) -> None:
    """Create or find the job for KEY and run the pipeline (SOURCE may be -)."""
    out = out_for(ctx)
    result = commands.prepare(where(), out.progress, key, targets, sources, push_now)
    job, note = result.job, result.note
    data = job.record.public() | {"created": result.created} | (
        {"note": note} if note else {})
    human = (render.describe_job(job) + ("" if result.created
                                         else "\n  (existing job for this key)")
             + (f"\n  {note}" if note else ""))
    out.emit(data, human)
    ctx.exit(result.exit_code)


@cli.command()
@click.argument("job", required=False)
@click.option("--all", "show_all", is_flag=True, help="Include finished jobs.")
@common_options
@click.pass_context
def status(ctx: click.Context, job: str | None, show_all: bool) -> None:
    """Show one job, or every job not yet finished."""
    out = out_for(ctx)
    result = commands.status(where(), out.progress, job, show_all)
    if not isinstance(result, commands.Jobs):
        out.emit(result.record.public(), render.describe_job(result))
        ctx.exit(EXIT_OK)
    out.emit(render.jobs_json(result),
             render.jobs_text(result, "no jobs" if show_all else "no unfinished jobs"))
    ctx.exit(EXIT_ERROR if result.errors else EXIT_OK)


@cli.command()
@click.argument("job")
@common_options
@click.pass_context
def log(ctx: click.Context, job: str) -> None:
    """Show a job's event history."""
    out = out_for(ctx)
    history = commands.log(where(), out.progress, job)
    out.emit(render.history_json(history), render.history_text(history))
    ctx.exit(EXIT_OK)


def _jobs(ctx: click.Context, out: Output, result: commands.Jobs, empty: str) -> None:
    out.emit(render.jobs_json(result), render.jobs_text(result, empty))
    ctx.exit(result.exit_code)


@cli.command()
@click.argument("jobs", nargs=-1, metavar="[JOB]...")
@click.option("--create-branch", is_flag=True,
              help="Create the configured branch on the remote if it does not exist there "
                   "(without it, a missing branch stops the push: exit 2).")
@common_options
@click.pass_context
def push(ctx: click.Context, jobs: tuple[str, ...], create_branch: bool) -> None:
    """Deliver the given jobs, or every deliverable job: fetch, re-check, rebase, push,
    confirm."""
    out = out_for(ctx)
    _jobs(ctx, out, commands.push(where(), out.progress, jobs, create_branch),
          "nothing to deliver")


@cli.command()
@common_options
@click.pass_context
def sync(ctx: click.Context) -> None:
    """Deliver every pending job, then each hand commit whole (or change nothing)."""
    out = out_for(ctx)
    result = commands.sync(where(), out.progress)
    if result.remark:
        out.progress(result.remark)
    out.emit(render.sync_json(result), render.sync_text(result))
    ctx.exit(result.exit_code)


@cli.command()
@common_options
@click.pass_context
def reconcile(ctx: click.Context) -> None:
    """Recover every unfinished job after a crash (safe to run at any time)."""
    out = out_for(ctx)
    result = commands.reconcile(where(), out.progress)
    pending = result.pending
    if pending is not None and not pending.empty:
        out.progress(f"pending hand edits: {len(pending.uncommitted)} uncommitted content "
                     f"path(s), {len(pending.unpushed)} unpushed commit(s); run `git pub sync`")
    _jobs(ctx, out, result, "nothing to reconcile")


@cli.command()
@click.argument("job")
@click.option("--retry", "action", flag_value="retry", help="Run the job again.")
@click.option("--abandon", "action", flag_value="abandon", help="Give the job up.")
@common_options
@click.pass_context
def resolve(ctx: click.Context, job: str, action: str | None) -> None:
    """The way out of REVIEW, CONFLICT and FAILED."""
    if action not in ("retry", "abandon"):
        raise click.UsageError("give --retry or --abandon")
    out = out_for(ctx)
    result = commands.resolve(where(), out.progress, job,
                              "retry" if action == "retry" else "abandon")
    _jobs(ctx, out, result, "")


@cli.command()
@click.option("--range", "rev_range", metavar="A..B",
              help="Verify these commits instead of those since the last confirmed point.")
@click.option("--no-push-notes", is_flag=True, help="Write the notes locally only.")
@click.option("--accept", "accept", metavar="SHA",
              help="Accept the BAD verdict on this commit (with --reason).")
@click.option("--reason", metavar="TEXT", help="Why the BAD verdict is accepted.")
@common_options
@click.pass_context
def confirm(ctx: click.Context, rev_range: str | None, no_push_notes: bool,
            accept: str | None, reason: str | None) -> None:
    """For CI: verify the trailers and manifests of commits on the remote branch."""
    out = out_for(ctx)
    report = commands.confirm(where(), out.progress, rev_range, not no_push_notes, accept,
                              reason)
    out.emit(render.confirm_json(report), render.confirm_text(report, accepting=accept))
    ctx.exit(EXIT_ERROR if report.failed else EXIT_OK)


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the demo directory.")
@common_options
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
    from gitpub.cli.hooks import hook_impl_command, hooks_group

    cli.add_command(hooks_group)
    cli.add_command(hook_impl_command)


def main(argv: Sequence[str] | None = None) -> int:
    """The entry point: runs a command and turns every outcome into an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("GITPUB_DEBUG") == "1"
    as_json = "--json" in args
    start = os.getcwd()
    try:
        rv = cli.main(args=args, prog_name="git-pub", standalone_mode=False)
        return rv if isinstance(rv, int) else EXIT_OK
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except click.ClickException as e:
        e.show()
        return EXIT_USAGE
    except (click.exceptions.Abort, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    except GitpubError as e:
        report_error(e.message, e.hint, as_json)
        return e.exit_code
    except Exception as e:
        if debug:
            traceback.print_exc()
        report_error(f"unexpected error: {type(e).__name__}: {e}",
                     "rerun with --debug for details", as_json)
        return EXIT_ERROR
    finally:
        os.chdir(start)  # -C changed it; a caller in the same process keeps its own
