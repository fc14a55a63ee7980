"""The prepare pipeline: RECEIVED → PREPARING → READY_TO_COMMIT → LOCAL_COMMITTED.

Each phase reads only what earlier phases recorded in the job's state commit and records its own
outcome there before the next one starts, so a rerun after a crash resumes at the first phase
not yet recorded instead of redoing the others (a draft command is not run twice because the
process died during the gates). Phases:

1. *snapshot* — the base commit (remote-tracking branch if present, else the local branch) and,
   per target, NEW or UPDATE with the SHA-256 of the content it replaces;
2. *draft* — the optional draft command turns the source into the article files (in scratch);
   without one, the sources are the articles;
3. *judge* — the optional dedup judge answers SKIP or KEEP; anything else fails closed (REVIEW);
4. *gates* — the built-in secret scan, UTF-8 and front-matter checks, then the configured gate
   commands; then the manifest and its hash → READY_TO_COMMIT;
5. *commit* — see ``localcommit``.

Nothing here touches the user's working tree or index, and nothing needs the network.
A process that loses a compare-and-swap to another one working on the same job re-reads the job
and carries on from wherever the other got to.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gitpub.config.schema import Command, Config
from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import KeyReusedError, LostRace, UsageError
from gitpub.core.manifest import Manifest, ManifestError, check_path, content_sha256
from gitpub.core.record import JobRecord, Target
from gitpub.core.sanitize import find_secrets, sanitize, sanitize_bytes
from gitpub.core.states import State
from gitpub.fonts import step as fontstep
from gitpub.git.repo import MODE_FILE, MODE_TREE, Entry, Repository
from gitpub.pipeline import gates, steps
from gitpub.pipeline.commit import commit_job, recover
from gitpub.store.jobs import Job, JobStore, job_id_for_key

REQUEST_VERSION = 1
#: How long ``prepare`` waits for another process already preparing the same job.
PREPARE_WAIT = 120.0


@dataclass(frozen=True)
class Source:
    label: str  # where it came from, for messages ("-" for stdin)
    data: bytes


@dataclass(frozen=True)
class Request:
    """What the user asked for. Its hash covers everything that changes the meaning of the
    operation — contents, targets, whether a draft step turns sources into articles — and
    nothing else (no timestamps, no file names of the sources)."""

    targets: tuple[str, ...]
    sources: tuple[Source, ...]
    drafted: bool
    key: str | None = None
    kind: str = "publish"  # "sync" for content changes made outside gitpub

    def canonical(self) -> bytes:
        if self.drafted:
            body: dict[str, object] = {
                "targets": sorted(self.targets),
                "inputs": [content_sha256(s.data) for s in self.sources],
            }
        else:
            body = {"files": sorted(
                [t, content_sha256(s.data)] for t, s in zip(self.targets, self.sources,
                                                            strict=True))}
        doc = {"v": REQUEST_VERSION, "operation": self.kind,
               "mode": "draft" if self.drafted else "direct", **body}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def request_hash(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()

    def effective_key(self) -> str:
        return self.key if self.key is not None else "auto-" + self.request_hash()[:32]


def validate_request(request: Request) -> None:
    if not request.targets:
        raise UsageError("nothing to publish: give at least one --to PATH")
    for t in request.targets:
        try:
            check_path(t)
        except ManifestError as e:
            raise UsageError(f"--to {t!r}: {e}") from None
    if len(set(request.targets)) != len(request.targets):
        raise UsageError("the same --to path is given twice")
    if not request.drafted and len(request.sources) != len(request.targets):
        raise UsageError(
            f"{len(request.targets)} --to paths but {len(request.sources)} sources",
            hint="give one SOURCE per --to PATH (or a directory with a --to ending in '/')")
    if request.drafted and len(request.sources) != 1:
        raise UsageError("with a draft command, give exactly one SOURCE")
    if request.key is not None and not request.key.strip():
        raise UsageError("--key must not be empty")


@dataclass
class Context:
    repo: Repository
    store: JobStore
    config: Config
    clock: Callable[[], float] = time.time
    progress: Callable[[str], None] = field(default=lambda msg: None)
    #: Snapshot this commit instead of the tracking branch (sync: the hand edits' own base).
    base_override: str | None = None

    def base_ref(self) -> str | None:
        """The ref the base snapshot comes from: the remote-tracking branch when present."""
        for ref in (f"refs/remotes/{self.config.remote}/{self.config.branch}",
                    f"refs/heads/{self.config.branch}"):
            if self.repo.read_ref(ref) is not None:
                return ref
        return None

    def search_tips(self) -> list[str]:
        refs = [f"refs/heads/{self.config.branch}",
                f"refs/remotes/{self.config.remote}/{self.config.branch}"]
        return [sha for sha in (self.repo.read_ref(r) for r in refs) if sha]


# -- creating or finding the job -----------------------------------------------------------

def source_files(request: Request) -> dict[str, bytes]:
    """The sources as stored in the job: sanitized, at ``source/<target>`` (or ``source/input``)."""
    if request.drafted:
        return {"source/input": sanitize_bytes(request.sources[0].data)}
    return {f"source/{t}": sanitize_bytes(s.data)
            for t, s in zip(request.targets, request.sources, strict=True)}


def ensure_job(ctx: Context, request: Request) -> tuple[Job, bool]:
    """The job for the request's key: created now (True) or found (False). Exit 3 on a key
    that names a different request; nothing is written then."""
    validate_request(request)
    key = request.effective_key()
    job_id = job_id_for_key(key)
    wanted = request.request_hash()
    for _ in range(3):
        job = ctx.store.load(job_id)
        if job is not None:
            if job.record.request_hash != wanted:
                raise KeyReusedError(
                    f"idempotency key {sanitize(key)!r} already names job {job_id} "
                    "with different content or targets",
                    hint="use a new --key for a new request; nothing was changed")
            return job, False
        try:
            return _create(ctx, request, key, job_id, wanted), True
        except LostRace:
            continue  # another process created it first: read theirs
    raise LostRace(job_id)


def _create(ctx: Context, request: Request, key: str, job_id: str, request_hash: str) -> Job:
    files = source_files(request)
    findings = [
        sanitize(f"{s.label}:{f.line}: possible secret ({f.kind})")
        for s in request.sources for f in find_secrets(s.data.decode("utf-8", "replace"))
    ]
    now = ctx.clock()
    record = JobRecord(
        job_id=job_id,
        idempotency_key=sanitize(key),
        request_hash=request_hash,
        state=State.RECEIVED,
        node=ctx.config.node,
        created_at=now,
        updated_at=now,
        source_sha256=hashlib.sha256(b"".join(
            content_sha256(d).encode() for d in files.values())).hexdigest(),
        drafted=request.drafted,
        kind=request.kind,
        targets=tuple(Target(t, "new") for t in request.targets),
        max_attempts=ctx.config.retry.max_attempts,
        phases={"source-scan": "secret: " + "; ".join(findings)} if findings else {},
    )
    job = ctx.store.create(record, files, reason="accepted " + ", ".join(request.targets))
    crash_point("prepare.job-created")
    return job


# -- driving the job -----------------------------------------------------------------------

def drive(ctx: Context, job: Job, *, wait: float = 0.0) -> Job:
    """Run the job forward through every local phase, until it rests.

    Work happens under the job's lease. When another live process holds it, wait up to
    ``wait`` seconds for it to finish (``prepare`` waits: the caller wants the job's outcome),
    then return the job as it stands (``reconcile`` does not wait: it has other jobs to do).
    """
    deadline = time.monotonic() + wait
    while True:
        handler = _HANDLERS.get(job.state)
        if handler is None:
            return job
        leased = ctx.store.acquire(job)
        if leased is None:
            if time.monotonic() >= deadline:
                return job
            time.sleep(0.05)
            job = reload(ctx.store, job)
            continue
        try:
            job = handler(ctx, leased)
        except LostRace:
            job = reload(ctx.store, job)


def reload(store: JobStore, job: Job) -> Job:
    fresh = store.load(job.job_id)
    assert fresh is not None, "a job's ref never disappears under us"
    return fresh


def to_review(ctx: Context, job: Job, phase: str, code: str, problems: Sequence[str]) -> Job:
    detail = sanitize("; ".join(problems))
    return ctx.store.transition(
        job, job.record.evolve(state=State.REVIEW, failure_code=code, failure_detail=detail),
        phase=phase, reason=detail)


def _snapshot(ctx: Context, job: Job) -> Job:
    record = job.record
    if "source-scan" in record.phases:
        return to_review(ctx, job, "source-scan", "secret_in_source",
                          [record.phases["source-scan"]])
    base_ref: str | None
    base: str | None
    if ctx.base_override is not None:
        base_ref, base = "(base of the local changes)", ctx.base_override
    else:
        base_ref = ctx.base_ref()
        base = None if base_ref is None else ctx.repo.read_ref(base_ref)
    tree = None if base is None else ctx.repo.commit(base).tree
    targets = []
    for t in record.targets:
        entry = None if tree is None else ctx.repo.lookup(tree, t.path)
        blocker = None if tree is None else ctx.repo.file_in_the_way(tree, t.path)
        problem = (f"{t.path} is a directory in the base" if entry and entry.mode == MODE_TREE
                   else f"{t.path}: {blocker} is a file in the base" if blocker else None)
        if problem:
            return ctx.store.transition(
                job, record.evolve(state=State.CONFLICT, failure_code="target_blocked",
                                   failure_detail=problem),
                phase="snapshot", reason=problem)
        if entry is None:
            targets.append(Target(t.path, "new"))
        else:
            targets.append(Target(t.path, "update", content_sha256(ctx.repo.blob(entry.sha))))
    entries: dict[str, Entry | None] = {}
    phases = dict(record.phases)
    if not record.drafted:
        for t in record.targets:
            src = ctx.repo.lookup(job.tree, f"source/{t.path}")
            assert src is not None
            entries[f"artifacts/{t.path}"] = Entry(MODE_FILE, src.sha)
        phases["draft"] = "direct"
    job = ctx.store.transition(
        job, record.evolve(state=State.PREPARING, base_ref=base_ref, base_commit=base,
                           first_base=record.first_base or base,
                           targets=tuple(targets), phases=phases),
        phase="snapshot", reason=f"base {base_ref or '(empty)'} at {base or '(none)'}",
        entries=entries)
    crash_point("prepare.base-snapshotted")
    return job


def _phase_env(ctx: Context, job: Job) -> dict[str, str]:
    return {
        "GITPUB_JOB_ID": job.job_id,
        "GITPUB_BASE_COMMIT": job.record.base_commit or "",
        "GITPUB_TARGETS": "\n".join(job.record.target_paths),
        "GITPUB_GIT_DIR": str(ctx.repo.common_dir),
    }


def _scratch(ctx: Context, job: Job, label: str) -> steps.Scratch:
    return steps.Scratch(ctx.repo.pub_dir / "scratch", f"{job.job_id[:8]}-{label}")


def _artifact_files(ctx: Context, job: Job) -> dict[str, bytes]:
    tree = ctx.store.subtree(job, "artifacts")
    if tree is None:
        return {}
    return {p: ctx.repo.blob(e.sha) for p, e in ctx.repo.walk_files(tree)}


def _draft(ctx: Context, job: Job, command: Command) -> Job:
    source = ctx.store.read_file(job, "source/input") or b""
    declared = frozenset(job.record.target_paths)
    ctx.progress(f"draft: running {command.name}")
    with _scratch(ctx, job, "draft") as scratch:
        scratch.put("source", source)
        env = _phase_env(ctx, job) | {"GITPUB_SOURCE": str(scratch.path / "source")}
        result = steps.run(command, scratch, stdin=source, env=env, declared=declared)
    crash_point("prepare.draft-ran")
    if not result.ok:
        code = ("draft_failed" if not result.stray
                else "input_modified" if any(p.endswith(")") for p in result.stray)
                else "temp_file_leak")
        return to_review(ctx, job, "draft", code, [f"draft: {result.describe()}"])
    missing = sorted(declared - set(result.outputs))
    if missing:
        return to_review(ctx, job, "draft", "draft_incomplete",
                          [f"draft did not write {', '.join(missing)}"])
    files = {p: d for p, (_m, d) in result.outputs.items()}
    secrets = gates.secret_problems(files)
    if secrets:  # the drafted text is *not* stored: only where the secrets are
        return to_review(ctx, job, "draft", "secret_in_content", secrets)
    entries: dict[str, Entry | None] = {
        f"artifacts/{p}": Entry(mode, ctx.repo.write_blob(data))
        for p, (mode, data) in result.outputs.items()
    }
    job = ctx.store.transition(
        job, job.record.evolve(phases=job.record.phases | {"draft": "ok"}),
        phase="draft", reason=f"drafted {len(entries)} file(s)", entries=entries)
    crash_point("prepare.draft-recorded")
    return job


def run_judge(ctx: Context, job: Job, command: Command,
              extra: dict[str, object] | None = None) -> tuple[str | None, str]:
    """Ask the dedup judge: ("SKIP" | "KEEP", "") or (None, why it gave no valid answer).

    The contract is strict and fails closed: exactly SKIP or KEEP on stdout and exit 0;
    anything else — another word, a crash, a timeout, a stray file — is no answer.
    """
    files = _artifact_files(ctx, job)
    payload = json.dumps({
        "job_id": job.job_id,
        "base_commit": job.record.base_commit,
        "candidates": [{"path": p, "content": d.decode("utf-8", "replace")}
                       for p, d in sorted(files.items())],
        **(extra or {}),
    }, ensure_ascii=False).encode()
    ctx.progress(f"judge: running {command.name}")
    with _scratch(ctx, job, "judge") as scratch:
        result = steps.run(command, scratch, stdin=payload, env=_phase_env(ctx, job))
    answer = result.stdout.decode("utf-8", "replace").strip()
    if result.ok and answer in ("SKIP", "KEEP"):
        return answer, ""
    why = result.describe() if not result.ok else f"answered {sanitize(answer)[:80]!r}"
    return None, f"judge: {why} (expected SKIP or KEEP)"


def _judge(ctx: Context, job: Job, command: Command) -> Job:
    verdict, problem = run_judge(ctx, job, command)
    crash_point("prepare.judge-ran")
    if verdict is None:
        return to_review(ctx, job, "judge", "judge_undecided", [problem])
    if verdict == "SKIP":
        skipped = job.record.evolve(state=State.SKIPPED,
                                    phases=job.record.phases | {"judge": "SKIP"})
        return ctx.store.transition(job, skipped, phase="judge",
                                    reason="the dedup judge answered SKIP")
    job = ctx.store.transition(
        job, job.record.evolve(phases=job.record.phases | {"judge": "KEEP"}),
        phase="judge", reason="the dedup judge answered KEEP")
    crash_point("prepare.judge-recorded")
    return job


def _gates(ctx: Context, job: Job) -> Job:
    files = _artifact_files(ctx, job)
    problems = gates.secret_problems(files)
    if problems:
        return to_review(ctx, job, "gates", "secret_in_content", problems)
    problems = gates.text_problems(files)
    for command in ctx.config.gates:
        ctx.progress(f"gate: running {command.name}")
        with _scratch(ctx, job, "gate") as scratch:
            for path, data in files.items():
                scratch.put(f"files/{path}", data)
            env = _phase_env(ctx, job) | {
                "GITPUB_FILES": "\n".join(f"files/{p}" for p in sorted(files))}
            result = steps.run(command, scratch, env=env)
        if not result.ok:
            problems.append(f"gate {command.name}: {result.describe()}")
    crash_point("prepare.gates-ran")
    if problems:
        return to_review(ctx, job, "gates", "gate_failed", problems)
    tree = ctx.store.subtree(job, "artifacts")
    modes = {p: e.mode for p, e in ctx.repo.walk_files(tree)} if tree else {}
    record = job.record.evolve(phases=job.record.phases | {"gates": "passed"})
    fonts: dict[str, bytes] = {}
    if ctx.config.fonts:
        derived = derive_fonts(ctx, record.base_commit, files)
        if derived.problems:
            return to_review(ctx, job, "fonts", "font_failed", derived.problems)
        fonts = derived.changed  # an output that would not change is not written
        record = record.evolve(
            targets=record.targets + tuple(_target_in(ctx, record.base_commit, out)
                                           for out in sorted(fonts)),
            phases=record.phases | {"fonts": derived.summary()})
    manifest = Manifest.build([(p, modes[p], d) for p, d in files.items()]
                              + [(p, MODE_FILE, d) for p, d in fonts.items()])
    author = ctx.repo.user_identity()
    job = ctx.store.transition(
        job,
        record.evolve(state=State.READY_TO_COMMIT, manifest_sha256=manifest.sha256(),
                      commit_time=int(ctx.clock()), author=author.as_bytes().decode()),
        phase="gates", reason=f"gates passed; manifest {manifest.sha256()}",
        files={"manifest": manifest.serialize()} | {f"artifacts/{p}": d
                                                     for p, d in fonts.items()})
    crash_point("prepare.ready-recorded")
    return job


def derive_fonts(ctx: Context, commit: str | None, own: dict[str, bytes]) -> fontstep.Derived:
    """The configured font subsets for the article set of ``commit`` plus ``own``."""
    tree = None if commit is None else ctx.repo.commit(commit).tree
    return fontstep.derive(ctx.repo, ctx.config, tree, own, ctx.repo.pub_dir / "fonts-cache",
                           ctx.progress)


def _target_in(ctx: Context, commit: str | None, path: str) -> Target:
    """NEW or UPDATE (with the content hash it replaces) for ``path`` in ``commit``."""
    entry = None if commit is None else ctx.repo.lookup(ctx.repo.commit(commit).tree, path)
    if entry is None or entry.mode == MODE_TREE:
        return Target(path, "new")
    return Target(path, "update", content_sha256(ctx.repo.blob(entry.sha)))


def _preparing(ctx: Context, job: Job) -> Job:
    phases, config = job.record.phases, ctx.config
    if "draft" not in phases:
        if config.draft is None:
            return to_review(ctx, job, "draft", "draft_unconfigured",
                              ["the job needs a draft command but none is configured"])
        return _draft(ctx, job, config.draft)
    if config.judge is not None and "judge" not in phases and job.record.kind != "sync":
        return _judge(ctx, job, config.judge)
    return _gates(ctx, job)


def _commit(ctx: Context, job: Job) -> Job:
    return commit_job(ctx.store, job, ctx.config.trailer_prefix)


def _recover(ctx: Context, job: Job) -> Job:
    return recover(ctx.store, job, ctx.config.trailer_prefix, ctx.search_tips())


_HANDLERS: dict[State, Callable[[Context, Job], Job]] = {
    State.RECEIVED: _snapshot,
    State.PREPARING: _preparing,
    State.READY_TO_COMMIT: _commit,
    State.LOCAL_COMMITTING: _recover,
    State.RECOVERING: _recover,
}


def prepare(ctx: Context, request: Request) -> tuple[Job, bool]:
    """Create or find the job for ``request`` and drive it as far as it goes locally."""
    job, created = ensure_job(ctx, request)
    return drive(ctx, job, wait=PREPARE_WAIT), created
