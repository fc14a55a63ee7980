"""``git pub confirm``'s output, as text and as ``--json`` (``schemas/confirm.json``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a type only: rendering loads no verifier
    from gitpub.app.confirm import ConfirmReport


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
