"""The archive: finished jobs folded into one ref, so the store keeps O(unfinished) job refs.

A finished job (PUBLISHED or SKIPPED — the two states no transition leaves — with its channels
settled) does not need a ref of its own forever: every fetch and push would advertise it, and
every listing of the store would grow with all of them. So finished jobs are *folded*, as
Gerrit's NoteDb and git-bug keep entities in git, into ``refs/pub/archive`` — on the remote, and
as its tracking ref here (``delivery.fold``). An archive commit's tree maps each job id to its
final record, fanned out like git notes::

    FORMAT                               "gitpub-archive v1"
    <id[0:2]>/<id[2:4]>/<id>/job.json    the job's final record (the very blob of its state)
    <id[0:2]>/<id[2:4]>/<id>/state       the id of its final state commit

Its first parent is the previous archive commit (``git log --first-parent refs/pub/archive``
is the history of folds, down to a root commit that holds only ``FORMAT``); its other parents
are the final state commits of the jobs it adds, which keeps every folded job's whole event
history reachable, on the remote and in every clone that fetched the archive: ``git pub log``
and ``status`` work for an archived job as for any other. The two fan-out levels keep each
tree small (256 entries, then a few), so a lookup reads four small trees whatever the
archive's size, and a fold writes O(jobs folded) objects.

An entry is replaced only by a newer state of the same job (its history contains the old one:
a job's channels settled on the clone that published it after another clone folded the job).
``job.json`` is read straight from the archive's tree, so a clone that fetched only the archive
commit (a shallow CI clone) still knows each job's final state without its history.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

from gitpub.core.errors import CorruptStateError
from gitpub.core.record import JobRecord, RecordError, parse_record
from gitpub.git.objects import is_object_id
from gitpub.git.repo import MODE_FILE, MODE_TREE, Entry, Repository

#: The archive's name below ``refs/pub/`` (on the remote; here below the tracking prefix).
ARCHIVE = "archive"
FORMAT = b"gitpub-archive v1\n"
FORMAT_FILE = "FORMAT"
_HEX = frozenset("0123456789abcdef")
_ID_CHARS = _HEX | {"-"}  # a job id is a UUID: anything else is never looked up


def archive_problem(repo: Repository, commit: str) -> str | None:
    """Why ``commit`` is no archive commit gitpub can read (not a commit, no ``FORMAT`` of a
    known format), or None."""
    try:
        _ = Archive(repo, commit).tree
    except CorruptStateError as e:
        return e.message
    return None


def entry_dir(job_id: str) -> str:
    return f"{job_id[0:2]}/{job_id[2:4]}/{job_id}"


class Archived(NamedTuple):
    """A folded job: its final state commit (``JobStore.load_at`` reads it with its history)
    and the blob of its final ``job.json``."""

    job_id: str
    state_commit: str
    record_blob: str


class Final(NamedTuple):
    """What a fold adds for one job: its final state commit and that state's ``job.json``."""

    job_id: str
    state_commit: str
    record_blob: str


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
                                        hint="inspect it with `git show` and `git ls-tree`; "
                                             "nothing was changed")
        return self._tree

    @property
    def parent(self) -> Archive | None:
        """The archive before the last fold (None: this is the first archive commit)."""
        if self.commit is None:
            return None
        parents = self.repo.commit(self.commit).parents
        return Archive(self.repo, parents[0]) if parents else None

    def lookup(self, job_id: str) -> Archived | None:
        """The folded job ``job_id``, or None when the archive does not hold it."""
        tree = self.tree
        if tree is None or len(job_id) < 4 or not set(job_id) <= _ID_CHARS:
            return None
        entry = self.repo.lookup(tree, entry_dir(job_id))
        if entry is None:
            return None
        return self._archived(job_id, entry)

    def _archived(self, job_id: str, entry: Entry) -> Archived:
        if entry.mode != MODE_TREE:
            raise self._corrupt(job_id, "is not a directory")
        items = dict(self.repo.tree_items(entry.sha))
        state, record = items.get("state"), items.get("job.json")
        if state is None or record is None or state.mode != MODE_FILE or \
                record.mode != MODE_FILE:
            raise self._corrupt(job_id, "lacks its state or job.json")
        sha = self.repo.blob(state.sha).decode("ascii", "replace").strip()
        if not is_object_id(sha):
            raise self._corrupt(job_id, f"names no state commit ({sha[:60]!r})")
        return Archived(job_id, sha, record.sha)

    def _corrupt(self, job_id: str, what: str) -> CorruptStateError:
        return CorruptStateError(f"the archive's entry of job {job_id} {what} (archive commit "
                                 f"{self.commit})", hint="inspect it with `git show` and "
                                                         "`git ls-tree`; nothing was changed")

    def record(self, entry: Archived) -> JobRecord:
        """The final record an entry holds, read from the archive's own tree."""
        try:
            record = parse_record(self.repo.blob(entry.record_blob))
        except RecordError as e:
            raise self._corrupt(entry.job_id, f"holds an unreadable job.json: {e}") from None
        if record.job_id != entry.job_id:
            raise self._corrupt(entry.job_id, f"holds the record of job {record.job_id!r}")
        return record

    def matching(self, prefix: str) -> list[str]:
        """The archived job ids starting with ``prefix`` (at least 4 characters: the fan-out
        is descended, never scanned)."""
        tree = self.tree
        if tree is None or len(prefix) < 4 or not set(prefix) <= _ID_CHARS:
            return []
        entry = self.repo.lookup(tree, f"{prefix[0:2]}/{prefix[2:4]}")
        if entry is None or entry.mode != MODE_TREE:
            return []
        return sorted(name for name, e in self.repo.tree_items(entry.sha)
                      if name.startswith(prefix) and e.mode == MODE_TREE)

    def changed(self, since: Archive | None) -> Iterator[Archived]:
        """The entries this archive adds or replaces against ``since`` (an earlier archive;
        None: every entry). Identical subtrees are skipped by id: the cost follows the change."""
        tree = self.tree
        if tree is None:
            return
        old = None if since is None else since.tree
        seen: set[str] = set()
        for path, new in self.repo.changed_paths(old, tree):
            parts = path.split("/")
            if new is None or len(parts) != 4 or parts[2] in seen:
                continue  # FORMAT, or an entry removed (a fold never removes one)
            seen.add(parts[2])
            found = self.lookup(parts[2])
            if found is not None:
                yield found

    def fold(self, finals: Sequence[Final], message: str) -> str:
        """A new archive commit on top of this one, holding ``finals`` (added, or replacing
        older states of the same jobs) and keeping their histories alive (the state commits
        are parents). Objects only: nothing points at it yet."""
        changes: dict[str, Entry | None] = {}
        with self.repo.batch():
            start = self.commit or self._root()
            for final in finals:
                base = entry_dir(final.job_id)
                changes[f"{base}/job.json"] = Entry(MODE_FILE, final.record_blob)
                changes[f"{base}/state"] = Entry(
                    MODE_FILE, self.repo.write_blob(f"{final.state_commit}\n".encode()))
            tree = self.repo.write_tree(Archive(self.repo, start).tree, changes)
            parents = [start, *dict.fromkeys(f.state_commit for f in finals)]
            return self.repo.write_commit(tree, parents, message.encode())

    def _root(self) -> str:
        """The archive's first commit: no entries, no parents. Every fold's first parent is
        then an archive commit, the first fold's too."""
        tree = self.repo.write_tree(None, {FORMAT_FILE: Entry(MODE_FILE,
                                                              self.repo.write_blob(FORMAT))})
        return self.repo.write_commit(tree, [], b"gitpub archive: finished jobs\n")
