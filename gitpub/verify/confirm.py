"""``git pub confirm``: what CI runs to confirm what reached the remote — a security gate.

One run:

1. fetch the remote branch and the remote's ``refs/notes/pub``; read the ledger there
   (``verify.ledger``): the points the last run checked through, the open BAD verdicts;
2. walk ``tip ^points`` with one ``git log`` (the cost of C git's walk; a shallow clone is
   deepened step by step until the walk is whole);
3. verify every commit that claims a job (``verify.commit``) under the trailer prefix of the
   configuration *at the range's start* — the last verified commit, never the pushed tree — and
   always under the default ``Blog``; a change of ``.gitpub.yaml`` inside the range is reported
   and applies from the next run. A second commit claiming a job id that an earlier commit
   published (the job-id index) is BAD;
4. write each verdict as a note line, the job-id index and the new ledger, pushed as a
   fast-forward of the remote notes ref (on a lost race, re-applied on top of the winner's:
   notes are line sets, ledgers merge).

BAD is sticky: the run fails while any BAD verdict in the ledger is open, until a person runs
``git pub confirm --accept SHA --reason TEXT`` (``accept``), whose note line is shown by later
runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gitpub.config.load import parse_config
from gitpub.config.model import CONFIG_FILE, Config, ConfigError
from gitpub.core.errors import GitpubError, UsageError
from gitpub.core.sanitize import sanitize
from gitpub.git import trailers
from gitpub.git.notes import NOTES_REF, add_notes, build_notes_commit, read_note
from gitpub.git.remote import PushResult, Remote
from gitpub.git.repo import Repository
from gitpub.git.walk import LogScan, log_scan, shallow_commits
from gitpub.verify import ledger as L
from gitpub.verify.commit import DEFAULT_PREFIX, Verdict, verify_commit

CHECKED = "gitpub-confirm: checked-through"
REMOTE_NOTES = "refs/pub/remote-notes"
PUSH_ATTEMPTS = 8
FIRST_DEPTH = 64
Progress = Callable[[str], None]


@dataclass
class ConfirmReport:
    tip: str
    checked: int = 0  # commits walked
    verdicts: list[Verdict] = field(default_factory=list)  # this run's, oldest first
    deepened: int = 0
    notes_pushed: bool = False
    start: str | None = None  # the range's start: whose configuration applied
    prefixes: tuple[str, ...] = ()
    config_changes: list[str] = field(default_factory=list)  # commits changing .gitpub.yaml
    open_bad: list[tuple[str, str]] = field(default_factory=list)  # (commit, its BAD line)
    accepted: list[tuple[str, str]] = field(default_factory=list)  # (commit, acceptance)
    remarks: list[str] = field(default_factory=list)

    @property
    def bad(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    @property
    def failed(self) -> bool:
        return bool(self.open_bad)


def confirm(repo: Repository, config: Config, remote: Remote, *, rev_range: str | None,
            push_notes: bool, progress: Progress) -> ConfirmReport:
    tip = remote.fetch()
    if tip is None:
        raise GitpubError(f"the remote has no branch {config.branch}")
    notes_tip = remote.fetch_ref(NOTES_REF, REMOTE_NOTES)
    ledger = L.read_ledger(repo, notes_tip)
    report = ConfirmReport(tip)
    points = _points(repo, ledger, rev_range, report)
    if rev_range is not None:
        tip = _rev_parse(repo, rev_range.partition("..")[2] or tip)
        report.tip = tip
    scan = _walk(repo, remote, tip, points, report, progress)
    report.checked = scan.count
    start = next((p for p in points if repo.has_object(p)), None)  # after deepening
    report.start = start
    prefixes = _prefixes(repo, config, start, tip, report)
    report.prefixes = prefixes
    if start is not None:
        report.config_changes = _config_changes(repo, start, tip, points)
    index: dict[str, str] = {}
    for sha, message in reversed(scan.candidates):
        verdict = _judge(repo, sha, message, prefixes, notes_tip, index, tip)
        if verdict is not None:
            report.verdicts.append(verdict)
    additions = _additions(report, index, checked=rev_range is None)
    if rev_range is None:
        ledger = ledger.checked_through(tip)
    ledger = ledger.with_bad(v.commit for v in report.bad)
    subject = f"gitpub confirm: {len(report.verdicts)} job commit(s) up to {tip}"
    final = _write(repo, remote, additions, ledger, subject, notes_tip, push_notes, report)
    _settle(repo, final, report)
    return report


def accept(repo: Repository, remote: Remote, commit: str, reason: str, who: str, *,
           push_notes: bool) -> ConfirmReport:
    """A person accepts a BAD verdict: an acceptance line on the commit's note (sanitized),
    the commit closed in the ledger. Refused for a commit without a BAD verdict."""
    notes_tip = remote.fetch_ref(NOTES_REF, REMOTE_NOTES)
    full = len(commit) == 40 and all(c in "0123456789abcdef" for c in commit.lower())
    sha = commit.lower() if full else _rev_parse(repo, commit)  # a shallow clone may lack it
    lines = read_note(repo, sha, notes_tip)
    ledger = L.read_ledger(repo, notes_tip)
    if not any(ln.startswith("gitpub-confirm: BAD") for ln in lines) \
            and sha not in ledger.open_bad:
        raise UsageError(f"{commit}: no BAD verdict of `git pub confirm` to accept",
                         hint="`git log --notes=pub` shows the verdicts")
    if not reason.strip():
        raise UsageError("--accept needs a --reason")
    line = _one_line(f"{L.ACCEPT_LINE} by {who}: {reason}")
    report = ConfirmReport(sha)
    final = _write(repo, remote, {sha: [line]}, ledger.accept(sha),
                   f"gitpub confirm: accept {sha}", notes_tip, push_notes, report)
    _settle(repo, final, report)
    return report


# -- the range ------------------------------------------------------------------------------

def _points(repo: Repository, ledger: L.Ledger, rev_range: str | None,
            report: ConfirmReport) -> tuple[str, ...]:
    if rev_range is None:
        return ledger.points
    lower, sep, _ = rev_range.partition("..")
    if not sep or not lower:
        raise UsageError(f"--range {rev_range!r}: expected A..B")
    return (_rev_parse(repo, lower),)


def _walk(repo: Repository, remote: Remote, tip: str, points: Sequence[str],
          report: ConfirmReport, progress: Progress) -> LogScan:
    """``tip ^points``, deepening a shallow clone until the walk is whole. Candidates are the
    commits that mention any ``-Job-Id`` (the prefixes are known only once the start is here)."""
    needles = [b"-job-id"]
    depth = FIRST_DEPTH
    while True:
        shallow = shallow_commits(repo)
        present = [p for p in points if repo.has_object(p)]
        if not shallow and len(present) < len(points):
            for p in points:
                if p not in present:
                    report.remarks.append(f"checked-through point {p} is not in the remote's "
                                          "history any more (rewritten?): not used")
        whole = not shallow or len(present) == len(points)
        if whole:
            scan = log_scan(repo, [tip], present, needles)
            if not any(scan.has(c) for c in shallow):
                return scan
        progress(f"shallow clone: fetching {depth} more commits of history")
        before = _commit_count(repo, tip)
        remote.fetch_ref(f"refs/heads/{remote.branch}", remote.tracking_ref, deepen=depth)
        report.deepened += _commit_count(repo, tip) - before  # fewer than asked near the root
        depth *= 4


def _commit_count(repo: Repository, tip: str) -> int:
    """How many commits of ``tip``'s history this (shallow) clone has."""
    proc = repo.git("rev-list", "--count", tip)
    return int(proc.stdout.decode().strip() or 0) if proc.returncode == 0 else 0


def _rev_parse(repo: Repository, rev: str) -> str:
    proc = repo.git("rev-parse", "--verify", "--quiet", rev + "^{commit}")
    sha = proc.stdout.decode().strip()
    if proc.returncode != 0 or not sha:
        raise UsageError(f"unknown revision {rev!r}")
    return sha


# -- the rules: configuration at the start --------------------------------------------------

def config_at(repo: Repository, commit: str) -> Config:
    """The configuration committed at ``commit`` (defaults when it has no ``.gitpub.yaml``)."""
    entry = repo.lookup(repo.commit(commit).tree, CONFIG_FILE)
    if entry is None:
        return Config()
    text = repo.blob(entry.sha).decode("utf-8-sig", "replace")
    return parse_config(text, f"{CONFIG_FILE} at {commit[:12]}")


def _prefixes(repo: Repository, config: Config, start: str | None, tip: str,
              report: ConfirmReport) -> tuple[str, ...]:
    """The prefixes whose claims are checked: the start's, and always the default."""
    if start is None:
        report.remarks.append("no verified start (first run): the configuration at the tip "
                              "applies")
        rules = config
    else:
        try:
            rules = config_at(repo, start)
        except ConfigError as e:
            report.remarks.append(f"the configuration at {start} is invalid ({e.message}): "
                                  "the default prefix applies")
            rules = Config()
    return tuple(dict.fromkeys((rules.trailer_prefix, DEFAULT_PREFIX)))


def _config_changes(repo: Repository, start: str, tip: str, points: Sequence[str]) -> list[str]:
    def blob(commit: str) -> str | None:
        entry = repo.lookup(repo.commit(commit).tree, CONFIG_FILE)
        return None if entry is None else entry.sha

    if blob(start) == blob(tip):
        return []
    excludes = [f"^{p}" for p in points if repo.has_object(p)]
    proc = repo.git("log", "--format=%H", tip, *excludes, "--", CONFIG_FILE)
    return list(reversed(proc.stdout.decode().split()))


# -- the verdicts ---------------------------------------------------------------------------

def _judge(repo: Repository, sha: str, message: bytes, prefixes: Sequence[str],
           notes_tip: str | None, index: dict[str, str], tip: str) -> Verdict | None:
    """The verdict on one walked commit (None: it claims no job). ``index`` collects the first
    publication of each job id found in this run."""
    if not trailers.mentions_job_id(message, prefixes):
        return None
    verdict = verify_commit(repo, sha, prefixes)
    if verdict is None or not verdict.ok:
        return verdict
    earlier = index.get(verdict.job_id) or next(iter(
        p for p in L.published_by(read_note(repo, L.job_key(verdict.job_id), notes_tip))
        if p != sha and _in_history(repo, p, tip)), None)
    if earlier is not None and earlier != sha:
        return Verdict(sha, verdict.job_id,
                       (f"job {verdict.job_id} was already published by {earlier}",),
                       verdict.manifest_sha256, verdict.manifest)
    index[verdict.job_id] = sha
    return verdict


def _in_history(repo: Repository, commit: str, tip: str) -> bool:
    """Is ``commit`` in the branch's history? Assumed so below a shallow clone's boundary."""
    if not repo.has_object(commit):
        return bool(shallow_commits(repo))
    return repo.git("merge-base", "--is-ancestor", commit, tip).returncode == 0


def _one_line(text: str) -> str:
    """A note line: sanitized, no control characters."""
    return "".join(ch if ch.isprintable() else " " for ch in sanitize(text))


def note_line(v: Verdict) -> str:
    if v.ok:
        return _one_line(f"gitpub-confirm: ok job={v.job_id}")
    return _one_line(f"gitpub-confirm: BAD job={v.job_id}: {'; '.join(v.problems)}")


def _additions(report: ConfirmReport, index: Mapping[str, str], *,
               checked: bool) -> dict[str, list[str]]:
    additions: dict[str, list[str]] = {v.commit: [note_line(v)] for v in report.verdicts}
    for job_id, commit in index.items():
        additions.setdefault(L.job_key(job_id), []).append(L.PUBLISHED_BY + commit)
    if checked:
        additions.setdefault(report.tip, []).append(CHECKED)
    return additions


# -- writing the notes ----------------------------------------------------------------------

def _write(repo: Repository, remote: Remote, additions: dict[str, list[str]],
           ledger: L.Ledger, subject: str, notes_tip: str | None, push: bool,
           report: ConfirmReport) -> str | None:
    """Our note lines and ledger on top of the remote's notes (pushed when ``push``); on a
    lost race, re-applied on top of the winner's. The local notes ref gets them too. Returns
    the notes commit the ledger was settled against."""
    base = notes_tip
    for _ in range(PUSH_ATTEMPTS):
        before = L.read_ledger(repo, base)
        merged = ledger.merged(before) if base != notes_tip else ledger
        new = build_notes_commit(repo, base, additions, merged.message(subject),
                                 allow_empty=merged != before)
        if new is None:
            return base
        if not push:
            break
        outcome = remote.push_ref(new, NOTES_REF)
        if outcome.result == PushResult.SENT:
            report.notes_pushed = True
            break
        base = remote.fetch_ref(NOTES_REF, REMOTE_NOTES)
    else:
        raise GitpubError(f"could not push notes to {NOTES_REF}: the remote notes kept moving")
    local = repo.read_ref(NOTES_REF)
    if (local is None or local == base) and repo.cas_ref(NOTES_REF, local, new, subject):
        return new
    add_notes(repo, additions, subject)
    return new


def _settle(repo: Repository, notes: str | None, report: ConfirmReport) -> None:
    """The open BAD verdicts and the acceptances, as the notes at ``notes`` record them."""
    ledger = L.read_ledger(repo, notes)
    for commit in ledger.open_bad:
        lines = read_note(repo, commit, notes)
        accepted = L.acceptance(lines)
        if accepted is not None:
            report.accepted.append((commit, accepted))
            continue
        bad = next((ln for ln in lines if ln.startswith("gitpub-confirm: BAD")),
                   "gitpub-confirm: BAD")
        report.open_bad.append((commit, bad))
    for commit in ledger.accepted:
        accepted = L.acceptance(read_note(repo, commit, notes))
        if accepted is not None and (commit, accepted) not in report.accepted:
            report.accepted.append((commit, accepted))
