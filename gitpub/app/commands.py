"""The commands: each ``cmd_*`` takes plain arguments, does its work and returns an exit code.

The click layer (``cli``) only parses options and calls these; output goes through ``Output`` so
every command speaks both human and ``--json``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gitpub.config.schema import CONFIG_FILE, Config, default_config_text, load_config
from gitpub.core.errors import EXIT_ERROR, EXIT_OK, CorruptStateError, GitpubError, UsageError
from gitpub.core.sanitize import sanitize
from gitpub.core.states import LOCAL, TERMINAL, State, exit_code_for
from gitpub.git.repo import Repository
from gitpub.pipeline.prepare import Context, Request, Source, prepare
from gitpub.store.jobs import Job, JobStore
from gitpub.store.maintenance import pack_refs_if_needed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gitpub.delivery.deliver import Deliverer


@dataclass
class Output:
    """Where a command reports: human lines on stdout/stderr, or one JSON object on stdout."""

    json: bool = False

    def emit(self, data: dict[str, Any], human: str) -> None:
        if self.json:
            sys.stdout.write(json.dumps(data, ensure_ascii=False, sort_keys=True) + "\n")
        elif human:
            sys.stdout.write(human.rstrip("\n") + "\n")
        sys.stdout.flush()

    def progress(self, message: str) -> None:
        """Progress of long work, on stderr so it never mixes with ``--json``."""
        sys.stderr.write(f"gitpub: {sanitize(message)}\n")
        sys.stderr.flush()


@contextmanager
def open_context(where: Path, out: Output) -> Iterator[Context]:
    with Repository.discover(where) as repo:
        config = load_repo_config(repo)
        yield Context(repo, JobStore(repo), config, progress=out.progress)


def load_repo_config(repo: Repository) -> Config:
    root = repo.work_tree if repo.work_tree is not None else repo.common_dir
    return load_config(root, repo.pub_dir)


# -- rendering -----------------------------------------------------------------------------

def _ago(ts: float | None) -> str:
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
    if r.attempt:
        lines.append(f"  attempt:   {r.attempt}/{r.max_attempts}")
    if r.next_retry_at:
        lines.append(f"  retry at:  {_ago(r.next_retry_at)}")
    if r.failure_code:
        lines.append(f"  failure:   {r.failure_code}: {r.failure_detail or ''}")
    lines.append(f"  updated:   {_ago(r.updated_at)}")
    return "\n".join(lines)


def resolve_job(store: JobStore, ref: str) -> Job:
    """A job by id or unique id prefix."""
    if "/" not in ref and len(ref) == 36:
        exact = store.load(ref)
        if exact is not None:
            return exact
    ids = store.job_ids()
    matches = [i for i in ids if i == ref] or [i for i in ids if i.startswith(ref)]
    if not matches:
        raise UsageError(f"no job {ref!r}", hint="`git pub status` lists the jobs")
    if len(matches) > 1:
        raise UsageError(f"job id prefix {ref!r} is ambiguous ({len(matches)} jobs)")
    job = store.load(matches[0])
    if job is None:
        raise UsageError(f"no job {ref!r}")
    return job


# -- commands ------------------------------------------------------------------------------

def read_sources(
    targets: Sequence[str], sources: Sequence[str], drafted: bool
) -> tuple[list[str], list[Source]]:
    """Expand ``--to``/SOURCE pairs: ``-`` is stdin, a directory maps below a ``--to`` ending
    in ``/``."""
    if list(sources).count("-") > 1:
        raise UsageError("stdin (-) can be only one SOURCE")
    if drafted:
        return list(targets), [_read_one(s) for s in sources]
    if len(targets) != len(sources):
        raise UsageError(f"{len(targets)} --to paths but {len(sources)} sources",
                         hint="give one SOURCE per --to PATH")
    out_targets: list[str] = []
    out_sources: list[Source] = []
    for target, source in zip(targets, sources, strict=True):
        path = Path(source)
        if source != "-" and path.is_dir():
            if not target.endswith("/"):
                raise UsageError(f"{source} is a directory: its --to must end with '/'")
            files = sorted(p for p in path.rglob("*") if p.is_file())
            if not files:
                raise UsageError(f"{source} is an empty directory")
            for f in files:
                out_targets.append(target + f.relative_to(path).as_posix())
                out_sources.append(Source(str(f), f.read_bytes()))
        else:
            if target.endswith("/"):
                raise UsageError(f"--to {target} ends with '/' but {source} is not a directory")
            out_targets.append(target)
            out_sources.append(_read_one(source))
    return out_targets, out_sources


def _read_one(source: str) -> Source:
    if source == "-":
        return Source("-", sys.stdin.buffer.read())
    try:
        return Source(source, Path(source).read_bytes())
    except OSError as e:
        raise UsageError(f"cannot read {source}: {e.strerror}") from None


def cmd_prepare(where: Path, out: Output, key: str | None, targets: Sequence[str],
                sources: Sequence[str], push: bool = False) -> int:
    notes: dict[str, str] = {}
    with open_context(where, out) as ctx:
        drafted = ctx.config.draft is not None
        paths, srcs = read_sources(targets, sources, drafted)
        request = Request(tuple(paths), tuple(srcs), drafted, key)
        if push:
            ctx.store.keep_lease_in = frozenset({State.LOCAL_COMMITTED})
        job, created = prepare(ctx, request)
        if push:  # deliver it now, in this process: one interpreter start instead of two
            from gitpub.delivery.deliver import Deliverer, remote_for

            deliverer = Deliverer(ctx, remote_for(ctx), now_please=True)
            job = deliverer.deliver(job)
            notes = deliverer.notes
    note = f"\n  {notes[job.job_id]}" if job.job_id in notes else ""
    out.emit(job.record.public() | {"created": created} | (
        {"note": notes[job.job_id]} if job.job_id in notes else {}),
        describe_job(job) + ("" if created else "\n  (existing job for this key)") + note)
    return exit_code_for(job.state)


def cmd_status(where: Path, out: Output, job_ref: str | None, show_all: bool) -> int:
    with open_context(where, out) as ctx:
        if job_ref is not None:
            job = resolve_job(ctx.store, job_ref)
            out.emit(job.record.public(), describe_job(job))
            return EXIT_OK
        jobs: list[Job] = []
        errors: list[CorruptStateError] = []
        for item in ctx.store.iter_jobs(finished=show_all):
            if isinstance(item, CorruptStateError):
                errors.append(item)
            elif show_all or item.state not in TERMINAL:
                jobs.append(item)
    jobs.sort(key=lambda j: j.record.created_at)
    human = [_job_line(j) for j in jobs] or ["no unfinished jobs" if not show_all
                                             else "no jobs"]
    human += [f"error: {e.message}" for e in errors]
    out.emit({"jobs": [j.record.public() for j in jobs],
              "errors": [e.message for e in errors]}, "\n".join(human))
    return EXIT_ERROR if errors else EXIT_OK


def cmd_log(where: Path, out: Output, job_ref: str) -> int:
    with open_context(where, out) as ctx:
        job = resolve_job(ctx.store, job_ref)
        events = ctx.store.history(job)
    rows = [{"commit": e.commit, "time": e.time, "from": e.from_state, "to": e.to_state,
             "phase": e.phase, "reason": e.reason} for e in events]
    human = [f"{_ago(e.time)}  {(e.from_state or '-'):>18} -> {e.to_state:<18} "
             f"[{e.phase}] {e.reason}" for e in events]
    out.emit({"job_id": job.job_id, "events": rows}, "\n".join(human))
    return EXIT_OK


def cmd_init(where: Path, out: Output) -> int:
    with Repository.discover(where) as repo:
        if repo.work_tree is None:
            raise UsageError("git pub init needs a repository with a working tree")
        path = repo.work_tree / CONFIG_FILE
        created = not path.exists()
        if created:
            path.write_text(default_config_text(), encoding="utf-8")
        load_repo_config(repo)  # validate what is there
        work_tree = repo.work_tree
    from gitpub.hooks.install import install_hooks

    lines = [f"{'wrote' if created else 'kept existing'} {path}"]
    try:
        hooks = install_hooks(work_tree)
        lines.append("hooks installed: " + ", ".join(hooks))
        hook_error = None
    except UsageError as e:  # e.g. core.hooksPath points elsewhere: config is still written
        hooks, hook_error = [], e.message
        lines.append(f"hooks not installed: {e.message}" + (f"\nhint: {e.hint}" if e.hint
                                                             else ""))
    out.emit({"config": str(path), "created": created, "hooks": hooks,
              "hooks_error": hook_error}, "\n".join(lines))
    return EXIT_OK


# -- delivery ------------------------------------------------------------------------------

def _job_line(job: Job, note: str | None = None) -> str:
    line = f"{job.job_id[:13]}  {job.state.value:<18} {', '.join(job.record.target_paths)}"
    if job.record.failure_detail and job.state not in TERMINAL:
        line += f"\n    {job.record.failure_code}: {job.record.failure_detail}"
    if job.state == State.PUBLISHED and job.record.remote_commit:
        line += f"\n    remote commit {job.record.remote_commit}"
    if note:
        line += f"\n    {note}"
    return line


def _report_jobs(out: Output, jobs: list[Job], errors: list[str],
                 notes: dict[str, str], empty: str) -> int:
    rows = [j.record.public() | ({"note": notes[j.job_id]} if j.job_id in notes else {})
            for j in jobs]
    human = [_job_line(j, notes.get(j.job_id)) for j in jobs] or [empty]
    human += [f"error: {e}" for e in errors]
    out.emit({"jobs": rows, "errors": errors}, "\n".join(human))
    if errors:
        return EXIT_ERROR
    return aggregate_exit([j.state for j in jobs])


def aggregate_exit(states: Sequence[State]) -> int:
    """4 if any job needs a person, else 5 if any is not confirmed yet, else 0."""
    codes = [exit_code_for(s) for s in states]
    return 4 if 4 in codes else 5 if 5 in codes else EXIT_OK


def _unfinished(ctx: Context, errors: list[str], states: frozenset[State]) -> list[Job]:
    """The unfinished jobs in ``states``, oldest first; unreadable ones go to ``errors``."""
    jobs = []
    for item in ctx.store.iter_jobs(finished=False):
        if isinstance(item, CorruptStateError):
            errors.append(item.message)
        elif item.state in states:
            jobs.append(item)
    return sorted(jobs, key=lambda j: j.record.created_at)


def _deliver_one(job: Job, deliverer: Deliverer, errors: list[str]) -> Job:
    """The job delivered as far as it goes; on an error, the job as it was (error recorded)."""
    try:
        return deliverer.deliver(job)
    except GitpubError as e:  # one bad job must not stop the others
        errors.append(f"job {job.job_id}: {sanitize(e.message)}")
        return job


def _deliver_all(jobs: Sequence[Job], deliverer: Deliverer,
                 errors: list[str]) -> list[Job]:
    return [_deliver_one(job, deliverer, errors) for job in jobs]


def cmd_push(where: Path, out: Output, job_refs: Sequence[str]) -> int:
    from gitpub.delivery.deliver import DELIVERABLE, Deliverer, remote_for

    with open_context(where, out) as ctx:
        deliverer = Deliverer(ctx, remote_for(ctx), now_please=bool(job_refs))
        errors: list[str] = []
        if job_refs:
            jobs = [resolve_job(ctx.store, ref) for ref in job_refs]
        else:
            jobs = _unfinished(ctx, errors, DELIVERABLE | LOCAL)
        done = _deliver_all(jobs, deliverer, errors)
        pack_refs_if_needed(ctx.repo)
    return _report_jobs(out, done, errors, deliverer.notes, "nothing to deliver")


def cmd_reconcile(where: Path, out: Output) -> int:
    """Recover every unfinished job: local phases, unknown push outcomes, expired leases,
    due retries, probes of FAILED jobs. Goes on past a bad job."""
    from gitpub.delivery.deliver import Deliverer, remote_for
    from gitpub.delivery.sync import settle_outbox

    with open_context(where, out) as ctx:
        deliverer = Deliverer(ctx, remote_for(ctx))
        errors: list[str] = []
        everything = frozenset(State) - TERMINAL
        done = _deliver_all(_unfinished(ctx, errors, everything), deliverer, errors)
        pending = settle_outbox(ctx, ctx.repo.read_ref(deliverer.remote.tracking_ref))
        pack_refs_if_needed(ctx.repo)
    if not pending.empty:
        out.progress(f"pending hand edits: {len(pending.uncommitted)} uncommitted content "
                     f"path(s), {len(pending.unpushed)} unpushed commit(s); run `git pub sync`")
    return _report_jobs(out, done, errors, deliverer.notes, "nothing to reconcile")


def cmd_resolve(where: Path, out: Output, job_ref: str, action: Literal["retry", "abandon"]
                ) -> int:
    from gitpub.delivery.deliver import Deliverer, remote_for
    from gitpub.delivery.resolve import resolve
    from gitpub.git.remote import RemoteError

    with open_context(where, out) as ctx:
        job = resolve(ctx.store, resolve_job(ctx.store, job_ref), action)
        deliverer = Deliverer(ctx, remote_for(ctx), now_please=True)
        errors: list[str] = []
        if action == "retry":
            if job.state == State.RECEIVED:
                with contextlib.suppress(RemoteError):
                    deliverer.remote.fetch()  # re-snapshot against the current remote
            job = _deliver_one(job, deliverer, errors)
    return _report_jobs(out, [job], errors, deliverer.notes, "")


def cmd_confirm(where: Path, out: Output, rev_range: str | None, push_notes: bool) -> int:
    from gitpub.delivery.deliver import remote_for
    from gitpub.verify.confirm import confirm

    with open_context(where, out) as ctx:
        report = confirm(ctx.repo, ctx.config, remote_for(ctx), rev_range=rev_range,
                         push_notes=push_notes, progress=out.progress)
    rows = [{"commit": v.commit, "job_id": v.job_id, "ok": v.ok, "problems": list(v.problems)}
            for v in report.verdicts]
    human = [f"checked {report.checked} commit(s) up to {report.tip}: "
             f"{len(report.verdicts)} job commit(s), {len(report.bad)} bad"]
    human += [f"BAD {v.commit} (job {v.job_id}): {'; '.join(v.problems)}" for v in report.bad]
    if report.deepened:
        human.append(f"(shallow clone deepened by {report.deepened} commits)")
    out.emit({"tip": report.tip, "checked": report.checked, "commits": rows,
              "bad": [v.commit for v in report.bad], "notes_pushed": report.notes_pushed,
              "deepened": report.deepened}, "\n".join(human))
    return EXIT_ERROR if report.bad else EXIT_OK


def cmd_sync(where: Path, out: Output) -> int:
    """Deliver every deliverable job, then the content changes that belong to no job."""
    from gitpub.delivery.deliver import DELIVERABLE, Deliverer, remote_for
    from gitpub.delivery.sync import reset_to_published, settle_outbox, sync_changes
    from gitpub.git.remote import RemoteError

    with open_context(where, out) as ctx:
        deliverer = Deliverer(ctx, remote_for(ctx))
        errors: list[str] = []
        done = _deliver_all(_unfinished(ctx, errors, DELIVERABLE | LOCAL), deliverer,
                            errors)
        try:
            tip = deliverer.remote.fetch()
        except RemoteError as e:
            errors.append(f"hand edits not synced: {e.message}")
            return _report_jobs(out, done, errors, deliverer.notes, "")
        result = sync_changes(ctx, tip)
        job = result.job
        if job is not None:
            if job.state not in TERMINAL:
                job = _deliver_one(job, deliverer, errors)
            done = [j for j in done if j.job_id != job.job_id] + [job]
            if job.state == State.PUBLISHED and job.record.remote_commit and result.local:
                result.notes.append(reset_to_published(ctx, result.local,
                                                       job.record.remote_commit))
        settle_outbox(ctx, ctx.repo.read_ref(deliverer.remote.tracking_ref))
        if result.notes and job is not None:
            deliverer.notes[job.job_id] = "; ".join(result.notes)
        elif result.notes:
            out.progress("; ".join(result.notes))
    return _report_jobs(out, done, errors, deliverer.notes, "nothing to sync")
