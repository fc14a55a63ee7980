"""What gitpub's hooks do, past the fast path that decided it may matter (``hooks.fast``).

**post-commit** (after ``hooks.fast`` found that it may matter): a commit carrying job trailers
that was made outside gitpub (an amend, a cherry-pick, a rebase) is linked to its job with a
``linked-job: <id>`` line in its note under ``refs/notes/pub``; any other commit that changes a
content path is an *external sync* event: a ref ``refs/pub/outbox/<id>`` pointing at the commit,
with ``id`` derived from the commit id, created only if absent — recording the same commit
twice is a no-op. ``git pub sync`` publishes and clears these; ``reconcile`` can rediscover
anything a lost hook run missed.

**pre-push**: every commit being pushed that claims a job (``<prefix>-Job-Id`` under the
configured prefix or the default ``Blog``) must be the publication it claims (``verify.commit``:
its manifest's files, and no other path changed, no path that steers git, CI or gitpub), and no
two pushed commits may claim one job id; otherwise the push is refused, naming the commit and
the paths. ``git push --no-verify`` skips hooks, as for any hook. The check fails closed: when it
cannot run, the push is refused with a hint on how to skip it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gitpub.config.load import load_config
from gitpub.config.model import Config
from gitpub.core.errors import CONFIG_FILE, GitpubError
from gitpub.core.files import write_atomic
from gitpub.core.sanitize import contains_secret, sanitize
from gitpub.git import notes
from gitpub.git.repo import Repository
from gitpub.hooks.shared import CACHE_NAME, cache_bytes, read_cache
from gitpub.proof import trailers
from gitpub.runtime.session import open_repository
from gitpub.store.outbox import register_external_change
from gitpub.verify.commit import DEFAULT_PREFIX, Verdict, verify_commit

ZERO_SHA = "0" * 40
#: How long post-commit waits for a lock held by a live process before it skips its hint
#: (``reconcile`` rediscovers what it skipped); a stale lock is removed without waiting.
HOOK_LOCK_WAIT = 1.0
NO_VERIFY_HINT = "`git push --no-verify` skips gitpub's check (and every other pre-push hook)"


# -- post-commit ------------------------------------------------------------------------------

def content_starts(config: Config) -> list[str]:
    """Strings every content path of ``config`` starts with one of: each glob's text before its
    first wildcard (a glob matches its literal characters one for one), each font output whole.
    What the fast path compares changed paths with; ``Config.is_content`` decides exactly."""
    starts = [_literal_start(glob) for glob in (*config.articles, *config.content)]
    return sorted(set(starts + [font.output for font in config.fonts]))


def _literal_start(glob: str) -> str:
    cut = min((i for i in (glob.find(c) for c in "*?[") if i >= 0), default=len(glob))
    return glob[:cut]


def refresh_cache(git_dir: Path, top: Path) -> Config:
    """The configuration, with the fast path's cache brought up to date when the file did not
    change while we read it.

    The cache holds no text the sanitizer would redact: a configuration file that holds a
    secret (a token inside a gate command, say) is recognised by its SHA-256 instead of its
    bytes, and derived values that would hold one (absurd, but cheap to rule out) are not
    cached at all — the fast path then always takes the exact path.
    """
    path = top / CONFIG_FILE
    before = path.read_bytes() if path.is_file() else None
    config = load_config(top)
    after = path.read_bytes() if path.is_file() else None
    if before == after and read_cache(str(git_dir), before) is None:
        cache = git_dir / "pub" / CACHE_NAME
        starts = content_starts(config)
        if contains_secret("\n".join([config.trailer_prefix, *starts])):
            cache.unlink(missing_ok=True)
            return config
        secret = before is not None and contains_secret(before.decode("utf-8", "replace"))
        cache.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(cache, cache_bytes(before, config.trailer_prefix, starts,
                                        digest_only=secret))
    return config


def link_commit(repo: Repository, commit: str, job_id: str) -> bool:
    """Note on ``commit`` that it belongs to ``job_id``; False if the note already said so."""
    before = repo.read_ref(notes.NOTES_REF)
    after = notes.add_notes(repo, {commit: [f"linked-job: {sanitize(job_id)}"]},
                            "gitpub: link a job commit made outside gitpub")
    return after != before


def post_commit_slow(commit: str, message: bytes, paths: Sequence[str], *, git_dir: str,
                     top: str) -> None:
    """The exact post-commit check and its one write (``hooks.fast`` handles errors)."""
    config = refresh_cache(Path(git_dir), Path(top))
    with open_repository(Path(top), _say) as repo:
        repo.lock_wait = HOOK_LOCK_WAIT  # a commit never waits long on a hint
        proof = trailers.read_pub_trailers(message, config.trailer_prefix)
        if proof is not None:
            if link_commit(repo, commit, proof.job_id):
                _say(f"linked {commit[:12]} to job {sanitize(proof.job_id)}")
            return
        changed = [p for p in paths if config.is_content(p)]
        if changed and register_external_change(repo, commit):
            more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
            _say(f"{commit[:12]} changes {sanitize(changed[0])}{more}: "
                 "recorded for `git pub sync`")


def _say(line: str) -> None:
    print(f"gitpub: {line}", file=sys.stderr)


# -- pre-push ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PushUpdate:
    """One line of pre-push's stdin: what is pushed, and what the remote has there now."""

    local_ref: str
    local_sha: str
    remote_ref: str
    remote_sha: str


def parse_push_lines(data: bytes) -> list[PushUpdate]:
    updates = []
    for line in data.decode("utf-8", "surrogateescape").splitlines():
        parts = line.rsplit(maxsplit=3)
        if len(parts) == 4:
            updates.append(PushUpdate(*parts))
    return updates


def updates_from_pre_commit(env: Mapping[str, str]) -> list[PushUpdate]:
    """The pushed range as the pre-commit framework passes it (it keeps stdin for itself)."""
    to = env.get("PRE_COMMIT_TO_REF") or env.get("PRE_COMMIT_LOCAL_BRANCH")
    if not to:
        return []
    return [PushUpdate(env.get("PRE_COMMIT_LOCAL_BRANCH", to), to,
                       env.get("PRE_COMMIT_REMOTE_BRANCH", ""),
                       env.get("PRE_COMMIT_FROM_REF") or ZERO_SHA)]


def _is_commit(repo: Repository, rev: str) -> bool:
    return repo.git("rev-parse", "--verify", "-q", f"{rev}^{{commit}}").returncode == 0


def pushed_job_commits(repo: Repository, updates: Sequence[PushUpdate], remote: str,
                       prefixes: Sequence[str]) -> list[str]:
    """Commits being pushed whose message mentions ``<prefix>-Job-Id`` for one of ``prefixes``
    (git filters; the trailer parser decides): reachable from a pushed tip, not from what the
    remote has. Oldest first."""
    found: dict[str, None] = {}
    for update in updates:
        if update.remote_ref.startswith(("refs/pub/", "refs/notes/")):
            continue  # gitpub's job store and notes: state, not publications (their history
            # holds each job's content commits, rebased ones included)
        if not update.local_sha.strip("0") or not _is_commit(repo, update.local_sha):
            continue  # a deleted ref, or a tag of a tree or blob: no commits to check
        revs = [update.local_sha]
        if update.remote_sha.strip("0") and _is_commit(repo, update.remote_sha):
            revs.append(f"^{update.remote_sha}")
        if remote:
            revs += ["--not", f"--remotes={remote}"]
        greps = [f"--grep={p}-Job-Id" for p in dict.fromkeys(prefixes)]
        proc = repo.git("rev-list", "--reverse", "-i", "-F", *greps, *revs)
        if proc.returncode != 0:
            raise GitpubError(f"cannot list the commits pushed to {update.remote_ref}: "
                              f"{proc.stderr.decode('utf-8', 'replace').strip()}",
                              hint=NO_VERIFY_HINT)
        found.update(dict.fromkeys(proc.stdout.decode().split()))
    return list(found)


def check_push(repo: Repository, prefix: str, remote: str,
               updates: Sequence[PushUpdate]) -> list[Verdict]:
    """The verdicts on every job commit in the push that is not the publication it claims, or
    that claims a job id an earlier commit of the push already claims."""
    prefixes = [prefix, DEFAULT_PREFIX]
    bad: list[Verdict] = []
    first_claim: dict[str, str] = {}
    for commit in pushed_job_commits(repo, updates, remote, prefixes):
        verdict = verify_commit(repo, commit, prefixes)
        if verdict is None:
            continue
        earlier = first_claim.setdefault(verdict.job_id, commit)
        if earlier != commit:
            verdict = Verdict(commit, verdict.job_id, (
                *verdict.problems, f"job {verdict.job_id} is already claimed by {earlier}"))
        if not verdict.ok:
            bad.append(verdict)
    return bad


def pre_push_check(args: Sequence[str], stdin: bytes) -> int:
    """pre-push: 0 to let the push go, 1 to refuse it (with what and why on stderr)."""
    remote = args[0] if args else os.environ.get("PRE_COMMIT_REMOTE_NAME", "")
    updates = parse_push_lines(stdin) if stdin.strip() else updates_from_pre_commit(os.environ)
    try:
        with Repository.discover(Path.cwd()) as repo:
            prefix = load_config(repo.work_tree or Path.cwd()).trailer_prefix
            bad = check_push(repo, prefix, remote, updates)
            subjects = {v.commit: _subject(repo.commit(v.commit).message) for v in bad}
    except GitpubError as e:
        _error(e.message, "; ".join(h for h in (e.hint, NO_VERIFY_HINT) if h))
        return 1
    except Exception as e:
        _error(f"the pre-push check failed: {type(e).__name__}: {e}", NO_VERIFY_HINT)
        return 1
    if not bad:
        return 0
    lines = ["refusing to push: a job commit is not the publication it claims" if len(bad) == 1
             else f"refusing to push: {len(bad)} job commits are not the publications they "
                  "claim"]
    for v in bad:
        lines.append(f"  {v.commit[:12]} {subjects[v.commit]!r} (job {v.job_id})")
        lines += [f"    {problem}" for problem in v.problems]
    _error("\n".join(lines), "a job commit must change exactly the files its manifest lists: put "
           "hand edits in a commit of their own on top (not --amend), or publish them with "
           f"`git pub prepare`; {NO_VERIFY_HINT}")
    return 1


def _subject(message: bytes) -> str:
    return message.decode("utf-8", "replace").split("\n", 1)[0]


def _error(message: str, hint: str | None) -> None:
    print(f"git-pub: error: {sanitize(message)}", file=sys.stderr)
    if hint:
        print(f"hint: {sanitize(hint)}", file=sys.stderr)
