"""Edits to the same page: a job's change and another writer's, merged three-way.

A job that UPDATEs a file whose content changed on the remote since the job's snapshot fails
its compare-and-swap. When the two changes do not overlap, the file is merged as
``git merge-file`` merges it (``git.mergefile``): base = the file at the job's snapshot, ours =
the job's version, theirs = the remote's. Their change is kept and ours is added; nothing of
theirs is overwritten. Anything else stays a CONFLICT for a person: overlapping changes, binary
content, a file whose mode, type or case changed, a deletion.

A file the remote already holds as the job would leave it (someone made the same edit, or one
that contains ours: the merge adds nothing) is *present*: the job does not write it again. When
every file of the job is present there is nothing left to publish, and the job is SKIPPED
(``already_on_remote``) — never an empty publication commit, never a CONFLICT; when only some
are, those leave the job (its targets, artifacts and manifest) and the rest is published.

The merged content is new content: it passes every gate again (``prepare.run_gates``: secret
scan, text checks, the configured gate commands) against the tip it lands on — the tip's
allowlist, and the tip's version of each file as the base of the diff-based secret scan, so a
finding the other writer already published is inherited and one our side brings is the job's —
and a failure sends the job to REVIEW. What is published is described by a new manifest (its
hash goes into the trailers), the targets' compare-and-swap conditions become the remote's
content (a third writer's change is merged, or conflicts, again), and the remote's version is
kept in the job's state under ``merge-base/`` as the base of such a later merge.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gitpub.core.crashpoints import crash_point
from gitpub.core.files import pub_dir
from gitpub.core.manifest import Manifest, ManifestEntry, content_sha256
from gitpub.core.record import JobRecord, Target
from gitpub.core.states import FailureCode
from gitpub.git import paths as git_paths
from gitpub.git.mergefile import merge_file
from gitpub.git.repo import MODE_EXEC, MODE_FILE, Entry
from gitpub.pipeline.commit import Artifacts, target_problems
from gitpub.pipeline.jobs import uses
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job

#: Where a job's state keeps the remote's version of a file it merged with: the merge base of
#: the next merge of that file.
MERGE_BASES = "merge-base"
#: Modes whose content merges by lines (a symlink's target does not).
MERGEABLE_MODES = frozenset({MODE_FILE, MODE_EXEC})


@dataclass(frozen=True)
class FileMerged:
    path: str
    content: bytes  # the merged bytes
    mode: int  # ours (the job's)
    theirs: Entry  # the remote's version it was merged with
    present: bool = False  # the remote's version is already what the job would leave


@dataclass(frozen=True)
class Merged:
    """The job's content merged with the remote's: what the rebase commits and records."""

    artifacts: Artifacts
    record: JobRecord
    files: dict[str, bytes]  # for the job's state: the manifest
    # artifacts/ and merge-base/<merged path>; artifacts/<present path>: None (leaves the job)
    entries: dict[str, Entry | None] = field(default_factory=dict)
    paths: tuple[str, ...] = ()  # merged
    present: tuple[str, ...] = ()  # already on the remote as the job would leave them
    allowed: tuple[str, ...] = ()  # known non-secrets the gates let through (never values)

    def describe(self) -> str:
        said = []
        if self.paths:
            said.append("merged three-way with the remote's changes: " + ", ".join(self.paths))
        if self.present:
            said.append("already on the remote as this job would leave them, so no longer "
                        "written by it: " + ", ".join(self.present))
        return "; ".join(said) + uses(self.allowed)


@dataclass(frozen=True)
class Present:
    """Every file of the job is on the remote already as the job would leave it (another
    writer made the same change): nothing to publish. SKIPPED, never an empty commit."""

    paths: tuple[str, ...]

    def describe(self) -> str:
        return ("the remote already holds every file of this job as the job would leave it "
                "(the same change was made by another writer): nothing to publish: "
                + ", ".join(self.paths))


@dataclass(frozen=True)
class Review:
    """The merged content did not pass the gates: REVIEW, nothing published."""

    code: FailureCode
    problems: list[str]


def merge_base(ctx: Context, job: Job, target: Target) -> Entry | None:
    """The version of ``target`` the job's change was made against: the content its
    compare-and-swap condition names, found as the remote's version of an earlier merge
    (``merge-base/``) or the file in the job's base (a new snapshot, ``resolve --from``,
    leaves an earlier merge's base behind: whichever holds that content); None when neither
    does."""
    repo, record = ctx.repo, job.record
    found = [repo.lookup(job.tree, f"{MERGE_BASES}/{target.path}")]
    if record.base_commit is not None and repo.has_object(record.base_commit):
        found.append(repo.lookup(repo.commit(record.base_commit).tree, target.path))
    for entry in found:
        if entry is not None and entry.mode in MERGEABLE_MODES and \
                content_sha256(repo.blob(entry.sha)) == target.base_sha256:
            return entry
    return None


def merge_contents(ctx: Context, job: Job, artifacts: Artifacts, tree: str | None,
                   targets: list[Target]) -> list[FileMerged] | list[str]:
    """The files of ``targets`` merged with their versions in ``tree`` (those whose
    compare-and-swap fails), or the problems that keep the job a CONFLICT."""
    repo = ctx.repo
    merged: list[FileMerged] = []
    problems: list[str] = []
    for t in targets:
        failed = target_problems(repo, tree, [t])
        if not failed:
            continue
        why = _merge_one(ctx, job, artifacts, tree, t)
        if isinstance(why, str):
            problems += [f"{p}{why}" for p in failed]
            continue
        merged.append(why)
    return problems or merged


def _merge_one(ctx: Context, job: Job, artifacts: Artifacts, tree: str | None,
                 t: Target) -> FileMerged | str:
    """The merge of one target whose compare-and-swap failed, or why there is none (appended
    to the compare-and-swap's own problem)."""
    repo = ctx.repo
    theirs = None if tree is None else repo.lookup(tree, t.path)
    ours = artifacts.entries.get(t.path)
    if theirs is None or ours is None or t.op == "delete" or \
            (tree is not None and git_paths.case_twins_in(repo, tree, t.path)):
        return ""
    if theirs == ours:  # the same mode and blob: the job's file is there already
        return FileMerged(t.path, repo.blob(ours.sha), ours.mode, theirs, present=True)
    if t.op != "update":
        return ""
    base = merge_base(ctx, job, t)
    if base is None or theirs.mode != base.mode or ours.mode not in MERGEABLE_MODES:
        return " (not merged: the file's mode or type changed)" if base is not None else ""
    outcome = merge_file(repo.blob(base.sha), repo.blob(ours.sha), repo.blob(theirs.sha),
                         pub_dir(repo.common_dir) / "scratch")
    if outcome.content is None:
        if outcome.conflicts:
            return (f", and the changes overlap ({outcome.conflicts} conflicting "
                    f"region{'s' if outcome.conflicts > 1 else ''}): not merged")
        return f" (not merged: {outcome.why})"
    present = ours.mode == theirs.mode and outcome.content == repo.blob(theirs.sha)
    return FileMerged(t.path, outcome.content, ours.mode, theirs, present=present)


def merge_edits(ctx: Context, job: Job, record: JobRecord, artifacts: Artifacts,
                tip: str | None, targets: list[Target], *, derived: bool = False
                ) -> Merged | Present | Review | list[str]:
    """Merge the job's changed targets with the remote tip's versions and gate the result:
    the merge, Present when the remote already holds every file as the job would leave it,
    REVIEW for merged content that fails a gate, or the problems of a CONFLICT. ``derived``:
    the job has files derived from ``targets`` besides them (font outputs): with every target
    present, the Merged job of those alone (whether the remote holds them too is the
    caller's to judge once they are derived again), never Present."""
    from gitpub.pipeline.prepare import run_gates  # the gates: only for edits merged here

    repo = ctx.repo
    tree = None if tip is None else repo.commit(tip).tree
    found = merge_contents(ctx, job, artifacts, tree, targets)
    if not found or isinstance(found[0], str):
        return [p for p in found if isinstance(p, str)]
    merges = [m for m in found if isinstance(m, FileMerged)]
    present = frozenset(m.path for m in merges if m.present)
    if present == {t.path for t in targets} and not derived:
        return Present(tuple(sorted(present)))
    files = [m for m in merges if not m.present]
    by_path = {m.path: m for m in files}
    contents = {p: repo.blob(e.sha) for p, e in artifacts.entries.items()
                if p in {t.path for t in targets} - present} | {m.path: m.content
                                                                 for m in files}
    # The merged content lands on the tip: it is judged against the tip (its allowlist, and
    # its version of each file as the base of the diff-based secret scan). A finding the other
    # writer published is there already, unchanged and in place (inherited); one our side
    # brings, or one the merge itself makes, is new.
    verdict = run_gates(ctx, contents, job_id=job.job_id, base_commit=tip,
                        targets=[t.path for t in targets]) if contents else None
    crash_point("merge.gated")
    if verdict is not None and verdict.code is not None:
        what = (f"the content merged with the remote's changes to {', '.join(sorted(by_path))}"
                if by_path else "the job's content, judged against the remote tip")
        return Review(verdict.code, [f"{what}: " + "; ".join(verdict.problems)])
    entries = {p: e for p, e in artifacts.entries.items() if p not in present}
    manifest_entries = [e for e in artifacts.manifest.entries
                        if e.path not in by_path and e.path not in present]
    for m in files:
        entries[m.path] = Entry(m.mode, repo.write_blob(m.content))
        manifest_entries.append(ManifestEntry(m.path, m.mode, content_sha256(m.content)))
    manifest = Manifest.of(manifest_entries)
    new_targets = tuple(
        t if t.path not in by_path else
        Target(t.path, "update", content_sha256(repo.blob(by_path[t.path].theirs.sha)),
               t.base_mode)
        for t in record.targets if t.path not in present)
    return Merged(
        Artifacts(entries, manifest),
        record.evolve(targets=new_targets, manifest_sha256=manifest.sha256()),
        files={"manifest": manifest.serialize()},
        entries={f"{MERGE_BASES}/{m.path}": m.theirs for m in files}
        | {f"artifacts/{m.path}": entries[m.path] for m in files}  # with its mode
        | {f"artifacts/{p}": None for p in present},
        paths=tuple(sorted(by_path)), present=tuple(sorted(present)),
        allowed=() if verdict is None else tuple(verdict.allowed))
