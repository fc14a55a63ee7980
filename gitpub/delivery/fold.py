"""Folding finished jobs into the archive, on the remote and here, so refs stay O(unfinished).

When finished job refs pile up — ``archive_after`` of them (default 64), counting this clone's
and the remote's — any node folds them (``store.archive``): one new archive commit adding their
final records, then **one atomic push** that moves ``refs/pub/archive`` by compare-and-swap and
deletes each folded job ref on the remote with ``--force-with-lease=<ref>:<its final value>``
(a job that moved meanwhile is not deleted, and not folded). Then the same here in **one C git
ref transaction** (``git update-ref --stdin``: all or nothing locally too; dulwich has none):
the tracking archive moves, the folded tracking refs and this clone's own refs of those jobs go.

What is folded: jobs whose state is PUBLISHED or SKIPPED and whose distribution is settled
(``settled``: no channel still to send), where this clone has nothing newer than the remote.
A finished job that only this clone has (SKIPPED by the judge at prepare, or published before
the job store was shared) is folded into the archive too, so the archive is the record of
every finished job; a job another node folded already is only pruned here. A crash between the
push and the local transaction (``shared.archived``) leaves refs here that the archive holds:
the next fold prunes them. Without atomic push the archive moves first, then the job refs are
deleted (each its own compare-and-swap): a crash between leaves job refs the archive also
holds — harmless, the next fold deletes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CorruptStateError, GitpubError
from gitpub.core.states import TERMINAL
from gitpub.delivery.shared import Shared, remote_ref
from gitpub.git.push import PushResult, Update
from gitpub.git.remote import RemoteError
from gitpub.store.archive import ARCHIVE
from gitpub.store.jobs import ACTIVE_PREFIX, JOBS_PREFIX, Job

#: Jobs folded by one fold at most (one push).
FOLD_LIMIT = 1000
ARCHIVE_REF = "refs/pub/" + ARCHIVE


@dataclass(frozen=True)
class Candidate:
    job: Job  # its final state: the value folded
    remote: str | None  # the remote's job ref to delete (its value), if it has one
    local: str | None  # this clone's job ref to delete (its value), if it has one
    archived: bool  # the archive holds it already: only refs to delete


@dataclass(frozen=True)
class Folded:
    archived: int  # jobs added to the archive
    pruned: int  # job refs deleted here


def due(shared: Shared, threshold: int) -> bool:
    """Whether enough finished job refs piled up (this clone's and the remote's) to fold."""
    repo = shared.ctx.repo
    local = len(repo.list_refs(JOBS_PREFIX)) - len(repo.list_refs(ACTIVE_PREFIX))
    return local + len(repo.list_refs(shared.view.prefix + "jobs/")) >= threshold


def fold(shared: Shared, settled: Callable[[Job], bool], threshold: int) -> Folded | None:
    """Fold the finished jobs when ``due``; None when there was nothing to do. Needs a fresh
    fetch of the job store (``Shared.fetch``); raises ``RemoteError`` when the remote does
    not answer (nothing changed here then)."""
    if not due(shared, threshold):
        return None
    candidates = _candidates(shared, settled)[:FOLD_LIMIT]
    if not candidates:
        return None
    view, repo = shared.view, shared.ctx.repo
    archive = view.archive()
    old = archive.commit
    new_entries = [c for c in candidates if not c.archived]
    new = old
    if new_entries:
        finals = [(c.job.job_id, c.job.commit, _record_blob(shared, c.job)) for c in new_entries]
        new = archive.fold(finals, f"gitpub archive: {len(finals)} finished job(s)\n")
    deleted = _push(shared, old, new, [c for c in candidates if c.remote is not None])
    if deleted is None:
        return Folded(0, 0)
    crash_point("shared.archived")
    done = [c for c in candidates if c.remote is None or c.job.job_id in deleted]
    _here(shared, old, new, done)
    del repo  # (the transaction ran in C git)
    return Folded(len(new_entries) if new != old else 0,
                  sum(1 for c in done if c.local is not None))


def _candidates(shared: Shared, settled: Callable[[Job], bool]) -> list[Candidate]:
    view, repo = shared.view, shared.ctx.repo
    local = repo.list_refs(JOBS_PREFIX)
    active = repo.list_refs(ACTIVE_PREFIX)
    remote = repo.list_refs(view.prefix + "jobs/")
    archive = view.archive()
    out: list[Candidate] = []
    for job_id, theirs in sorted(remote.items()):
        job = _finished(shared, job_id, theirs, settled)
        mine = local.get(job_id)
        if job is None or (mine not in (None, theirs) and not view.descends(theirs, mine)):
            continue  # unfinished, or this clone has states the remote has not seen yet
        out.append(Candidate(job, theirs, mine, archive.lookup(job_id) is not None))
    for job_id, mine in sorted(local.items()):
        if job_id in remote or job_id in active:
            continue
        job = _finished(shared, job_id, mine, settled)
        if job is None:
            continue
        entry = archive.lookup(job_id)
        if entry is None:
            out.append(Candidate(job, None, mine, False))
        elif entry.state_commit == mine or view.descends(entry.state_commit, mine):
            out.append(Candidate(job, None, mine, True))
    return out


def _finished(shared: Shared, job_id: str, sha: str,
              settled: Callable[[Job], bool]) -> Job | None:
    try:
        job = shared.ctx.store.load_at(job_id, sha)
    except CorruptStateError:
        return None  # damaged state is reported elsewhere, never folded
    if job.state not in TERMINAL or not settled(job):
        return None
    return job


def _record_blob(shared: Shared, job: Job) -> str:
    entry = shared.ctx.repo.lookup(job.tree, "job.json")
    if entry is None:
        raise CorruptStateError(f"job {job.job_id}: state commit {job.commit} has no job.json")
    return entry.sha


def _push(shared: Shared, old: str | None, new: str | None,
          remote_jobs: list[Candidate]) -> set[str] | None:
    """Move the remote's archive and delete its folded job refs; the ids deleted there, or
    None when the archive did not move (another node folded first: nothing changed)."""
    archive = [Update(ARCHIVE_REF, new, old or "")] if new != old else []
    deletes = [Update(remote_ref(c.job.job_id), None, c.remote) for c in remote_jobs]
    if not archive and not deletes:
        return set()
    remote = shared.remote
    if shared.atomic:
        pushed = remote.push_updates(archive + deletes, atomic=True, verify=False)
        if not pushed.atomic_unsupported:
            if pushed.result != PushResult.SENT:
                return None
            return {c.job.job_id for c in remote_jobs}
        shared.atomic = False
    if archive and remote.push_updates(archive, verify=False).of(ARCHIVE_REF).result != \
            PushResult.SENT:
        return None
    if not deletes:
        return set()
    pushed = remote.push_updates(deletes, verify=False)
    return {c.job.job_id for c in remote_jobs
            if pushed.of(remote_ref(c.job.job_id)).result == PushResult.SENT}


def _here(shared: Shared, old: str | None, new: str | None, done: list[Candidate]) -> None:
    """The same here, in one ref transaction: the tracking archive, the folded tracking refs,
    this clone's own refs of the folded jobs. If a ref moved meanwhile, each change is tried
    on its own (the archive first: a job is never without both its ref and its entry)."""
    prefix = shared.view.prefix
    changes: list[tuple[str, str | None, str | None]] = []  # (ref, new, old)
    if new != old and new is not None:
        changes.append((prefix + ARCHIVE, new, old))
    for c in done:
        if c.remote is not None:
            changes.append((prefix + "jobs/" + c.job.job_id, None, c.remote))
        if c.local is not None:
            changes.append((JOBS_PREFIX + c.job.job_id, None, c.local))
    if not changes:
        return
    zero = "0" * 40
    lines = ["start"]
    for ref, value, expected in changes:
        lines.append(f"update {ref} {value} {expected or zero}" if value is not None
                     else f"delete {ref} {expected}")
    lines += ["prepare", "commit", ""]
    proc = shared.ctx.repo.git("update-ref", "--stdin",
                               input="\n".join(lines).encode())
    if proc.returncode == 0:
        return
    for ref, value, expected in changes:
        with contextlib.suppress(GitpubError, RemoteError):
            if value is not None:
                shared.ctx.repo.cas_ref(ref, expected, value, "gitpub: archive")
            elif expected is not None:
                shared.ctx.repo.delete_ref(ref, expected)
