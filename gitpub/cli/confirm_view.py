"""``git pub confirm``: the command's body (``run``, without click: ``cli.fast``), and its
output, as text and as ``--json`` (``schemas/confirm.json``)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitpub.core.errors import EXIT_ERROR, EXIT_OK

if TYPE_CHECKING:  # types only: rendering loads no verifier
    from gitpub.app.confirm import ConfirmReport
    from gitpub.cli.output import Output


def run(out: Output, *, rev_range: str | None, no_push_notes: bool, remote: str | None,
        branch: str | None, anchor: str | None, no_anchor: bool, first_run: bool,
        accept: str | None, reason: str | None) -> int:
    """Run ``git pub confirm`` in the working directory (after ``-C``) and report it; the exit
    code. The same whether click read the command line (``cli.main``) or ``cli.fast`` did."""
    from gitpub.app.confirm import confirm

    # The objects made so far live as long as the process: kept out of the collector's way,
    # which would walk them all again at each collection and at exit (measured: 50 ms of a
    # first run's exit).
    gc.freeze()
    report = confirm(Path.cwd(), out.progress, rev_range, not no_push_notes, accept, reason,
                     remote=remote, branch=branch, anchor=anchor, no_anchor=no_anchor,
                     first_run=first_run)
    out.emit(confirm_json(report), confirm_text(report, accepting=accept))
    return EXIT_ERROR if report.failed else EXIT_OK


def confirm_json(report: ConfirmReport) -> dict[str, Any]:
    rows = [{"commit": v.commit, "job_id": v.job_id, "ok": v.ok, "problems": list(v.problems)}
            for v in report.verdicts]
    return {"tip": report.tip, "checked": report.checked, "commits": rows,
            "bad": [v.commit for v in report.bad],
            "open_bad": [{"commit": c, "verdict": line} for c, line in report.open_bad],
            "accepted": [{"commit": c, "acceptance": line} for c, line in report.accepted],
            "start": report.start, "prefixes": list(report.prefixes),
            "config_changes": report.config_changes, "remarks": report.remarks,
            "notes_pushed": report.notes_pushed, "deepened": report.deepened,
            "authenticated": report.authenticated, "rewritten": report.rewritten}


def confirm_text(report: ConfirmReport, accepting: str | None = None) -> str:
    if accepting is not None:
        human = [f"accepted the BAD verdict on {report.tip}"]
    else:
        human = [f"checked {report.checked} commit(s) up to {report.tip}: "
                 f"{len(report.verdicts)} job commit(s), {len(report.bad)} bad"]
        human += [f"BAD {v.commit} (job {v.job_id}): {'; '.join(v.problems)}"
                  for v in report.bad]
    new = {v.commit for v in report.bad}
    human += [f"BAD {c}: checked-through point no longer in the branch's history (rewritten)"
              for c in report.rewritten]
    new |= set(report.rewritten)
    human += [f"still BAD {c} (not accepted): {line}" for c, line in report.open_bad
              if c not in new]
    human += [f"accepted {c}: {line}" for c, line in report.accepted]
    human += [f"{'.gitpub.yaml'} changed in {c}: it applies from the next run"
              for c in report.config_changes]
    human += [f"note: {r}" for r in report.remarks]
    if report.deepened:
        human.append(f"(shallow clone deepened by {report.deepened} commits)")
    if report.open_bad:
        human.append("hint: a person who has looked at a BAD commit accepts it with "
                      "`git pub confirm --accept SHA --reason TEXT`")
    return "\n".join(human)
