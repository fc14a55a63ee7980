"""The probe: is a job published? Search the remote branch for the job's proof.

The search is bounded by the job's base: it walks only the commits after the (first) base, the
ones a rebase or another writer could have added. It is given explicit tips — for
confirmation, the freshly fetched remote branch only, never local branches (a local leftover
must not count as published).
"""

from __future__ import annotations

from collections.abc import Sequence

from gitpub.core.record import JobRecord
from gitpub.git import trailers
from gitpub.git.repo import Repository
from gitpub.git.walk import walk_since


def find_job_commit(
    repo: Repository, tips: Sequence[str], record: JobRecord, prefix: str
) -> str | None:
    """A commit reachable from ``tips`` and newer than the job's (first) base that carries both
    the job's id and manifest hash; None if there is none."""
    if record.manifest_sha256 is None:
        return None
    for info_sha, message in walk_since(repo, tips, record.first_base or record.base_commit):
        proof = trailers.read_pub_trailers(message, prefix)
        if (proof is not None and proof.job_id == record.job_id
                and proof.manifest_sha256 == record.manifest_sha256):
            return info_sha
    return None
