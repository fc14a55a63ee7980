"""The probe: is a job published? Search the remote branch for the job's publication.

The search is bounded by the job's base: it walks only the commits after the (first) base, the
ones a rebase or another writer could have added. It is given explicit tips — for
confirmation, the freshly fetched remote branch only, never local branches (a local leftover
must not count as published).

Every commit there that claims the job's id is judged by the one verifier (``verify.commit``):

- a publication of the job's manifest (trailers *and* content) → the job is published;
- a publication of the same job id with other content → the key was used elsewhere for another
  request (``reused``): the job must stop, never publish a second commit with that id;
- anything else (copied trailers, a partial or padded commit) is no proof (``forged``): the job
  goes on and publishes its own commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gitpub.core.manifest import Manifest
from gitpub.core.record import JobRecord
from gitpub.git import trailers
from gitpub.git.repo import Repository
from gitpub.git.walk import walk_since
from gitpub.verify.commit import Verdict, same_request, verify_commit


@dataclass(frozen=True)
class ProbeResult:
    published: str | None = None  # the commit that is the job's publication
    reused: Verdict | None = None  # a publication of the job id with other content
    forged: tuple[Verdict, ...] = ()  # claims of the job id that are no publication


def probe(repo: Repository, tips: Sequence[str], record: JobRecord, prefix: str, *,
          manifest: Manifest | None = None, derived: frozenset[str] = frozenset()
          ) -> ProbeResult:
    """Judge every commit reachable from ``tips`` and newer than the job's (first) base that
    claims the job's id. ``manifest`` is the job's own (to recognise the same request with other
    ``derived`` files, e.g. font subsets made from another article set)."""
    if record.manifest_sha256 is None:
        return ProbeResult()
    forged: list[Verdict] = []
    reused: Verdict | None = None
    for sha, message in walk_since(repo, tips, record.first_base or record.base_commit):
        if not trailers.mentions_job_id(message, [prefix]):
            continue
        verdict = verify_commit(repo, sha, [prefix])
        if verdict is None or record.job_id not in _claimed_ids(message, prefix):
            continue
        if not verdict.ok or verdict.job_id != record.job_id:
            forged.append(verdict)
        elif verdict.manifest_sha256 == record.manifest_sha256 or same_request(
                manifest, verdict.manifest, derived):
            return ProbeResult(published=sha, forged=tuple(forged))
        elif reused is None:
            reused = verdict
    return ProbeResult(reused=reused, forged=tuple(forged))


def _claimed_ids(message: bytes, prefix: str) -> tuple[str, ...]:
    found = trailers.claim(message, prefix)
    return () if found is None else found.job_ids


def find_job_commit(
    repo: Repository, tips: Sequence[str], record: JobRecord, prefix: str
) -> str | None:
    """The commit reachable from ``tips`` and newer than the job's (first) base that is the
    job's publication (its trailers and its content: ``verify.commit``); None if none is."""
    return probe(repo, tips, record, prefix).published
