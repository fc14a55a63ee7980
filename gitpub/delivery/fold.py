"""Folding finished jobs into the archive, on the remote and here, so refs stay O(unfinished).

When finished job refs pile up — ``archive_after`` of them (default 64), counting this clone's
and the remote's — every command that delivers folds them (``store.archive``), under the
delivery lock, after a fetch of the job store (the command's own, if it made one):

1. **objects**: one new archive commit on top of the remote's archive, adding the final records
   (``fold.written``: nothing points at it yet);
2. **one atomic push** that moves ``refs/pub/archive`` by compare-and-swap
   (``--force-with-lease=refs/pub/archive:<the archive we built on>``) and deletes each folded
   job ref with ``--force-with-lease=refs/pub/jobs/<id>:<its final value>``: either the archive
   holds the jobs and their refs are gone, or nothing changed (``fold.pushed``: the remote is
   done, nothing here yet);
3. **here, the archive first**: the tracking archive moves (``fold.noted``), then one C git ref
   transaction deletes the folded tracking refs and this clone's own refs of those jobs.

At every step each job is found: in its ref, in the archive, or (between the steps) in both —
never in neither, because the archive always moves before a ref goes, locally and on the remote.
What a crash leaves in both places is the next fold's to prune (a job the archive holds is only
deleted, never added twice), and every reader (``store.shared.find``, ``ensure_job``) looks at
the ref first, so a job is reported once.

A fold that loses a compare-and-swap (another node folded first, or a job moved since the
fetch) changed nothing: it fetches again and recomputes the whole fold, a few times, then stops
for this run. Without atomic push the archive moves first, then the job refs are deleted, each
its own compare-and-swap (``fold.archive-pushed`` between the two): a crash leaves refs the
archive also holds, which the next fold deletes.

What is folded: jobs whose state is PUBLISHED or SKIPPED and whose distribution is ``settled``,
and where this clone has nothing newer than the remote. A finished job that only this clone has
(SKIPPED by the judge at prepare, say) goes into the archive too: the archive is the record of
every finished job, so its key is found by every clone. A newer final state of an archived job
(its channels settled after another node folded it) replaces the entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CorruptStateError
from gitpub.core.states import TERMINAL
from gitpub.delivery.shared import Shared, remote_ref
from gitpub.git.push import PushOutcome, PushResult, Update
from gitpub.git.remote import RemoteError
from gitpub.git.repo import RefUpdate
from gitpub.store.archive import ARCHIVE, Archive, Final
from gitpub.store.fetch import note_pushed
from gitpub.store.jobs import ACTIVE_PREFIX, JOBS_PREFIX, Job

#: Jobs one archive commit (one push, one ref transaction here) folds at most: its refspecs
#: stay a short command line.
FOLD_LIMIT = 500
#: What a command that publishes (``push``, ``prepare --push``, ``sync``) takes on of a fold:
#: ``git push`` matches each refspec (and each lease) it is given against every local and
#: remote ref, so deleting a job ref costs in proportion to the refs there are — ~15 ms each
#: over a store of 10,000 job refs an older gitpub left unfolded, 10,000 of them minutes. So a
#: publish folds at most ``FLOW_BUDGET`` / (the job refs each deletion is matched against)
#: jobs, ``FLOW_LEAST`` at the least (more than a publish adds), ``FOLD_LIMIT`` at the most;
#: the rest is left to the next runs, or to ``reconcile``, which folds them all. A store that
#: folds as it goes (``archive_after``) is folded whole by one publish; one of 10,000 refs,
#: 25 jobs a publish, which costs it a few tenths of a second.
FLOW_BUDGET = 1_000_000
FLOW_LEAST = 16
#: Whole folds re-tried after a lost compare-and-swap, before this run gives up.
ROUNDS = 4
ARCHIVE_REF = "refs/pub/" + ARCHIVE

Settled = Callable[[Job], bool]
#: This clone's job refs, its active index and the remote's job refs, each by job id.
Listings = tuple[dict[str, str], dict[str, str], dict[str, str]]


@dataclass(frozen=True)
class Candidate:
    """One finished job to fold: what the archive is to hold for it, and the refs to go."""

    job_id: str
    final: str  # the state commit the archive holds for the job after the fold
    record_blob: str  # that state's job.json
    remote: str | None  # the remote's job ref to delete (its value), if it has one
    local: str | None  # this clone's job ref to delete (its value), if it has one
    entry: str | None  # the state the archive holds before the fold (None: none)
    active: str | None = None  # this clone's (stale) active index entry of the job, to delete

    @property
    def adds(self) -> bool:
        return self.entry != self.final


@dataclass
class Folded:
    archived: int = 0  # entries added to (or replaced in) the archive
    deleted: int = 0  # job refs deleted on the remote
    pruned: int = 0  # this clone's job refs deleted
    stopped: str | None = None  # why the fold stopped before the end (sanitized)
    skipped: list[str] = field(default_factory=list)  # finished jobs left alone, and why
    left: int = 0  # finished job refs left for the next fold (a publish's fold, bounded)

    @property
    def changed(self) -> bool:
        return bool(self.archived or self.deleted or self.pruned)


def finished_refs(shared: Shared) -> int:
    """About how many jobs have a finished job ref, this clone's or the remote's (as last
    fetched), without reading a record: this clone's job refs not in its active index (which
    lists the unfinished ones), and every remote job ref (whose state only its record says)."""
    return _finished_count(_listings(shared))


def _finished_count(listings: Listings) -> int:
    local, active, remote = listings
    return len({job_id for job_id in local if job_id not in active} | set(remote))


def _listings(shared: Shared, *, fresh: bool = False) -> Listings:
    """This clone's job refs, its active index and the remote's job refs as last fetched
    (each keyed by job id), read together in one ``for-each-ref``: every fold decision on
    them is a compare-and-swap, on the remote (the push's leases) and here (one ref
    transaction) — but not the one that holds a fold back: this clone has a newer state of
    the job than the remote's. So the fold reads them as they are now (``fresh``), never as a
    publishing command kept them from its start (``git.refs``); a count of them (``due``)
    may take what was kept."""
    prefixes = (JOBS_PREFIX, ACTIVE_PREFIX, shared.view.prefix + "jobs/")
    found = shared.ctx.repo.read_together(prefixes, fresh=fresh)
    local, active, remote = ({n[len(p):]: v for n, v in found.items() if n.startswith(p)}
                             for p in prefixes)
    return local, active, remote


def due(shared: Shared, threshold: int) -> bool:
    return threshold > 0 and finished_refs(shared) >= threshold


def fold(shared: Shared, settled: Settled, *, flow: bool = False) -> Folded:
    """Fold the finished jobs into the archive, in batches of ``FOLD_LIMIT``, after a fetch
    (this command's, if it made one; see the module docstring): all of them, or (``flow``: a
    command that publishes) at most ``flow_limit`` of them, ``Folded.left`` then saying how
    many finished job refs wait for the next fold. Raises ``RemoteError`` when the remote does
    not answer or the outcome of a push is unknown: the next fold's fetch finds out what
    happened."""
    result = Folded()
    quota: int | None = None
    for round_ in range(ROUNDS):
        if round_ or not shared.fetched:
            # A first try may build on this command's fetch of the store: over values that
            # moved since, it loses a compare-and-swap, changes nothing and fetches.
            shared.fetch()
        if shared.damaged_archive is not None:
            result.stopped = "the remote's refs/pub/archive is no archive: `git pub doctor " \
                             "--fix` puts the last good one back"
            return result
        listings = _listings(shared, fresh=True)
        if flow and quota is None:
            quota = flow_limit(*listings)
        candidates = _candidates(shared, listings, settled, result, quota)
        if not candidates:
            return _count_left(result, quota, listings, 0)
        try:
            done = 0
            for batch in _batches(candidates):
                if not _fold_batch(shared, batch, result):
                    break  # lost a compare-and-swap: fetch again, fold again
                done += len(batch)
                if done < len(candidates):  # a long fold says how far it is
                    shared.ctx.progress(f"archive: {done} of {len(candidates)} finished "
                                        "job(s) folded so far")
            else:
                return _count_left(result, None if quota is None else quota - done, listings,
                                   done)
            quota = None if quota is None else quota - done
        except _Refused as e:
            result.stopped = f"the remote refuses the fold's push ({e}): allow pushes to " \
                             "refs/pub/* for this account"
            return result
    result.stopped = "the remote's job store kept moving (other nodes folding or delivering)"
    return result


def flow_limit(local: Mapping[str, str], active: Mapping[str, str],
               remote: Mapping[str, str]) -> int:
    """How many jobs a publish folds at most, given the job refs listed (see ``FLOW_BUDGET``):
    each deletion is matched against every local ref (the remote's tracked here too) and twice
    against every remote one."""
    matched = len(local) + len(active) + 3 * len(remote) + 1
    return max(FLOW_LEAST, min(FOLD_LIMIT, FLOW_BUDGET // matched))


def _count_left(result: Folded, quota: int | None, listings: Listings, done: int) -> Folded:
    """The result, with about how many finished job refs are left when the quota ran out: the
    listing the fold started from, less the jobs it folded."""
    if quota is not None and quota <= 0:
        result.left = max(0, _finished_count(listings) - done)
    return result


class _Refused(Exception):
    """The remote refused the fold's push for another reason than a lost race (a hook, a
    protected ref): nothing changed, and trying again would not help."""


def _batches(items: Sequence[Candidate]) -> Iterator[Sequence[Candidate]]:
    for start in range(0, len(items), FOLD_LIMIT):
        yield items[start:start + FOLD_LIMIT]


# -- deciding ----------------------------------------------------------------------------------

def _candidates(shared: Shared, listings: Listings, settled: Settled, result: Folded,
                limit: int | None) -> list[Candidate]:
    """The jobs to fold, at most ``limit`` (None: all), the remote's first, by id, from the
    job refs ``_listings`` read (in one ``for-each-ref``): only the jobs looked at are loaded."""
    view = shared.view
    local, active, remote = listings
    archive = view.archive()
    out: list[Candidate] = []

    def refs() -> Iterator[tuple[str, str | None, str]]:  # job id, remote value, its state
        for job_id, theirs in sorted(remote.items()):
            mine = local.get(job_id)
            if mine in (None, theirs) or view.descends(theirs, mine):
                yield job_id, theirs, theirs
            # else this clone has states the remote has not seen yet: shared first
        for job_id, mine in sorted(local.items()):
            if job_id not in remote and job_id not in active:
                yield job_id, None, mine

    for job_id, theirs, sha in refs():
        if limit is not None and len(out) >= limit:
            break
        job = _finished(shared, job_id, sha, settled)
        if job is not None:
            out += _candidate(shared, archive, job, theirs, local.get(job_id), result,
                              active.get(job_id))
    return out


def _finished(shared: Shared, job_id: str, sha: str, settled: Settled) -> Job | None:
    try:
        job = shared.ctx.store.load_at(job_id, sha)
        if job.state not in TERMINAL or not settled(job):
            return None
    except CorruptStateError:
        return None  # damaged state is reported by the commands that read it, never folded
    return job


def _candidate(shared: Shared, archive: Archive, job: Job, remote: str | None,
               local: str | None, result: Folded, active: str | None) -> list[Candidate]:
    """The job's candidate, given what the archive holds for it already: nothing (add it), an
    older state (replace it), the same or a newer state (only the refs go); none when the
    archive holds a state of another history (two clones created the job independently)."""
    try:
        entry = archive.lookup(job.job_id)
    except CorruptStateError as e:
        result.skipped.append(e.message)
        return []
    record = shared.ctx.repo.lookup(job.tree, "job.json")
    if record is None:
        return []
    view = shared.view
    final, blob = job.commit, record.sha
    if entry is not None and entry.state_commit != job.commit:
        if view.descends(entry.state_commit, job.commit):
            final, blob = entry.state_commit, entry.record_blob  # the archive's is newer
        elif not view.descends(job.commit, entry.state_commit):
            result.skipped.append(f"job {job.job_id}: the archive holds another history of "
                                  f"it ({entry.state_commit}); its ref {job.commit} is kept")
            return []
    return [Candidate(job.job_id, final, blob, remote, local,
                      None if entry is None else entry.state_commit, active)]


# -- acting ------------------------------------------------------------------------------------

def _fold_batch(shared: Shared, batch: Sequence[Candidate], result: Folded) -> bool:
    """One archive commit and one push for ``batch``, then the same here; False when the
    remote's archive or one of the job refs moved (nothing changed anywhere)."""
    old = shared.view.archive_value
    adds = [c for c in batch if c.adds]
    new = old
    if adds:
        finals = [Final(c.job_id, c.final, c.record_blob) for c in adds]
        new = Archive(shared.ctx.repo, old).fold(
            finals, f"gitpub archive: {len(finals)} finished job(s)\n")
    crash_point("fold.written")
    deleted = _push(shared, old, new, [c for c in batch if c.remote is not None])
    if deleted is None:
        return False
    crash_point("fold.pushed")
    _here(shared, old, new, batch, deleted)
    result.archived += len(adds) if new != old else 0
    result.deleted += len(deleted)
    result.pruned += sum(1 for c in batch if c.local is not None and _gone(c, deleted))
    return True


def _gone(candidate: Candidate, deleted: set[str]) -> bool:
    """Whether the candidate's refs may go here: the remote has no ref of it any more."""
    return candidate.remote is None or candidate.job_id in deleted


def _push(shared: Shared, old: str | None, new: str | None,
          remote_jobs: Sequence[Candidate]) -> set[str] | None:
    """Move the remote's archive and delete its folded job refs: the ids deleted there, or
    None when a compare-and-swap lost (nothing changed). ``RemoteError`` when unknown."""
    archive = [Update(ARCHIVE_REF, new, old or "")] if new != old else []
    deletes = [Update(remote_ref(c.job_id), None, c.remote) for c in remote_jobs]
    if not archive and not deletes:
        return set()
    remote = shared.remote
    if shared.atomic:
        pushed = remote.push_updates(archive + deletes, atomic=True, verify=False)
        if not pushed.atomic_unsupported:
            if pushed.result == PushResult.UNKNOWN:
                raise RemoteError(f"the fold's push has no outcome: {pushed.detail}")
            if pushed.result == PushResult.REJECTED:
                raise _Refused(_refusal(pushed.refs.values()))
            return {c.job_id for c in remote_jobs} if pushed.result == PushResult.SENT \
                else None
        shared.atomic = False
        shared.ctx.progress(f"warning: the remote {remote.remote} does not support atomic "
                            "pushes: moving the archive first, then deleting the folded job "
                            "refs")
    if archive:
        moved = remote.push_updates(archive, verify=False).of(ARCHIVE_REF)
        if moved.result == PushResult.UNKNOWN:
            raise RemoteError(f"the archive's push has no outcome: {moved.detail}")
        if moved.result == PushResult.REJECTED:
            raise _Refused(moved.detail)
        if moved.result != PushResult.SENT:
            return None
        crash_point("fold.archive-pushed")
    if not deletes:
        return set()
    pushed = remote.push_updates(deletes, verify=False)
    return {c.job_id for c in remote_jobs
            if pushed.of(remote_ref(c.job_id)).result == PushResult.SENT}


def _refusal(outcomes: Iterable[PushOutcome]) -> str:
    return next((o.detail for o in outcomes if o.result == PushResult.REJECTED), "rejected")


def _here(shared: Shared, old: str | None, new: str | None, batch: Sequence[Candidate],
          deleted: set[str]) -> None:
    """The same here: the tracking archive first (a job is never without both its ref and its
    entry), then one ref transaction for the folded tracking refs and this clone's refs of
    the folded jobs (their values as listed for the fold: compare-and-swap). A ref that moved
    meanwhile is left for the next fold."""
    if new != old and new is not None:
        note_pushed(shared.remote, ARCHIVE, old, new)
    crash_point("fold.noted")
    repo, prefix = shared.ctx.repo, shared.view.prefix
    changes: list[RefUpdate] = []
    for c in batch:
        if c.remote is not None and c.job_id in deleted:
            changes.append(RefUpdate(f"{prefix}jobs/{c.job_id}", None, c.remote))
        if c.local is not None and _gone(c, deleted):
            changes.append(RefUpdate(JOBS_PREFIX + c.job_id, None, c.local))
            if c.active is not None:
                changes.append(RefUpdate(ACTIVE_PREFIX + c.job_id, None, c.active))
    if repo.update_refs(changes, "gitpub: folded into the archive"):
        return
    for change in changes:  # something moved: each on its own, the rest for the next fold
        repo.update_refs([change], "gitpub: folded into the archive")
