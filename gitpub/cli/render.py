"""Rendering results for people (and their ``--json`` form): jobs, lists of jobs, histories.

Pure functions from result values to text or JSON-ready dicts; the commands compute, this shows.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gitpub.core.errors import CONFIG_FILE
from gitpub.core.states import TERMINAL, State

if TYPE_CHECKING:  # types only: rendering one command's result loads no other command
    from gitpub.app.doctor import Report
    from gitpub.app.initialize import Initialized
    from gitpub.app.plan import Plan
    from gitpub.app.results import ChannelReport, History, Job, Jobs


def ago(ts: float | None) -> str:
    if ts is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def describe_job(job: Job) -> str:
    r = job.record
    lines = [f"job {r.job_id}  {r.state.value}"]
    lines.append(f"  key:       {r.idempotency_key}")
    for t in r.targets:
        lines.append(f"  target:    {t.path} ({t.op})")
    if r.base_commit:
        lines.append(f"  base:      {r.base_commit} ({r.base_ref})")
    if r.manifest_sha256:
        lines.append(f"  manifest:  {r.manifest_sha256}")
    if r.local_commit:
        lines.append(f"  commit:    {r.local_commit}")
    if r.remote_commit:
        lines.append(f"  remote:    {r.remote_commit}")
    if r.review is not None:
        lines.append(f"  review:    {r.review.branch} into {r.review.base} ({r.review.forge})"
                     + (f", request #{r.review.number}" if r.review.number else ""))
        if r.review.url:
            lines.append(f"  request:   {r.review.url}")
    if r.attempt:
        lines.append(f"  attempt:   {r.attempt}/{r.max_attempts}")
    if r.next_retry_at:
        lines.append(f"  retry at:  {ago(r.next_retry_at)}")
    if r.failure_code:
        lines.append(f"  failure:   {r.failure_code.value}: {r.failure_detail or ''}")
    lines.append(f"  updated:   {ago(r.updated_at)}")
    return "\n".join(lines)


def with_hint(text: str, hint: str | None, indent: str = "") -> str:
    return text if not hint else f"{text}\n{indent}hint: {hint}"


def job_json(job: Job, note: str | None = None, hint: str | None = None) -> dict[str, Any]:
    """A job's ``--json`` object: the record's public fields, the note and the hint."""
    return job.record.public() | ({"note": note} if note else {}) | {"hint": hint}


def job_line(job: Job, note: str | None = None) -> str:
    line = f"{job.job_id[:13]}  {job.state.value:<18} {', '.join(job.record.target_paths)}"
    code = job.record.failure_code
    if job.record.failure_detail and job.state not in TERMINAL:
        line += f"\n    {code.value if code else None}: {job.record.failure_detail}"
    if job.state == State.PUBLISHED and job.record.remote_commit:
        line += f"\n    remote commit {job.record.remote_commit}"
    review = job.record.review
    if job.state == State.IN_REVIEW and review is not None:
        line += f"\n    review: {review.url or review.branch}"
    if note:
        line += f"\n    {note}"
    return line


def channels_json(report: ChannelReport | None) -> dict[str, Any]:
    """The ``channels`` (and ``live``) of a job's ``--json`` view; empty without any."""
    if report is None or report.distribution is None:
        return {"channel_errors": list(report.errors)} if report and report.errors else {}
    dist = report.distribution
    data: dict[str, Any] = {
        "channels": [r.public(report.job_id[:13]) for r in dist.channels.values()],
        "live": None if dist.live is None else dist.live.public(),
    }
    if report.notes or report.errors:
        data["channel_notes"] = list(report.notes) + list(report.errors)
    return data


def channels_text(report: ChannelReport | None, indent: str = "    ") -> list[str]:
    """One line per channel: name, status, evidence or what it waits for; then a ``hint:``
    for what is unknown (``git pub reconcile``) and for what needs a person."""
    if report is None or report.distribution is None:
        return [f"{indent}error: {e}" for e in (report.errors if report else ())]
    dist = report.distribution
    lines = []
    if dist.live is not None:
        lines.append(f"{indent}live      {dist.live.status.value:<13} {dist.live.url}"
                     + (f"  ({dist.live.detail})" if dist.live.detail else ""))
    for r in dist.channels.values():
        evidence = " ".join(x for x in (r.remote_id, r.url) if x)
        what = evidence if r.status == "confirmed" else (r.detail or "")
        flag = "required" if r.required else "optional"
        lines.append(f"{indent}channel {r.channel} ({flag}, {r.account}): {r.status.value}"
                     + (f"  {what}" if what else ""))
    lines += [f"{indent}{n}" for n in (*report.notes, *report.errors)]
    now = time.time()
    unknown = [r.channel for r in dist.channels.values() if not r.final
               and not r.waits_for_person and r.status in ("unknown", "sending", "reconciling")
               and not (r.holder is not None and r.holder.expires_at > now)]
    if unknown:
        lines.append(f"{indent}hint: the outcome of {', '.join(unknown)} is unknown: `git pub "
                     "reconcile` looks for the post (a probe, or the same-key resend); it is "
                     "never sent blindly again")
    if any(r.waits_for_person for r in dist.channels.values()):
        lines.append(f"{indent}hint: check the platform, then `git pub resolve "
                     f"{report.job_id[:13]} --channel NAME --confirmed URL | --not-sent | "
                     "--skip`")
    return lines


#: After the errors a command met job by job (each named; the others went on).
ERRORS_HINT = ("hint: `git pub status JOB` shows where each job named above stands, `git pub "
               "doctor` checks the repository (--debug shows the tracebacks of internal errors)")


def jobs_json(result: Jobs) -> dict[str, Any]:
    rows = [job_json(j, result.notes.get(j.job_id), result.hints.get(j.job_id))
            | channels_json(result.channels.get(j.job_id))
            for j in result.jobs]
    return {"jobs": rows, "errors": list(result.errors), "unconfirmed": list(result.unconfirmed)}


def jobs_text(result: Jobs, empty: str) -> str:
    single = len(result.jobs) == 1
    human = [with_hint("\n".join([job_line(j, result.notes.get(j.job_id)),
                                  *channels_text(result.channels.get(j.job_id))]),
                       result.hints.get(j.job_id), "" if single else "    ")
             for j in result.jobs]
    if not human and empty:
        human = [empty]
    human += [f"error: {e}" for e in result.errors]
    human += [ERRORS_HINT] if result.errors else []
    human += [f"not confirmed: {u}\nhint: run the same command again later"
              for u in result.unconfirmed]
    return "\n".join(human)


def history_json(history: History) -> dict[str, Any]:
    rows = [{"commit": e.commit, "time": e.time, "from": e.from_state, "to": e.to_state,
             "phase": e.phase, "reason": e.reason} for e in history.events]
    return {"job_id": history.job.job_id, "events": rows}


def history_text(history: History) -> str:
    return "\n".join(f"{ago(e.time)}  {(e.from_state or '-'):>18} -> {e.to_state:<18} "
                     f"[{e.phase}] {e.reason}" for e in history.events)


def sync_json(result: Jobs) -> dict[str, Any]:
    """``sync --json``: the jobs, plus a ``commits`` entry per unpushed commit (``status``:
    published, pending, held, refused, conflict, review or blocked; ``reason``) and ``local``,
    what happened to the local branch."""
    return jobs_json(result) | {"commits": [c.public() for c in result.commits],
                                "local": result.local, "remark": result.remark,
                                "refused": result.refusal}


def sync_text(result: Jobs) -> str:
    lines = [f"{(c.commit or '')[:12]}  {c.status.value:<9} {c.subject}"
             + (" (uncommitted changes)" if c.uncommitted else "")
             + (f"\n    {c.reason}" if c.reason else "") for c in result.commits]
    shown = {c.job_id for c in result.commits}
    lines += [with_hint(job_line(j, result.notes.get(j.job_id)), result.hints.get(j.job_id),
                        "    ") for j in result.jobs if j.job_id not in shown]
    if result.refusal:
        lines.append(f"uncommitted changes refused: {result.refusal}")
    if result.local:
        lines.append(result.local)
    if result.refusal or any(c.status.needs_person for c in result.commits):
        lines.append("hint: each reason above says what to do; then run `git pub sync` again")
    if not lines:
        lines = ["nothing to sync"]
    lines += [f"error: {e}" for e in result.errors]
    lines += [ERRORS_HINT] if result.errors else []
    lines += [f"not confirmed: {u}\nhint: the next `git pub sync` tries again"
              for u in result.unconfirmed]
    return "\n".join(lines)


def init_next_steps(result: Initialized) -> list[str]:
    """What a person does after ``init`` wrote a new configuration: commit it, publish, confirm."""
    if not result.created or result.branch is None:
        return []
    first = result.articles[0] if result.articles else "posts/**/*.md"
    folder = "/".join(part for part in first.split("/")[:-1] if not set(part) & set("*?["))
    example = f"{folder}/hello.md" if folder else "hello.md"
    return [
        f"check {CONFIG_FILE}: articles (where your articles are), fonts (optional subsets)",
        f"commit and push it, so every writer and CI use it: git add {CONFIG_FILE} && "
        f"git commit -m 'Configure gitpub' && git push {result.remote} {result.branch}",
        f"publish an article: git pub prepare --to {example} hello.md && git pub push",
        "in CI, confirm what reached the remote: git pub confirm (see docs/commands/confirm.md)",
    ]


def init_text(result: Initialized) -> str:
    if result.created:
        lines = [f"wrote {result.config}: remote {result.remote}, branch {result.branch}, "
                 f"articles {', '.join(result.articles)}"]
    else:
        lines = [f"kept existing {result.config}"]
    error = result.hooks_error
    if error is None:
        lines.append("hooks installed: " + ", ".join(result.hooks))
    else:
        lines.append(f"hooks not installed: {error.message}"
                     + (f"\nhint: {error.hint}" if error.hint else ""))
    steps = init_next_steps(result)
    if steps:
        lines.append("next steps:")
        lines += [f"  {n}. {step}" for n, step in enumerate(steps, 1)]
    return "\n".join(lines)


#: A path's change, by git's letter (``Change.status``): a rename is a deletion and an addition.
CHANGE_WORDS = {"A": "added", "M": "modified", "D": "deleted", "T": "type_changed"}


def plan_json(plan: Plan) -> dict[str, Any]:
    pending, foreseen = plan.hand_edits, plan.foreseen
    edits = None if pending is None else {
        "uncommitted": list(pending.uncommitted), "unpushed": list(pending.unpushed),
        "left_alone": sorted(pending.foreign), "refused": pending.refused,
        "commits": [{"commit": o.commit or None, "subject": o.subject,
                     "uncommitted": o.uncommitted, "status": str(o.status), "reason": o.reason,
                     "job_id": o.job_id,
                     "changes": [{"path": c.path, "change": CHANGE_WORDS[c.status]}
                                 for c in changes]}
                    for o, changes in (foreseen.commits if foreseen is not None else ())],
        "notes": list(foreseen.notes) if foreseen is not None else []}
    return {"dry_run": True, "remote_tip": plan.remote_tip, "fetched_tip": plan.fetched_tip,
            "jobs": [{"job_id": s.job.job_id, "state": s.job.state.value,
                      "target_paths": list(s.job.record.target_paths), "action": s.action,
                      "detail": s.detail} for s in plan.steps],
            "hand_edits": edits, "errors": list(plan.errors)}


def plan_text(plan: Plan) -> str:
    lines = ["dry run: nothing is fetched, pushed or written",
             f"remote tip: {plan.remote_tip or '(unknown or no branch)'}; last fetched: "
             f"{plan.fetched_tip or '(nothing)'}"]
    for s in plan.steps:
        lines.append(f"{s.job.job_id[:13]}  {s.job.state.value:<18} "
                     f"{', '.join(s.job.record.target_paths)}\n    {s.detail}")
    pending, foreseen = plan.hand_edits, plan.foreseen
    if pending is not None:
        if pending.refused is not None:
            lines.append(f"hand edits: would refuse {len(pending.uncommitted)} content "
                         f"path(s): {pending.refused}")
        elif pending.uncommitted:
            lines.append(f"hand edits: would commit {len(pending.uncommitted)} content path(s): "
                         + ", ".join(pending.uncommitted[:5]))
        for commit, paths in pending.foreign.items():
            lines.append(f"hand edits: would leave {commit[:12]} alone (changes non-content "
                         f"paths: {', '.join(paths[:3])})")
    if foreseen is not None and foreseen.commits:
        lines.append("hand edits, as sync would take them (a rename is a deletion and an "
                     "addition):")
        for o, changes in foreseen.commits:
            name = o.commit[:12] if o.commit else "uncommitted "
            reason = o.reason if o.reason != "to be delivered" else ""  # said by the status
            lines.append(f"  {name}  {o.status.value:<9} {o.subject}"
                         + (f"\n      {reason}" if reason else ""))
            lines += [f"      {CHANGE_WORDS[c.status]:<12} {c.path}" for c in changes]
    lines += [f"hand edits: {n}" for n in (foreseen.notes if foreseen is not None else ())]
    if not plan.steps and (pending is None or pending.empty):
        lines.append("nothing would be pushed")
    lines += [f"error: {e}" for e in plan.errors]
    lines += [ERRORS_HINT] if plan.errors else []
    return "\n".join(lines)


def doctor_json(report: Report) -> dict[str, Any]:
    return {"ok": report.ok, "checks": [
        {"name": c.name, "status": c.status, "message": c.message, "fix": c.fix,
         "safe_fix": c.safe_fix, "fixed": c.fixed} for c in report.checks]}


def doctor_text(report: Report, fixing: bool) -> str:
    lines = []
    for c in report.checks:
        mark = "fixed" if c.fixed else c.status.upper() if c.status != "ok" else "ok"
        lines.append(f"{mark:<7} {c.name}: {c.message}")
        if c.fix and not c.fixed and c.status in ("warn", "fail"):
            safe = " (safe: `git pub doctor --fix` applies it)" if c.safe_fix and not fixing \
                else ""
            lines.append(f"        fix: {c.fix}{safe}")
    return "\n".join(lines)
