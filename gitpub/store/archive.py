"""The archive: finished jobs folded into one ref, so the store keeps O(unfinished) job refs.

A finished job (PUBLISHED or SKIPPED, its channels settled) does not need a ref of its own
forever: every fetch and push would advertise it, and reading one ref would grow with all of
them. So finished jobs are *folded*, as Gerrit's NoteDb and git-bug keep entities in git, into
``refs/pub/archive`` — on the remote, and as its tracking ref here. An archive commit's tree
maps each job id to its final record::

    <id[0:2]>/<id[2:4]>/<id>/job.json    the job's final record (the very blob of its state)
    <id[0:2]>/<id[2:4]>/<id>/state       the id of its final state commit

and its parents are the previous archive commit (first parent: ``git log --first-parent
refs/pub/archive`` is the history of folds) and the final state commits of the jobs it folds,
which keeps every folded job's whole event history reachable: ``git pub log`` and ``status``
work for an archived job as for any other. The two-level fan-out keeps each tree small, so a
fold writes O(jobs folded) objects and a lookup reads three small trees, whatever the archive's
size. Format version 1 is the layout above; ``FORMAT`` at the tree's root says it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gitpub.core.errors import CorruptStateError
from gitpub.git.repo import MODE_FILE, Entry, Repository

#: The archive's name below ``refs/pub/`` (on the remote; here below the tracking prefix).
ARCHIVE = "archive"
FORMAT = b"gitpub-archive v1\n"
FORMAT_FILE = "FORMAT"


def entry_dir(job_id: str) -> str:
    return f"{job_id[0:2]}/{job_id[2:4]}/{job_id}"


@dataclass(frozen=True)
class Archived:
    """A folded job: its final state commit (read it with ``JobStore.load_at``)."""

    job_id: str
    state_commit: str


class Archive:
    """One archive commit (None: no archive yet), read and extended."""

    def __init__(self, repo: Repository, commit: str | None) -> None:
        self.repo = repo
        self.commit = commit
        self._tree: str | None = None

    @property
    def tree(self) -> str | None:
        if self.commit is None:
            return None
        if self._tree is None:
            self._tree = self.repo.commit(self.commit).tree
            entry = self.repo.lookup(self._tree, FORMAT_FILE)
            if entry is None or self.repo.blob(entry.sha) != FORMAT:
                raise CorruptStateError(f"archive commit {self.commit} has no {FORMAT_FILE} "
                                        "of a known format",
                                        hint="inspect `git show refs/pub/archive`")
        return self._tree

    def lookup(self, job_id: str) -> Archived | None:
        """The folded job ``job_id``, or None when the archive does not hold it."""
        tree = self.tree
        if tree is None:
            return None
        entry = self.repo.lookup(tree, f"{entry_dir(job_id)}/state")
        if entry is None:
            return None
        sha = self.repo.blob(entry.sha).decode("ascii", "replace").strip()
        if len(sha) != 40 or not self.repo.has_object(sha):
            raise CorruptStateError(f"archive entry of job {job_id} names no state commit "
                                    f"({sha[:60]!r})")
        return Archived(job_id, sha)

    def fold(self, finals: Sequence[tuple[str, str, str]], message: str) -> str:
        """A new archive commit on top of this one, adding ``finals`` — (job id, final state
        commit, the blob id of its ``job.json``) each — and keeping their histories alive (the
        state commits are parents). Objects only: nothing points at it yet."""
        changes: dict[str, Entry | None] = {FORMAT_FILE: Entry(MODE_FILE,
                                                               self.repo.write_blob(FORMAT))}
        for job_id, state, record_blob in finals:
            base = entry_dir(job_id)
            changes[f"{base}/job.json"] = Entry(MODE_FILE, record_blob)
            changes[f"{base}/state"] = Entry(MODE_FILE,
                                             self.repo.write_blob(f"{state}\n".encode()))
        with self.repo.batch():
            tree = self.repo.write_tree(self.tree, changes)
            parents = ([] if self.commit is None else [self.commit]) + [s for _, s, _ in finals]
            return self.repo.write_commit(tree, parents, message.encode())
