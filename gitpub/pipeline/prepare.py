"""The prepare pipeline: RECEIVED → PREPARING → READY_TO_COMMIT → LOCAL_COMMITTED.

Each phase reads only what earlier phases recorded in the job's state commit and records its own
outcome there before the next one starts, so a rerun after a crash resumes at the first phase
not yet recorded instead of redoing the others (a draft command is not run twice because the
process died during the gates). Phases:

1. *snapshot* — the base commit (remote-tracking branch if present, else the local branch) and,
   per target, NEW or UPDATE with the SHA-256 of the content it replaces;
2. *draft* — the optional draft command turns the source into the article files (in scratch);
   without one, the sources are the articles;
   *history* — once per job, the base's whole history is searched for the job id
   (``pipeline.history``);
3. *judge* — the optional dedup judge answers SKIP or KEEP; anything else fails closed (REVIEW);
4. *gates* — the built-in secret scan, UTF-8 and front-matter checks, then the configured gate
   commands; then the manifest and its hash → READY_TO_COMMIT;
5. *commit* — see ``localcommit``.

Nothing here touches the user's working tree or index, and nothing needs the network.
A process that loses a compare-and-swap to another one working on the same job re-reads the job
and carries on from wherever the other got to.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitpub.config.model import Command, font_outputs
from gitpub.core.allowlist import AllowlistError
from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CorruptStateError, LostRace
from gitpub.core.files import pub_dir
from gitpub.core.manifest import Manifest, ManifestError, content_sha256
from gitpub.core.paths import case_twins
from gitpub.core.record import Target
from gitpub.core.sanitize import sanitize
from gitpub.core.states import Answer, FailureCode, Kind, Phase, Stage, State
from gitpub.git import paths as git_paths
from gitpub.git.repo import MODE_FILE, MODE_TREE, Entry
from gitpub.pipeline import gates
from gitpub.pipeline.commit import (
    author_problem,
    commit_job,
    read_artifacts,
    recover,
    unsound_base,
)
from gitpub.pipeline.history import history_phase
from gitpub.pipeline.jobs import reload, to_review, uses
from gitpub.pipeline.request import Request, ensure_job
from gitpub.runtime import steps
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job

if TYPE_CHECKING:
    from gitpub.fonts.step import Derived

#: How long ``prepare`` waits for another process already preparing the same job.
PREPARE_WAIT = 120.0


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
            job = reload(ctx.store, job, fresh=True)  # the other worker's moves: read them
            continue
        try:
            job = handler(ctx, leased)
        except LostRace:
            job = reload(ctx.store, job)


def sync_targets(ctx: Context, parent: str, commit: str) -> tuple[list[Target],
                                                                   dict[str, Entry | None]]:
    """A hand commit's changes against its parent as targets (each with the compare-and-swap
    condition of the entry it replaces: content *and* mode) and artifact entries (the commit's
    own blobs and modes, byte for byte)."""
    repo = ctx.repo
    targets: list[Target] = []
    entries: dict[str, Entry | None] = {}
    for change in repo.diff_entries(repo.commit(parent).tree, repo.commit(commit).tree):
        old, new = change.old, change.new
        if new is not None:
            entries[f"artifacts/{change.path}"] = new
        if old is None:
            targets.append(Target(change.path, "new"))
        else:
            targets.append(Target(change.path, "update" if new is not None else "delete",
                                  content_sha256(repo.blob(old.sha)), old.mode))
    return targets, entries


def _snapshot_sync(ctx: Context, job: Job) -> Job:
    """A sync job's snapshot: the hand commit's parent is the base, its changes the targets."""
    record = job.record
    assert record.sync_commit is not None and record.requested_base is not None
    targets, entries = sync_targets(ctx, record.requested_base, record.sync_commit)
    base = record.requested_base
    job = ctx.store.transition(
        job, record.evolve(state=State.PREPARING, base_ref="(parent of the hand commit)",
                           base_commit=base, first_base=record.first_base or base,
                           targets=tuple(targets),
                           phases=record.phases | {Phase.DRAFT: "direct"}),
        phase=Stage.SNAPSHOT, reason=f"commit {record.sync_commit} on {base}", entries=entries)
    crash_point("prepare.base-snapshotted")
    return job


def _snapshot(ctx: Context, job: Job) -> Job:
    record = job.record
    if Phase.SOURCE_SCAN in record.phases:  # (a sync job's commit: never snapshotted then)
        return to_review(ctx, job, Stage.SOURCE_SCAN, FailureCode.SECRET_IN_SOURCE,
                         [record.phases[Phase.SOURCE_SCAN]])
    if record.kind == Kind.SYNC and record.sync_commit is not None:
        return _snapshot_sync(ctx, job)
    base_ref: str | None
    base: str | None
    if record.requested_base is not None:
        base_ref, base = "(base of the local changes)", record.requested_base
    else:
        base_ref = ctx.base_ref()
        base = None if base_ref is None else ctx.repo.read_ref(base_ref)
    tree = None if base is None else ctx.repo.commit(base).tree
    record = record.evolve(targets=_requested(ctx, job))
    unsound = unsound_base(ctx.repo, tree, record.target_paths)
    if unsound is not None:
        return ctx.store.transition(
            job, record.evolve(state=State.CONFLICT, failure_code=FailureCode.TREE_UNSOUND,
                               failure_detail=unsound),
            phase=Stage.SNAPSHOT, reason=f"base {base}: {unsound}")
    twins = case_collisions(ctx, tree, record.target_paths)
    if twins:
        return to_review(ctx, job, Stage.SNAPSHOT, FailureCode.CASE_COLLISION, twins)
    targets = []
    for t in record.targets:
        entry = None if tree is None else ctx.repo.lookup(tree, t.path)
        blocker = None if tree is None else ctx.repo.file_in_the_way(tree, t.path)
        problem = (f"{t.path} is a directory in the base" if entry and entry.mode == MODE_TREE
                   else f"{t.path}: {blocker} is a file in the base" if blocker else None)
        if problem:
            return ctx.store.transition(
                job, record.evolve(state=State.CONFLICT, failure_code=FailureCode.TARGET_BLOCKED,
                                   failure_detail=problem),
                phase=Stage.SNAPSHOT, reason=problem)
        if entry is None:
            targets.append(Target(t.path, "new"))
        else:
            targets.append(Target(t.path, "update", content_sha256(ctx.repo.blob(entry.sha))))
    entries: dict[str, Entry | None] = {}
    phases = dict(record.phases)
    if not record.drafted:
        for t in record.targets:
            src = ctx.repo.lookup(job.tree, f"source/{t.path}")
            if src is None:
                raise CorruptStateError(f"job {job.job_id}: target {t.path} has no "
                                        f"source/{t.path} in state commit {job.commit}")
            entries[f"artifacts/{t.path}"] = Entry(MODE_FILE, src.sha)
        phases[Phase.DRAFT] = "direct"
    job = ctx.store.transition(
        job, record.evolve(state=State.PREPARING, base_ref=base_ref, base_commit=base,
                           first_base=record.first_base or base,
                           targets=tuple(targets), phases=phases),
        phase=Stage.SNAPSHOT, reason=f"base {base_ref or '(empty)'} at {base or '(none)'}",
        entries=entries)
    crash_point("prepare.base-snapshotted")
    return job


def _requested(ctx: Context, job: Job) -> tuple[Target, ...]:
    """The targets the request names: without the font outputs an earlier run of the pipeline
    derived (a job retried after a CONFLICT or REVIEW still lists them; the gates derive them
    again from the new snapshot). A direct job's requested targets are its ``source/`` files."""
    derived = font_outputs(ctx.config)
    return tuple(t for t in job.record.targets
                 if t.path not in derived
                 or (not job.record.drafted
                     and ctx.repo.lookup(job.tree, f"source/{t.path}") is not None))


def case_collisions(ctx: Context, tree: str | None, targets: Sequence[str]) -> list[str]:
    """Targets that differ only in case (or Unicode normalisation) from another target or from
    a path of the base ``tree``: one file on a case-insensitive file system. Both named."""
    problems = [f"{a} and {b} differ only in case: one file on case-insensitive file systems"
                for a, b in case_twins(targets)]
    for target in targets:
        if tree is None:
            break
        problems += [f"{target} and {twin} (in the base) differ only in case: one file on "
                     "case-insensitive file systems"
                     for twin in git_paths.case_twins_in(ctx.repo, tree, target)]
    return problems


def _phase_env(ctx: Context, job: Job) -> dict[str, str]:
    return _env(ctx, job.job_id, job.record.base_commit, job.record.target_paths)


def _env(ctx: Context, job_id: str, base_commit: str | None,
         targets: Sequence[str]) -> dict[str, str]:
    return {
        "GITPUB_JOB_ID": job_id,
        "GITPUB_BASE_COMMIT": base_commit or "",
        "GITPUB_TARGETS": "\n".join(targets),
        "GITPUB_GIT_DIR": str(ctx.repo.common_dir),
    }


def _base(ctx: Context, job: Job) -> gates.Base:
    """The job's base as the secret scan reads it (its allowlist, its version of each file)."""
    return gates.Base(ctx.repo, job.record.base_commit)


def _scratch(ctx: Context, job: Job, label: str) -> steps.Scratch:
    return steps.Scratch(pub_dir(ctx.repo.common_dir) / "scratch",
                         f"{job.job_id[:8]}-{label}")


def _artifact_files(ctx: Context, job: Job) -> dict[str, bytes]:
    tree = ctx.store.subtree(job, "artifacts")
    if tree is None:
        return {}
    return {p: ctx.repo.blob(e.sha) for p, e in ctx.repo.walk_files(tree)}


def _run_step(ctx: Context, command: Command, scratch: steps.Scratch, *, stdin: bytes = b"",
              env: Mapping[str, str] | None = None,
              declared: frozenset[str] = frozenset()) -> steps.StepResult:
    """``steps.run``; then what the command kept of the configuration and the mirror refs is
    forgotten (``Repository.forget_kept``): the step is the person's program, which may run
    git (``git config``, ``git fetch``) before what gitpub reads next."""
    try:
        return steps.run(command, scratch, stdin=stdin, env=env, declared=declared)
    finally:
        ctx.repo.forget_kept()


def _draft(ctx: Context, job: Job, command: Command) -> Job:
    source = ctx.store.read_file(job, "source/input") or b""
    declared = frozenset(job.record.target_paths)
    ctx.progress(f"draft: running {command.name}")
    with _scratch(ctx, job, "draft") as scratch:
        scratch.put("source", source)
        env = _phase_env(ctx, job) | {"GITPUB_SOURCE": str(scratch.path / "source")}
        result = _run_step(ctx, command, scratch, stdin=source, env=env, declared=declared)
    crash_point("prepare.draft-ran")
    if not result.ok:
        code = (FailureCode.DRAFT_FAILED if not result.stray
                else FailureCode.INPUT_MODIFIED if result.changed_inputs
                else FailureCode.TEMP_FILE_LEAK)
        return to_review(ctx, job, Stage.DRAFT, code, [f"draft: {result.describe()}"])
    missing = sorted(declared - set(result.outputs))
    if missing:
        return to_review(ctx, job, Stage.DRAFT, FailureCode.DRAFT_INCOMPLETE,
                          [f"draft did not write {', '.join(missing)}"])
    files = {p: d for p, (_m, d) in result.outputs.items()}
    try:
        secrets, allowed = gates.secret_scan(files, _base(ctx, job))
    except AllowlistError as e:
        return to_review(ctx, job, Stage.DRAFT, FailureCode.SECRET_IN_CONTENT, [e.message])
    if secrets:  # the drafted text is *not* stored: only where the secrets are
        return to_review(ctx, job, Stage.DRAFT, FailureCode.SECRET_IN_CONTENT, secrets)
    entries: dict[str, Entry | None] = {
        f"artifacts/{p}": Entry(mode, ctx.repo.write_blob(data))
        for p, (mode, data) in result.outputs.items()
    }
    job = ctx.store.transition(
        job, job.record.evolve(phases=job.record.phases | {Phase.DRAFT: "ok"}),
        phase=Stage.DRAFT, reason=f"drafted {len(entries)} file(s){uses(allowed)}",
        entries=entries)
    crash_point("prepare.draft-recorded")
    return job


def run_judge(ctx: Context, job: Job, command: Command,
              extra: dict[str, object] | None = None) -> tuple[Answer | None, str]:
    """Ask the dedup judge: (SKIP | KEEP, "") or (None, why it gave no valid answer).

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
        result = _run_step(ctx, command, scratch, stdin=payload, env=_phase_env(ctx, job))
    answer = result.stdout.decode("utf-8", "replace").strip()
    if result.ok and answer in Answer.__members__:
        return Answer(answer), ""
    why = result.describe() if not result.ok else f"answered {sanitize(answer)[:80]!r}"
    return None, f"judge: {why} (expected SKIP or KEEP)"


def _judge(ctx: Context, job: Job, command: Command) -> Job:
    verdict, problem = run_judge(ctx, job, command)
    crash_point("prepare.judge-ran")
    if verdict is None:
        return to_review(ctx, job, Stage.JUDGE, FailureCode.JUDGE_UNDECIDED, [problem])
    if verdict == Answer.SKIP:
        skipped = job.record.evolve(state=State.SKIPPED,
                                    phases=job.record.phases | {Phase.JUDGE: Answer.SKIP.value})
        return ctx.store.transition(job, skipped, phase=Stage.JUDGE,
                                    reason="the dedup judge answered SKIP")
    job = ctx.store.transition(
        job, job.record.evolve(phases=job.record.phases | {Phase.JUDGE: Answer.KEEP.value}),
        phase=Stage.JUDGE, reason="the dedup judge answered KEEP")
    crash_point("prepare.judge-recorded")
    return job


@dataclass(frozen=True)
class GateVerdict:
    """What the gates said of a set of files: ``code`` None when they passed."""

    code: FailureCode | None
    problems: list[str]
    allowed: list[str]  # the known non-secrets let through (for the history, never values)


def run_gates(ctx: Context, files: dict[str, bytes], *, job_id: str, base_commit: str | None,
              targets: Sequence[str]) -> GateVerdict:
    """The secret scan (with the allowlist committed in ``base_commit``), the text checks and
    the configured gate commands on ``files``: in memory and scratch space only, nothing
    stored (``sync`` runs them on uncommitted content before it commits anything)."""
    try:
        problems, allowed = gates.secret_scan(files, gates.Base(ctx.repo, base_commit))
    except AllowlistError as e:
        return GateVerdict(FailureCode.GATE_FAILED, [e.message], [])
    if problems:
        return GateVerdict(FailureCode.SECRET_IN_CONTENT, problems, allowed)
    problems = gates.text_problems(files)
    for command in ctx.config.gates:
        ctx.progress(f"gate: running {command.name}")
        with steps.Scratch(pub_dir(ctx.repo.common_dir) / "scratch",
                           f"{job_id[:8]}-gate") as scratch:
            unplaced = _place_files(scratch, files)
            if unplaced:
                problems.append(f"gate {command.name}: {unplaced}")
                continue
            env = _env(ctx, job_id, base_commit, targets) | {
                "GITPUB_FILES": "\n".join(f"files/{p}" for p in sorted(files))}
            result = _run_step(ctx, command, scratch, env=env)
        if not result.ok:
            problems.append(f"gate {command.name}: {result.describe()}")
    return GateVerdict(FailureCode.GATE_FAILED if problems else None, problems, allowed)


def regate(ctx: Context, job: Job) -> Job | None:
    """Another node's job, adopted here: its artifacts pass this node's write scope and gates
    again before anything of it is delivered (whoever may push ``refs/pub/*`` can rewrite a
    dead node's record, artifacts and manifest alike, so they prove nothing). The job in
    REVIEW when they do not, else None.

    Every path the commit would write or delete — artifacts, targets, the manifest's deletions
    — must be in scope, and each one a target (the targets are what is compare-and-swapped
    against the remote). Font outputs among the targets are derived, not gated (as in prepare):
    the delivery derives them again from the remote's articles. The gates read the remote
    branch's tip (what the commit goes onto) as the base, not the record's ``base_commit``: a
    forger's own commit there, whose file already has the secret, would pass it as inherited.
    (Not required to be a commit of the branch: ``prepare --to`` may base a job on local
    commits.)"""
    repo, record = ctx.repo, job.record
    files = _artifact_files(ctx, job)
    targets = set(record.target_paths)
    deleted: tuple[str, ...] = ()
    problems: list[str] = []
    code = FailureCode.GATE_FAILED
    if record.manifest_sha256 is not None:
        try:
            deleted = read_artifacts(ctx.store, job).manifest.deleted
        except ManifestError as e:
            code, problems = FailureCode.ARTIFACTS_UNSAFE, [str(e)]
    tip = repo.read_ref(ctx.remote().tracking_ref)
    problems += [f"{p}: {why}" for p in sorted({*files, *targets, *deleted})
                 if (why := ctx.config.scope_problem(p)) is not None]
    problems += [f"{p}: written or deleted, but not among the job's targets"
                 for p in sorted({*files, *deleted} - targets)]
    why = author_problem(record.author)
    problems += [] if why is None else [why]
    if not problems:
        gated = {p: d for p, d in files.items() if p not in ctx.config.font_outputs}
        verdict = run_gates(ctx, gated, job_id=job.job_id,
                            base_commit=tip if tip is not None else record.base_commit,
                            targets=record.target_paths)
        code, problems = verdict.code or code, verdict.problems
    if not problems:
        return None
    ctx.progress(f"{job.job_id[:13]}: taken over, but its artifacts do not pass this node's "
                 "gates: left for a person (REVIEW)")
    return to_review(ctx, job, Stage.GATES, code, [f"taken over from node "
                                                   f"{sanitize(record.node)}", *problems])


def _gates(ctx: Context, job: Job) -> Job:
    files = _artifact_files(ctx, job)
    verdict = run_gates(ctx, files, job_id=job.job_id, base_commit=job.record.base_commit,
                        targets=job.record.target_paths)
    crash_point("prepare.gates-ran")
    if verdict.code is not None:
        return to_review(ctx, job, Stage.GATES, verdict.code, verdict.problems)
    allowed = verdict.allowed
    tree = ctx.store.subtree(job, "artifacts")
    modes = {p: e.mode for p, e in ctx.repo.walk_files(tree)} if tree else {}
    record = job.record.evolve(phases=job.record.phases | {Phase.GATES: "passed"})
    fonts: dict[str, bytes] = {}
    if ctx.config.fonts and record.kind != Kind.SYNC:  # a hand commit is delivered as it is
        derived = derive_fonts(ctx, record.base_commit, files)
        if derived.problems:
            return to_review(ctx, job, Stage.FONTS, FailureCode.FONT_FAILED, derived.problems)
        fonts = derived.changed  # an output that would not change is not written
        record = record.evolve(
            targets=record.targets + tuple(_target_in(ctx, record.base_commit, out)
                                           for out in sorted(fonts)),
            phases=record.phases | {Phase.FONTS: derived.summary()})
    manifest = Manifest.build([(p, modes[p], d) for p, d in files.items()]
                              + [(p, MODE_FILE, d) for p, d in fonts.items()],
                              deleted=[t.path for t in record.targets if t.op == "delete"])
    author = sanitize(ctx.repo.user_identity().as_bytes().decode())  # it is published
    job = ctx.store.transition(
        job,
        record.evolve(state=State.READY_TO_COMMIT, manifest_sha256=manifest.sha256(),
                      commit_time=int(ctx.clock()), author=author),
        phase=Stage.GATES, reason=f"gates passed; manifest {manifest.sha256()}{uses(allowed)}",
        files={"manifest": manifest.serialize()} | {f"artifacts/{p}": d
                                                     for p, d in fonts.items()})
    crash_point("prepare.ready-recorded")
    return job


def _place_files(scratch: steps.Scratch, files: dict[str, bytes]) -> str | None:
    """Put the job's files in a gate's scratch; why one cannot be put there, or None."""
    for path, data in files.items():
        try:
            scratch.put(f"files/{path}", data)
        except OSError as e:  # a name too long for the file system, say
            return sanitize(f"cannot give it {path[:80]}: {e.strerror or e}")
    return None


def derive_fonts(ctx: Context, commit: str | None, own: dict[str, bytes]) -> Derived:
    """The configured font subsets for the article set of ``commit`` plus ``own`` (the font
    code is loaded here: only a site with fonts configured derives any)."""
    from gitpub.fonts import step as fontstep

    tree = None if commit is None else ctx.repo.commit(commit).tree
    return fontstep.derive(ctx.repo, ctx.config, tree, own,
                           pub_dir(ctx.repo.common_dir) / "fonts-cache", ctx.progress)


def _target_in(ctx: Context, commit: str | None, path: str) -> Target:
    """NEW or UPDATE (with the content hash it replaces) for ``path`` in ``commit``."""
    entry = None if commit is None else ctx.repo.lookup(ctx.repo.commit(commit).tree, path)
    if entry is None or entry.mode == MODE_TREE:
        return Target(path, "new")
    return Target(path, "update", content_sha256(ctx.repo.blob(entry.sha)))


def _preparing(ctx: Context, job: Job) -> Job:
    phases, config = job.record.phases, ctx.config
    if Phase.DRAFT not in phases:
        if config.draft is None:
            return to_review(ctx, job, Stage.DRAFT, FailureCode.DRAFT_UNCONFIGURED,
                              ["the job needs a draft command but none is configured"])
        return _draft(ctx, job, config.draft)
    if Phase.HISTORY not in phases:
        return history_phase(ctx, job)
    if config.judge is not None and Phase.JUDGE not in phases and job.record.kind != Kind.SYNC:
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
