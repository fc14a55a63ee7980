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

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gitpub.core.crashpoints import crash_point
from gitpub.core.manifest import Manifest, ManifestError, content_sha256
from gitpub.core.record import JobRecord, Target
from gitpub.core.sanitize import sanitize
from gitpub.core.states import FailureCode, Kind, Stage, State
from gitpub.git import paths as git_paths
from gitpub.git.repo import BLOB_MODES, MODE_TREE, Entry, Identity, Repository
from gitpub.pipeline.frontmatter import title_of
from gitpub.proof import trailers
from gitpub.proof.message import ProofMessageError, with_proof
from gitpub.store.jobs import Job, JobStore
from gitpub.verify.probe import find_job_commit


@dataclass(frozen=True)
class Artifacts:
    """The job's immutable files: repository path -> tree entry, plus the manifest (which
    also lists the paths the commit deletes: a sync job's)."""

    entries: dict[str, Entry]
    manifest: Manifest

    def changes(self) -> dict[str, Entry | None]:
        """What the commit writes into its parent's tree: every file, and None per deletion."""
        return {**dict(self.entries), **dict.fromkeys(self.manifest.deleted)}


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
    if set(entries) != {e.path for e in manifest.files}:
        raise ManifestError("the artifact tree and the manifest list different files")
    for e in manifest.files:
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
    deleted = frozenset(t.path for t in targets if t.op == "delete")

    def goes(path: str) -> bool:
        """Whether the job itself removes what ``tree`` has at ``path`` (a file it deletes, a
        directory whose every file it deletes): a folder replaced by a file, a file by a
        folder, a case-only rename are no conflict with themselves."""
        if path in deleted:
            return True
        entry = None if tree is None else repo.lookup(tree, path)
        return (entry is not None and entry.mode == MODE_TREE
                and all(f in deleted for f, _ in repo.walk_files(entry.sha, path + "/")))

    for t in targets:
        twins = [] if tree is None else [twin for twin in git_paths.case_twins_in(
            repo, tree, t.path) if not goes(twin)]
        if twins:
            problems.append(f"{t.path}: {', '.join(twins)} now exists, which differs only in "
                            "case (one file on case-insensitive file systems)")
            continue
        entry = None if tree is None else repo.lookup(tree, t.path)
        if t.op == "new":
            if entry is not None and not (entry.mode == MODE_TREE and goes(t.path)):
                problems.append(f"{t.path}: created by someone else since the snapshot")
            elif (tree is not None and (blocker := repo.file_in_the_way(tree, t.path))
                  and not goes(blocker)):
                problems.append(f"{t.path}: {blocker} is now a file")
        elif entry is None:
            problems.append(f"{t.path}: deleted since the snapshot")
        elif (entry.mode not in BLOB_MODES
              or content_sha256(repo.blob(entry.sha)) != t.base_sha256):
            problems.append(f"{t.path}: changed since the snapshot")
        elif t.base_mode is not None and entry.mode != t.base_mode:
            problems.append(f"{t.path}: mode changed since the snapshot "
                            f"({t.base_mode:o} -> {entry.mode:o})")
    return problems


def unsound_base(repo: Repository, tree: str | None, paths: Sequence[str]) -> str | None:
    """Why the job's files cannot be written into ``tree`` (None: they can): a tree on their
    way is one ``git fsck`` refuses (``Repository.unsound_trees``). Rebuilt, it would lose an
    entry git has twice or keep what git refuses, and the commit would not be the job's
    publication; no retry changes that, a person must repair the branch."""
    problems = repo.unsound_trees(tree, paths)
    if not problems:
        return None
    return ("a tree the job's files go into is one git fsck refuses ("
            + "; ".join(problems) + "): nothing is built on it")


def change_problems(repo: Repository, before: str | None, after: str,
                    manifest: Manifest) -> list[str]:
    """What makes the commit ``before`` → ``after`` change other paths than its manifest's, or
    them otherwise (a file or directory of the new base in the way of a hand commit's change:
    writing it would drop or keep what the manifest does not say)."""
    wanted = {e.path: e for e in manifest.entries}
    problems = []
    for change in repo.diff_entries(before, after):
        entry = wanted.pop(change.path, None)
        if entry is None:
            problems.append(f"{change.path}: would change too (a file or directory in the way)")
        elif (change.new is None) != entry.deleted or (
                change.new is not None and change.new.mode != entry.mode):
            problems.append(f"{change.path}: would not change as the manifest says")
    problems += [f"{path}: would not change (already so on the new base)" for path in wanted]
    return problems


def commit_subject(record: JobRecord, artifacts: Artifacts, repo: Repository) -> str:
    for path in record.target_paths:
        entry = artifacts.entries.get(path)
        if entry is not None:
            title = title_of(path, repo.blob(entry.sha))
            if title:
                return f"Publish: {title}"
    return "Publish " + ", ".join(record.target_paths[:3])


_AUTHOR = re.compile(r"[^<>\x00-\x1f\x7f]+ <[^<>\x00-\x1f\x7f]*>")


def author_problem(author: str | None) -> str | None:
    """Why a record's ``author`` cannot be a commit's author line (it goes into the commit
    as it is: a line break there would write headers and a message of its own), or None."""
    if author is None or _AUTHOR.fullmatch(author):
        return None
    return f"author {sanitize(author)[:80]!r} is not 'Name <email>' on one line"


def build_commit(
    repo: Repository, record: JobRecord, artifacts: Artifacts, onto: str | None,
    prefix: str, *, subject: str | None = None,
) -> str:
    """Write the job's content commit on top of ``onto`` and return its id (unreferenced).
    ``subject``: the message's first line, when it is known already (``rebuild_commit``);
    otherwise it is made from the articles' titles (``commit_subject``)."""
    problem = author_problem(record.author)
    if problem is not None:
        raise ManifestError(problem)
    base_tree = None if onto is None else repo.commit(onto).tree
    tree = repo.write_tree(base_tree, artifacts.changes())
    proof = trailers.PubTrailers(
        job_id=record.job_id,
        manifest_sha256=artifacts.manifest.sha256(),
        base_commit=record.base_commit,
        writer_node=record.node,
        sync_id=record.idempotency_key.removeprefix("sync:") if record.kind == Kind.SYNC else None,
    )
    if record.kind == Kind.SYNC and record.sync_commit is not None:
        return _rebuild_hand_commit(repo, record, artifacts, tree, onto, proof, prefix)
    if subject is None:
        subject = commit_subject(record, artifacts, repo)
    message = trailers.format_message(subject, artifacts.manifest.serialize(), proof, prefix)
    name, _, email = (record.author or "gitpub <gitpub@localhost>").partition(" <")
    return repo.write_commit(
        tree, [] if onto is None else [onto], message,
        author=Identity(name, email.rstrip(">")), when=record.commit_time,
    )


def rebuild_commit(repo: Repository, record: JobRecord, artifacts: Artifacts, onto: str | None,
                   prefix: str) -> str:
    """``build_commit`` onto ``onto`` for a job that has its local commit, without reading the
    articles' titles again: the subject is the local commit's, when that commit is exactly what
    ``build_commit`` makes of this record and these artifacts (onto its own parent) with that
    subject — every byte but the subject's is recomputed and compared through the object id.
    Onto that same parent, the local commit itself is the answer. Otherwise (no local commit,
    another record after a merge of edits, another trailer prefix) it is built as it was:
    titles read from the articles' front matter, which may need a YAML parser (~15 ms)."""
    local = record.local_commit
    subject = None
    if local is not None and record.kind != Kind.SYNC and repo.has_object(local):
        info = repo.commit(local)
        line = info.message.split(b"\n", 1)[0]
        try:
            candidate = line.decode("utf-8")
        except UnicodeDecodeError:
            candidate = None
        if candidate is not None and len(info.parents) <= 1:
            parent = info.parents[0] if info.parents else None
            if build_commit(repo, record, artifacts, parent, prefix,
                            subject=candidate) == local:
                if parent == onto:
                    return local
                subject = candidate
    return build_commit(repo, record, artifacts, onto, prefix, subject=subject)


def _rebuild_hand_commit(repo: Repository, record: JobRecord, artifacts: Artifacts, tree: str,
                         onto: str | None, proof: trailers.PubTrailers, prefix: str) -> str:
    """A sync job's commit: the person's commit with the new tree and parent, its author and
    message kept and the proof added (``proof.message``), committed by the identity and at the
    time fixed in the record (so it is reproducible, as every content commit is)."""
    assert record.sync_commit is not None
    original = repo.commit(record.sync_commit)
    try:
        message = with_proof(original.message, artifacts.manifest.serialize(), proof,
                             prefix)
    except ProofMessageError as e:
        raise ManifestError(f"commit {record.sync_commit}: {e}") from None
    name, _, email = (record.author or "gitpub <gitpub@localhost>").partition(" <")
    return repo.rewrite_commit(record.sync_commit, tree=tree,
                               parents=[] if onto is None else [onto], message=message,
                               committer=Identity(name, email.rstrip(">")),
                               when=record.commit_time or original.commit_time)


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
