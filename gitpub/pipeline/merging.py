"""Edits to the same page: a job's change and another writer's, merged three-way.

A job that UPDATEs a file whose content changed on the remote since the job's snapshot fails
its compare-and-swap. When the two changes do not overlap, the file is merged as
``git merge-file`` merges it (``git.mergefile``): base = the file at the job's snapshot, ours =
the job's version, theirs = the remote's. Their change is kept and ours is added; nothing of
theirs is overwritten. Anything else stays a CONFLICT for a person: overlapping changes, binary
content, a file whose mode, type or case changed, a deletion, or a merge that would add nothing
(the remote already has the job's change).

The merged content is new content: it passes every gate again (secret scan, text checks, the
configured gate commands), with the allowlist of the tip it lands on, and a failure sends the
job to REVIEW. What is published is described by a new manifest (its hash goes into the
trailers), the targets' compare-and-swap conditions become the remote's content (a third
writer's change is merged, or conflicts, again), and the remote's version is kept in the job's
state under ``merge-base/`` as the base of such a later merge.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gitpub.core.manifest import Manifest, ManifestEntry, content_sha256
from gitpub.core.record import JobRecord, Target
from gitpub.core.states import FailureCode
from gitpub.git import paths as git_paths
from gitpub.git.mergefile import merge_file
from gitpub.git.repo import MODE_EXEC, MODE_FILE, Entry
from gitpub.pipeline.commit import Artifacts, target_problems
from gitpub.pipeline.gates import allowlist_at
from gitpub.pipeline.prepare import gate_problems
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


@dataclass(frozen=True)
class Merged:
    """The job's content merged with the remote's: what the rebase commits and records."""

    artifacts: Artifacts
    record: JobRecord
    files: dict[str, bytes]  # for the job's state: the manifest, artifacts/<merged paths>
    entries: dict[str, Entry | None] = field(default_factory=dict)  # merge-base/<path>
    paths: tuple[str, ...] = ()

    def describe(self) -> str:
        return "merged three-way with the remote's changes: " + ", ".join(self.paths)


@dataclass(frozen=True)
class Review:
    """The merged content did not pass the gates: REVIEW, nothing published."""

    code: FailureCode
    problems: list[str]


def merge_base(ctx: Context, job: Job, target: Target) -> Entry | None:
    """The version of ``target`` the job's change was made against: the remote's version of an
    earlier merge (``merge-base/``), else the file in the job's base; None when that is not the
    content the compare-and-swap condition names."""
    repo, record = ctx.repo, job.record
    entry = repo.lookup(job.tree, f"{MERGE_BASES}/{target.path}")
    if entry is None and record.base_commit is not None and repo.has_object(record.base_commit):
        entry = repo.lookup(repo.commit(record.base_commit).tree, target.path)
    if entry is None or entry.mode not in MERGEABLE_MODES or \
            content_sha256(repo.blob(entry.sha)) != target.base_sha256:
        return None
    return entry


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
    if t.op != "update" or theirs is None or ours is None or \
            (tree is not None and git_paths.case_twins_in(repo, tree, t.path)):
        return ""
    base = merge_base(ctx, job, t)
    if base is None or theirs.mode != base.mode or ours.mode not in MERGEABLE_MODES:
        return " (not merged: the file's mode or type changed)" if base is not None else ""
    outcome = merge_file(repo.blob(base.sha), repo.blob(ours.sha), repo.blob(theirs.sha),
                         repo.pub_dir / "scratch")
    if outcome.content is None:
        if outcome.conflicts:
            return (f", and the changes overlap ({outcome.conflicts} conflicting "
                    f"region{'s' if outcome.conflicts > 1 else ''}): not merged")
        return f" (not merged: {outcome.why})"
    if content_sha256(outcome.content) == content_sha256(repo.blob(theirs.sha)):
        return " (not merged: the remote already has this change)"
    return FileMerged(t.path, outcome.content, ours.mode, theirs)


def merge_edits(ctx: Context, job: Job, record: JobRecord, artifacts: Artifacts,
                tip: str | None, targets: list[Target]) -> Merged | Review | list[str]:
    """Merge the job's changed targets with the remote tip's versions and gate the result:
    the merge, REVIEW for merged content that fails a gate, or the problems of a CONFLICT."""
    repo = ctx.repo
    tree = None if tip is None else repo.commit(tip).tree
    found = merge_contents(ctx, job, artifacts, tree, targets)
    if not found or isinstance(found[0], str):
        return [p for p in found if isinstance(p, str)]
    files = [m for m in found if isinstance(m, FileMerged)]
    by_path = {m.path: m for m in files}
    contents = {p: repo.blob(e.sha) for p, e in artifacts.entries.items()
                if p in {t.path for t in targets}} | {m.path: m.content for m in files}
    code, problems, _allowed = gate_problems(ctx, job, contents,
                                             lambda: allowlist_at(repo, tip))
    if code is not None:
        return Review(code, [f"the content merged with the remote's changes to "
                             f"{', '.join(sorted(by_path))}: " + "; ".join(problems)])
    entries = dict(artifacts.entries)
    manifest_entries = [e for e in artifacts.manifest.entries if e.path not in by_path]
    for m in files:
        entries[m.path] = Entry(m.mode, repo.write_blob(m.content))
        manifest_entries.append(ManifestEntry(m.path, m.mode, content_sha256(m.content)))
    manifest = Manifest.of(manifest_entries)
    new_targets = tuple(
        t if t.path not in by_path else
        Target(t.path, "update", content_sha256(repo.blob(by_path[t.path].theirs.sha)),
               t.base_mode)
        for t in record.targets)
    return Merged(
        Artifacts(entries, manifest),
        record.evolve(targets=new_targets, manifest_sha256=manifest.sha256()),
        files={"manifest": manifest.serialize()} | {f"artifacts/{m.path}": m.content
                                                     for m in files},
        entries={f"{MERGE_BASES}/{m.path}": m.theirs for m in files},
        paths=tuple(sorted(by_path)))
