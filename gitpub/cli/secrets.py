"""``git pub secrets baseline``: the findings already on the branch, as allowlist rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from gitpub.cli.options import common_options, out_for, where
from gitpub.core.errors import EXIT_OK

if TYPE_CHECKING:
    from gitpub.app.secrets import Baseline


@click.group("secrets")
def secrets_group() -> None:
    """Manage what the secret scan lets through."""


@secrets_group.command("baseline")
@click.option("--dry-run", is_flag=True,
              help="Show the rules that would be added; write nothing.")
@common_options
@click.pass_context
def baseline_command(ctx: click.Context, dry_run: bool) -> None:
    """Allow the findings already on the branch: a rule (path and fingerprint, never the
    value) for each one in .gitpub-allowlist, for a person to review, commit and push.

    Idempotent: what the file already allows is not added again."""
    out = out_for(ctx)
    from gitpub.app.secrets import baseline

    result = baseline(where(), out.progress, dry_run)
    out.emit(baseline_json(result), baseline_text(result))
    ctx.exit(EXIT_OK)


def baseline_json(result: Baseline) -> dict[str, Any]:
    return {"file": str(result.file), "ref": result.ref, "commit": result.commit,
            "dry_run": result.dry_run, "written": result.written,
            "added": [f.public() for f in result.added],
            "skipped": [f.public() for f in result.skipped],
            "already_allowed": result.allowed, "next_steps": result.next_steps()}


def baseline_text(result: Baseline) -> str:
    if result.ref is None:
        return "no branch to scan yet: nothing written"
    lines = [f"scanned {result.ref} at {result.commit}: {len(result.added)} finding(s) to "
             f"allow, {result.allowed} already allowed"]
    verb = "would add" if result.dry_run else "added"
    if result.added:
        lines.append(f"{verb} to {result.file}:")
        lines += [f"  {f.rule}    ({f.path}: line {', '.join(map(str, f.lines))}, {f.kind})"
                  for f in result.added]
    lines += [f"skipped {f.path}: line {', '.join(map(str, f.lines))}, {f.kind}, fingerprint "
              f"{f.fingerprint}: {f.skipped}" for f in result.skipped]
    if result.dry_run:
        lines.append("dry run: nothing written")
    elif not result.added:
        lines.append(f"nothing to add: {result.file} left as it was")
    steps = result.next_steps()
    if steps:
        lines.append("next steps:")
        lines += [f"  {n}. {step}" for n, step in enumerate(steps, 1)]
    return "\n".join(lines)
