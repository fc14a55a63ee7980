"""The probe: is a job published? Search the remote branch for the job's publication.

The search is bounded by the job's base: it walks only the commits after the (first) base, the
ones a rebase or another writer could have added (the base's own history is searched once per
job, ``verify.history``). It is given explicit tips — for confirmation, the freshly fetched
remote branch only, never local branches (a local leftover must not count as published).

Claims are read under every prefix the job may have been written with (``job_prefixes``): the
prefix of the job's own commit, the configured one and the default ``Blog`` — a publication
that landed before ``trailer_prefix`` changed is still found, and never published twice.

Every commit there that claims the job's id is judged by the one verifier (``verify.commit``):

- a publication of the job's manifest (trailers *and* content) → the job is published;
- a publication of the same job id with other content → the key was used elsewhere for another
  request (``reused``): the job must stop, never publish a second commit with that id;
- anything else (copied trailers, a partial or padded commit) is no proof (``forged``): the job
  goes on and publishes its own commit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gitpub.core.manifest import Manifest
from gitpub.core.record import JobRecord
from gitpub.git.repo import Repository
from gitpub.git.walk import walk_since
from gitpub.proof import trailers
from gitpub.verify.commit import DEFAULT_PREFIX, Verdict, same_request, verify_commit


@dataclass(frozen=True)
class ProbeResult:
    published: str | None = None  # the commit that is the job's publication
    reused: Verdict | None = None  # a publication of the job id with other content
    forged: tuple[Verdict, ...] = ()  # claims of the job id that are no publication


def prefixes_claiming(message: bytes, job_id: str) -> tuple[str, ...]:
    """Every prefix ``P`` under which a reading of git finds ``P-Job-Id: <job_id>``."""
    found: dict[str, None] = {}
    for reading in trailers.Reading:
        for key, value in trailers.parse(message, reading):
            if value == job_id and key.lower().endswith("-job-id") and len(key) > 7:
                found[key[:-7]] = None
    return tuple(found)


def job_prefixes(repo: Repository, record: JobRecord, configured: str) -> tuple[str, ...]:
    """The prefixes a publication of the job may carry: its own commit's, the configured one
    and the default."""
    own: tuple[str, ...] = ()
    if record.local_commit is not None and repo.has_object(record.local_commit):
        own = prefixes_claiming(repo.commit(record.local_commit).message, record.job_id)
    return tuple(dict.fromkeys((*own, configured, DEFAULT_PREFIX)))


def judge_claims(repo: Repository, claims: Iterable[tuple[str, Sequence[str]]],
                 record: JobRecord, manifest: Manifest | None,
                 derived: frozenset[str]) -> ProbeResult:
    """Judge commits that may claim the job, given as (commit, prefixes to read it under):
    the first publication of the job's request wins; else the first publication of the id
    with other content is ``reused``; claims that are no publication are ``forged``."""
    forged: list[Verdict] = []
    reused: Verdict | None = None
    for sha, prefixes in claims:
        verdict = verify_commit(repo, sha, prefixes)
        if verdict is None or record.job_id not in verdict.job_ids:
            continue
        if not verdict.ok or verdict.job_id != record.job_id:
            forged.append(verdict)
        elif (record.manifest_sha256 is not None
              and verdict.manifest_sha256 == record.manifest_sha256) or same_request(
                manifest, verdict.manifest, derived):
            return ProbeResult(published=sha, forged=tuple(forged))
        elif reused is None:
            reused = verdict
    return ProbeResult(reused=reused, forged=tuple(forged))


def probe(repo: Repository, tips: Sequence[str], record: JobRecord, prefix: str, *,
          manifest: Manifest | None = None, derived: frozenset[str] = frozenset()
          ) -> ProbeResult:
    """Judge every commit reachable from ``tips`` and newer than the job's (first) base that
    claims the job's id. ``manifest`` is the job's own (to recognise the same request with other
    ``derived`` files, e.g. font subsets made from another article set); ``prefix`` is the
    configured trailer prefix (``job_prefixes`` adds the others)."""
    if record.manifest_sha256 is None:
        return ProbeResult()
    prefixes = job_prefixes(repo, record, prefix)
    walked = walk_since(repo, tips, record.first_base or record.base_commit)
    candidates = ((sha, prefixes) for sha, message in walked
                  if trailers.mentions_job_id(message, prefixes))
    return judge_claims(repo, candidates, record, manifest, derived)


def find_job_commit(
    repo: Repository, tips: Sequence[str], record: JobRecord, prefix: str
) -> str | None:
    """The commit reachable from ``tips`` and newer than the job's (first) base that is the
    job's publication (its trailers and its content: ``verify.commit``); None if none is."""
    return probe(repo, tips, record, prefix).published
