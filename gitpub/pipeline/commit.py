"""The content commit: the job's files written into a base tree, in memory, with its trailers.

READY_TO_COMMIT → LOCAL_COMMITTING → LOCAL_COMMITTED. The commit is built from git objects only
(no index, no working tree) and is *reproducible*: author, time, message and tree all come from
the job record and its artifacts, so rebuilding it after a crash yields the very same object id.
The commit and the state change are one atomic step: the commit becomes a parent of the state
commit that records LOCAL_COMMITTED, and that state commit is published by a single
compare-and-swap of the job's ref. Before that swap the commit is unreachable garbage; after it,
it is kept alive by the job's history.

If a process finds a job in LOCAL_COMMITTING that it did not put there, the earlier attempt's
outcome is unknown: the job goes to RECOVERING, which looks for a commit carrying the job's
trailers (someone may have committed it by hand), else rebuilds it from the artifact tree after
verifying the artifacts against the manifest, else sends the job to REVIEW.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gitpub.core.crashpoints import crash_point
from gitpub.core.manifest import Manifest, ManifestError, content_sha256
from gitpub.core.record import JobRecord, Target
from gitpub.core.states import FailureCode, Kind, Stage, State
from gitpub.git import paths as git_paths
from gitpub.git import trailers
from gitpub.git.repo import MODE_TREE, Entry, Identity, Repository
from gitpub.pipeline.gates import title_of
from gitpub.store.jobs import Job, JobStore
from gitpub.verify.probe import find_job_commit


@dataclass(frozen=True)
class Artifacts:
    """The job's immutable files: repository path -> tree entry, plus the manifest."""

    entries: dict[str, Entry]
    manifest: Manifest


def read_artifacts(store: JobStore, job: Job) -> Artifacts:
    """The artifact tree and manifest of a READY (or later) job, verified against each other.

    Raises ``ManifestError`` when the stored files do not match the recorded manifest hash.
    """
    repo = store.repo
    raw = store.read_file(job, "manifest")
    if raw is None:
        raise ManifestError("the job has no manifest")
    manifest = Manifest.parse(raw)
    if manifest.sha256() != job.record.manifest_sha256:
        raise ManifestError("the stored manifest does not match the recorded manifest hash")
    tree = store.subtree(job, "artifacts")
    entries = dict(repo.walk_files(tree)) if tree else {}
    if set(entries) != set(manifest.paths):
        raise ManifestError("the artifact tree and the manifest list different files")
    for e in manifest.entries:
        entry = entries[e.path]
        if entry.mode != e.mode or content_sha256(repo.blob(entry.sha)) != e.sha256:
            raise ManifestError(f"artifact {e.path} does not match the manifest")
    return Artifacts(entries, manifest)


def target_problems(repo: Repository, tree: str | None, targets: Sequence[Target]) -> list[str]:
    """Compare-and-swap conditions of the targets against ``tree``: what no longer holds. A
    path that now differs from a target only in case or normalisation (another writer's
    ``posts/hello.md`` against our ``posts/Hello.md``) is one file on macOS and Windows: a
    conflict too, found at every rebase and not only at the snapshot."""
    problems = []
    for t in targets:
        twins = [] if tree is None else git_paths.case_twins_in(repo, tree, t.path)
        if twins:
            problems.append(f"{t.path}: {', '.join(twins)} now exists, which differs only in "
                            "case (one file on case-insensitive file systems)")
            continue
        entry = None if tree is None else repo.lookup(tree, t.path)
        if t.op == "new":
            if entry is not None:
                problems.append(f"{t.path}: created by someone else since the snapshot")
            elif tree is not None and (blocker := repo.file_in_the_way(tree, t.path)):
                problems.append(f"{t.path}: {blocker} is now a file")
        elif entry is None:
            problems.append(f"{t.path}: deleted since the snapshot")
        elif entry.mode == MODE_TREE or content_sha256(repo.blob(entry.sha)) != t.base_sha256:
            problems.append(f"{t.path}: changed since the snapshot")
    return problems


def commit_subject(record: JobRecord, artifacts: Artifacts, repo: Repository) -> str:
    for path in record.target_paths:
        entry = artifacts.entries.get(path)
        if entry is not None:
            title = title_of(path, repo.blob(entry.sha))
            if title:
                return f"Publish: {title}"
    return "Publish " + ", ".join(record.target_paths[:3])


def build_commit(
    repo: Repository, record: JobRecord, artifacts: Artifacts, onto: str | None,
    prefix: str,
) -> str:
    """Write the job's content commit on top of ``onto`` and return its id (unreferenced)."""
    base_tree = None if onto is None else repo.commit(onto).tree
    tree = repo.write_tree(base_tree, dict(artifacts.entries))
    proof = trailers.PubTrailers(
        job_id=record.job_id,
        manifest_sha256=artifacts.manifest.sha256(),
        base_commit=record.base_commit,
        writer_node=record.node,
        sync_id=record.idempotency_key.removeprefix("sync:") if record.kind == Kind.SYNC else None,
    )
    message = trailers.format_message(
        commit_subject(record, artifacts, repo), artifacts.manifest.serialize(), proof, prefix
    )
    name, _, email = (record.author or "gitpub <gitpub@localhost>").partition(" <")
    return repo.write_commit(
        tree, [] if onto is None else [onto], message,
        author=Identity(name, email.rstrip(">")), when=record.commit_time,
    )


def commit_job(store: JobStore, job: Job, prefix: str) -> Job:
    """READY_TO_COMMIT → LOCAL_COMMITTING → LOCAL_COMMITTED (or CONFLICT)."""
    job = store.transition(job, job.record.evolve(state=State.LOCAL_COMMITTING),
                           phase=Stage.COMMIT, reason="building the content commit")
    crash_point("commit.committing-recorded")
    return _finish(store, job, prefix)


def _finish(store: JobStore, job: Job, prefix: str) -> Job:
    repo, record = store.repo, job.record
    base_tree = None if record.base_commit is None else repo.commit(record.base_commit).tree
    problems = target_problems(repo, base_tree, record.targets)
    if problems:
        return store.transition(
            job, record.evolve(state=State.CONFLICT, failure_code=FailureCode.TARGET_CHANGED,
                               failure_detail="; ".join(problems)),
            phase=Stage.COMMIT, reason="; ".join(problems))
    commit = build_commit(repo, record, read_artifacts(store, job), record.base_commit, prefix)
    crash_point("commit.objects-written")
    job = store.transition(
        job, record.evolve(state=State.LOCAL_COMMITTED, local_commit=commit),
        phase=Stage.COMMIT, reason=f"content commit {commit}", keep_alive=[commit])
    crash_point("commit.committed-recorded")
    return job


def recover(store: JobStore, job: Job, prefix: str, search_tips: Sequence[str]) -> Job:
    """A job found in LOCAL_COMMITTING or RECOVERING: find, rebuild, or hand to a person."""
    record = job.record
    if job.state == State.LOCAL_COMMITTING:
        job = store.transition(job, record.evolve(state=State.RECOVERING), phase=Stage.RECOVER,
                               reason="an earlier commit attempt ended with an unknown outcome")
    found = find_job_commit(store.repo, search_tips, record, prefix)
    if found is not None:
        return store.transition(
            job, job.record.evolve(state=State.LOCAL_COMMITTED, local_commit=found),
            phase=Stage.RECOVER, reason=f"found commit {found} by its trailers", keep_alive=[found])
    try:
        read_artifacts(store, job)
    except ManifestError as e:
        return store.transition(
            job, job.record.evolve(state=State.REVIEW, failure_code=FailureCode.ARTIFACTS_UNSAFE,
                                   failure_detail=str(e)),
            phase=Stage.RECOVER, reason=f"artifacts cannot be trusted: {e}")
    job = store.transition(job, job.record.evolve(state=State.LOCAL_COMMITTING),
                           phase=Stage.RECOVER, reason="artifacts intact; rebuilding the commit")
    return _finish(store, job, prefix)
