"""``git pub confirm``: what CI runs to confirm what reached the remote.

It fetches the remote branch and the remote's ``refs/notes/pub``, finds the commits since the last
confirmed point (the newest commits noted ``checked-through`` by an earlier run; or a range given
by the user), verifies every one that carries gitpub trailers against its own manifest, and
writes the verdicts as notes. The notes are pushed as a fast-forward of the remote notes ref;
when another CI run pushed first, our additions are re-applied on top of theirs (line union) and
pushed again — two concurrent runs both keep their notes.

A shallow clone is deepened step by step until the walk reaches the last confirmed point (or the
root), so CI does not need a full clone on every run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gitpub.config.model import Config
from gitpub.core.errors import GitpubError, UsageError
from gitpub.git.notes import NOTES_REF, add_notes, build_notes_commit, read_note
from gitpub.git.remote import PushResult, Remote
from gitpub.git.repo import Repository
from gitpub.verify.commit import Verdict, verify_commit

CHECKED = "gitpub-confirm: checked-through"
REMOTE_NOTES = "refs/pub/remote-notes"
PUSH_ATTEMPTS = 8


@dataclass
class ConfirmReport:
    tip: str
    checked: int = 0  # commits walked
    verdicts: list[Verdict] = field(default_factory=list)
    deepened: int = 0
    notes_pushed: bool = False

    @property
    def bad(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]


def confirm(repo: Repository, config: Config, remote: Remote, *, rev_range: str | None,
            push_notes: bool, progress: Callable[[str], None]) -> ConfirmReport:
    tip = remote.fetch()
    if tip is None:
        raise GitpubError(f"the remote has no branch {config.branch}")
    notes_tip = remote.fetch_ref(NOTES_REF, REMOTE_NOTES)
    report = ConfirmReport(tip)
    commits = _commits_to_check(repo, remote, tip, notes_tip, rev_range, report, progress)
    report.checked = len(commits)
    for sha in commits:
        verdict = verify_commit(repo, sha, config.trailer_prefix)
        if verdict is not None:
            report.verdicts.append(verdict)
    additions: dict[str, list[str]] = {v.commit: [_note_line(v)] for v in report.verdicts}
    additions.setdefault(tip, []).append(CHECKED)
    message = f"gitpub confirm: {len(report.verdicts)} job commit(s) up to {tip}"
    if push_notes:
        report.notes_pushed = _push_notes(repo, remote, additions, message, notes_tip)
    else:
        add_notes(repo, additions, message)
    return report


def _note_line(v: Verdict) -> str:
    if v.ok:
        return f"gitpub-confirm: ok job={v.job_id}"
    return f"gitpub-confirm: BAD job={v.job_id}: {'; '.join(v.problems)}"


def _commits_to_check(repo: Repository, remote: Remote, tip: str, notes_tip: str | None,
                      rev_range: str | None, report: ConfirmReport,
                      progress: Callable[[str], None]) -> list[str]:
    """The commits to verify, newest first, deepening a shallow clone as needed."""
    stop: set[str] = set()
    if rev_range is not None:
        lower, sep, upper = rev_range.partition("..")
        if not sep or not lower:
            raise UsageError(f"--range {rev_range!r}: expected A..B")
        stop = {_rev_parse(repo, lower)}
        tip = _rev_parse(repo, upper or tip)
    depth = 64
    while True:
        commits, hit_boundary = _walk(repo, tip, stop, notes_tip)
        if not hit_boundary or not _is_shallow(repo):
            return commits
        progress(f"shallow clone: fetching {depth} more commits of history")
        before = _commit_count(repo, tip)
        remote.fetch_ref(f"refs/heads/{remote.branch}", remote.tracking_ref, deepen=depth)
        report.deepened += _commit_count(repo, tip) - before  # fewer than asked near the root
        depth *= 4


def _walk(repo: Repository, tip: str, stop: set[str],
          notes_tip: str | None) -> tuple[list[str], bool]:
    seen, order, boundary = set(stop), [], False
    stack = [tip]
    while stack:
        sha = stack.pop()
        if sha in seen:
            continue
        seen.add(sha)
        if not repo.has_object(sha):
            boundary = True
            continue
        if sha != tip and CHECKED in read_note(repo, sha, notes_tip):
            continue
        order.append(sha)
        stack.extend(reversed(repo.commit(sha).parents))  # a shallow root's are missing
    return order, boundary


def _commit_count(repo: Repository, tip: str) -> int:
    """How many commits of ``tip``'s history this (shallow) clone has."""
    proc = repo.git("rev-list", "--count", tip)
    return int(proc.stdout.decode().strip() or 0) if proc.returncode == 0 else 0


def _is_shallow(repo: Repository) -> bool:
    return (repo.common_dir / "shallow").exists()


def _rev_parse(repo: Repository, rev: str) -> str:
    proc = repo.git("rev-parse", "--verify", "--quiet", rev + "^{commit}")
    sha = proc.stdout.decode().strip()
    if proc.returncode != 0 or not sha:
        raise UsageError(f"--range: unknown revision {rev!r}")
    return sha


def _push_notes(repo: Repository, remote: Remote, additions: dict[str, list[str]],
                message: str, notes_tip: str | None) -> bool:
    """Push our note lines on top of the remote's notes; on a lost race, re-apply on top of the
    winner's and try again. Afterwards the local notes ref has them too."""
    base = notes_tip
    for _ in range(PUSH_ATTEMPTS):
        new = build_notes_commit(repo, base, additions, message)
        if new is None:
            break  # everything we would add is already on the remote
        outcome = remote.push_ref(new, NOTES_REF)
        if outcome.result == PushResult.SENT:
            break
        base = remote.fetch_ref(NOTES_REF, REMOTE_NOTES)
    else:
        raise GitpubError(f"could not push notes to {NOTES_REF}: the remote notes kept moving")
    if new is not None and repo.cas_ref(NOTES_REF, None, new, message):
        return True  # a fresh clone (CI): the local notes are now the remote's
    add_notes(repo, additions, message)
    return True
