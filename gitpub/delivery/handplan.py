"""Planning ``git pub sync``: what becomes of each unpushed commit, decided before anything is done.

``sync`` delivers a person's commits whole, or leaves the branch, the index and the working tree
exactly as they were. So it decides first, on git objects only, and acts only on a plan whose
every step is known to hold (git-branchless's plan-then-execute):

1. **What is pending**: the local branch's commits that the remote branch does not have
   (``git rev-list --topo-order LOCAL ^REMOTE``), oldest first; and the uncommitted changes under
   content paths, as one more commit built from a private index (the real index and the branch
   are not touched while planning).
2. **What each commit is**: *content* — every path it changes is a content path — is delivered;
   *held* — it changes no content path — is the person's business: not pushed, kept on the
   branch; *refused* — a merge, a root commit, a commit that mixes content with other paths, a
   submodule under a content path, a path every job is refused (git's path rules, a secret in
   the name, outside the ``publish`` write scope), a message that cannot carry the proof as git
   reads it — is a commit sync will not handle.
3. **Whether it lands**: the content commits are replayed in memory, in order, onto the fetched
   remote tip. Every path a commit changes must still be as the commit's parent had it —
   content *and* mode (the compare-and-swap) — and the new tree must differ from the old in
   exactly the commit's paths (no file or directory in the way). The held commits are then
   replayed onto that: the local branch's next tree. And the worktree that has the branch
   checked out must be able to follow (a dry run of the two-tree merge).

A refusal, a conflict, a job that needs a person, or a checkout that cannot follow stops the
plan: nothing is delivered and nothing is touched, and every commit gets its reason. Commits an
earlier run delivered (their job is PUBLISHED) are done; jobs of earlier runs not yet confirmed
are counted as landing (their own delivery re-checks them).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum

from gitpub.core.errors import UsageError
from gitpub.core.manifest import Manifest
from gitpub.core.states import LOCAL, Kind, State
from gitpub.delivery.checkout import blocker
from gitpub.git import paths as git_paths
from gitpub.git.objects import is_object_id
from gitpub.git.repo import BLOB_MODES, MODE_TREE, Change, Entry, Repository
from gitpub.pipeline.request import Request, check_target
from gitpub.proof.message import ProofMessageError, with_proof
from gitpub.proof.trailers import PubTrailers
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job, job_id_for_key

#: More unpushed commits than this are not a hand edit: sync leaves them to a person.
MAX_COMMITS = 500


class Role(StrEnum):
    CONTENT = "content"  # every path it changes is a content path: delivered
    HELD = "held"  # no content path: the person's business, kept on the branch
    REFUSED = "refused"  # a commit sync will not handle


class Status(StrEnum):
    """What became of a commit (``--json``: ``commits[].status``)."""

    PUBLISHED = "published"  # on the remote branch with its proof (this run or an earlier one)
    DELIVER = "deliver"  # planned for delivery (the plan's word; a result says what came of it)
    PENDING = "pending"  # its job is not confirmed yet: run again later
    HELD = "held"  # touches only non-content paths: not pushed, kept on the local branch
    REFUSED = "refused"  # sync will not handle this commit: a person must
    CONFLICT = "conflict"  # a path it changes changed on the remote
    REVIEW = "review"  # its job did not pass the gates
    BLOCKED = "blocked"  # not delivered because another commit or the checkout stops sync

    @property
    def stops(self) -> bool:
        return self in (Status.REFUSED, Status.CONFLICT, Status.REVIEW)

    @property
    def needs_person(self) -> bool:
        return self.stops or self == Status.BLOCKED


@dataclass(frozen=True)
class Unpushed:
    """One pending commit, as sync sees it."""

    sha: str
    parent: str | None
    subject: str
    changes: tuple[Change, ...]
    role: Role
    reason: str = ""
    uncommitted: bool = False  # built by sync from the working tree; not on the branch yet

    @property
    def key(self) -> str:
        return f"sync:{self.sha}"

    @property
    def job_id(self) -> str:
        return job_id_for_key(self.key)


@dataclass(frozen=True)
class Outcome:
    """A commit's line in the report (``--json``: one object of ``commits``)."""

    commit: str
    subject: str
    status: Status
    reason: str
    job_id: str | None = None
    remote_commit: str | None = None
    uncommitted: bool = False

    def public(self) -> dict[str, object]:
        return {"commit": self.commit, "subject": self.subject, "status": str(self.status),
                "reason": self.reason, "job_id": self.job_id,
                "remote_commit": self.remote_commit, "uncommitted": self.uncommitted}


@dataclass(frozen=True)
class Plan:
    local: str | None  # the local branch tip it was planned from
    tip: str | None  # the remote tip it was planned against
    commits: tuple[Unpushed, ...] = ()
    outcomes: tuple[Outcome, ...] = ()  # one per commit, same order
    stop: str | None = None  # why nothing is done; None: go
    local_tree: str | None = None  # the tree the local branch gets once every commit landed

    @property
    def rebuild(self) -> bool:
        """Whether the local branch is to be rebuilt on the remote (some content commit of it
        is, or will be, on the remote)."""
        return any(c.role == Role.CONTENT for c in self.commits)


# -- 1. what is pending ------------------------------------------------------------------------

def _git_out(repo: Repository, *args: str) -> str | None:
    proc = repo.git(*args)
    return proc.stdout.decode("utf-8", "surrogateescape") if proc.returncode == 0 else None


def unpushed(repo: Repository, local: str, tip: str) -> list[tuple[str, tuple[str, ...]]] | None:
    """(commit, parents) of every commit of ``local`` that ``tip`` lacks, oldest first; None
    when there are more than ``MAX_COMMITS``. One ``rev-list`` (it stops past that many), and
    one per pair of commits in a command: the answer never changes (commits are immutable)."""
    known: dict[tuple[str, str], list[tuple[str, tuple[str, ...]]] | None] = \
        vars(repo).setdefault("_unpushed", {})
    if (local, tip) in known:
        rows = known[(local, tip)]
        return None if rows is None else list(rows)
    # --max-count applies before --reverse: the newest MAX_COMMITS + 1 of the range, enough
    # to tell that there are too many
    out = _git_out(repo, "rev-list", "--reverse", "--topo-order", "--parents",
                   f"--max-count={MAX_COMMITS + 1}", local, f"^{tip}")
    if out is None:
        return None  # git cannot walk it (as before: no answer, not kept)
    found = [(row[0], tuple(row[1:])) for row in (line.split() for line in out.splitlines()
                                                   if line.strip())]
    known[(local, tip)] = None if len(found) > MAX_COMMITS else found
    return None if len(found) > MAX_COMMITS else list(found)


#: How many of the remote-tracking branch's newest reflog entries ``removed_from_remote`` reads.
REFLOG_ENTRIES = 1000


def removed_from_remote(repo: Repository, tracking: str, tip: str,
                        candidates: list[str]) -> frozenset[str]:
    """The ``candidates`` (commits the remote branch lacks) that an earlier value of the
    remote-tracking branch had, by its reflog: they were on the remote and somebody removed
    them since (a force push). ``git pull --rebase`` drops such commits (``--fork-point``)
    rather than bring them back; sync must not publish them again either."""
    if not candidates:
        return frozenset()
    # the reflog as git reads it, whatever the ref backend (files or reftable); git passes
    # over entries whose commits are gone, and a ref without a reflog gives its value alone
    out = _git_out(repo, "rev-list", "--walk-reflogs", f"--max-count={REFLOG_ENTRIES}",
                   tracking, "--")
    seen = {sha for sha in (out or "").split()
            if is_object_id(sha) and sha.strip("0") and sha != tip}
    old = sorted(sha for sha in seen if repo.has_object(sha))
    if not old:
        return frozenset()
    out = _git_out(repo, "rev-list", *old, f"^{tip}")
    return frozenset(candidates) & frozenset((out or "").split())


def subject_of(message: bytes, encoding: str | None = None) -> str:
    """The first line, decoded as the commit says it is encoded (git's default: UTF-8)."""
    line = message.split(b"\n", 1)[0]
    try:
        return line.decode(encoding or "utf-8").strip()
    except (LookupError, UnicodeDecodeError):
        return line.decode("utf-8", "replace").strip()


#: What gitpub adds to a hand commit's message (the manifest paragraph, the proof trailers):
#: printable ASCII, newlines and tabs. In the commit's encoding these bytes must read as
#: themselves, or git (which re-encodes the message to read it) finds no proof.
_ADDED = bytes(range(0x20, 0x7F)) + b"\n\t"


def encoding_problem(encoding: str | None) -> str | None:
    """Why a message in ``encoding`` (the commit's ``encoding`` header) cannot carry the proof:
    an encoding unknown here (git might read it otherwise than gitpub), or one in which ASCII
    bytes are other characters (IBM037, UTF-16, UTF-7...). None: UTF-8 or ASCII-compatible."""
    if encoding is None:
        return None
    hint = ("re-commit its changes with a UTF-8 message (for the last commit: `git reset "
            "--soft HEAD^`, then `git commit` without i18n.commitEncoding), or push it yourself")
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        return (f"its message is in the encoding {encoding!r}, unknown to gitpub: the proof it "
                f"adds could not be read back as git reads it; {hint}")
    try:
        same = _ADDED.decode(name) == _ADDED.decode("ascii")
    except (UnicodeDecodeError, ValueError):
        same = False
    if not same:
        return (f"its message is in the encoding {encoding!r}, in which ASCII text is other "
                f"characters: the proof gitpub adds (ASCII) would not read as a proof; {hint}")
    return None


def _shown(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


def classify(ctx: Context, sha: str, parents: tuple[str, ...], *,
             uncommitted: bool = False) -> Unpushed:
    """Content, held or refused (with the reason), from the commit alone."""
    repo = ctx.repo
    info = repo.commit(sha)
    subject = subject_of(info.message, info.encoding)

    def refused(reason: str, changes: tuple[Change, ...] = ()) -> Unpushed:
        return Unpushed(sha, parents[0] if parents else None, subject, changes, Role.REFUSED,
                        reason)

    if len(parents) > 1:
        return refused("a merge commit: sync delivers a line of commits; rebase it onto the "
                       "remote branch (`git rebase`) or push it yourself")
    if not parents:
        return refused("a root commit: it shares no history with the remote branch")
    problem = encoding_problem(info.encoding)
    if problem is not None:
        return refused(problem)
    changes = tuple(repo.diff_entries(repo.commit(parents[0]).tree, info.tree))
    problem = _named_in_encoding(info.encoding, [c.path for c in changes])
    if problem is not None:
        return refused(problem, changes)
    return judge(ctx, sha, parents[0], subject, changes, uncommitted=uncommitted)


def _named_in_encoding(encoding: str | None, paths: list[str]) -> str | None:
    """Why the manifest paragraph gitpub adds cannot name ``paths`` in a message stored in
    ``encoding`` (an ASCII-compatible one other than UTF-8): it names each path in UTF-8, and
    git, re-encoding the message to read it, shows a path that is not ASCII as other
    characters (``naïve`` as ``naÃ¯ve``): no proof. None: nothing to fear."""
    if encoding is None or codecs.lookup(encoding).name == "utf-8":
        return None
    wide = [p for p in paths if not p.isascii()]
    if not wide:
        return None
    return (f"its message is in the encoding {encoding!r} and it changes paths that are not "
            f"ASCII ({_shown(wide)}): the manifest gitpub adds names them in UTF-8, which git "
            "would read as other characters; re-commit its changes with a UTF-8 message (for "
            "the last commit: `git reset --soft HEAD^`, then `git commit` without "
            "i18n.commitEncoding), or push it yourself")


def judge(ctx: Context, sha: str, parent: str, subject: str, changes: tuple[Change, ...], *,
          uncommitted: bool = False) -> Unpushed:
    """Content, held or refused, by the paths a commit of ``parent`` changes and their
    entries (``classify``; ``sync --dry-run`` judges the uncommitted changes so, unbuilt)."""
    config = ctx.config

    def refused(reason: str, changes: tuple[Change, ...] = ()) -> Unpushed:
        return Unpushed(sha, parent, subject, changes, Role.REFUSED, reason,
                        uncommitted=uncommitted)

    content = [c.path for c in changes if config.is_content(c.path)]
    others = [c.path for c in changes if not config.is_content(c.path)]
    if not content:
        reason = (f"touches only non-content paths ({_shown(others)})" if others
                  else "changes no file")
        return Unpushed(sha, parent, subject, changes, Role.HELD,
                        reason + ": not pushed, kept on the local branch (push it yourself)",
                        uncommitted=uncommitted)
    if others:
        return refused(f"mixes content paths ({_shown(content)}) with other paths "
                       f"({_shown(others)}): sync delivers a commit whole or not at all; "
                       "split it (`git rebase -i`, `edit`) or push it yourself", changes)
    probe = Request((), (), False, kind=Kind.SYNC)
    for c in changes:
        entry = c.new or c.old
        if entry is not None and entry.mode not in BLOB_MODES:
            return refused(f"{c.path}: a submodule or other non-file entry ({entry.mode:o}) "
                           "cannot be published", changes)
        try:  # the rules every job's paths obey: git's, no secret in a name, the write scope
            check_target(probe, config, c.path)
        except UsageError as e:
            return refused(f"{e.message}" + (f" ({e.hint})" if e.hint else ""), changes)
    return Unpushed(sha, parent, subject, changes, Role.CONTENT, uncommitted=uncommitted)


# -- 3. whether it lands ------------------------------------------------------------------------

def _file_entry(repo: Repository, tree: str, path: str) -> Entry | None:
    entry = repo.lookup(tree, path)
    return None if entry is None or entry.mode == MODE_TREE else entry


def replay(repo: Repository, tree: str, changes: tuple[Change, ...]) -> tuple[str | None,
                                                                            list[str]]:
    """``changes`` applied to ``tree``: (the new tree, []) when every path is still as the
    change expects and nothing else changes, else (None, what stands in the way): also a tree
    on the way to them that ``git fsck`` refuses (rebuilt, it would change more)."""
    unsound = repo.unsound_trees(tree, [c.path for c in changes])
    if unsound:
        return None, [f"the remote's {p} (git fsck refuses it; repair the branch first)"
                      for p in unsound]
    problems = cas_problems(changes, lambda path: _file_entry(repo, tree, path))
    if problems:
        return None, problems
    wanted = {c.path: c.new for c in changes}
    try:
        new_tree = repo.write_tree(tree, wanted)
    except ValueError as e:
        return None, [str(e)]
    actual = {d.path: d.new for d in repo.diff_entries(tree, new_tree)}
    if actual != wanted:
        paths = sorted(p for p in actual.keys() | wanted.keys() if actual.get(p) != wanted.get(p)
                       or (p in actual) != (p in wanted))
        return None, [f"{p}: a file or directory of the remote is in the way" for p in paths]
    return new_tree, []


def cas_problems(changes: tuple[Change, ...], now: Callable[[str], Entry | None]) -> list[str]:
    """The compare-and-swap of ``changes`` against the files as ``now`` has them: what stands
    in the way (every path must still be as the change's parent had it, content and mode)."""
    problems = []
    for c in changes:
        entry = now(c.path)
        if entry == c.old:
            continue
        if c.old is None:
            problems.append(f"{c.path}: created on the remote meanwhile")
        elif entry is None:
            problems.append(f"{c.path}: deleted (or made a directory) on the remote meanwhile")
        elif entry.sha == c.old.sha:
            problems.append(f"{c.path}: its mode changed on the remote ({c.old.mode:o} -> "
                            f"{entry.mode:o})")
        else:
            problems.append(f"{c.path}: changed on the remote meanwhile")
    return problems


def case_twins(repo: Repository, tree: str, changes: tuple[Change, ...]) -> list[str]:
    """The paths ``changes`` add to ``tree`` (the tree with them applied) that another path
    of it differs from only in case: one file on case-insensitive file systems. (A case-only
    rename is none: the old name is gone from ``tree``.)"""
    return [f"{c.path} and {', '.join(twins)} differ only in case (one file on "
            "case-insensitive file systems): rename one (`git mv`), then sync again"
            for c in changes if c.old is None and c.new is not None
            and (twins := git_paths.case_twins_in(repo, tree, c.path))]


def proof_problem(ctx: Context, commit: Unpushed) -> str | None:
    """Why the commit's message cannot carry the proof (``proof.message``), or None."""
    repo = ctx.repo
    manifest = Manifest.build(
        [(c.path, c.new.mode, repo.blob(c.new.sha)) for c in commit.changes if c.new],
        deleted=[c.path for c in commit.changes if c.new is None])
    proof = PubTrailers(commit.job_id, manifest.sha256(), commit.parent, ctx.config.node,
                        commit.sha)
    try:
        with_proof(repo.commit(commit.sha).message, manifest.serialize(), proof,
                   ctx.config.trailer_prefix)
    except (ProofMessageError, ValueError) as e:
        return f"its message cannot carry gitpub's proof: {e}; reword it (`git rebase -i`)"
    return None


def job_status(job: Job) -> tuple[Status, str]:
    state = job.state
    if state == State.PUBLISHED:
        return Status.PUBLISHED, f"published as {job.record.remote_commit}"
    if state == State.REVIEW:
        return Status.REVIEW, f"job {job.job_id} is in REVIEW: {job.record.failure_detail}"
    if state == State.CONFLICT:
        return Status.CONFLICT, f"job {job.job_id} is in CONFLICT: {job.record.failure_detail}"
    if state == State.SKIPPED:
        return Status.REFUSED, (f"its job {job.job_id} was given up "
                                f"({job.record.failure_code}): drop the commit or push it "
                                "yourself")
    if state in LOCAL or state == State.LOCAL_COMMITTED:
        return Status.DELIVER, f"job {job.job_id} ({state.value})"
    return Status.PENDING, (f"job {job.job_id} is {state.value}: "
                            f"{job.record.failure_detail or 'not confirmed yet'}")


def _outcome(commit: Unpushed, status: Status, reason: str, job: Job | None = None) -> Outcome:
    return Outcome(commit.sha, commit.subject, status, reason,
                   None if job is None else job.job_id,
                   None if job is None else job.record.remote_commit, commit.uncommitted)


def plan(ctx: Context, local: str, tip: str, commits: list[Unpushed]) -> Plan:
    """Decide what becomes of ``commits`` (the branch at ``local`` against the remote ``tip``)."""
    repo, store = ctx.repo, ctx.store
    outcomes: list[Outcome] = []
    tree: str | None = repo.commit(tip).tree
    stop: list[str] = []
    for commit in commits:
        if commit.role == Role.HELD:
            outcomes.append(_outcome(commit, Status.HELD, commit.reason))
            continue
        if commit.role == Role.REFUSED:
            outcomes.append(_outcome(commit, Status.REFUSED, commit.reason))
            stop.append(f"{commit.sha[:12]} is refused")
            tree = None
            continue
        job = store.load(commit.job_id)
        status, reason = (Status.DELIVER, "") if job is None else job_status(job)
        if status == Status.PUBLISHED or status.stops:
            outcomes.append(_outcome(commit, status, reason, job))
            if status.stops:
                stop.append(f"{commit.sha[:12]} needs a person")
                tree = None
            continue
        problem = proof_problem(ctx, commit) if job is None else None
        if problem is not None:
            outcomes.append(_outcome(commit, Status.REFUSED, problem))
            stop.append(f"{commit.sha[:12]} is refused")
            tree = None
            continue
        if tree is None:  # behind a stop: it cannot be replayed, and is not delivered
            outcomes.append(_outcome(commit, status, reason, job))
            continue
        new_tree, problems = replay(repo, tree, commit.changes)
        if new_tree is None:
            outcomes.append(_outcome(commit, Status.CONFLICT, "; ".join(problems) + (
                ": bring the remote's changes in (`git pull --rebase`), then sync again"), job))
            stop.append(f"{commit.sha[:12]} conflicts with the remote")
            tree = None
            continue
        twins = case_twins(repo, new_tree, commit.changes)
        if twins:
            outcomes.append(_outcome(commit, Status.REFUSED, "; ".join(twins), job))
            stop.append(f"{commit.sha[:12]} is refused")
            tree = None
            continue
        tree = new_tree
        outcomes.append(_outcome(commit, status, reason or "to be delivered", job))
    result = Plan(local, tip, tuple(commits), tuple(outcomes))
    if not stop and result.rebuild and tree is not None:
        tree, stop = _held_onto(ctx, commits, outcomes, tree, stop)
    if not stop and result.rebuild and tree is not None:
        why = blocker(repo, ctx.config.branch, local, tree)
        if why is not None:
            stop.append(why)
    if stop:
        return replace(result, outcomes=tuple(blocked(outcomes, stop)), stop="; ".join(stop))
    return replace(result, outcomes=tuple(outcomes), local_tree=tree)


def _held_onto(ctx: Context, commits: list[Unpushed], outcomes: list[Outcome], tree: str,
               stop: list[str]) -> tuple[str | None, list[str]]:
    """The held commits replayed after the content: the local branch's next tree."""
    for i, commit in enumerate(commits):
        if commit.role != Role.HELD:
            continue
        new_tree, problems = replay(ctx.repo, tree, commit.changes)
        if new_tree is None:
            outcomes[i] = replace(outcomes[i], status=Status.CONFLICT, reason=(
                "; ".join(problems) + ": the local branch could not be rebuilt on the remote "
                "with this commit; bring the remote's changes in (`git pull --rebase`) first"))
            return None, [*stop, f"held commit {commit.sha[:12]} conflicts with the remote"]
        tree = new_tree
    return tree, stop


def blocked(outcomes: list[Outcome], stop: list[str]) -> list[Outcome]:
    """When the plan stops, the commits it would have delivered are not."""
    reason = f"not delivered: sync delivers every content commit or none ({'; '.join(stop)})"
    return [replace(o, status=Status.BLOCKED, reason=reason)
            if o.status == Status.DELIVER else o for o in outcomes]
