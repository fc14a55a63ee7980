"""``git pub resolve``: a person's way out of a stuck job — and it never destroys anything.

Decide, then act: ``check`` refuses what cannot be done (before anything is read from the
network or written), then one function per action moves the job, each move recorded in the
job's history with the reason and the hashes involved.

- ``--retry`` on **CONFLICT** re-checks against the current remote (fetched): while the other
  writer's change is still there and overlaps the job's, the job stays CONFLICT (the event says
  so, and the hint shows the exact ``git diff``); when it is gone, or no longer overlaps (the
  delivery merges it three-way: ``pipeline.merging``), the job goes back to LOCAL_COMMITTED and
  is delivered.
  It never takes the remote's version as a new base — that would overwrite it silently.
- ``--overwrite`` (CONFLICT) replaces their version explicitly: the targets' compare-and-swap
  conditions become *their* current content (so a third writer's change is still a CONFLICT),
  and the history records both hashes of every replaced file.
- ``--from FILE`` (CONFLICT) supplies merged content: a new snapshot against the current tip,
  under the same job; the pipeline (judge, gates, fonts) runs again on it. A secret FILE adds
  to their version is refused before anything is stored.
- ``--retry`` on **REVIEW** re-runs the pipeline on the job's own snapshot (its compare-and-swap
  conditions kept: the delivery rebases and checks them against the remote) and stops at
  LOCAL_COMMITTED unless ``--push``. A job that never had a snapshot starts again at RECEIVED,
  and so does a sync job (its hand commit is snapshotted again: it has no sources).
  The sanitized source is kept; so is a secret finding in it, which no retry can clear.
- ``--retry --from FILE`` on **REVIEW** gives the content of the job's one article (a person's
  fix: the page without the secret, or past the gate that refused it): the pipeline runs again
  on it, on the job's own snapshot (or a first one, for a job refused before it had one), and
  stops at LOCAL_COMMITTED unless ``--push``. A secret FILE adds to the base is refused before
  anything is stored. A sync job delivers a hand commit whole: its content is the commit's.
- ``--retry`` on **FAILED** delivers the *same* artifacts with a fresh attempt budget (a failed
  delivery is never a reason to regenerate content).
- ``--abandon`` ends the job as SKIPPED (``abandoned``) in every state in which nothing of it is
  on the remote. From PUSHING, RETRY_WAIT and FAILED, and from any state in which the job has a
  commit (LOCAL_COMMITTED, CONFLICT, …: a push whose report was lost, or a person's own
  ``git push``, may have published it), the remote is probed first, under the delivery lock and
  the job's lease, and a job found there is PUBLISHED — not abandoned, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gitpub.config.model import font_outputs
from gitpub.core.errors import GitpubError, TryLaterError, UsageError
from gitpub.core.manifest import ManifestError, content_sha256
from gitpub.core.record import JobRecord, Target
from gitpub.core.sanitize import sanitize
from gitpub.core.states import (
    LOCAL,
    MAYBE_REMOTE,
    MERGED,
    TERMINAL,
    FailureCode,
    Kind,
    Phase,
    Stage,
    State,
)
from gitpub.delivery.deliver import Deliverer
from gitpub.delivery.lock import delivery_lock
from gitpub.git.remote import RemoteError
from gitpub.git.repo import MODE_FILE, MODE_TREE, Entry
from gitpub.pipeline.commit import read_artifacts, target_problems
from gitpub.pipeline.gates import Base, secret_scan
from gitpub.pipeline.jobs import reload
from gitpub.pipeline.merging import merge_contents
from gitpub.pipeline.prepare import drive
from gitpub.runtime.context import Context
from gitpub.store.fetchdir import fetch_branch
from gitpub.store.jobs import Job
from gitpub.store.lease import shown_owner

S = State


class Action(StrEnum):
    RETRY = "retry"
    OVERWRITE = "overwrite"
    FROM = "from"
    ABANDON = "abandon"


@dataclass(frozen=True)
class Resolution:
    """What the person asked for."""

    action: Action
    merged: bytes | None = None  # --from: the merged content
    merged_label: str | None = None  # --from: where it came from (for the history)
    push: bool = False  # REVIEW --retry: deliver once the pipeline passes


@dataclass(frozen=True)
class Resolved:
    job: Job
    note: str | None = None  # what happened that the job's state alone does not say


# -- deciding ----------------------------------------------------------------------------------

_RETRY_ELSEWHERE = {
    S.LOCAL_COMMITTED: "`git pub push {id}` delivers it",
    S.RETRY_WAIT: "`git pub push {id}` retries it now",
    S.RECHECK_CANDIDATES: "`git pub push {id}` delivers it",
    S.PUSHING: "`git pub reconcile` finds out whether its push landed",
}


def check(job: Job, resolution: Resolution) -> None:
    """Refuse, before anything is done, what the job's state does not allow."""
    state, action, jid = job.state, resolution.action, job.job_id
    if state in TERMINAL:
        what = "published: it cannot be abandoned or changed" if state == S.PUBLISHED \
            else "already ended"
        raise UsageError(f"job {jid} is {state.value}: {what}",
                         hint=f"`git pub log {jid[:13]}` shows its history")
    if action == Action.ABANDON:
        return
    if action == Action.FROM and state == S.REVIEW:
        _check_review_from(job)
        return
    if action in (Action.OVERWRITE, Action.FROM) and state != S.CONFLICT:
        raise UsageError(f"--{action.value} resolves a CONFLICT; job {jid} is {state.value}",
                         hint=_hint_for_state(job))
    if action == Action.RETRY and state not in (S.REVIEW, S.CONFLICT, S.FAILED):
        raise UsageError(f"job {jid} is {state.value}: --retry is for REVIEW, CONFLICT and "
                         "FAILED jobs", hint=_hint_for_state(job))
    if action == Action.OVERWRITE and not _has_commit(job.record):
        raise UsageError(f"job {jid} has no content to overwrite with yet (it conflicted at its "
                         "snapshot)", hint=f"`git pub resolve {jid[:13]} --retry`")


def _check_review_from(job: Job) -> None:
    record, jid = job.record, job.job_id
    if record.sync_commit is not None:
        raise UsageError(f"job {jid} delivers hand commit {record.sync_commit[:12]} whole: "
                         "--from cannot change it", hint="change the commit itself (`git "
                         "commit --amend`, `git rebase -i`), then `git pub sync`")


def _hint_for_state(job: Job) -> str:
    if job.state in LOCAL:
        return "`git pub reconcile` finishes its interrupted local phase"
    return _RETRY_ELSEWHERE.get(job.state, "`git pub status {id}` shows where it stands") \
        .format(id=job.job_id[:13])


def _has_commit(record: JobRecord) -> bool:
    return record.manifest_sha256 is not None and record.local_commit is not None


# -- acting ------------------------------------------------------------------------------------

def resolve(ctx: Context, job: Job, resolution: Resolution) -> Resolved:
    check(job, resolution)
    if ctx.store.held_by_other(job):
        lease = job.record.lease
        raise TryLaterError(f"job {job.job_id} is being worked on by "
                        f"{shown_owner(lease.owner) if lease else 'another process'}",
                        hint="run the same command again when that process is done")
    deliverer = Deliverer(ctx, ctx.remote(), now_please=True)
    if resolution.action == Action.ABANDON:
        return _abandon(ctx, deliverer, job)
    if job.state == S.FAILED:
        return _deliver(deliverer, _retry_failed(ctx, job))
    if job.state == S.REVIEW and resolution.action == Action.FROM:
        assert resolution.merged is not None
        return _review_from(ctx, deliverer, job, resolution)
    if job.state == S.REVIEW:
        return _retry_review(ctx, deliverer, job, resolution.push)
    return _resolve_conflict(ctx, deliverer, job, resolution)


def _deliver(deliverer: Deliverer, job: Job, note: str | None = None) -> Resolved:
    job = deliverer.deliver(job)
    notes = [n for n in (note, deliverer.notes.get(job.job_id)) if n]
    return Resolved(job, "; ".join(notes) or None)


def _abandon(ctx: Context, deliverer: Deliverer, job: Job) -> Resolved:
    was = job.state
    if was not in MAYBE_REMOTE and not _has_commit(job.record):
        return Resolved(_record_abandon(ctx, job, f"abandoned by a person (was {was.value})"))
    # Under the delivery lock nobody here pushes between our probe and our record, and the
    # record is a compare-and-swap: a job that moved meanwhile is not abandoned.
    with delivery_lock(ctx.repo):
        job = reload(ctx.store, job)
        if ctx.store.held_by_other(job) or job.state != was:
            raise TryLaterError(f"job {job.job_id} is being delivered by another process",
                                hint="run the same command again when that process is done")
        # A review is asked first, the branch probed after: a merge in between is found.
        still = deliverer.review.still_open(job) if was == S.IN_REVIEW else None
        tip, found = _probe(deliverer, job, "abandon")
        if found is not None:
            job = deliverer.published(job, found)
            return Resolved(job, f"not abandoned: it is already on the remote as {found}")
        if still is not None:
            raise UsageError(f"job {job.job_id} is not abandoned: {still}",
                             hint="a merge of it would publish the job after all; run the "
                                  "same command again once nothing can merge it")
        reason = (f"abandoned by a person (was {was.value}); the probe of "
                  f"{ctx.config.remote}/{ctx.config.branch} at {tip or '(no branch)'} "
                  "found it absent")
        return Resolved(_record_abandon(ctx, job, reason))


def _record_abandon(ctx: Context, job: Job, reason: str) -> Job:
    record = job.record
    detail = f"abandoned in {job.state.value}" + (
        f": {record.failure_detail}" if record.failure_detail else "")
    return ctx.store.transition(
        job, record.evolve(state=S.SKIPPED, failure_code=FailureCode.ABANDONED,
                           failure_detail=detail, next_retry_at=None),
        phase=Stage.RESOLVE, reason=reason)


def _probe(deliverer: Deliverer, job: Job, doing: str) -> tuple[str | None, str | None]:
    """(remote tip, the job's commit there or None), fetched now. A remote that does not
    answer stops the resolution with nothing changed (a misconfigured one: exit 2)."""
    try:
        return deliverer.fetch_and_probe(job)
    except RemoteError as e:
        raise TryLaterError(f"cannot {doing} job {job.job_id} without checking the remote: "
                            f"{e.message}",
                            hint="nothing was changed; run it again once the remote answers"
                            ) from None


def _retry_failed(ctx: Context, job: Job) -> Job:
    return ctx.store.transition(
        job, job.record.evolve(state=S.LOCAL_COMMITTED, attempt=0, failure_code=None,
                               failure_detail=None, next_retry_at=None),
        phase=Stage.RESOLVE, reason="retry requested: a new delivery budget, same artifacts")


# -- REVIEW ------------------------------------------------------------------------------------

def _retry_review(ctx: Context, deliverer: Deliverer, job: Job, push: bool) -> Resolved:
    record = job.record
    was = f"was REVIEW: {record.failure_code}"
    if record.base_ref is None or record.kind == Kind.SYNC:
        # never snapshotted, or a hand commit's (snapshotted again from the commit itself)
        job = ctx.store.transition(job, _fresh(ctx, record), phase=Stage.RESOLVE,
                                   entries={"artifacts": None, "manifest": None},
                                   reason=f"retry requested: the pipeline runs again ({was})")
    else:
        fresh, entries = _rerun_on_snapshot(ctx, job)
        job = ctx.store.transition(
            job, fresh, phase=Stage.RESOLVE, entries=entries,
            reason=f"retry requested: the pipeline runs again on base {record.base_commit} "
                   f"({was})")
    return _after_review(ctx, deliverer, drive(ctx, job), push)


def _after_review(ctx: Context, deliverer: Deliverer, job: Job, push: bool) -> Resolved:
    if push and job.state == S.LOCAL_COMMITTED:
        return _deliver(deliverer, job)
    if job.state == S.LOCAL_COMMITTED:
        return Resolved(job, f"committed locally; `git pub push {job.job_id[:13]}` delivers it")
    return Resolved(job)


def _review_from(ctx: Context, deliverer: Deliverer, job: Job,
                 resolution: Resolution) -> Resolved:
    """A person's content for the job's one article; the pipeline runs again on it, on the
    job's snapshot (its compare-and-swap conditions kept), or on a first one."""
    record, repo = job.record, ctx.repo
    merged, label = resolution.merged, resolution.merged_label or "FILE"
    assert merged is not None
    targets = _request_targets(ctx, record)
    if len(targets) != 1:
        raise UsageError(f"job {job.job_id} writes {len(targets)} files: --from FILE gives the "
                         "content of exactly one", hint=f"`git pub resolve {job.job_id[:13]} "
                         "--abandon`, then prepare the files as a new job")
    path = targets[0].path
    snapshotted = record.base_ref is not None
    base_ref = None if snapshotted else ctx.base_ref()
    base = record.base_commit if snapshotted else (
        None if base_ref is None else repo.read_ref(base_ref))
    _refuse_secrets(ctx, path, merged, label, base)
    blob = repo.write_blob(merged)
    old = ctx.store.subtree(job, "artifacts")
    ours = None if old is None else repo.lookup(old, path)
    entries: dict[str, Entry | None] = {
        "artifacts": None, "manifest": None,
        f"artifacts/{path}": Entry(MODE_FILE if ours is None else ours.mode, blob)}
    if not record.drafted:
        entries[f"source/{path}"] = Entry(MODE_FILE, blob)
    phases = {Phase.DRAFT: MERGED}
    if snapshotted:
        fresh = _cleared(record).evolve(state=S.PREPARING, targets=targets, phases=phases)
        where = f"on base {record.base_commit}"
    else:  # the secret found in the source is the source's, which FILE replaces
        fresh = _fresh(ctx, record).evolve(phases=phases)
        where = "from a new snapshot"
    job = ctx.store.transition(
        job, fresh, phase=Stage.RESOLVE, entries=entries,
        reason=f"content from {label} for {path} (sha256 {content_sha256(merged)}): the "
               f"pipeline runs again {where} (was REVIEW: {record.failure_code})")
    return _after_review(ctx, deliverer, drive(ctx, job), resolution.push)


def _refuse_secrets(ctx: Context, path: str, content: bytes, label: str,
                    base: str | None) -> None:
    """A secret ``content`` adds to ``path``'s version in ``base`` (judged as the gates will
    judge it, with the allowlist committed there): refused, nothing stored."""
    findings, _allowed = secret_scan({path: content}, Base(ctx.repo, base))
    if findings:
        raise UsageError(sanitize(f"{label} holds a possible secret ({'; '.join(findings[:5])}):"
                                  " nothing was stored"),
                         hint="remove it from the file and run again; a value that is no "
                              "secret can be allowed (docs/content-rules.md)")


def _request_targets(ctx: Context, record: JobRecord) -> tuple[Target, ...]:
    """The job's targets without the font outputs the pipeline derives (and adds) itself."""
    fonts = font_outputs(ctx.config)
    return tuple(t for t in record.targets if t.path not in fonts)


def _fresh(ctx: Context, record: JobRecord) -> JobRecord:
    """RECEIVED again, to be snapshotted anew. A sync job keeps its base: what it delivers is
    the hand commit's change against its parent, whatever the remote holds now."""
    kept = {k: v for k, v in record.phases.items() if k == Phase.SOURCE_SCAN}
    base = record.requested_base if record.kind == Kind.SYNC else None
    return _cleared(record).evolve(
        state=S.RECEIVED, phases=kept, base_commit=None, base_ref=None, requested_base=base,
        targets=tuple(Target(t.path, "new") for t in _request_targets(ctx, record)))


def _cleared(record: JobRecord) -> JobRecord:
    """What every rerun of the pipeline recomputes."""
    return record.evolve(manifest_sha256=None, commit_time=None, author=None,
                         local_commit=None, failure_code=None, failure_detail=None, attempt=0,
                         next_retry_at=None)


def _rerun_on_snapshot(ctx: Context, job: Job) -> tuple[JobRecord, dict[str, Entry | None]]:
    """PREPARING on the job's own snapshot: same base, same targets (font outputs dropped, the
    gates derive them again); the draft re-runs unless the content is a person's merge."""
    store, record = ctx.store, job.record
    entries: dict[str, Entry | None] = {"artifacts": None, "manifest": None}
    if record.sync_commit is not None:  # no sources: the hand commit is snapshotted again
        return _cleared(record).evolve(state=S.RECEIVED, phases={}), entries
    targets = _request_targets(ctx, record)
    phases: dict[Phase, str] = {}
    merged = record.phases.get(Phase.DRAFT) == MERGED
    if merged or not record.drafted:
        for t in targets:
            src = store.repo.lookup(job.tree, f"{'artifacts' if merged else 'source'}/{t.path}")
            if src is None:
                raise GitpubError(f"job {job.job_id}: no stored content for {t.path}",
                                  hint="`git pub resolve JOB --abandon` and prepare it anew")
            entries[f"artifacts/{t.path}"] = Entry(src.mode if merged else MODE_FILE, src.sha)
        phases[Phase.DRAFT] = MERGED if merged else "direct"
    return _cleared(record).evolve(state=S.PREPARING, targets=targets, phases=phases), entries


# -- CONFLICT ----------------------------------------------------------------------------------

def _resolve_conflict(ctx: Context, deliverer: Deliverer, job: Job,
                      resolution: Resolution) -> Resolved:
    if not _has_commit(job.record) and resolution.action == Action.RETRY:
        return _retry_from_scratch(ctx, deliverer, job)
    tip, found = _probe(deliverer, job, "resolve")
    job = reload(ctx.store, job)
    if found is not None:
        return Resolved(deliverer.published(job, found),
                        f"already on the remote as {found}: nothing to resolve")
    if resolution.action == Action.OVERWRITE:
        return _overwrite(ctx, deliverer, job, tip)
    if resolution.action == Action.FROM:
        assert resolution.merged is not None
        return _merge_from(ctx, deliverer, job, tip, resolution.merged,
                           resolution.merged_label or "FILE")
    return _recheck_conflict(ctx, deliverer, job, tip)


def _retry_from_scratch(ctx: Context, deliverer: Deliverer, job: Job) -> Resolved:
    """A CONFLICT at the snapshot (a path blocked by a file or directory): no content and no
    compare-and-swap condition exist yet, so the pipeline simply starts again."""
    try:
        fetch_branch(deliverer.remote)  # the new snapshot sees the current remote
    except RemoteError as e:
        ctx.progress(f"fetch failed ({e.message}): snapshotting what was fetched last")
    job = ctx.store.transition(
        job, _fresh(ctx, job.record), phase=Stage.RESOLVE,
        entries={"artifacts": None, "manifest": None},
        reason=f"retry requested: the pipeline runs again (was CONFLICT at the snapshot: "
               f"{job.record.failure_detail})")
    return _deliver(deliverer, drive(ctx, job))


def _article_targets(ctx: Context, record: JobRecord) -> list[Target]:
    fonts = font_outputs(ctx.config)
    return [t for t in record.targets if t.path not in fonts]


def _tip_tree(ctx: Context, tip: str | None) -> str | None:
    return None if tip is None else ctx.repo.commit(tip).tree


def _recheck_conflict(ctx: Context, deliverer: Deliverer, job: Job,
                      tip: str | None) -> Resolved:
    tree, targets = _tip_tree(ctx, tip), _article_targets(ctx, job.record)
    problems = target_problems(ctx.repo, tree, targets)
    if problems and job.record.kind != Kind.SYNC:  # their change may merge with ours now
        try:
            merged = merge_contents(ctx, job, read_artifacts(ctx.store, job), tree, targets)
        except ManifestError:
            merged = problems
        problems = [p for p in merged if isinstance(p, str)]
        if not problems:
            return _deliver_merged(ctx, deliverer, job, tip)
    if problems:
        detail = "; ".join(problems)
        job = ctx.store.transition(
            job, job.record.evolve(failure_detail=detail), phase=Stage.RESOLVE,
            reason=f"retry: re-checked against {tip}: the other version is still there "
                   f"({detail}); nothing was overwritten")
        return Resolved(job, f"still conflicting with {ctx.config.remote}/"
                             f"{ctx.config.branch} at {tip}: their version was left as it is")
    job = ctx.store.transition(
        job, job.record.evolve(state=S.LOCAL_COMMITTED, attempt=0, failure_code=None,
                               failure_detail=None, next_retry_at=None),
        phase=Stage.RESOLVE,
        reason=f"retry: re-checked against {tip}: the conflicting change is gone")
    return _deliver(deliverer, job)


def _deliver_merged(ctx: Context, deliverer: Deliverer, job: Job, tip: str | None) -> Resolved:
    job = ctx.store.transition(
        job, job.record.evolve(state=S.LOCAL_COMMITTED, attempt=0, failure_code=None,
                               failure_detail=None, next_retry_at=None),
        phase=Stage.RESOLVE,
        reason=f"retry: re-checked against {tip}: their changes no longer overlap ours (or "
               "already hold them); the delivery merges them three-way")
    return _deliver(deliverer, job)


def _their_entry(ctx: Context, tree: str | None, path: str) -> Entry | None:
    """Their file at ``path`` in ``tree``; refuses when a directory or file is in the way (no
    content can replace that)."""
    if tree is None:
        return None
    entry = ctx.repo.lookup(tree, path)
    blocker = ctx.repo.file_in_the_way(tree, path)
    if (entry is not None and entry.mode == MODE_TREE) or blocker:
        raise UsageError(f"cannot write {path}: "
                         + (f"{blocker} is a file" if blocker else "it is a directory")
                         + " on the remote", hint="`git pub resolve JOB --abandon`, then "
                                                  "prepare it at another path")
    return entry


def _as_target(ctx: Context, path: str, theirs: Entry | None) -> Target:
    if theirs is None:
        return Target(path, "new")
    return Target(path, "update", content_sha256(ctx.repo.blob(theirs.sha)))


def _describe(ctx: Context, theirs: Entry | None) -> str:
    if theirs is None:
        return "absent"
    return f"sha256 {content_sha256(ctx.repo.blob(theirs.sha))} (blob {theirs.sha})"


def _overwrite(ctx: Context, deliverer: Deliverer, job: Job, tip: str | None) -> Resolved:
    record, tree = job.record, _tip_tree(ctx, tip)
    artifacts = ctx.store.subtree(job, "artifacts")
    targets, replaced = [], []
    for t in record.targets:
        if t.path in font_outputs(ctx.config):
            targets.append(t)  # derived: regenerated on the rebase, never compared
            continue
        theirs = _their_entry(ctx, tree, t.path)
        target = _as_target(ctx, t.path, theirs)
        if target != t:
            ours = None if artifacts is None else ctx.repo.lookup(artifacts, t.path)
            replaced.append(f"{t.path}: theirs {_describe(ctx, theirs)} replaced by ours "
                            f"{_describe(ctx, ours)}")
        targets.append(target)
    job = ctx.store.transition(
        job, record.evolve(state=S.LOCAL_COMMITTED, targets=tuple(targets), attempt=0,
                           failure_code=None, failure_detail=None, next_retry_at=None),
        phase=Stage.RESOLVE,
        reason=f"overwrite requested by a person, against {tip}: "
               + ("; ".join(replaced) or "no target differs any more"))
    return _deliver(deliverer, job, "overwrote: " + "; ".join(replaced) if replaced else None)


def _merge_target(ctx: Context, job: Job, tree: str | None) -> str:
    """The one path ``--from`` gives content for: the job's only article, else its only
    conflicting one."""
    targets = _article_targets(ctx, job.record)
    if len(targets) == 1:
        return targets[0].path
    conflicting = [t.path for t in targets if target_problems(ctx.repo, tree, [t])]
    if len(conflicting) == 1:
        return conflicting[0]
    raise UsageError(f"job {job.job_id} writes {len(targets)} files and {len(conflicting)} of "
                     "them conflict: --from FILE gives the content of exactly one",
                     hint="`git pub resolve JOB --overwrite` or `--abandon` (and prepare the "
                          "merged files as a new job)")


def _merge_from(ctx: Context, deliverer: Deliverer, job: Job, tip: str | None, merged: bytes,
                label: str) -> Resolved:
    record, repo, tree = job.record, ctx.repo, _tip_tree(ctx, tip)
    path = _merge_target(ctx, job, tree)
    _refuse_secrets(ctx, path, merged, label, tip)  # what it adds to theirs (the new base)
    theirs = _their_entry(ctx, tree, path)
    targets = tuple(t if t.path != path else _as_target(ctx, path, theirs)
                    for t in _article_targets(ctx, record))
    for t in targets:
        _their_entry(ctx, tree, t.path)  # refuses a blocked path before anything is written
    blob = repo.write_blob(merged)
    old = ctx.store.subtree(job, "artifacts")
    entries: dict[str, Entry | None] = {"manifest": None}
    for p in font_outputs(ctx.config) & set(record.target_paths):
        entries[f"artifacts/{p}"] = None  # derived again by the gates
    mode = MODE_FILE
    if old is not None and (ours := repo.lookup(old, path)) is not None:
        mode = ours.mode
    entries[f"artifacts/{path}"] = Entry(mode, blob)
    if not record.drafted:
        entries[f"source/{path}"] = Entry(MODE_FILE, blob)
    phases = {Phase.DRAFT: MERGED}
    fresh = _cleared(record).evolve(
        state=S.PREPARING, base_ref=deliverer.remote.tracking_ref, base_commit=tip,
        requested_base=None, targets=targets, phases=phases)
    job = ctx.store.transition(
        job, fresh, phase=Stage.RESOLVE, entries=entries,
        reason=f"merged content from {label} for {path} (sha256 {content_sha256(merged)}), "
               f"a new snapshot against {tip}, where theirs is {_describe(ctx, theirs)}")
    job = drive(ctx, job)
    return _deliver(deliverer, job) if job.state == S.LOCAL_COMMITTED else Resolved(job)
