"""``git pub sync``: a person's commits delivered whole, or left exactly where they were.

Hand edits — a typo fixed in an article, a file written straight into the working tree, a
commit made by a person — reach the remote as reliably as jobs, without anybody running
``git pull --rebase``. ``handplan`` decides what becomes of every unpushed commit before anything
is done; this module carries the plan out:

1. the uncommitted changes under content paths are planned as one more commit, built through a
   private index (nothing points at it), and must pass the gates (secret scan, text checks, the
   configured gate commands) before anything holds it: refused, nothing is stored or committed;
2. each content commit becomes a *sync job* (key ``sync:<commit>``, so a rerun after a crash
   finds it) whose artifacts are the commit's own blobs and modes, whose targets carry the
   compare-and-swap condition of every path it adds, changes or deletes, and whose commit is the
   person's commit rebased: same author, same message with the manifest paragraph and the proof
   trailers added (``proof.message``), ``Blog-Sync-Id: <commit>``. Each waits for the job of the
   commit before it (``sync_after``), so they land in their order; each is delivered like any
   job (probe, rebase in memory, push, confirm, retries, leases). Only once the jobs of the
   person's commits are ready is the commit of the uncommitted changes put on the branch (the
   branch moves forward to it; exactly those paths are staged; every other staged change stays
   staged) and given its job; one that stops leaves the branch, index and working tree as they
   were;
3. once every content commit of the branch is on the remote, the local branch is rebuilt: the
   remote commit with the held commits (the ones touching only other paths) replayed on top,
   moved together with the worktree that has it checked out (``checkout.move_branch``) — a move
   that keeps every change: nothing on the branch is lost, nothing staged is unstaged.

What cannot be done stops with the reason for each commit (``handplan.Outcome``) and changes
nothing. No dedup judge runs for hand edits, and font subsets are not regenerated for them (the
next job's subset covers their characters). Nothing here depends on hook events: everything is
rediscovered from git on each run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from gitpub.core.allowlist import AllowlistError
from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import GitpubError
from gitpub.core.files import pub_dir
from gitpub.core.paths import quoted
from gitpub.core.sanitize import sanitize
from gitpub.core.states import LOCAL, FailureCode, Kind, Stage, State
from gitpub.delivery.checkout import is_ancestor, move_branch
from gitpub.delivery.deliver import DELIVERABLE
from gitpub.delivery.handplan import (
    Outcome,
    Plan,
    Role,
    Status,
    Unpushed,
    blocked,
    cas_problems,
    classify,
    job_status,
    judge,
    plan,
    proof_problem,
    removed_from_remote,
    replay,
    unpushed,
)
from gitpub.git.repo import MODE_EXEC, MODE_FILE, MODE_LINK, MODE_TREE, Change, Entry, Repository
from gitpub.git.worktrees import checked_out, worktrees
from gitpub.pipeline.gates import Base, secret_scan
from gitpub.pipeline.prepare import drive, run_gates
from gitpub.pipeline.request import Request, ensure_job
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job
from gitpub.store.outbox import clear_outbox_entry, outbox_entries, register_external_change
from gitpub.verify.probe import find_job_commit

#: Index states of a path in the middle of a merge (``git status --porcelain``'s XY).
UNMERGED = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})
#: How long sync waits for another process preparing one of its jobs.
PREPARE_WAIT = 30.0


@dataclass
class SyncReport:
    """What ``sync`` did with the hand edits: a line per commit, the jobs, the local branch."""

    outcomes: list[Outcome] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    local: str | None = None  # what happened to the local branch (None: nothing to say)
    notes: list[str] = field(default_factory=list)
    refusal: str | None = None  # why the uncommitted changes were not committed (a person acts)


# -- uncommitted changes -------------------------------------------------------------------------

def uncommitted_paths(repo: Repository, is_content: Callable[[str], bool]
                      ) -> tuple[list[str], list[str], list[str]]:
    """(content paths changed in the index or working tree, unmerged content paths, content
    paths staged one way and changed again in the working tree since)."""
    proc = repo.git("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
    if proc.returncode != 0:
        raise GitpubError("git status failed: " + proc.stderr.decode("utf-8", "replace").strip())
    changed: list[str] = []
    unmerged: list[str] = []
    partial: list[str] = []
    entries = [e for e in proc.stdout.decode("utf-8", "surrogateescape").split("\0")
               if len(e) > 3 and is_content(e[3:])]
    # ``git rm --cached``: the deletion is staged, the file kept untracked in the working tree
    kept = {e[3:] for e in entries if e[:2] == "??"} & {e[3:] for e in entries if e[:2] == "D "}
    for entry in entries:
        path = entry[3:]
        (unmerged if entry[:2] in UNMERGED else changed).append(path)
        if entry[:2] not in UNMERGED and entry[0] not in " ?" and (entry[1] != " "
                                                                   or path in kept):
            partial.append(path)
    return list(dict.fromkeys(changed)), unmerged, partial


def _in_progress(repo: Repository) -> str | None:
    for name, what in (("MERGE_HEAD", "a merge"), ("CHERRY_PICK_HEAD", "a cherry-pick"),
                       ("REVERT_HEAD", "a revert"), ("rebase-merge", "a rebase"),
                       ("rebase-apply", "a rebase")):
        if (repo.git_dir / name).exists():
            return what
    return None


def _in_work_tree(top: Path, path: str) -> bool:
    """Whether git sees the file ``path`` in the working tree at ``top``: it exists as a file
    or a link (a directory there now is no such file: its files are paths of their own), and
    no directory on the way to it is a symbolic link (git does not look beyond one)."""
    here = top
    parts = path.split("/")
    for part in parts[:-1]:
        here = here / part
        if here.is_symlink() or not here.is_dir():
            return False
    last = here / parts[-1]
    return last.is_symlink() or (last.exists() and not last.is_dir())


def _add(repo: Repository, paths: list[str], env: dict[str, str] | None = None) -> None:
    """Stage exactly these paths as the working tree has them (``git add -A``, literal
    pathspecs given on stdin); a path gone from the working tree is removed from the index
    (``git update-index --force-remove``: nothing to do when the index has no such path either,
    a deletion or ``git mv`` already staged, where ``git add`` would fail on a pathspec that
    matches nothing)."""
    top = repo.work_tree
    present = [p for p in paths if top is not None and _in_work_tree(top, p)]
    gone = [p for p in paths if p not in set(present)]
    for name, args, names in (
            ("add", ("--literal-pathspecs", "add", "-A", "--pathspec-from-file=-",
                     "--pathspec-file-nul"), present),
            ("update-index", ("update-index", "--force-remove", "-z", "--stdin"), gone)):
        if not names:
            continue
        proc = repo.git(*args, input=b"".join(p.encode("utf-8", "surrogateescape") + b"\0"
                                              for p in names), env=env)
        if proc.returncode != 0:
            raise GitpubError(f"git {name} failed: "
                              + proc.stderr.decode("utf-8", "replace").strip())


def build_uncommitted(repo: Repository, local: str, paths: list[str]) -> str:
    """A commit of ``local`` plus the working tree's version of ``paths``, made as ``git
    commit`` would (identity, dates, filters), through a private index: nothing points at it,
    the real index is untouched."""
    where = pub_dir(repo.common_dir)
    where.mkdir(parents=True, exist_ok=True)
    index = where / f"sync-index.{os.getpid()}"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        proc = repo.git("read-tree", local, env=env)
        if proc.returncode != 0:
            raise GitpubError("git read-tree failed: "
                              + proc.stderr.decode("utf-8", "replace").strip())
        _add(repo, paths, env)
        tree = repo.git("write-tree", env=env).stdout.decode().strip()
    finally:
        index.unlink(missing_ok=True)
    message = ("Sync content changes\n\n" + "\n".join(f"- {quoted(p)}" for p in sorted(paths))
               + "\n")
    # the message is UTF-8 (paths as git quotes them): never said to be in the person's
    # ``i18n.commitEncoding``, which would make git show it as mojibake
    proc = repo.git("-c", "i18n.commitEncoding=UTF-8", "commit-tree", tree, "-p", local,
                    input=message.encode())
    if proc.returncode != 0:
        raise GitpubError("git commit-tree failed: "
                          + proc.stderr.decode("utf-8", "replace").strip())
    return proc.stdout.decode().strip()


def _uncommitted(ctx: Context, local: str) -> tuple[Unpushed | None, str | None]:
    """The uncommitted content changes as a planned commit on ``local``, or why not."""
    repo = ctx.repo
    found = _uncommitted_changes(ctx)
    if not isinstance(found, tuple):
        return None, found
    changed, partial = found
    secret = uncommitted_secrets(ctx, local, changed)
    if secret is not None:
        raise _Refused(secret)
    commit = classify(ctx, build_uncommitted(repo, local, changed), (local,), uncommitted=True)
    stranger = unrecorded_work_tree(repo)
    if stranger is not None:
        return replace(commit, role=Role.REFUSED, reason=stranger), None
    return _partly_staged(commit, partial), None


def _uncommitted_changes(ctx: Context) -> tuple[list[str], list[str]] | str | None:
    """The content paths changed in the working tree of the branch (and those of them staged,
    then changed again); or why they are left alone (a merge, rebase… in progress); None
    when there are none (or the branch is not checked out here)."""
    repo, branch = ctx.repo, ctx.config.branch
    if repo.work_tree is None or repo.head_ref() != f"refs/heads/{branch}":
        return None
    changed, unmerged, partial = uncommitted_paths(repo, ctx.config.is_content)
    if not changed and not unmerged:
        return None
    busy = _in_progress(repo) or ("unmerged paths" if unmerged else None)
    if busy is not None:
        return (f"uncommitted content changes left alone: {busy} is in progress ("
                + _listed(sorted(set(changed) | set(unmerged))) + ")")
    return changed, partial


def _partly_staged(commit: Unpushed, partial: list[str]) -> Unpushed:
    """``commit`` refused when paths were staged, then changed again: committing the working
    tree's version would silently drop the staged one."""
    if not partial or commit.role == Role.REFUSED:
        return commit
    return replace(commit, role=Role.REFUSED, reason=(
        f"{_listed(partial)} staged, then changed again in the working tree: sync would "
        "publish the working tree's version and drop the staged one; stage all of it "
        "(`git add`) or commit what is staged (`git commit`), then sync again"))


class _Refused(Exception):
    """The uncommitted changes are not committed (the reason): nothing is done."""


def uncommitted_secrets(ctx: Context, local: str, paths: list[str]) -> str | None:
    """Why the working tree's version of ``paths`` must not be committed: the secrets it
    brings, judged as a hand commit on ``local`` would be (the allowlist committed there, the
    findings its version of each file already had). Read from the working tree *before*
    anything is written: a secret never enters the object database by gitpub's doing."""
    repo = ctx.repo
    assert repo.work_tree is not None
    files = {}
    for path in paths:
        file = repo.work_tree / path
        if file.is_file() and not file.is_symlink():
            files[path] = file.read_bytes()
    try:
        problems, _allowed = secret_scan(files, Base(repo, local))
    except AllowlistError as e:
        problems = [e.message]
    if not problems:
        return None
    return sanitize(f"the uncommitted content changes bring a secret ({'; '.join(problems[:5])})"
                    ": nothing was committed; take it out of the file, then `git pub sync`")


def unrecorded_work_tree(repo: Repository) -> str | None:
    """Why the working tree is not one to commit from: ``GIT_DIR`` was set without
    ``GIT_WORK_TREE`` and no ``core.worktree``, so git took the current directory as the top,
    and it is none of the repository's own checkouts (from a subdirectory, every file there
    looks deleted: syncing that would publish the deletion of every article)."""
    if not repo.work_tree_implied or repo.work_tree is None:
        return None
    if repo.config_value("core", "worktree") is not None:
        return None
    here = os.path.realpath(repo.work_tree)
    if any(os.path.realpath(w.path) == here for w in worktrees(repo)):
        return None
    return (f"GIT_DIR is set without GIT_WORK_TREE, so git takes {repo.work_tree} for the top "
            "of the working tree, which is none of this repository's checkouts (`git worktree "
            "list`): its changes are not committed; unset GIT_DIR (or set GIT_WORK_TREE too), "
            "then sync again")


def _listed(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


def _adopt(ctx: Context, local: str, commit: Unpushed) -> bool:
    """Put the planned commit of uncommitted changes on the branch: its paths staged first
    (so a failure leaves them merely staged), then the branch moved forward by CAS."""
    _add(ctx.repo, [c.path for c in commit.changes])
    return ctx.repo.cas_ref(f"refs/heads/{ctx.config.branch}", local, commit.sha,
                            "gitpub sync: commit content changes")


# -- the run ------------------------------------------------------------------------------------

_TOO_MANY = "local {branch} has more unpushed commits than sync handles: left to you"
_NO_BRANCH = ("the remote has no branch {branch}: sync delivers onto it, so push {branch} "
              "yourself first")


def _commits(ctx: Context, local: str, tip: str) -> list[Unpushed] | None:
    """Each commit of ``local`` that ``tip`` lacks, oldest first, classified; None when there
    are too many."""
    rows = unpushed(ctx.repo, local, tip)
    if rows is None:
        return None
    commits = [classify(ctx, sha, parents) for sha, parents in rows]
    gone = removed_from_remote(ctx.repo, ctx.remote().tracking_ref, tip,
                               [c.sha for c in commits if c.role == Role.CONTENT])
    return [replace(c, role=Role.REFUSED, reason=(
        f"it was on the remote branch ({ctx.remote().tracking_ref} had it) and was removed "
        "from it since (a force push?): sync does not publish it again; drop it from the "
        "local branch (`git rebase -i`), or push it yourself if its removal was a mistake"))
        if c.sha in gone else c for c in commits]


def pending_plan(ctx: Context, tip: str | None) -> tuple[Plan | None, list[str], str | None]:
    """The plan for the local branch against ``tip``, or None (with why) when there is none;
    and why the uncommitted content changes are refused (None: they are not), which stops
    sync before anything is done."""
    branch = ctx.config.branch
    local = ctx.repo.read_ref(f"refs/heads/{branch}")
    if local is None:
        return None, [], None
    if tip is None:
        return None, [_NO_BRANCH.format(branch=branch)], None
    commits = _commits(ctx, local, tip)
    if commits is None:
        return None, [_TOO_MANY.format(branch=branch)], None
    interrupted = _interrupted_move(ctx, local, tip, commits)
    if interrupted is not None:
        return interrupted, [f"finishing the move of local {branch} that an earlier run "
                             "began"], None
    try:
        extra, note = _uncommitted(ctx, local)
    except _Refused as refused:
        return plan(ctx, local, tip, commits), [], str(refused)
    if extra is not None:
        commits.append(extra)
    planned = plan(ctx, extra.sha if extra is not None else local, tip, commits)
    return planned, [note] if note else [], None


def _interrupted_move(ctx: Context, local: str, tip: str,
                      commits: list[Unpushed]) -> Plan | None:
    """The plan that only finishes an earlier run's rebuild of the branch, when that run died
    between updating the worktree and moving the branch (``checkout.worktree-updated``): every
    content commit is published, and the index of the worktree that has the branch checked out
    is already the rebuilt tree. (Its staged difference from the old tip is then not a hand
    edit: it is the remote's and the person's commits, as rebuilt.)"""
    content = [c for c in commits if c.role == Role.CONTENT]
    if not content:
        return None
    for commit in content:
        job = ctx.store.load(commit.job_id)
        if job is None or job.state != State.PUBLISHED:
            return None
    holder = checked_out(ctx.repo, f"refs/heads/{ctx.config.branch}")
    if holder is None or holder.missing:
        return None
    proc = holder.git("write-tree")
    planned = plan(ctx, local, tip, commits)
    if (proc.returncode != 0 or planned.stop is not None
            or proc.stdout.decode().strip() != planned.local_tree):
        return None
    return planned


def sync_changes(ctx: Context, tip: str | None, deliver: Callable[[Job], Job]) -> SyncReport:
    """Plan, then deliver every content commit of the local branch, then rebuild it."""
    planned, notes, refusal = pending_plan(ctx, tip)
    report = SyncReport(notes=notes, refusal=refusal)
    branch = ctx.config.branch
    if refusal is not None:
        report.outcomes = [replace(o, status=Status.BLOCKED, reason="not delivered: the "
                                   "uncommitted changes stop sync")
                           if o.status == Status.DELIVER else o
                           for o in (planned.outcomes if planned is not None else ())]
        report.local = (f"local {branch}, its index and working tree left as they were: "
                        "nothing is committed or delivered until the secret is out")
        return report
    if planned is None or not planned.commits:
        return report
    report.outcomes = list(planned.outcomes)
    if planned.stop is not None:
        report.local = (f"local {branch}, its index and working tree left as they were "
                        f"({planned.stop})")
        return report
    report.notes += [
        f"{c.sha[:12]} is signed: it is published unsigned (a signature covers the parent and "
        "the message, which sync changes); to keep a signature, push the commit yourself"
        for c, o in zip(planned.commits, planned.outcomes, strict=True)
        if c.role == Role.CONTENT and o.status == Status.DELIVER and ctx.repo.is_signed(c.sha)]
    extra = next((c for c in planned.commits if c.uncommitted), None)
    start = planned.local
    if extra is not None and ctx.store.load(extra.job_id) is None:
        refused = _gate_uncommitted(ctx, extra)
        if refused is not None:  # nothing stored, nothing committed
            report.outcomes = blocked([refused if o.commit == extra.sha else o
                                       for o in planned.outcomes],
                                      [f"{extra.sha[:12]} needs a person"])
            report.local = (f"local {branch}, its index and working tree left as they were "
                            "(the uncommitted content changes did not pass the gates)")
            return report
    jobs = _jobs(ctx, planned, uncommitted=False)
    ready = all(j.state in DELIVERABLE or j.state == State.PUBLISHED for j in jobs.values())
    if extra is not None:
        # Committed onto the branch only once the jobs of the commits before are ready to go:
        # one that stops leaves the branch, the index and the working tree as they were.
        assert extra.parent is not None
        if not ready or not _adopt(ctx, extra.parent, extra):
            report.jobs = list(jobs.values())
            report.outcomes = [
                _result(o, jobs.get(o.commit), False) if not o.uncommitted
                else replace(o, status=Status.BLOCKED, reason=(
                    "not committed: another commit's job stops sync" if not ready
                    else f"not committed: local {branch} moved meanwhile"))
                for o in planned.outcomes]
            report.local = (f"local {branch}, its index and working tree left as they were "
                            + ("(a commit's job stops sync)" if not ready
                               else "(the branch moved meanwhile: run sync again)"))
            return report
        crash_point("sync.uncommitted-adopted")
        report.notes.append(f"committed the uncommitted content changes as {extra.sha[:12]}")
        jobs = _jobs(ctx, planned, uncommitted=True)
        ready = all(j.state in DELIVERABLE or j.state == State.PUBLISHED for j in jobs.values())
    if ready:
        for sha, job in jobs.items():
            jobs[sha] = deliver(job) if job.state in DELIVERABLE else job
    report.jobs = list(jobs.values())
    report.outcomes = [_result(o, jobs.get(o.commit), ready) for o in planned.outcomes]
    report.outcomes = [replace(o, status=Status.BLOCKED, reason="not delivered: a commit before "
                               "it brings a secret") if o.status == Status.DELIVER else o
                       for o in report.outcomes]
    content = [o for o in report.outcomes if o.status != Status.HELD]
    if planned.rebuild and start is not None and all(
            o.status == Status.PUBLISHED for o in content):
        report.local = rebuild_local(ctx, planned, start, _newest(ctx.repo, jobs, tip))
    elif planned.rebuild and extra is not None:
        report.local = (f"local {branch} moved to {extra.sha[:12]}, the commit of the "
                        "uncommitted content changes; rebuilt on the remote once every content "
                        "commit is published")
    elif planned.rebuild:
        report.local = f"local {branch} left as it was until every content commit is published"
    return report


def _gate_uncommitted(ctx: Context, commit: Unpushed) -> Outcome | None:
    """The gates on the uncommitted content changes, before anything holds them (a job's ref,
    the branch): REVIEW, naming what they found (never a secret's value), or None."""
    repo = ctx.repo
    files = {c.path: repo.blob(c.new.sha) for c in commit.changes if c.new is not None}
    verdict = run_gates(ctx, files, job_id=commit.job_id, base_commit=commit.parent,
                        targets=[c.path for c in commit.changes])
    if verdict.code is None:
        return None
    detail = sanitize("; ".join(verdict.problems))
    return Outcome(commit.sha, commit.subject, Status.REVIEW,
                   f"{verdict.code}: {detail}: nothing was committed or stored; change the "
                   "files, then sync again", uncommitted=True)


def _jobs(ctx: Context, planned: Plan, *, uncommitted: bool) -> dict[str, Job]:
    """The sync job of every content commit not published yet (with ``uncommitted``, that of
    the uncommitted changes too: once they are committed on the branch), created (in order,
    each after the one before) or found, and driven through its local phases. A commit that
    brings a secret stops the list: its job keeps nothing of it, and a later commit's job would
    keep it alive all the same (it is in the later commit's history)."""
    jobs: dict[str, Job] = {}
    before: str | None = None
    for commit, outcome in zip(planned.commits, planned.outcomes, strict=True):
        if commit.role != Role.CONTENT or (commit.uncommitted and not uncommitted):
            continue
        if outcome.status != Status.PUBLISHED:
            job = ctx.store.load(commit.job_id)
            if job is None:
                job, _ = ensure_job(ctx, Request(
                    tuple(c.path for c in commit.changes), (), False, key=commit.key,
                    kind=Kind.SYNC, base=commit.parent, commit=commit.sha, after=before))
            jobs[commit.sha] = drive(ctx, job, wait=PREPARE_WAIT) if job.state in LOCAL else job
            if jobs[commit.sha].record.failure_code == FailureCode.SECRET_IN_SOURCE:
                break
        before = commit.job_id
    return jobs


def _result(planned: Outcome, job: Job | None, delivered: bool) -> Outcome:
    if job is None:
        return planned
    status, reason = job_status(job)
    if status == Status.DELIVER and delivered:  # its delivery waits for the one before it
        status, reason = Status.PENDING, (f"job {job.job_id} ({job.state.value}) waits for "
                                          "the job of the commit before it")
    elif status == Status.DELIVER:  # made ready, not delivered: another job stops the run
        status, reason = Status.BLOCKED, (f"job {job.job_id} ({job.state.value}) not "
                                          "delivered: another commit's job stops sync")
    return Outcome(planned.commit, planned.subject, status, reason, job.job_id,
                   job.record.remote_commit, planned.uncommitted)


def _newest(repo: Repository, jobs: dict[str, Job], tip: str | None) -> str | None:
    """The remote commit the local branch is rebuilt on: of the remote tip it was planned
    against (which has every commit published before) and the commits this run published, the
    one that has all the others in its history."""
    newest = tip
    for job in jobs.values():
        found = job.record.remote_commit
        if found is not None and (newest is None or is_ancestor(repo, newest, found)):
            newest = found
    return newest


def rebuild_local(ctx: Context, planned: Plan, start: str, base: str | None) -> str:
    """Move the local branch from ``start`` to ``base`` with the held commits replayed on top
    (their author and message kept, committed now by this user, as git's own
    ``GIT_COMMITTER_*`` say): what ``git pull --rebase``
    would make of it, minus the commits that are now on the remote."""
    repo, branch = ctx.repo, ctx.config.branch
    if base is None:
        return f"local {branch} left as it was: the remote commit is unknown"
    head, tree = base, repo.commit(base).tree
    identity, now, zone = repo.committer_now()
    held = [c for c in planned.commits if c.role == Role.HELD]
    for commit in held:
        new_tree, problems = replay(repo, tree, commit.changes)
        if new_tree is None:
            return (f"local {branch} left as it was: held commit {commit.sha[:12]} no longer "
                    f"applies on the remote ({'; '.join(problems)}); run `git pull --rebase`")
        head = repo.rewrite_commit(commit.sha, tree=new_tree, parents=[head],
                                   message=repo.commit(commit.sha).message, committer=identity,
                                   when=now, timezone=zone)
        tree = new_tree
    crash_point("sync.local-rebuilt")
    moved = move_branch(repo, branch, start, head, then="git pub sync")
    signed = [c.sha[:12] for c in held if repo.is_signed(c.sha)]
    if moved.moved and signed:
        return (f"{moved.note}; {len(held)} held commit(s) replayed on top, without the "
                f"signature of {', '.join(signed)} (re-sign: `git rebase --exec 'git commit "
                f"--amend --no-edit -S' {base[:12]}`)")
    if moved.moved and held:
        return f"{moved.note}; {len(held)} held commit(s) replayed on top"
    return moved.note


# -- stale sync jobs, the outbox and what reconcile reports -------------------------------------

def supersede(ctx: Context, tip: str | None) -> list[Job]:
    """Sync jobs whose hand commit is no longer among the local branch's unpushed commits (the
    person amended, rebased or dropped it, or pushed it), never sent: SKIPPED (superseded), so
    a stale version is not delivered over the person's current one. A job whose proof is on the
    remote is left to its delivery, which will find it."""
    repo, store = ctx.repo, ctx.store
    local = repo.read_ref(f"refs/heads/{ctx.config.branch}")
    rows = None if local is None or tip is None else unpushed(repo, local, tip)
    if rows is None or tip is None:
        return []
    live = {sha for sha, _ in rows}
    done = []
    for item in store.iter_jobs(finished=False):
        if not isinstance(item, Job) or item.record.kind != Kind.SYNC:
            continue
        if item.record.sync_commit in live or store.held_by_other(item):
            continue
        if item.state not in (State.LOCAL_COMMITTED, State.CONFLICT, State.REVIEW,
                              State.RETRY_WAIT, State.FAILED, State.PUSHING):
            continue  # (a push whose outcome is unknown: the probe of the tip fetched decides)
        if find_job_commit(repo, [tip], item.record, ctx.config.trailer_prefix) is not None:
            continue
        done.append(store.transition(
            item, item.record.evolve(state=State.SKIPPED, failure_code=FailureCode.SUPERSEDED,
                                     failure_detail="the hand commit left the local branch"),
            phase=Stage.RESOLVE, reason=f"commit {item.record.sync_commit} is no longer among "
                                        f"local {ctx.config.branch}'s unpushed commits; nothing "
                                        "was sent"))
    return done


@dataclass
class Pending:
    """Content changes that belong to no job, as git shows them now (for ``reconcile``)."""

    uncommitted: list[str] = field(default_factory=list)  # content paths changed in the tree
    unpushed: list[str] = field(default_factory=list)  # local commits not on the remote
    foreign: dict[str, list[str]] = field(default_factory=dict)  # commit -> non-content paths
    refused: str | None = None  # why the uncommitted changes would not be committed

    @property
    def empty(self) -> bool:
        return not self.uncommitted and not self.unpushed


def discover(ctx: Context, remote_tip: str | None) -> Pending:
    """Uncommitted content changes and unpushed local commits, from git itself."""
    repo, config = ctx.repo, ctx.config
    pending = Pending()
    on_branch = repo.work_tree is not None and repo.head_ref() == f"refs/heads/{config.branch}"
    if on_branch:
        changed, unmerged, partial = uncommitted_paths(repo, config.is_content)
    # one read of the branch for both questions (what it holds, what is not pushed): one
    # snapshot; nothing here moves it, and the outbox it feeds is moved by compare-and-swap
    local = repo.read_ref(f"refs/heads/{config.branch}")
    if on_branch:
        pending.uncommitted = sorted(set().union(changed, unmerged, partial))
        if pending.uncommitted:
            pending.refused = unrecorded_work_tree(repo) or (
                None if local is None else uncommitted_secrets(ctx, local, changed))
    rows = None if local is None or remote_tip is None else unpushed(repo, local, remote_tip)
    for sha, parents in rows or []:
        pending.unpushed.append(sha)
        commit = classify(ctx, sha, parents)
        if commit.role != Role.CONTENT:
            pending.foreign[sha] = sorted(c.path for c in commit.changes
                                          if not config.is_content(c.path))
    return pending


def settle_outbox(ctx: Context, remote_tip: str | None) -> Pending:
    """Make the outbox match git: register every unpushed content commit (a lost post-commit
    event is found again), clear entries whose commits are delivered or gone. Returns what is
    pending now."""
    pending = discover(ctx, remote_tip)
    still = set(pending.unpushed)
    for commit in pending.unpushed:
        if commit not in pending.foreign:
            register_external_change(ctx.repo, commit)
    for entry_id, commit in outbox_entries(ctx.repo).items():
        if commit not in still:
            clear_outbox_entry(ctx.repo, entry_id, commit)
    return pending




# -- what sync would deliver (``sync --dry-run``) ------------------------------------------------

@dataclass(frozen=True)
class Foreseen:
    """What ``sync --dry-run`` says of the hand edits: a line per pending commit (the
    uncommitted changes last, as the commit sync would make of them: ``commit`` empty), each
    with every path it changes; and notes (why there is nothing to plan)."""

    commits: tuple[tuple[Outcome, tuple[Change, ...]], ...] = ()
    notes: tuple[str, ...] = ()


def foresee(ctx: Context, tip: str | None) -> Foreseen:
    """What ``sync`` would do with the local branch's commits and the uncommitted content
    changes against the remote ``tip``, and every path each would add, change or delete —
    decided as sync decides (``handplan``) but on git objects only and writing nothing: the
    uncommitted changes are read from ``git status`` and the working tree (no commit is built),
    and the compare-and-swap is checked against the remote's files as the commits before would
    leave them (no tree is written). The checks that need a tree built — a file or directory
    in the way, names that differ only in case, the checkout following — run in ``sync``."""
    repo, branch = ctx.repo, ctx.config.branch
    local = repo.read_ref(f"refs/heads/{branch}")
    if local is None:
        return Foreseen()
    if tip is None:
        return Foreseen(notes=(_NO_BRANCH.format(branch=branch),))
    commits = _commits(ctx, local, tip)
    if commits is None:
        return Foreseen(notes=(_TOO_MANY.format(branch=branch),))
    extra, note = _uncommitted_unbuilt(ctx, local)
    if extra is not None:
        commits.append(extra)
    outcomes = _foreseen(ctx, tip, commits)
    notes = () if note is None else (note,)
    return Foreseen(tuple((o, c.changes) for o, c in zip(outcomes, commits, strict=True)),
                    notes)


def _uncommitted_unbuilt(ctx: Context, local: str) -> tuple[Unpushed | None, str | None]:
    """The uncommitted content changes judged as ``_uncommitted`` judges them, without building
    their commit: each path's entry in ``local`` against the working tree's (``sha`` is
    empty: there is no commit yet)."""
    repo = ctx.repo
    found = _uncommitted_changes(ctx)
    if not isinstance(found, tuple):
        return None, found
    changed, partial = found
    tree = repo.commit(local).tree
    now = _work_tree_entries(repo, sorted(changed))
    changes = []
    for path, new in now.items():
        old = repo.lookup(tree, path)
        old = None if old is None or old.mode == MODE_TREE else old
        if old != new:
            changes.append(Change(path, old, new))
    commit = judge(ctx, "", local, "Sync content changes", tuple(changes), uncommitted=True)
    secret = uncommitted_secrets(ctx, local, changed)
    stranger = unrecorded_work_tree(repo)
    if secret is not None or stranger is not None:
        return replace(commit, role=Role.REFUSED, reason=secret or stranger or ""), None
    return _partly_staged(commit, partial), None


def _work_tree_entries(repo: Repository, paths: list[str]) -> dict[str, Entry | None]:
    """Each path as ``git add`` would enter it from the working tree — mode, and the blob id
    of its content through git's filters (``git hash-object`` without ``-w``: nothing is
    written) — or None when it is not there."""
    assert repo.work_tree is not None
    top = repo.work_tree
    found: dict[str, Entry | None] = {}
    files: list[str] = []
    for path in paths:
        file = top / path
        if not _in_work_tree(top, path):
            found[path] = None
        elif file.is_symlink():
            target = os.readlink(file).encode("utf-8", "surrogateescape")
            sha = repo.git("hash-object", "--stdin", input=target).stdout.decode().strip()
            found[path] = Entry(MODE_LINK, sha)
        else:
            found[path] = Entry(MODE_EXEC if file.stat().st_mode & 0o100 else MODE_FILE, "")
            files.append(path)
    named = [p for p in files if "\n" not in p]
    proc = repo.git("hash-object", "--stdin-paths", input="".join(
        f"{p}\n" for p in named).encode("utf-8", "surrogateescape")) if named else None
    hashes = proc.stdout.decode().split() if proc is not None and proc.returncode == 0 else []
    for path, sha in zip(named, hashes, strict=False):
        entry = found[path]
        assert entry is not None
        found[path] = Entry(entry.mode, sha)
    return found


def _foreseen(ctx: Context, tip: str, commits: list[Unpushed]) -> list[Outcome]:
    """``handplan.plan``'s verdicts, without writing a tree: the compare-and-swap of each
    content commit against the remote's files as the commits before it leave them."""
    repo, store = ctx.repo, ctx.store
    tree = repo.commit(tip).tree
    after: dict[str, Entry | None] = {}

    def now(path: str) -> Entry | None:
        if path in after:
            return after[path]
        entry = repo.lookup(tree, path)
        return None if entry is None or entry.mode == MODE_TREE else entry

    outcomes: list[Outcome] = []
    stop: list[str] = []
    for commit in commits:
        line = commit.sha[:12] or "the uncommitted changes"
        if commit.role == Role.HELD:
            outcomes.append(_line(commit, Status.HELD, commit.reason))
            continue
        if commit.role == Role.REFUSED:
            outcomes.append(_line(commit, Status.REFUSED, commit.reason))
            stop.append(f"{line}: refused")
            continue
        job = store.load(commit.job_id) if commit.sha else None
        status, reason = (Status.DELIVER, "") if job is None else job_status(job)
        if status == Status.PUBLISHED or status.stops:
            outcomes.append(_line(commit, status, reason, job))
            stop += [f"{line}: needs a person"] if status.stops else []
            continue
        problem = proof_problem(ctx, commit) if job is None and commit.sha else None
        if problem is not None:
            outcomes.append(_line(commit, Status.REFUSED, problem))
            stop.append(f"{line}: refused")
            continue
        if stop:  # behind a stop: not delivered
            outcomes.append(_line(commit, status, reason, job))
            continue
        problems = cas_problems(commit.changes, now)
        if problems:
            outcomes.append(_line(commit, Status.CONFLICT, "; ".join(problems) + (
                ": bring the remote's changes in (`git pull --rebase`), then sync again"), job))
            stop.append(f"{line}: conflicts with the remote")
            continue
        after.update({c.path: c.new for c in commit.changes})
        outcomes.append(_line(commit, status, reason or "to be delivered", job))
    return blocked(outcomes, stop) if stop else outcomes


def _line(commit: Unpushed, status: Status, reason: str, job: Job | None = None) -> Outcome:
    return Outcome(commit.sha, commit.subject, status, reason,
                   None if job is None else job.job_id,
                   None if job is None else job.record.remote_commit, commit.uncommitted)
