"""What to do next: one ``hint:`` for every outcome that is not simply done.

Pure reading: from a job's state, failure code and what git shows now (for a CONFLICT, the two
versions of each conflicting file as blob ids a person can paste into ``git diff``), one line
naming the command to run. Nothing here writes.
"""

from __future__ import annotations

import time

from gitpub.config.model import font_outputs
from gitpub.core.manifest import content_sha256
from gitpub.core.record import JobRecord
from gitpub.core.states import LOCAL, MERGED, FailureCode, Kind, Phase, State
from gitpub.git.values import MODE_TREE
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job
from gitpub.store.lease import shown_owner

S = State
F = FailureCode

_REVIEW_FIX = {
    F.SECRET_IN_CONTENT: "make the draft command write no secret (its output was not stored)",
    F.DRAFT_UNCONFIGURED: "configure `draft:` in .gitpub.yaml",
    F.DRAFT_FAILED: "fix the draft command (its output is in `git pub log {id}`)",
    F.DRAFT_INCOMPLETE: "make the draft command write every --to path",
    F.INPUT_MODIFIED: "make the step leave its input alone",
    F.TEMP_FILE_LEAK: "make the step write only its declared outputs",
    F.JUDGE_UNDECIDED: "make the judge command print exactly SKIP or KEEP",
    F.GATE_FAILED: "fix the content (or the gate)",
    F.FONT_FAILED: "fix the `fonts:` entry or the font file",
    F.ARTIFACTS_UNSAFE: "nothing to fix by hand: the stored files are rebuilt",
}


def next_step(ctx: Context, job: Job, now: float | None = None) -> str | None:
    """The hint for ``job`` as it stands, or None when it is done (PUBLISHED, SKIPPED)."""
    jid, record = job.job_id[:13], job.record
    state = job.state
    if state in (S.PUBLISHED, S.SKIPPED):
        return None
    if ctx.store.held_by_other(job):
        owner = shown_owner(record.lease.owner) if record.lease else "another process"
        return f"{owner} is working on it; `git pub status {jid}` shows how far it got"
    if state == S.LOCAL_COMMITTED:
        return f"`git pub push {jid}` publishes it"
    if state in LOCAL or state == S.RECHECK_CANDIDATES:
        return (f"an interrupted {state.value} phase: `git pub reconcile` finishes it "
                f"(or `git pub resolve {jid} --abandon`)")
    if state == S.PUSHING:
        return "the push's outcome is unknown: `git pub reconcile` probes the remote and " \
               "finishes it (never pushing twice)"
    if state == S.RETRY_WAIT:
        return _retry_wait(jid, record.next_retry_at, now)
    if state == S.FAILED:
        return (f"delivery gave up after {record.attempt} attempt(s): fix what the error says, "
                f"then `git pub resolve {jid} --retry` (a new budget, the same content); "
                f"`git pub push {jid}` probes whether it landed after all")
    if state == S.IN_REVIEW:
        review = record.review
        where = (review.url or f"the branch {review.branch}") if review else "its request"
        return (f"waiting for a person to merge or close {where}; `git pub push` (or "
                f"`reconcile`) checks it and records PUBLISHED once merged")
    if state == S.REVIEW:
        return _review(ctx, jid, record)
    if record.failure_code == F.REVIEW_BRANCH_TAKEN:
        return (f"the job's review branch holds someone else's commit: look at it, delete it "
                f"if it may go, then `git pub resolve {jid} --retry`; or `git pub resolve "
                f"{jid} --abandon`")
    return _conflict(ctx, job)


def _retry_wait(jid: str, at: float | None, now: float | None) -> str:
    if at is None:
        return f"`git pub push {jid}` tries again"
    wait = max(0, round(at - (time.time() if now is None else now)))
    when = time.strftime("%H:%M:%S", time.localtime(at))
    return (f"next try at {when} (in {wait}s) by `git pub push` or `git pub sync`; "
            f"`git pub push {jid}` tries now")


def _review(ctx: Context, jid: str, record: JobRecord) -> str:
    from gitpub.core.allowlist import ALLOWLIST_FILE  # (the secret scan's: a job in REVIEW's)

    code = record.failure_code
    if code in (F.REVIEW_CLOSED, F.REVIEW_MERGED_OTHER, F.REVIEW_REFUSED):
        return (f"its pull/merge request did not publish it (`git pub log {jid}` says why): "
                f"`git pub resolve {jid} --retry --push` sends it again for review (a new "
                f"request), or `--abandon` gives it up")
    if (record.failure_detail or "").startswith(f"{ALLOWLIST_FILE}:"):
        return (f"{ALLOWLIST_FILE} of the job's base does not parse: fix it, commit and push it "
                f"(`git push {ctx.config.remote} {ctx.config.branch}`); the job keeps its base, "
                f"so `git pub resolve {jid} --abandon`, then prepare it again under a new --key")
    if code in (F.SECRET_IN_SOURCE, F.SECRET_IN_CONTENT):
        fonts = font_outputs(ctx.config)
        articles = [p for p in record.target_paths if p not in fonts]
        secret = _secret_way_out(jid, record, articles)
        if secret is not None:
            return secret
    fix = _REVIEW_FIX.get(code, "fix what the failure says") if code else "fix the content"
    return (f"{fix.format(id=jid)}, then `git pub resolve {jid} --retry` (re-runs the pipeline "
            f"and stops before pushing; add --push to deliver), or `--abandon`")


def _secret_way_out(jid: str, record: JobRecord, articles: list[str]) -> str | None:
    """What clears a secret finding, by where the secret came from (None: the draft command
    wrote it, and the usual ``--retry`` runs the draft again).

    A retry runs the pipeline again on what the job stored — a source stored redacted, a hand
    commit that stays what it is — and finds the same; only new content publishes without the
    secret: a person's commit rewritten (a later commit removing the secret would still
    publish it in the history), the article given with ``--retry --from FILE`` (one article),
    or a new ``prepare`` under a new key."""
    if record.kind == Kind.SYNC and record.sync_commit is not None:
        commit = record.sync_commit[:12]
        return (f"commit {commit} brings the secret: take it out of that commit (`git commit "
                f"--amend` if it is the last one, else `git rebase -i {commit}^` and `edit`; a "
                f"later commit deleting it would still publish it), then `git pub resolve {jid} "
                f"--abandon` and `git pub sync`")
    drafted_here = record.drafted and record.phases.get(Phase.DRAFT) != MERGED
    if record.failure_code == F.SECRET_IN_CONTENT and drafted_here:
        return None
    if len(articles) == 1:
        return (f"write {articles[0]} as it should be published, without the secret, to a "
                f"file, then `git pub resolve {jid} --retry --from FILE` (re-runs the pipeline "
                "on it and stops before pushing; add --push to deliver); a public example "
                "value can be allowed instead (docs/content-rules.md) and the content given "
                "as it was")
    return (f"no retry can take a secret out of this job's content: `git pub resolve {jid} "
            "--abandon`, then prepare the content without it under a new --key")


def _conflict(ctx: Context, job: Job) -> str:
    jid, record = job.job_id[:13], job.record
    options = (f"then `git pub resolve {jid} --retry` (re-checks; never overwrites), "
               f"`--overwrite` (replaces their version), `--from FILE` (merged content) or "
               f"`--abandon`")
    if record.failure_code == F.TARGET_BLOCKED:
        return (f"a file or directory stands in the way on the remote; once it is gone "
                f"`git pub resolve {jid} --retry`, or `--abandon`")
    if record.failure_code == F.TREE_UNSOUND:
        return (f"the remote branch holds a tree `git fsck` refuses (failure_detail names it); "
                f"once a commit whose tree git accepts repairs the branch, `git pub resolve "
                f"{jid} --retry`, or `--abandon`")
    diffs = conflict_diffs(ctx, job)
    if not diffs:
        return f"`git pub log {jid}` shows what conflicted; {options}"
    return "compare: " + "; ".join(diffs) + f"; {options}"


def conflict_diffs(ctx: Context, job: Job) -> list[str]:
    """For each conflicting file, the command that shows theirs against ours (``git diff
    THEIRS OURS`` of two blob ids, or ``git show`` when one side has no file)."""
    # only for a CONFLICT: the pipeline, not for every `status`
    from gitpub.pipeline.commit import target_problems

    repo, config = ctx.repo, ctx.config
    tip = repo.read_ref(f"refs/remotes/{config.remote}/{config.branch}")
    artifacts = ctx.store.subtree(job, "artifacts")
    if tip is None or artifacts is None:
        return []
    tree = repo.commit(tip).tree
    fonts = font_outputs(config)
    out = []
    for t in job.record.targets:
        if t.path in fonts or not target_problems(repo, tree, [t]):
            continue
        theirs, ours = repo.lookup(tree, t.path), repo.lookup(artifacts, t.path)
        if theirs is not None and theirs.mode == MODE_TREE:
            theirs = None
        if theirs is not None and ours is not None:
            same = content_sha256(repo.blob(theirs.sha)) == content_sha256(repo.blob(ours.sha))
            cmd = f"`git diff {theirs.sha} {ours.sha}`" + (" (identical)" if same else "")
        elif ours is not None:
            cmd = f"`git show {ours.sha}` (theirs deleted it)"
        elif theirs is not None:
            cmd = f"`git show {theirs.sha}`"
        else:
            continue
        out.append(f"{cmd} ({t.path}: theirs at {config.remote}/{config.branch} "
                   f"{tip[:12]}, ours in the job)")
    return out
