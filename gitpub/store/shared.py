"""The shared job store as this clone last fetched it, and how a job here relates to it.

The remote holds the truth about every job that reached delivery: ``refs/pub/jobs/<id>`` (the
job's latest state commit, the same objects as here, moved only by compare-and-swap) and
``refs/pub/archive`` (finished jobs, ``store.archive``). A fetch mirrors them under a tracking
prefix, ``refs/pub/remote/<remote>/`` (``git.storefetch``); this module reads that mirror
without the network:

- ``find``: a job by id — this clone's own ref (its working copy), else the remote's, else the
  archive's entry — so that a key names one job across every clone;
- ``relation``: how this clone's value of a job's ref relates to the remote's — the same, one
  ahead of the other (the older one is in the newer one's first-parent chain: the history of
  state commits), or diverged (two nodes recorded different states from a common past, or two
  clones created the job independently).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from enum import StrEnum
from typing import NamedTuple

from gitpub.core.errors import CorruptStateError, GitpubError
from gitpub.store.archive import ARCHIVE, Archive, Archived
from gitpub.store.jobs import JOBS_PREFIX, Job, JobStore

JOBS = "jobs/"
#: How far back a first-parent walk looks for the other value before asking C git.
WALK_LIMIT = 2000


class Relation(StrEnum):
    SAME = "same"
    REMOTE_AHEAD = "remote-ahead"  # the remote has states this clone has not seen: adopt them
    LOCAL_AHEAD = "local-ahead"  # this clone has states the remote has not seen yet (normal)
    DIVERGED = "diverged"  # neither contains the other: the remote's is the truth
    LOCAL_ONLY = "local-only"  # the remote has no such job (never delivered, or not fetched)
    REMOTE_ONLY = "remote-only"


class Where(StrEnum):
    LOCAL = "local"
    REMOTE = "remote"
    ARCHIVE = "archive"


class Found(NamedTuple):
    job: Job
    where: Where


class SharedView:
    """The tracking refs of one remote's job store, read through ``store``."""

    def __init__(self, store: JobStore, prefix: str, remote: str = "origin") -> None:
        self.store = store
        self.repo = store.repo
        self.prefix = prefix  # refs/pub/remote/<remote>/
        self.remote = remote  # the remote's name, for messages

    def load(self, job_id: str, sha: str) -> Job:
        """The job as the remote's ref records it (``sha``: its value as fetched). An
        unreadable one — another clone's damage, or a forgery — raises, naming the remote's
        ref and how to repair it: this clone's own state is not the damaged one."""
        try:
            return self.store.load_at(job_id, sha)
        except CorruptStateError as e:
            ref, tracking = f"{JOBS_PREFIX}{job_id}", self.remote_ref(job_id)
            raise CorruptStateError(
                f"job {job_id}: the remote's job ref {ref} is unreadable: "
                f"{e.message.split(' is unreadable: ', 1)[-1]}",
                hint=f"nothing was changed; inspect it with `git log -p {tracking}`, then "
                     f"repair it or delete it on the remote (`git push {self.remote} :{ref}`)"
            ) from None

    def remote_ref(self, job_id: str) -> str:
        return f"{self.prefix}{JOBS}{job_id}"

    def remote_value(self, job_id: str) -> str | None:
        """The remote's value of the job's ref as last fetched (None: no such job there)."""
        return self.repo.read_ref(self.remote_ref(job_id))

    def remote_ids(self) -> list[str]:
        return sorted(self.repo.list_refs(self.prefix + JOBS))

    def remote_job(self, job_id: str) -> Job | None:
        sha = self.remote_value(job_id)
        return None if sha is None else self.load(job_id, sha)

    def remote_jobs(self) -> Iterator[tuple[str, Job | CorruptStateError]]:
        """Every job of the remote's store (id, job), an unreadable one as its error."""
        for job_id, sha in sorted(self.repo.list_refs(self.prefix + JOBS).items()):
            try:
                yield job_id, self.load(job_id, sha)
            except CorruptStateError as e:
                yield job_id, e

    @property
    def archive_value(self) -> str | None:
        return self.repo.read_ref(self.prefix + ARCHIVE)

    def archive(self) -> Archive:
        return Archive(self.repo, self.archive_value)

    def archived(self, job_id: str) -> Archived | None:
        return self.archive().lookup(job_id)

    def archived_job(self, job_id: str) -> Job | None:
        """The job as the archive holds it (its final state, with its history), or None."""
        entry = self.archived(job_id)
        return None if entry is None else self.store.load_at(job_id, entry.state_commit)

    def archived_matching(self, prefix: str) -> list[str]:
        """The archived job ids that start with ``prefix`` (at least 4 characters)."""
        return self.archive().matching(prefix)

    def find(self, job_id: str) -> Found | None:
        """The job as this clone knows it: its own ref, else the remote's, else the archive
        (a crash during a fold may leave a job in a ref and in the archive: the ref is read
        first, so it is found once)."""
        local = self.store.load(job_id)
        if local is not None:
            return Found(local, Where.LOCAL)
        remote = self.remote_job(job_id)
        if remote is not None:
            return Found(remote, Where.REMOTE)
        archived = self.archived_job(job_id)
        if archived is not None:
            return Found(archived, Where.ARCHIVE)
        return None

    def relation(self, local: str | None, remote: str | None) -> Relation:
        if local == remote:
            return Relation.SAME if local is not None else Relation.LOCAL_ONLY
        if remote is None:
            return Relation.LOCAL_ONLY
        if local is None:
            return Relation.REMOTE_ONLY
        if self.descends(remote, local):
            return Relation.REMOTE_AHEAD
        if self.descends(local, remote):
            return Relation.LOCAL_AHEAD
        return Relation.DIVERGED

    def descends(self, newer: str, older: str) -> bool:
        """Whether state commit ``older`` is in ``newer``'s history (first parents first)."""
        if not self.repo.has_object(newer):
            return False
        with contextlib.suppress(GitpubError):
            for i, info in enumerate(self.repo.first_parent_chain(newer)):
                if info.sha == older:
                    return True
                if i >= WALK_LIMIT:
                    break
            else:
                return False
        return self.repo.git("merge-base", "--is-ancestor", older, newer).returncode == 0
