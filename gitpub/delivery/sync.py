"""``git pub sync``: the relay for content changes that belong to no job.

Hand edits — a typo fixed in an article, a note written straight into the working tree, a
commit made by a person — must reach the remote as reliably as jobs do, without anybody running
``git pull --rebase`` and without staging anything unrelated. The relay:

1. commits uncommitted changes under content paths (articles, font outputs, ``content`` globs)
   on the local branch, staging exactly those paths (``git commit --only``);
2. takes the local branch's unpushed commits. If every path they change is a content path, their
   net change becomes a *sync job*: an ordinary job (key ``sync:<fingerprint>``, so a rerun after
   a crash finds it) whose artifacts are the changed files, snapshotted against the commits' own
   base (where they branched from the remote) — so an UPDATE still fails its compare-and-swap if
   someone else changed the same file on the remote meanwhile. From there it is delivered like
   any job: probe, rebase, push, confirm, retries, leases, CONFLICT;
3. once published, moves the local branch to the published commit with ``git reset --keep``
   (which refuses rather than lose local changes).

Unpushed commits that touch non-content paths are left for a person to push (and reported);
deletions are not synced (a job only writes files). No dedup judge runs for hand edits.
Nothing here depends on hook events: everything is rediscovered from git on each run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from gitpub.core.errors import GitpubError
from gitpub.core.states import Kind
from gitpub.git.repo import Repository
from gitpub.pipeline.context import Context
from gitpub.pipeline.prepare import drive
from gitpub.pipeline.request import Request, Source, ensure_job
from gitpub.store.jobs import Job
from gitpub.store.outbox import clear_outbox_entry, outbox_entries, register_external_change


def _git(repo: Repository, *args: str, check: bool = True) -> str:
    proc = repo.git(*args)
    if check and proc.returncode != 0:
        raise GitpubError(f"git {args[0]} failed: {proc.stderr.decode('utf-8', 'replace')}")
    return proc.stdout.decode("utf-8", "surrogateescape")


@dataclass
class Pending:
    """Content changes that belong to no job, as git shows them now."""

    uncommitted: list[str] = field(default_factory=list)  # content paths changed in the tree
    unpushed: list[str] = field(default_factory=list)  # local commits not on the remote
    foreign: dict[str, list[str]] = field(default_factory=dict)  # commit -> non-content paths

    @property
    def empty(self) -> bool:
        return not self.uncommitted and not self.unpushed


def discover(ctx: Context, remote_tip: str | None) -> Pending:
    """Uncommitted content changes and unpushed local commits, from git itself."""
    repo, config = ctx.repo, ctx.config
    pending = Pending()
    if repo.work_tree is None:
        return pending
    status = _git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all",
                  "--no-renames")
    for entry in status.split("\0"):
        if len(entry) > 3 and config.is_content(entry[3:]):
            pending.uncommitted.append(entry[3:])
    local = repo.read_ref(f"refs/heads/{config.branch}")
    if local is None:
        return pending
    exclude = [f"^{remote_tip}"] if remote_tip else []
    commits = _git(repo, "rev-list", "--reverse", local, *exclude).split()
    for commit in commits:
        pending.unpushed.append(commit)
        changed = _git(repo, "diff-tree", "--no-commit-id", "--name-only", "-r",
                       "-z", "--root", "-m", commit).split("\0")
        others = sorted({p for p in changed if p and not config.is_content(p)})
        if others:
            pending.foreign[commit] = others
    return pending


def commit_uncommitted(ctx: Context, paths: list[str]) -> str | None:
    """One commit of exactly these content paths on the checked-out branch; None if HEAD is
    not the configured branch (then nothing is touched)."""
    repo = ctx.repo
    if repo.head_ref() != f"refs/heads/{ctx.config.branch}":
        return None
    _git(repo, "add", "-A", "--", *paths)
    message = "Sync content changes\n\n" + "\n".join(f"- {p}" for p in sorted(paths))
    _git(repo, "commit", "-q", "--only", "-m", message, "--", *paths)
    return _git(repo, "rev-parse", "HEAD").strip()


def sync_request(repo: Repository, base: str, tip: str) -> tuple[Request, list[str]]:
    """The sync job's request: the files the commits base..tip changed, as they are at tip;
    and the paths they delete (which a job cannot carry)."""
    base_tree, tip_tree = repo.commit(base).tree, repo.commit(tip).tree
    targets, sources, deleted = [], [], []
    for path, sha in sorted(repo.changed_paths(base_tree, tip_tree)):
        if sha is None:
            deleted.append(path)
            continue
        targets.append(path)
        sources.append(Source(f"{tip[:12]}:{path}", repo.blob(sha)))
    fingerprint = hashlib.sha256(
        "\n".join(f"{t} {hashlib.sha256(s.data).hexdigest()}"
                   for t, s in zip(targets, sources, strict=True)).encode()).hexdigest()[:24]
    request = Request(tuple(targets), tuple(sources), drafted=False,
                      key=f"sync:{base[:12]}:{fingerprint}", kind=Kind.SYNC, base=base)
    return request, deleted


def merge_base(repo: Repository, a: str, b: str) -> str | None:
    out = _git(repo, "merge-base", a, b, check=False).strip()
    return out or None


def reset_to_published(ctx: Context, local_before: str, published: str) -> str:
    """Move the local branch from the synced commits to the published one, keeping local
    changes (``reset --keep`` refuses instead of overwriting)."""
    repo, branch = ctx.repo, ctx.config.branch
    if repo.read_ref(f"refs/heads/{branch}") != local_before or repo.work_tree is None:
        return f"local {branch} moved meanwhile: left alone"
    if repo.head_ref() != f"refs/heads/{branch}":
        if repo.cas_ref(f"refs/heads/{branch}", local_before, published, "gitpub sync"):
            return f"local {branch} moved to the published commit"
        return f"local {branch} moved meanwhile: left alone"
    if repo.git("reset", "-q", "--keep", published).returncode == 0:
        return f"local {branch} and working tree moved to the published commit"
    return f"local {branch} left alone: local changes would be overwritten"


@dataclass
class SyncResult:
    job: Job | None
    notes: list[str]
    local: str | None = None  # the local branch tip the sync job was made from


def sync_changes(ctx: Context, remote_tip: str | None) -> SyncResult:
    """Steps 1 and 2: the sync job for the pending hand edits (not yet delivered)."""
    notes: list[str] = []
    pending = discover(ctx, remote_tip)
    if pending.uncommitted:
        commit = commit_uncommitted(ctx, pending.uncommitted)
        if commit is None:
            notes.append(f"uncommitted content changes left alone: HEAD is not "
                         f"{ctx.config.branch}")
        else:
            notes.append(f"committed {len(pending.uncommitted)} changed content path(s) "
                         f"as {commit[:12]}")
            pending = discover(ctx, remote_tip)
    if not pending.unpushed:
        return SyncResult(None, notes)
    if pending.foreign:
        for commit, paths in pending.foreign.items():
            notes.append(f"unpushed commit {commit[:12]} also changes non-content paths "
                         f"({', '.join(paths[:5])}): push it yourself")
        return SyncResult(None, notes)
    local = pending.unpushed[-1]
    base = merge_base(ctx.repo, local, remote_tip) if remote_tip else None
    if base is None:
        notes.append("the local branch shares no history with the remote: left alone")
        return SyncResult(None, notes)
    request, deleted = sync_request(ctx.repo, base, local)
    if deleted:
        notes.append(f"deletions are not synced ({', '.join(deleted[:5])}): push them yourself")
    if not request.targets:
        return SyncResult(None, notes)
    job, _ = ensure_job(ctx, request)
    job = drive(ctx, job, wait=30.0)
    return SyncResult(job, notes, local)


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
