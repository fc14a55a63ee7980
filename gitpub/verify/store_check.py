"""``confirm`` checks the remote's job store too: its records must agree with the branch.

The job store on the remote (``refs/pub/jobs/<id>``, ``refs/pub/archive``) is what every clone
believes about a job: a record that says PUBLISHED stops every writer from publishing that key
again, so a false one would silently drop an article, and a publication the store does not
record would let another clone publish it twice. Three rules, each a BAD verdict naming the
job and the commit when broken:

1. **every job commit in the range has its record** — the job's remote ref, else its archive
   entry. A record that says PUBLISHED must name this very commit; one that says SKIPPED (or
   any other state a job on the branch cannot be in: REVIEW, CONFLICT) contradicts the branch.
   A delivery still under way (PUSHING, RETRY_WAIT, FAILED, LOCAL_COMMITTED, IN_REVIEW: the
   outcome is not recorded yet) is reported as *pending*. A job commit with **no record at all** is
   *unrecorded*: published before the job store was shared, or its record was deleted. It is
   BAD unless the configuration at the range's start (the trusted one, as for the trailer
   prefix) says ``confirm_unrecorded: report`` — for a repository with publications from
   before the shared store — then it is listed in the remarks only;
2. **every remote job ref that says PUBLISHED names a verified commit on the branch** (a
   publication of that job, by ``verify.commit``, in the history of the branch's tip; for a
   job that went to review, a commit without trailers — a squash under the forge's message —
   may be it by content, ``verify.content``: exactly the manifest its state holds). Job refs
   are O(unfinished jobs) once finished ones are folded (``delivery.fold``); a commit checked in
   this run, or in the authentic job-id index of the notes, is not verified again;
3. **every archive entry a fold added since the last run that says PUBLISHED** names a verified
   commit on the branch: the archive's folds (its first-parent history) are walked back to the
   newest fold an authenticated run marked as checked (a note line with a MAC on the archive
   commit); without ``GITPUB_CONFIRM_KEY`` nothing is believed and every fold is walked.

So a run costs O(jobs in its range + the remote's job refs + entries folded since the last run),
never O(every job). In a shallow clone (CI) only the records are fetched (``--depth=1``), the
archive with its last fold; it is deepened only as far as the walk needs, and the branch is
deepened only for a record that names a commit this clone does not have and no authentic index
vouches for (a suspicious record: then it is worth the download).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from gitpub.config.model import Config
from gitpub.core.errors import CorruptStateError, GitpubError
from gitpub.core.record import JobRecord
from gitpub.core.states import State
from gitpub.git.objects import is_object_id
from gitpub.git.remote import Remote
from gitpub.git.repo import Repository
from gitpub.git.walk import shallow_commits
from gitpub.store.archive import ARCHIVE, Archive
from gitpub.store.fetch import Fetched, fetch_records, fetch_with_store
from gitpub.store.fetchdir import fetch_ref
from gitpub.store.jobs import JobStore
from gitpub.store.mirror import store_prefix
from gitpub.store.shared import JOBS, SharedView
from gitpub.verify import ledger as L
from gitpub.verify.commit import Verdict, verdict, verify_commit
from gitpub.verify.content import record_content_problems
from gitpub.verify.facts import Bad, Resolver

ARCHIVE_CHECKED = "gitpub-confirm: archive-checked"
#: States of a record whose delivery is under way: the outcome is not recorded yet.
PENDING = frozenset({State.PUSHING, State.RETRY_WAIT, State.FAILED, State.LOCAL_COMMITTED,
                     State.RECHECK_CANDIDATES, State.RECOVERING, State.IN_REVIEW})
#: How deep the archive's history is fetched at most in a shallow clone (folds, not jobs).
MAX_ARCHIVE_DEPTH = 4096
_EVERYTHING = 1 << 30  # --deepen: the whole history


class StoreCheck(NamedTuple):
    """What the store check adds to a confirm run."""

    verdicts: list[Verdict]  # the run's verdicts (some made BAD), then the store's own BAD ones
    notes: dict[str, list[str]]  # note lines to write
    remarks: list[str]


def fetch_store(remote: Remote, also: tuple[str, str]) -> Fetched | None:
    """The branch, the job store and ``also`` (remote ref, local ref) in one ``git fetch``,
    where the store check reads them so (a full clone: everything); None in a shallow clone,
    whose store is fetched apart, by depth (``check_store``)."""
    if shallow_commits(remote.repo):
        return None
    return fetch_with_store(remote, also)


def unrecorded_rule(config: Config | Bad, start: str | None, facts: Resolver) -> str:
    """``confirm_unrecorded`` as the configuration at the range's start says (the tip's,
    ``config``, when there is no trusted start); ``bad`` when that file cannot be read."""
    if start is None or not facts.repo.has_object(start):
        return "bad" if isinstance(config, Bad) else config.confirm_unrecorded
    found = facts.at(start)
    return "bad" if isinstance(found, Bad) else found.confirm_unrecorded


def check_store(repo: Repository, remote: Remote, *, tip: str, verdicts: Sequence[Verdict],
                prefixes: Sequence[str], unrecorded: str, key: L.Key | None,
                memory: L.Memory, fetched: Fetched | None = None,
                lineages: Sequence[str] = ()) -> StoreCheck:
    """The three rules of the module docstring over a fresh fetch of the remote's store.
    ``fetched``: the store was fetched already, in the same ``git fetch`` as the branch
    (``fetch_store``: ``confirm``'s one network round), and its refs are what that fetch left
    here; else it is fetched here. ``lineages``: whose acceptances count
    (``ledger.acceptance``)."""
    checker = _Checker(repo, remote, tip, prefixes, key, memory)
    checker.lineages = tuple(lineages)
    if fetched is None:
        checker.fetch()
    else:
        checker.store_tip = fetched.tip or tip
        checker.refs = fetched.store
    out = [checker.in_range(v, unrecorded) for v in verdicts]
    checker.published = {(v.job_id, v.commit) for v in out if v.ok}
    extra = checker.job_refs() + checker.archive()
    seen = {v.commit for v in out if not v.ok}
    for v in extra:
        if v.commit not in seen:
            seen.add(v.commit)
            out.append(v)
    return StoreCheck(out, checker.notes, checker.remarks)


class _Record(NamedTuple):
    """What the store says of one job, and where."""

    where: str
    record: JobRecord


class _Checker:
    def __init__(self, repo: Repository, remote: Remote, tip: str, prefixes: Sequence[str],
                 key: L.Key | None, memory: L.Memory) -> None:
        self.repo, self.remote, self.tip = repo, remote, tip
        self.prefixes, self.key, self.memory = prefixes, key, memory
        self.view = SharedView(JobStore(repo), store_prefix(remote))
        self.store_tip = tip
        #: The tracking store's refs as the fetch left them (name below ``refs/pub/``), when
        #: known; else read from the repository.
        self.refs: dict[str, str] | None = None
        self.lineages: tuple[str, ...] = ()
        self.published: set[tuple[str, str]] = set()
        self.notes: dict[str, list[str]] = {}
        self.remarks: list[str] = []
        self._problems: dict[tuple[str, str], str | None] = {}
        self._deepened = False
        self._archive_depth = 2  # the archive's history fetched so far (a shallow clone)

    # -- fetching ------------------------------------------------------------------------

    @property
    def shallow(self) -> bool:
        return bool(shallow_commits(self.repo))

    def fetch(self) -> None:
        """The remote's store: everything in a full clone (with the branch, in one fetch: the
        records and the tip agree); in a shallow one, the records and the archive's last fold."""
        if not self.shallow:
            self.store_tip = fetch_with_store(self.remote).tip or self.tip
            return
        fetch_records(self.remote, depth=2)

    def _deepen_archive(self, depth: int) -> None:
        fetch_records(self.remote, depth=depth, jobs=False)

    def _deepen_branch(self) -> None:
        if self._deepened or not self.shallow:
            return
        self._deepened = True
        fetch_ref(self.remote, f"refs/heads/{self.remote.branch}", self.remote.tracking_ref,
                              deepen=_EVERYTHING)

    # -- rule 1: the range's job commits have their records --------------------------------

    def _job_refs(self) -> dict[str, str]:
        if self.refs is None:
            return self.repo.list_refs(self.view.prefix + JOBS)
        return {name[len(JOBS):]: sha for name, sha in self.refs.items()
                if name.startswith(JOBS)}

    def _archive(self) -> Archive:
        if self.refs is None:
            return self.view.archive()
        return Archive(self.repo, self.refs.get(ARCHIVE))

    def record_of(self, job_id: str) -> _Record | None:
        sha = self.view.remote_value(job_id) if self.refs is None else \
            self.refs.get(JOBS + job_id)
        if sha is not None:
            job = self.view.store.load_at(job_id, sha)
            return _Record(f"its job ref refs/pub/jobs/{job_id}", job.record)
        archive = self._archive()
        entry = archive.lookup(job_id)
        if entry is None:
            return None
        return _Record("its archive entry", archive.record(entry))

    def in_range(self, v: Verdict, unrecorded: str) -> Verdict:
        if not v.ok:
            return v
        try:
            found = self.record_of(v.job_id)
        except CorruptStateError as e:
            return self._bad(v, f"the remote's record of the job is unreadable: {e.message}")
        if found is None:
            what = (f"job {v.job_id} has no record in the remote's job store (no job ref "
                    "refs/pub/jobs/<id>, no archive entry)")
            if unrecorded == "report":
                self.remarks.append(f"unrecorded: {v.commit} publishes job {v.job_id}, which "
                                    "has no job ref and no archive entry on the remote")
                return v
            return self._bad(v, what)
        record = found.record
        if record.state == State.PUBLISHED:
            if record.remote_commit == v.commit:
                return v
            return self._bad(v, f"{found.where} says it was published by "
                                f"{record.remote_commit}, not by this commit")
        if record.state in PENDING:
            self.remarks.append(f"pending: job {v.job_id} is on the branch ({v.commit}); "
                                f"{found.where} still says {record.state.value} (its next "
                                "delivery run or reconcile records PUBLISHED)")
            return v
        return self._bad(v, f"{found.where} says {record.state.value}"
                            f"{_code(record)}, but the job's commit is on the branch")

    @staticmethod
    def _bad(v: Verdict, problem: str) -> Verdict:
        return verdict(v.commit, v.job_id, [*v.problems, problem], v.manifest_sha256,
                       v.manifest)

    # -- rules 2 and 3: PUBLISHED records name verified commits ----------------------------

    def job_refs(self) -> list[Verdict]:
        out = []
        for job_id, sha in sorted(self._job_refs().items()):
            try:
                record = self.view.store.load_at(job_id, sha).record
            except CorruptStateError as e:
                self.remarks.append(f"the remote's job ref of job {job_id} is unreadable: "
                                    f"{e.message}")
                continue
            if record.state == State.PUBLISHED:
                out += self._claim(job_id, record, f"the remote's job ref refs/pub/jobs/{job_id}",
                                   sha)
        return out

    def archive(self) -> list[Verdict]:
        """Walk the archive's folds back to the newest one marked checked (rule 3)."""
        archive = self._archive()
        if archive.commit is None:
            return []
        out: list[Verdict] = []
        current: Archive | None = archive
        while current is not None and current.commit is not None:
            if self._marked(current.commit):
                break
            parent = self._parent(current.commit)
            for entry in current.changed(parent):
                record = current.record(entry)
                if record.state == State.PUBLISHED:
                    out += self._claim(entry.job_id, record, "the remote's archive entry",
                                       entry.state_commit)
            current = parent
        if self.key is not None:
            self.notes.setdefault(archive.commit, []).append(self._mark(archive.commit))
        return out

    def _parent(self, commit: str) -> Archive | None:
        """The archive before fold ``commit`` (None: it is the first), its history deepened
        in a shallow clone until it is here (at most ``MAX_ARCHIVE_DEPTH`` folds: beyond,
        the fold is judged whole)."""
        parents = self.repo.commit(commit).parents
        if not parents:
            return None
        while not self.repo.has_object(parents[0]) and self.shallow and \
                self._archive_depth < MAX_ARCHIVE_DEPTH:
            self._archive_depth = min(self._archive_depth * 4, MAX_ARCHIVE_DEPTH)
            self._deepen_archive(self._archive_depth)
        return Archive(self.repo, parents[0]) if self.repo.has_object(parents[0]) else None

    def _mark(self, commit: str) -> str:
        assert self.key is not None
        return f"{ARCHIVE_CHECKED} [mac {self.key.mac('archive-checked', commit)}]"

    def _marked(self, commit: str) -> bool:
        if self.key is None:
            return False
        return self._mark(commit) in L.note_lines(self.repo, commit, self.memory, None)

    def _claim(self, job_id: str, record: JobRecord, where: str, state: str) -> list[Verdict]:
        commit = record.remote_commit or ""
        problem = self._problem(job_id, commit, record, state)
        if problem is None:
            return []
        shown = commit if _is_sha(commit) else state
        if self.key is not None and shown in self.memory.ledger.open_bad:
            return []  # open already: this run names it among the open verdicts
        if L.acceptance(self.key, shown, L.note_lines(self.repo, shown, self.memory, None),
                        self.lineages):
            return []
        return [verdict(shown, job_id, [f"{where} says PUBLISHED by {commit or 'no commit'}, "
                                        f"which {problem}"])]

    def _problem(self, job_id: str, commit: str, record: JobRecord, state: str) -> str | None:
        """Why ``commit`` is not a verified publication of ``job_id`` on the branch (None: it
        is, or it came after this run's tip and is the next run's). ``state``: the record's
        state commit."""
        if (job_id, commit) in self.published:
            return None
        if (job_id, commit) not in self._problems:
            self._problems[(job_id, commit)] = self._check(job_id, commit, record, state)
        return self._problems[(job_id, commit)]

    def _check(self, job_id: str, commit: str, record: JobRecord, state: str) -> str | None:
        if not _is_sha(commit):
            return "is no commit id"
        if self.key is not None:
            names = L.note_lines(self.repo, L.job_key(job_id, self.repo.object_format),
                                 self.memory, None)
            if commit in L.published_by(self.key, job_id, names):
                return None  # an authenticated run verified it
        if not self.repo.has_object(commit):
            self._deepen_branch()
        if not self.repo.has_object(commit) or not self._ancestor(commit, self.store_tip):
            return "is not on the branch"
        parents = self.repo.commit(commit).parents
        if parents and not self.repo.has_object(parents[0]):
            self._deepen_branch()  # what it changes is judged against its parent
        if not self._ancestor(commit, self.tip):
            self.remarks.append(f"job {job_id}: published by {commit} after this run's tip: "
                                "the next run checks it")
            return None
        try:
            found = verify_commit(self.repo, commit, self.prefixes)
        except CorruptStateError as e:
            return f"cannot be read here ({e.message})"
        if found is None and record.review is not None:
            return self._by_content(job_id, commit, record, state)
        if found is None:
            return "claims no job"
        if found.job_id != job_id:
            return f"is the publication of job {found.job_id}"
        if not found.ok:
            return f"is not a verified publication: {'; '.join(found.problems)}"
        return None

    def _by_content(self, job_id: str, commit: str, record: JobRecord,
                    state: str) -> str | None:
        """A job that went to review may be published by a commit without its trailers (a
        squash under the forge's message): then its content must be exactly the job's
        manifest's (``verify.content``), the manifest read from the record's own state."""
        try:
            job = self.view.store.load_at(job_id, state)
            raw = self.view.store.read_file(job, "manifest")
            problems = record_content_problems(self.repo, commit, record, raw)
        except GitpubError as e:
            return f"claims no job, and the job's state cannot be read here ({e.message})"
        if problems:
            return f"claims no job and is not its publication by content: {'; '.join(problems)}"
        return None

    def _ancestor(self, commit: str, tip: str) -> bool:
        return self.repo.git("merge-base", "--is-ancestor", commit, tip).returncode == 0


def _is_sha(text: str) -> bool:
    return is_object_id(text)


def _code(record: JobRecord) -> str:
    return "" if record.failure_code is None else f" ({record.failure_code})"
