"""The command line: option parsing and rendering only; the work is in ``gitpub.app``.

``git pub …`` runs the ``git-pub`` executable. ``-C PATH`` works as in git: gitpub changes to
PATH first, so every relative path on the command line (a SOURCE, a ``--from`` file) is read
relative to it. Every command takes ``--json`` (one JSON object on stdout) and ``--debug``
(tracebacks for unexpected errors). Exit codes: 0 done, 1 error, 2 usage, 3 key reused with
different content, 4 needs a person, 5 delivery not confirmed yet. Every outcome that is not
simply done ends with a ``hint:`` line naming the command to run next; errors — the option
parser's usage errors included — are ``git-pub: error: …`` plus ``hint:``, and under ``--json``
one ``{"error", "hint", "exit"}`` object.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import click

from gitpub import __version__
from gitpub.app.results import Jobs
from gitpub.cli import confirm_view, render
from gitpub.cli.fast import change_to, parse_confirm, run_confirm
from gitpub.cli.guard import EXIT_INTERRUPTED, guarded
from gitpub.cli.hooks import hook_impl_command, hooks_group
from gitpub.cli.options import State, common_options, out_for, where
from gitpub.cli.output import Output, as_json, report_error
from gitpub.cli.secrets import secrets_group
from gitpub.core.errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from gitpub.app.resolve import Action


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "paths", multiple=True, metavar="PATH",
              help="Run as if started in PATH (as git -C).")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True,
              callback=lambda ctx, _p, value: _version(ctx, value),
              help="Show the version and exit.")
@common_options
@click.pass_context
def cli(ctx: click.Context, paths: tuple[str, ...]) -> None:
    """Crash-safe publishing of content into git repositories."""
    ctx.ensure_object(State)
    for p in paths:
        change_to(p)


def _version(ctx: click.Context, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    wants_json = ctx.ensure_object(State).json
    click.echo(as_json({"version": __version__}) if wants_json else f"git-pub {__version__}")
    ctx.exit(EXIT_OK)


@cli.command()
@click.option("--remote", metavar="NAME",
              help="The remote to publish to (default: origin, or the only remote).")
@click.option("--branch", metavar="NAME",
              help="The branch to publish to (default: the remote's default branch).")
@common_options
@click.pass_context
def init(ctx: click.Context, remote: str | None, branch: str | None) -> None:
    """Write a .gitpub.yaml for this repository if absent (idempotent); install the hooks."""
    from gitpub.app.initialize import init

    result = init(where(), remote, branch)
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
    from gitpub.app.prepare import prepare as run

    result = run(where(), out.progress, key, targets, sources, push_now)
    job, note = result.job, result.note
    data = (render.job_json(job, note, result.hint) | {"created": result.created}
            | render.channels_json(result.channels))
    human = "\n".join([render.describe_job(job) + ("" if result.created
                                                   else "\n  (existing job for this key)")
                       + (f"\n  {note}" if note else ""),
                       *render.channels_text(result.channels, "  ")])
    out.emit(data, render.with_hint(human, result.hint))
    ctx.exit(result.exit_code)


@cli.command()
@click.argument("job", required=False)
@click.option("--all", "show_all", is_flag=True, help="Include finished jobs.")
@common_options
@click.pass_context
def status(ctx: click.Context, job: str | None, show_all: bool) -> None:
    """Show one job, or every job not yet finished."""
    out = out_for(ctx)
    from gitpub.app.results import Shown
    from gitpub.app.status import status as run

    result = run(where(), out.progress, job, show_all)
    if isinstance(result, Shown):
        report = result.channels
        out.emit(render.job_json(result.job, hint=result.hint) | render.channels_json(report),
                 render.with_hint("\n".join([render.describe_job(result.job),
                                             *render.channels_text(report, "  ")]),
                                  result.hint))
        ctx.exit(EXIT_OK)
    _debug_tracebacks(ctx, result)
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
    from gitpub.app.status import log as run

    history = run(where(), out.progress, job)
    out.emit(render.history_json(history), render.history_text(history))
    ctx.exit(EXIT_OK)


def _jobs(ctx: click.Context, out: Output, result: Jobs, empty: str) -> None:
    _debug_tracebacks(ctx, result)
    out.emit(render.jobs_json(result), render.jobs_text(result, empty))
    ctx.exit(result.exit_code)


def _debugging(ctx: click.Context) -> bool:
    return ctx.ensure_object(State).debug or os.environ.get("GITPUB_DEBUG") == "1"


def _debug_tracebacks(ctx: click.Context, result: Jobs) -> None:
    """With ``--debug``, the traceback of every unexpected error a job met (on stderr)."""
    if _debugging(ctx):
        for text in result.tracebacks:
            sys.stderr.write(text)


_DRY_RUN = click.option("--dry-run", is_flag=True,
                        help="Show what would be pushed; fetch, push and write nothing.")


@cli.command()
@click.argument("jobs", nargs=-1, metavar="[JOB]...")
@click.option("--create-branch", is_flag=True,
              help="Create the configured branch on the remote if it does not exist there "
                   "(without it, a missing branch stops the push: exit 2).")
@_DRY_RUN
@common_options
@click.pass_context
def push(ctx: click.Context, jobs: tuple[str, ...], create_branch: bool, dry_run: bool) -> None:
    """Deliver the given jobs, or every deliverable job: fetch, re-check, rebase, push,
    confirm."""
    out = out_for(ctx)
    if dry_run:
        _plan(ctx, out, jobs, hand_edits=False)
    from gitpub.app.push import push as run

    _jobs(ctx, out, run(where(), out.progress, jobs, create_branch),
          "nothing to deliver")


@cli.command()
@_DRY_RUN
@common_options
@click.pass_context
def sync(ctx: click.Context, dry_run: bool) -> None:
    """Deliver every pending job, then each hand commit whole (or change nothing)."""
    out = out_for(ctx)
    if dry_run:
        _plan(ctx, out, (), hand_edits=True)
    from gitpub.app.sync import sync as run

    result = run(where(), out.progress)
    if result.remark:
        out.progress(result.remark)
    out.emit(render.sync_json(result), render.sync_text(result))
    ctx.exit(result.exit_code)


def _plan(ctx: click.Context, out: Output, jobs: tuple[str, ...], hand_edits: bool) -> None:
    from gitpub.app.plan import plan

    result = plan(where(), out.progress, jobs, hand_edits)
    out.emit(render.plan_json(result), render.plan_text(result))
    ctx.exit(EXIT_OK)


@cli.command()
@click.option("--fix", is_flag=True, help="Apply the safe fixes (hooks, notes refspec, stale "
                                          "locks, active index).")
@common_options
@click.pass_context
def doctor(ctx: click.Context, fix: bool) -> None:
    """Check configuration, remote access, hooks, notes refspec, locks and job refs."""
    from gitpub.app.doctor import doctor as run

    report = run(where(), fix)
    out_for(ctx).emit(render.doctor_json(report), render.doctor_text(report, fix))
    ctx.exit(report.exit_code)


@cli.command()
@common_options
@click.pass_context
def reconcile(ctx: click.Context) -> None:
    """Recover every unfinished job after a crash (safe to run at any time)."""
    out = out_for(ctx)
    from gitpub.app.push import reconcile as run

    result = run(where(), out.progress)
    pending = result.pending
    if pending is not None and not pending.empty:
        out.progress(f"pending hand edits: {len(pending.uncommitted)} uncommitted content "
                     f"path(s), {len(pending.unpushed)} unpushed commit(s); run `git pub sync`")
    _jobs(ctx, out, result, "nothing to reconcile")


@cli.command()
@click.argument("job")
@click.option("--retry", is_flag=True,
              help="REVIEW: run the pipeline again (stops before pushing unless --push). "
                   "CONFLICT: re-check against the remote; never overwrites. FAILED: deliver "
                   "the same content with a new attempt budget.")
@click.option("--overwrite", is_flag=True,
              help="CONFLICT: replace their version with the job's (recorded with both "
                   "hashes).")
@click.option("--from", "from_file", metavar="FILE",
              help="CONFLICT: the merged content of the conflicting file (- for stdin): a new "
                   "snapshot against the current remote tip, under the same job. REVIEW: the "
                   "fixed content of the job's article; the pipeline runs again on it. A "
                   "regular file, at most 100 MiB, not empty unless --allow-empty.")
@click.option("--allow-empty", is_flag=True,
              help="With --from: the merged file is meant to be empty.")
@click.option("--push", "push_now", is_flag=True,
              help="With --retry on REVIEW: deliver the job once the pipeline passes.")
@click.option("--abandon", is_flag=True,
              help="Give the job up (SKIPPED). From PUSHING, RETRY_WAIT or FAILED only after a "
                   "probe shows it is not on the remote.")
@click.option("--channel", metavar="NAME",
              help="Resolve this channel of a published job (with one of the three below).")
@click.option("--confirmed", "confirmed_url", metavar="URL",
              help="With --channel: the post exists at URL (a person's evidence).")
@click.option("--not-sent", "channel_action", flag_value="not_sent",
              help="With --channel: nothing went out; send it again (same intent key).")
@click.option("--skip", "channel_action", flag_value="skip",
              help="With --channel: do not send this channel.")
@common_options
@click.pass_context
def resolve(ctx: click.Context, job: str, retry: bool, overwrite: bool,
            from_file: str | None, allow_empty: bool, push_now: bool, abandon: bool,
            channel: str | None, confirmed_url: str | None, channel_action: str | None) -> None:
    """The way out of REVIEW, CONFLICT and FAILED, or abandoning a job; with --channel, of a
    channel that needs a person."""
    out = out_for(ctx)
    if channel is not None or confirmed_url is not None or channel_action is not None:
        if retry or overwrite or from_file is not None or push_now or abandon:
            raise click.UsageError("--channel resolves one channel: it cannot be combined "
                                   "with --retry, --overwrite, --from, --push or --abandon")
        decision = channel_decision(channel, confirmed_url, channel_action)
        from gitpub.app.resolve import resolve_channel

        result = resolve_channel(where(), out.progress, job, str(channel), decision,
                                 confirmed_url)
        _jobs(ctx, out, result, "")
    if allow_empty and from_file is None:
        raise click.UsageError("--allow-empty goes with --from FILE")
    action = resolve_action(retry, overwrite, from_file, push_now, abandon)
    from gitpub.app.resolve import resolve as run

    result = run(where(), out.progress, job, action, from_file, push_now, allow_empty)
    _jobs(ctx, out, result, "")


def channel_decision(channel: str | None, confirmed_url: str | None,
                     channel_action: str | None) -> Literal["confirmed", "not_sent", "skip"]:
    """What a person decided about one channel; exactly one decision, with --channel."""
    given = [x for x in (confirmed_url, channel_action) if x is not None]
    if channel is None or len(given) != 1:
        raise click.UsageError("give --channel NAME with exactly one of --confirmed URL, "
                               "--not-sent, --skip")
    if confirmed_url is not None:
        return "confirmed"
    return "not_sent" if channel_action == "not_sent" else "skip"


def resolve_action(retry: bool, overwrite: bool, from_file: str | None, push_now: bool,
                   abandon: bool) -> Action:
    """The one thing ``resolve`` is asked to do; contradictory options are a usage error."""
    from gitpub.app.resolve import Action

    if abandon and (retry or overwrite or from_file is not None or push_now):
        raise click.UsageError("--abandon gives the job up: it cannot be combined with --retry, "
                               "--overwrite, --from or --push")
    if overwrite and from_file is not None:
        raise click.UsageError("give --overwrite or --from FILE, not both")
    if abandon:
        return Action.ABANDON
    if overwrite:
        return Action.OVERWRITE
    if from_file is not None:
        return Action.FROM
    if retry:
        return Action.RETRY
    raise click.UsageError("give --retry (optionally with --overwrite or --from FILE), or "
                           "--abandon")


@cli.command()
@common_options
@click.pass_context
def metrics(ctx: click.Context) -> None:
    """Prometheus text: oldest pending, unknown outcomes, backlog needing a person, key
    reuse, per-channel attempts and confirmations."""
    out = out_for(ctx)
    from gitpub.app.metrics import metrics as run

    text = run(where(), out.progress)
    out.emit({"metrics": text}, text)
    ctx.exit(EXIT_OK)


@cli.command()
@click.option("--range", "rev_range", metavar="A..B",
              help="Verify these commits instead of those since the last confirmed point.")
@click.option("--no-push-notes", is_flag=True, help="Write the notes locally only.")
@click.option("--remote", metavar="NAME", help="The remote to confirm (default: origin).")
@click.option("--branch", metavar="NAME",
              help="The branch to confirm (default: the one the ledger names, else the "
                   "remote's default branch; never the pushed .gitpub.yaml's).")
@click.option("--anchor", metavar="FILE",
              help="The rollback anchor CI keeps between runs (or GITPUB_CONFIRM_ANCHOR); "
                   "needed with the key, unless --no-anchor.")
@click.option("--no-anchor", is_flag=True,
              help="Keep no rollback anchor (a rollback of the notes cannot be detected).")
@click.option("--first-run", is_flag=True,
              help="Take the remote's notes as they are, once: the first keyed run, or after "
                   "the anchor was lost (a person's decision).")
@click.option("--accept", "accept", metavar="SHA",
              help="Accept the BAD verdict on this commit (with --reason).")
@click.option("--reason", metavar="TEXT", help="Why the BAD verdict is accepted.")
@common_options
@click.pass_context
def confirm(ctx: click.Context, rev_range: str | None, no_push_notes: bool, remote: str | None,
            branch: str | None, anchor: str | None, no_anchor: bool, first_run: bool,
            accept: str | None, reason: str | None) -> None:
    """For CI: verify the trailers and manifests of commits on the remote branch."""
    ctx.exit(confirm_view.run(out_for(ctx), rev_range=rev_range, no_push_notes=no_push_notes,
                              remote=remote, branch=branch, anchor=anchor, no_anchor=no_anchor,
                              first_run=first_run, accept=accept, reason=reason))


@cli.command()
@click.option("--keep", is_flag=True, help="Keep the demo directory.")
@common_options
@click.pass_context
def demo(ctx: click.Context, keep: bool) -> None:
    """Run an end-to-end demo in a throwaway repository with a local bare remote."""
    out = out_for(ctx)
    from gitpub.app.demo import run_demo

    code, report = run_demo(keep=keep, quiet=out.json)
    if out.json:
        out.emit(report, "")
    ctx.exit(code)


cli.add_command(hooks_group)
cli.add_command(secrets_group)
cli.add_command(hook_impl_command)


def usage_message(e: click.ClickException) -> tuple[str, str]:
    """Click's usage error as gitpub's one line and hint (`git pub CMD -h` for the usage)."""
    message = e.format_message().strip().rstrip(".")
    ctx = getattr(e, "ctx", None)
    path = ctx.command_path if ctx is not None else "git-pub"
    path = "git pub" + path.removeprefix("git-pub")
    return message, f"`{path} -h` shows the usage"


def _help_as_json(args: list[str], state: State) -> int:
    """``-h --json``: the help text click prints, as ``{"help": TEXT}`` (``--json`` is total).
    A ``-h`` that was an option's value runs the command as usual, its output passed on."""
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            rv = cli.main(args=args, prog_name="git-pub", standalone_mode=False, obj=state)
        code = rv if isinstance(rv, int) else EXIT_OK
    except click.exceptions.Exit as e:
        code = int(e.exit_code)
    finally:
        text = buffer.getvalue()
    if code == EXIT_OK and text.startswith("Usage:"):
        click.echo(as_json({"help": text}))
    else:
        sys.stdout.write(text)
    return code


def main(argv: Sequence[str] | None = None, *, fast: bool = True) -> int:
    """The entry point (``cli.entry.main`` comes here for every command line but a plain
    confirm): runs a command and turns every outcome into an exit code; errors reported by
    ``cli.guard``, click's usage errors in gitpub's format. A plain confirm command line is
    read by ``cli.fast`` (unless ``fast`` is False: click reads it, the same way)."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = parse_confirm(args, os.environ) if fast else None
    if command is not None:
        return guarded(lambda: run_confirm(command, args), args, cli.commands)
    return guarded(lambda: _click(args), args, cli.commands)


def _click(args: list[str]) -> int:
    state = State()
    state.json = "--json" in args
    state.debug = "--debug" in args or os.environ.get("GITPUB_DEBUG") == "1"
    try:
        if state.json and ("-h" in args or "--help" in args):
            return _help_as_json(args, state)
        rv = cli.main(args=args, prog_name="git-pub", standalone_mode=False, obj=state)
        return rv if isinstance(rv, int) else EXIT_OK
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except click.ClickException as e:
        message, hint = usage_message(e)
        report_error(message, hint, state.json, EXIT_USAGE)
        return EXIT_USAGE
    except click.exceptions.Abort:
        return EXIT_INTERRUPTED
