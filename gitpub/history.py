"""Searching history for proof of publication: commits carrying a job's trailers.

The search is bounded by the job's base: it walks only the commits after the base (the ones a
rebase or another writer could have added), not the whole history, so its cost follows the
number of commits since the job was prepared. It is given explicit tips — for confirmation, the
freshly fetched remote branch only, never local branches (a local leftover must not count as
published).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from gitpub import trailers
from gitpub.record import JobRecord
from gitpub.repo import Repository

#: How far back (seconds before the base commit's time) a walk may go down side branches of
#: merges that never meet the base.
CLOCK_SLACK = 7 * 24 * 3600


def find_job_commit(
    repo: Repository, tips: Sequence[str], record: JobRecord, prefix: str
) -> str | None:
    """A commit reachable from ``tips`` and newer than the job's base that carries both the
    job's id and manifest hash; None if there is none."""
    if record.manifest_sha256 is None:
        return None
    for info_sha, message in walk_since(repo, tips, record.base_commit):
        proof = trailers.read_pub_trailers(message, prefix)
        if (proof is not None and proof.job_id == record.job_id
                and proof.manifest_sha256 == record.manifest_sha256):
            return info_sha
    return None


def walk_since(
    repo: Repository, tips: Sequence[str], base: str | None
) -> Iterator[tuple[str, bytes]]:
    """(sha, message) of the commits reachable from ``tips`` but not beyond ``base``.

    A bounded walk: it stops at ``base``, and on side branches that never meet it, at commits
    older than the base by more than ``CLOCK_SLACK``. Work follows the commits since the base,
    not the length of the history.
    """
    floor = None
    if base is not None and repo.has_object(base):
        floor = repo.commit(base).commit_time - CLOCK_SLACK
    seen: set[str] = set() if base is None else {base}
    stack = [t for t in tips if t not in seen]
    while stack:
        sha = stack.pop()
        if sha in seen:
            continue
        seen.add(sha)
        if not repo.has_object(sha):
            continue
        info = repo.commit(sha)
        yield sha, info.message
        if floor is not None and info.commit_time < floor:
            continue
        stack.extend(p for p in info.parents if p not in seen)
