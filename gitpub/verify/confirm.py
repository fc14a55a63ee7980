"""``git pub confirm``: what CI runs to confirm what reached the remote — a security gate.

One run, with CI's key (``GITPUB_CONFIRM_KEY``; ``verify.ledger`` says what it authenticates):

1. fetch the remote branch and the remote's ``refs/notes/pub`` (one ``git fetch``); read the
   newest *authentic* ledger there (``ledger.read_memory``): the branch it confirms, the points
   the last run checked through, the open BAD verdicts, the prefixes ever checked. A ledger
   without a valid MAC is looked through. The branch is CI's ``--branch``, else the anchor's,
   else the ledger's, else the remote's default branch — never the pushed ``.gitpub.yaml``'s
   (``verify.facts``); the remote is CI's ``--remote`` (default ``origin``);
1b. make sure the ledger is the newest one CI wrote: the rollback anchor CI keeps
   (``verify.anchor``) must still be in the remote's notes, and a keyed run finds an authentic
   ledger at all — unless a person says ``--first-run``. Otherwise the run fails (exit 1): the
   notes were rolled back or deleted, and with them open BAD verdicts and rewrite checks;
2. every checked-through point must still be in the branch's history: one that is not (the
   branch was rewritten, e.g. by a force-push) is BAD itself — the run fails, naming it, until
   a person accepts it — and the walk starts from the points that remain, or from the root;
3. walk ``tip ^points`` with one ``git log`` (the cost of C git's walk; a shallow clone is
   deepened step by step until the walk is whole);
4. verify every commit that claims a job (``verify.commit``, its write scope and links under
   the configuration at the range's start) under every prefix that applies:
   the configuration's *at the range's start* (the last verified commit, never the pushed
   tree), the default ``Blog``, every prefix the ledger says was ever checked, every prefix a
   configuration inside the range names, and the prefix of any claim the configuration at
   that commit names (``verify.rules``). So a change of ``trailer_prefix`` only ever *adds*
   checks (it is reported, and the old prefix stays checked). A second commit claiming a job
   id that an earlier commit published (the job-id index, read from authentic trees) is BAD;
5. write each verdict as a note line, the job-id index and the new authenticated ledger, pushed
   as a fast-forward of the remote notes ref (on a lost race, re-applied on top of the
   winner's: notes are line sets, ledgers merge); what was erased from the notes since the last
   authentic ledger is written back.

BAD is sticky: the run fails while any BAD verdict is open, until a person holding the key runs
``git pub confirm --accept SHA --reason TEXT`` (``accept``), whose note line is shown by later
runs.

Without a key nothing in the notes can be believed (anyone who can push could have written it),
so the run is still safe, only slower: it walks the whole history every time, judges every claim
again (so open BAD verdicts and duplicate job ids are recomputed, not remembered), and an
acceptance does not count. A remark says how to turn on the authenticated mode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from gitpub.config.model import Config
from gitpub.core.crashpoints import crash_point
from gitpub.core.errors import CONFIG_FILE, GitpubError, UsageError
from gitpub.core.sanitize import remember_secret, sanitize
from gitpub.git.diff import first_parent_changes
from gitpub.git.notes import NOTES_REF, add_notes, build_notes_commit, read_note
from gitpub.git.objects import ObjectFormat, is_object_id
from gitpub.git.reading import parse_raw_diff
from gitpub.git.remote import PushResult, Remote, default_branch
from gitpub.git.repo import Repository
from gitpub.git.walk import LogScan, log_scan, shallow_commits, split_point
from gitpub.proof import trailers
from gitpub.proof.trailers import JOB_ID_NEEDLE
from gitpub.store.fetchdir import fetch_ref, fetch_with
from gitpub.verify import anchor as A
from gitpub.verify import facts as F
from gitpub.verify import ledger as L
from gitpub.verify import rules
from gitpub.verify.commit import Verdict, verdict, verify_commit
from gitpub.verify.history import commits_mentioning
from gitpub.verify.store_check import check_store, fetch_store, unrecorded_rule

CHECKED = "gitpub-confirm: checked-through"
REMOTE_NOTES = "refs/pub/remote-notes"
KEY_ENV = "GITPUB_CONFIRM_KEY"
PUSH_ATTEMPTS = 8
FIRST_DEPTH = 64
UNKEYED = (f"{KEY_ENV} is not set: nothing in the notes can be trusted, so the whole history "
           "was checked and acceptances do not count; set it (a secret only CI and the people "
           "who accept BAD verdicts hold) for the fast, authenticated mode")
Progress = Callable[[str], None]


class ConfirmReport:
    def __init__(self, tip: str, authenticated: bool = False) -> None:
        self.tip = tip
        self.checked = 0  # commits walked
        self.verdicts: list[Verdict] = []  # this run's, oldest first
        self.deepened = 0
        self.notes_pushed = False
        self.authenticated = authenticated  # run with the key: the notes' facts were believed
        self.start: str | None = None  # the range's start: whose configuration applied
        self.prefixes: tuple[str, ...] = ()
        self.config_changes: list[str] = []  # commits changing .gitpub.yaml
        self.rewritten: list[str] = []  # checked-through points now gone
        self.open_bad: list[tuple[str, str]] = []  # (commit, its BAD line)
        self.accepted: list[tuple[str, str]] = []  # (commit, acceptance)
        self.remarks: list[str] = []

    @property
    def bad(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    @property
    def failed(self) -> bool:
        return bool(self.open_bad)


def confirm_key(value: str | None) -> L.Key | None:
    """CI's key from the environment's value (None: the unauthenticated mode). The value is
    redacted from everything gitpub writes or shows from now on (``core.sanitize``)."""
    if not value:
        return None
    remember_secret(value, "confirm-key")
    secret = value.encode("utf-8", "surrogateescape")
    if len(secret) < L.MIN_KEY_BYTES:
        raise UsageError(f"{KEY_ENV} is shorter than {L.MIN_KEY_BYTES} bytes",
                         hint="use a long random secret, e.g. `openssl rand -hex 32`")
    return L.Key(secret)


class Target(NamedTuple):
    """What CI asks to confirm: the remote (its name in this clone) and the branch (None: the
    ledger's, else the remote's default branch)."""

    remote: str = "origin"
    branch: str | None = None


class Anchoring(NamedTuple):
    """The rollback anchor CI keeps (``verify.anchor``): its file (None: ``--no-anchor``), and
    whether a person takes the remote's notes as they are this once (``--first-run``)."""

    path: Path | None = None
    first_run: bool = False


#: No rollback anchor, no first run (``--no-anchor``; a run without the key keeps none).
NO_ANCHOR = Anchoring()


def confirm(repo: Repository, target: Target, *, rev_range: str | None, push_notes: bool,
            progress: Progress, key: L.Key | None = None,
            anchoring: Anchoring = NO_ANCHOR) -> ConfirmReport:
    """One run (the module's docstring)."""
    anchor = _anchor(anchoring, key) if key is not None and rev_range is None else None
    lineage = anchor.lineage if anchor is not None and anchor.lineage else None
    # the branch: CI's argument, else the anchor's (CI's own record), else the ledger's
    branch = target.branch or (anchor.branch if anchor is not None else None) or \
        _default_branch(repo, target.remote)
    while True:
        remote = Remote(repo, target.remote, branch)
        fetched = fetch_store(remote, (NOTES_REF, REMOTE_NOTES))  # one network round
        if fetched is None:  # a shallow clone: the store comes by depth, in the check
            tip, notes_tip = fetch_with(remote, NOTES_REF, REMOTE_NOTES)
        else:
            tip, notes_tip = fetched.tip, fetched.also
        memory = L.read_memory(repo, notes_tip, key,
                               "" if anchor is not None and lineage is None else lineage)
        named = memory.ledger.branch
        if target.branch is not None or anchor is not None or named in ("", "?", branch):
            break
        branch = named  # the ledger's branch, not the guess: again
    if tip is None:
        raise GitpubError(f"the remote {sanitize(target.remote)} has no branch "
                          f"{sanitize(branch)}", hint="give the branch CI confirms: --branch")
    report = ConfirmReport(tip, authenticated=key is not None)
    if key is not None and rev_range is None:
        report.remarks += _guard(repo, memory, notes_tip, anchoring, anchor, branch)
    _remark_memory(report, memory, key)
    lineages = _acceptance_lineages(memory, _lineage(anchor, anchoring, memory)
                                    if key is not None and rev_range is None else None)
    points = _points(repo, memory.ledger, rev_range)
    if rev_range is not None:
        tip = _rev_parse(repo, rev_range.partition("..")[2] or tip)
        report.tip = tip
    configs = F.Resolver(repo)
    scan, gone = _walk(repo, remote, tip, points, report, progress)
    report.checked = scan.count
    report.start = next((p for p in points if p not in gone), None)
    at_tip = configs.at(tip)
    trusted = configs.at(report.start) if report.start is not None else at_tip
    report.remarks += _target_remarks(at_tip, target.remote, branch, report.start)
    ordered = _oldest_first(repo, scan.candidates)
    checked = rules.checked_prefixes(repo, at_tip, memory, ordered[::-1], report.start,
                                     report.tip, configs)
    report.prefixes, report.config_changes = checked.prefixes, checked.config_changes
    report.remarks += checked.remarks
    prefixes = checked.prefixes
    lookup = _Earlier(repo, key, memory, tip, rev_range, prefixes)
    candidates = [(sha, m) for sha, m in ordered if trailers.mentions_job_id(m, prefixes)]
    changes = first_parent_changes(repo, [sha for sha, _ in candidates
                                          if _parent_here(repo, sha)])
    found = [v for v in (verify_commit(repo, sha, prefixes, changes=changes.get(sha),
                                       trusted=trusted)
                         for sha, _ in candidates) if v is not None]
    firsts = _first_publications(repo, found)
    report.verdicts += [_duplicate(v, firsts, lookup) for v in found]
    index = {v.job_id: v.commit for v in report.verdicts if v.ok}  # published here first
    store = check_store(repo, remote, tip=tip, verdicts=report.verdicts, prefixes=prefixes,
                        unrecorded=unrecorded_rule(at_tip, report.start, configs), key=key,
                        memory=memory, fetched=fetched, lineages=lineages)
    report.verdicts, report.remarks = store.verdicts, report.remarks + store.remarks
    if key is not None and rev_range is None:
        _rewritten(repo, memory, gone, notes_tip, key, report, lineages)
    ledger = _next_ledger(memory.ledger, report, gone, checked=rev_range is None)
    if key is not None and rev_range is None:
        ledger = ledger.next_run(branch, lineages[0])
    additions = _union(_additions(report, index, key, repo.object_format,
                                 checked=rev_range is None), store.notes)
    subject = f"gitpub confirm: {len(report.verdicts)} job commit(s) up to {tip}"
    final = _write(repo, remote, additions, ledger, subject, notes_tip, push_notes, report,
                   key, memory)
    settled = _settled_ledger(repo, final, key, ledger)
    _settle(repo, final, report, key, memory, settled, lineages)
    if report.notes_pushed:  # and the anchor not written yet: the next run goes on from it
        crash_point("confirm.notes-pushed")
    if key is not None and anchoring.path is not None and report.notes_pushed and \
            final is not None and rev_range is None:
        A.save(anchoring.path, A.Anchor(final, settled.serial, branch, settled.lineage), key)
    return report


def _default_branch(repo: Repository, remote: str) -> str:
    """The branch to fetch before the ledger is read: what the remote's ``HEAD`` names, as the
    clone recorded it (``refs/remotes/<remote>/HEAD``), else as the remote says."""
    recorded = repo.symbolic_target(f"refs/remotes/{remote}/HEAD") or ""
    if recorded.startswith(f"refs/remotes/{remote}/"):
        return recorded.removeprefix(f"refs/remotes/{remote}/")
    found = default_branch(repo, remote)
    if found is None:
        raise UsageError(f"cannot tell which branch of {sanitize(remote)} to confirm (the "
                         "remote names no default branch)",
                         hint="give it: `git pub confirm --branch NAME`")
    return found


def _anchor(anchoring: Anchoring, key: L.Key) -> A.Anchor | None:
    """The anchor CI kept (None: none, or a ``--first-run``, which takes the notes as they
    are); ``AnchorError`` when it is damaged or not written with this key."""
    if anchoring.first_run or anchoring.path is None:
        return None
    return A.load(anchoring.path, key)


def _lineage(anchor: A.Anchor | None, anchoring: Anchoring, memory: L.Memory) -> str:
    """The lineage of this run's ledger: the anchor's; without an anchor, the ledger's; else a
    new one — on a ``--first-run`` (the person vouches for the notes as they are: from now on
    only the ledgers of this run and its successors count) or after an anchor from before
    lineages."""
    if anchor is not None and anchor.lineage:
        return anchor.lineage
    if anchoring.path is None and memory.ledger.lineage:
        return memory.ledger.lineage
    return A.new_lineage()


def _acceptance_lineages(memory: L.Memory, run: str | None) -> tuple[str, ...]:
    """The lineages whose acceptances this run believes: its own (first: the lineage of the
    ledger it writes, ``run``) and that of the ledgers it believes (before a ``--first-run``'s
    new lineage, the ledgers it takes as they are; ``""``: ledgers from before lineages). An
    acceptance given under another repository's CI with the same key accepts nothing here."""
    believed = (memory.ledger.lineage,) if memory.found else ()
    return tuple(dict.fromkeys(x for x in ((run,) if run else ()) + believed))


def _guard(repo: Repository, memory: L.Memory, notes_tip: str | None,
           anchoring: Anchoring, anchor: A.Anchor | None, branch: str) -> list[str]:
    """Refuse a ledger that is not the newest CI wrote (rule 1b); the remarks to show."""
    remarks = []
    if anchoring.path is None:
        remarks.append("--no-anchor: a rollback of the notes to an older authentic ledger "
                       "cannot be detected (keep an --anchor file in CI)")
    if memory.ledger.branch not in ("", "?", branch):
        remarks.append(f"the ledger confirmed branch {sanitize(memory.ledger.branch)}; this "
                       f"run confirms {sanitize(branch)} (CI's --branch)")
    if anchoring.first_run:
        return ["--first-run: the remote's notes are taken as they are "
                + ("(an authentic ledger was found)" if memory.found else
                   "(no authentic ledger: the whole history is checked)"), *remarks]
    if anchor is not None and anchor.branch != branch:
        raise A.AnchorError(
            f"the anchor at {anchoring.path} is the anchor of branch {sanitize(anchor.branch)}; "
            f"this run confirms {sanitize(branch)} (--branch): the notes of one branch's runs "
            "are no rollback check for another's",
            hint="keep one anchor file per branch CI confirms (--anchor FILE); a person who "
                 "means to confirm this branch from now on runs once with --first-run")
    if anchor is not None:
        if notes_tip is None or not _in_notes(repo, anchor.notes, notes_tip) or \
                memory.ledger.serial < anchor.serial:
            raise A.AnchorError(
                f"{NOTES_REF} was rolled back or deleted on the remote: the ledger this CI "
                f"wrote last (run {anchor.serial}, notes commit {anchor.notes}) is not in "
                "its history any more, and with it open BAD verdicts and the points that "
                "show a rewritten branch may be gone",
                hint=f"restore {NOTES_REF} on the remote (it must descend from "
                     f"{anchor.notes[:12]}); a person who has checked the remote may run "
                     "once with --first-run to take the notes as they are")
    elif anchoring.path is not None:
        raise A.AnchorError(
            f"no rollback anchor at {anchoring.path}: CI keeps it between runs, and without "
            f"it a rollback of {NOTES_REF} cannot be told from a first run",
            hint="on the first keyed run with this anchor (or after losing it), a person runs "
                 "once with --first-run; then keep the file (a cache or an artifact)")
    if not memory.found:
        raise A.AnchorError(
            f"no authentic ledger in the remote's {NOTES_REF}: this is a first keyed run, or "
            "the notes were deleted or rolled back past every ledger CI wrote",
            hint="on the very first run with the key, run once with --first-run")
    return remarks


def _in_notes(repo: Repository, commit: str, notes_tip: str) -> bool:
    """Is ``commit`` in the notes' history (fetched whole: absent means not there)?"""
    return commit == notes_tip or (repo.has_object(commit) and repo.git(
        "merge-base", "--is-ancestor", commit, notes_tip).returncode == 0)


def _target_remarks(at_tip: Config | F.Bad, remote: str, branch: str,
                    start: str | None) -> list[str]:
    """What the pushed configuration says that this run does not follow (the remote and branch
    come from CI and the ledger, never from it), and whose configuration applied."""
    remarks = []
    if not isinstance(at_tip, F.Bad) and (at_tip.remote, at_tip.branch) != (remote, branch):
        remarks.append(f"the pushed {CONFIG_FILE} names {sanitize(at_tip.remote)}/"
                       f"{sanitize(at_tip.branch)}; this run confirms {sanitize(remote)}/"
                       f"{sanitize(branch)} (CI's arguments and the ledger decide, never the "
                       "pushed tree)")
    if start is not None:
        remarks.append(f"write scope, trailer prefix and confirm_unrecorded: the configuration "
                       f"at {start[:12]}, which the last run checked through")
    return remarks


def _settled_ledger(repo: Repository, final: str | None, key: L.Key | None,
                    ours: L.Ledger) -> L.Ledger:
    """The ledger as written (merged with a racing run's), else ours."""
    if key is None or final is None:
        return ours
    written = L.read_memory(repo, final, key, ours.lineage or None)
    return written.ledger if written.found else ours


def accept(repo: Repository, target: Target, commit: str, reason: str, who: str, *,
           push_notes: bool, key: L.Key | None = None) -> ConfirmReport:
    """A person accepts a BAD verdict: an acceptance line on the commit's note (sanitized,
    with a MAC), the commit closed in the ledger. Refused without the key (an acceptance
    anyone could write would accept nothing) and for a commit without a BAD verdict."""
    if key is None:
        raise UsageError(f"--accept needs {KEY_ENV}, the key `git pub confirm` runs with in CI",
                         hint="an acceptance without it could be written by anyone who can "
                              "push, so it would not count: run it where the key is set")
    if not reason.strip():
        raise UsageError("--accept needs a --reason")
    remote = Remote(repo, target.remote, target.branch or "main")  # only the notes move
    notes_tip = fetch_ref(remote, NOTES_REF, REMOTE_NOTES)
    full = is_object_id(commit.lower())
    sha = commit.lower() if full else _rev_parse(repo, commit)  # a shallow clone may lack it
    memory = L.read_memory(repo, notes_tip, key)
    lines = L.note_lines(repo, sha, memory, notes_tip)
    if L.bad_line(lines) is None and sha not in memory.ledger.open_bad:
        raise UsageError(f"{commit}: no BAD verdict of `git pub confirm` to accept",
                         hint="`git log --notes=pub` shows the verdicts")
    line = L.acceptance_line(key, sha, who, reason, memory.ledger.lineage)
    report = ConfirmReport(sha, authenticated=True)
    ledger = memory.ledger.accept(sha)
    final = _write(repo, remote, {sha: [line]}, ledger, f"gitpub confirm: accept {sha}",
                   notes_tip, push_notes, report, key, memory)
    _settle(repo, final, report, key, memory, ledger, (memory.ledger.lineage,))
    return report


def _remark_memory(report: ConfirmReport, memory: L.Memory, key: L.Key | None) -> None:
    if key is None:
        report.remarks.append(UNKEYED)
    elif not memory.found:
        report.remarks.append("no authentic ledger in the notes (first run with the key, or "
                              "the notes were rewritten): the whole history is checked")
    if key is not None and memory.unauthentic:
        report.remarks.append(f"{memory.unauthentic} ledger(s) in the notes without a valid "
                              "MAC were ignored")
    if key is not None and memory.foreign:
        report.remarks.append(f"{memory.foreign} authentic ledger(s) of another lineage (another "
                              "repository whose CI has the same key, or from before a "
                              "--first-run) were ignored")


# -- the range ------------------------------------------------------------------------------

def _points(repo: Repository, ledger: L.Ledger, rev_range: str | None) -> tuple[str, ...]:
    if rev_range is None:
        return ledger.points
    lower, sep, _ = rev_range.partition("..")
    if not sep or not lower:
        raise UsageError(f"--range {rev_range!r}: expected A..B")
    return (_rev_parse(repo, lower),)


def _walk(repo: Repository, remote: Remote, tip: str, points: Sequence[str],
          report: ConfirmReport, progress: Progress,
          meanwhile: Callable[[], object] | None = None) -> tuple[LogScan, list[str]]:
    """``tip ^points``, deepening a shallow clone until the walk is whole; and the points that
    are not in ``tip``'s history (gone: rewritten). Candidates are the commits that mention
    any ``-Job-Id`` (the prefixes are known only once the start is here).

    The walk is C git's, listed (``git.walk.log_scan``): ``git log`` prints every commit of
    the range with its message, and the messages are searched here at once; a whole long
    history (a first run, a run without the key) is walked as two halves at once, on two
    cores (``git.walk.split_scan``). One git's cost is C git's walk and about 7 % more for the
    printing; the filtered way (``--grep``) prints less
    but needs a second walk to count the commits (``checked``) (measured:
    ``bench/confirm_ci.py``). A shallow clone must see besides whether the walk
    reached its boundary, which only a listed walk can say. The candidates' order is not the
    walk's: ``_oldest_first``."""
    depth = FIRST_DEPTH
    while True:
        shallow = shallow_commits(repo)
        present = [p for p in points if repo.has_object(p)]
        if not shallow or len(present) == len(points):
            scan, ancestors = _scan(repo, tip, present, bool(shallow), meanwhile)
            if not shallow or not any(scan.has(c) for c in shallow):
                return scan, [p for p in points if p not in ancestors]
        progress(f"shallow clone: fetching {depth} more commits of history")
        before = _commit_count(repo, tip)
        fetch_ref(remote, f"refs/heads/{remote.branch}", remote.tracking_ref, deepen=depth)
        report.deepened += _commit_count(repo, tip) - before  # fewer than asked near the root
        depth *= 4


def _scan(repo: Repository, tip: str, points: list[str], shallow: bool,
          meanwhile: Callable[[], object] | None) -> tuple[LogScan, list[str]]:
    """The listed walk of ``tip ^points``, and those of ``points`` in ``tip``'s history —
    asked while git walks from all of them (the usual answer: all); otherwise the walk is
    made again from those that are. A whole history is split (``git.walk.split_point``)."""
    found: list[list[str]] = []

    def check() -> None:
        found.append(_ancestors(repo, points, tip))
        if meanwhile is not None:
            meanwhile()

    split = split_point(repo, tip) if not shallow and not points else None
    scan = log_scan(repo, [tip], points, JOB_ID_NEEDLE, listed=True, meanwhile=check,
                    split=split)
    if found[0] != points:
        split = split_point(repo, tip) if not shallow and not found[0] else None
        scan = log_scan(repo, [tip], found[0], JOB_ID_NEEDLE, listed=True, split=split)
    return scan, found[0]


def _ancestors(repo: Repository, commits: Sequence[str], tip: str) -> list[str]:
    """Those of ``commits`` that are in ``tip``'s history (one C git walk when all are)."""
    if not commits:
        return []
    proc = repo.git("rev-list", "--max-count=1", *commits, "--not", tip)
    if proc.returncode == 0 and not proc.stdout.strip():
        return list(commits)
    return [c for c in commits
            if repo.git("merge-base", "--is-ancestor", c, tip).returncode == 0]


def _commit_count(repo: Repository, tip: str) -> int:
    """How many commits of ``tip``'s history this (shallow) clone has."""
    proc = repo.git("rev-list", "--count", tip)
    return int(proc.stdout.decode().strip() or 0) if proc.returncode == 0 else 0


def _rev_parse(repo: Repository, rev: str) -> str:
    proc = repo.git("rev-parse", "--verify", "--quiet", rev + "^{commit}")
    sha = proc.stdout.decode().strip()
    if proc.returncode != 0 or not sha:
        raise UsageError(f"unknown revision {sanitize(rev)!r}")
    return sha


def _parent_here(repo: Repository, sha: str) -> bool:
    parents = repo.commit(sha).parents
    return not parents or repo.has_object(parents[0])


# -- the verdicts ---------------------------------------------------------------------------

class _Earlier:
    """Where an earlier publication of a job id is found: the authentic job-id index (the
    notes trees of the authentic ledgers), or — for a ``--range``, whose start no ledger
    vouches for — the history before the range (``verify.history``)."""

    def __init__(self, repo: Repository, key: L.Key | None, memory: L.Memory, tip: str,
                 rev_range: str | None, prefixes: Sequence[str]) -> None:
        self.repo, self.key, self.memory, self.tip = repo, key, memory, tip
        self.rev_range, self.prefixes = rev_range, prefixes

    def __call__(self, job_id: str, sha: str) -> str | None:
        names = L.note_lines(self.repo, L.job_key(job_id, self.repo.object_format),
                             self.memory, None)
        for commit in L.published_by(self.key, job_id, names):
            if commit != sha and _in_history(self.repo, commit, self.tip):
                return commit
        if self.rev_range is None:
            return None
        lower = _rev_parse(self.repo, self.rev_range.partition("..")[0])
        for commit in commits_mentioning(self.repo, lower, job_id):
            found = verify_commit(self.repo, commit, self.prefixes)
            if found is not None and found.ok and found.job_id == job_id:
                return commit
        return None


def _oldest_first(repo: Repository, candidates: Sequence[tuple[str, bytes]]
                  ) -> list[tuple[str, bytes]]:
    """The walk's candidates oldest first, in an order that does not depend on how the
    history was walked (listed or filtered, git's walk order): by commit time, then by id.
    Which of two claims of one job id came first is not left to this order
    (``_first_publications``)."""
    return sorted(candidates, key=lambda c: (repo.commit(c[0]).commit_time, c[0]))


def _first_publications(repo: Repository, found: Sequence[Verdict]) -> dict[str, str]:
    """job id → the commit of this run that published it first: of the sound claims of one
    job id, the one the others descend from — else (claims on lines of history apart) the
    oldest (``_oldest_first``)."""
    first: dict[str, str] = {}
    for v in found:
        if not v.ok:
            continue
        if v.job_id not in first:
            first[v.job_id] = v.commit
        elif repo.git("merge-base", "--is-ancestor", v.commit,
                      first[v.job_id]).returncode == 0:
            first[v.job_id] = v.commit  # equal times, or a skewed clock: ancestry decides
    return first


def _duplicate(found: Verdict, index: Mapping[str, str], earlier: _Earlier) -> Verdict:
    """``found``, made BAD when another commit published its job id first: one an earlier run
    verified, else this run's first publication of it (``index``) — so every later claim
    names the publication that stands, not a claim that is itself a duplicate."""
    if not found.ok:
        return found
    first = earlier(found.job_id, found.commit) or index[found.job_id]
    if first != found.commit:
        return verdict(found.commit, found.job_id,
                       [f"job {found.job_id} was already published by {first}"],
                       found.manifest_sha256, found.manifest)
    return found


def _in_history(repo: Repository, commit: str, tip: str) -> bool:
    """Is ``commit`` in the branch's history? Assumed so below a shallow clone's boundary."""
    if not repo.has_object(commit):
        return bool(shallow_commits(repo))
    return repo.git("merge-base", "--is-ancestor", commit, tip).returncode == 0


def _rewritten(repo: Repository, memory: L.Memory, gone: Sequence[str], notes_tip: str | None,
               key: L.Key, report: ConfirmReport, lineages: Sequence[str]) -> None:
    """Checked-through points no longer in the history: BAD, unless a person accepted that."""
    for point in gone:
        accepted = L.acceptance(key, point, L.note_lines(repo, point, memory, notes_tip),
                                lineages)
        if accepted is None:
            report.rewritten.append(point)
        else:
            report.remarks.append(f"checked-through point {point} is gone from the history "
                                  f"(accepted: {accepted})")


def rewritten_line(point: str, branch_tip: str) -> str:
    return L.one_line(f"{L.BAD_LINE} checked-through point {point} is not in the history of "
                       f"the branch (at {branch_tip}) any more: it was rewritten (a force-push?)")


def note_line(v: Verdict) -> str:
    if v.ok:
        return L.one_line(f"gitpub-confirm: ok job={v.job_id}")
    return L.one_line(f"{L.BAD_LINE} job={v.job_id}: {'; '.join(v.problems)}")


def _next_ledger(ledger: L.Ledger, report: ConfirmReport, gone: Sequence[str], *,
                 checked: bool) -> L.Ledger:
    ledger = ledger.without_points(gone)
    if checked:
        ledger = ledger.checked_through(report.tip)
    return ledger.with_bad([*report.rewritten, *(v.commit for v in report.bad)]) \
        .with_prefixes(report.prefixes)


def _additions(report: ConfirmReport, index: Mapping[str, str], key: L.Key | None,
               fmt: ObjectFormat, *,
               checked: bool) -> dict[str, list[str]]:
    additions: dict[str, list[str]] = {v.commit: [note_line(v)] for v in report.verdicts}
    for point in report.rewritten:
        additions.setdefault(point, []).append(rewritten_line(point, report.tip))
    if key is not None:  # index lines nobody could believe are not written
        for job_id, commit in index.items():
            additions.setdefault(L.job_key(job_id, fmt), []).append(
                L.published_line(key, job_id, commit))
    if checked:
        additions.setdefault(report.tip, []).append(CHECKED)
    return additions


# -- writing the notes ----------------------------------------------------------------------

def restore(repo: Repository, base: str | None, memory: L.Memory) -> dict[str, list[str]]:
    """The lines of the authentic notes trees that the notes at ``base`` lack (erased since):
    written back, so no run ever authenticates a tree with less in it."""
    if base is None:
        return {}
    back: dict[str, list[str]] = {}
    base_tree = repo.commit(base).tree
    for notes in memory.trees:
        tree = repo.commit(notes).tree
        if tree == base_tree:
            continue
        # only notes the authentic tree holds, changed or gone since (C git filters): notes
        # added since are not even listed, however many someone pushed
        proc = repo.git("diff-tree", "-r", "-z", "--no-renames", "--diff-filter=DMT", tree,
                        base_tree)
        if proc.returncode != 0:
            raise GitpubError(f"cannot compare the notes trees {tree} and {base_tree}")
        for change in parse_raw_diff(proc.stdout, repo.object_format.zero):
            name = change.path.replace("/", "")
            if change.old is not None and is_object_id(name):
                back.setdefault(name, []).extend(read_note(repo, name, notes,
                                                           L.MAX_NOTE_BYTES))
    return back


def _write(repo: Repository, remote: Remote, additions: dict[str, list[str]],
           ledger: L.Ledger, subject: str, notes_tip: str | None, push: bool,
           report: ConfirmReport, key: L.Key | None, memory: L.Memory) -> str | None:
    """Our note lines and ledger on top of the remote's notes (pushed when ``push``); on a
    lost race, re-applied on top of the winner's. The local notes ref gets them too. Returns
    the notes commit the ledger was settled against."""
    base = notes_tip
    for _ in range(PUSH_ATTEMPTS):
        before = L.read_memory(repo, base, key, ledger.lineage or None) \
            if base != notes_tip else memory
        merged = ledger.merged(before.ledger) if base != notes_tip else ledger
        everything = _union(restore(repo, base, memory), additions)
        new = build_notes_commit(repo, base, everything, _message(merged, subject, key),
                                 allow_empty=key is not None and merged != before.ledger,
                                 max_bytes=L.MAX_NOTE_BYTES)
        if new is None:
            return base
        if not push:
            break
        outcome = remote.push_ref(new, NOTES_REF)
        if outcome.result == PushResult.SENT:
            report.notes_pushed = True
            break
        base = fetch_ref(remote, NOTES_REF, REMOTE_NOTES)
    else:
        raise GitpubError(f"could not push notes to {NOTES_REF}: the remote notes kept moving")
    if repo.cas_ref(NOTES_REF, None, new, subject):  # CI's fresh clone has no notes of its own
        return new
    local = repo.read_ref(NOTES_REF)
    if local == base and repo.cas_ref(NOTES_REF, local, new, subject):
        return new
    add_notes(repo, additions, subject)
    return new


def _message(ledger: L.Ledger, subject: str, key: L.Key | None) -> Callable[[str], str]:
    return lambda tree: ledger.message(subject, key, tree)


def _union(*parts: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in parts:
        for name, lines in part.items():
            out.setdefault(name, []).extend(lines)
    return out


def _settle(repo: Repository, notes: str | None, report: ConfirmReport, key: L.Key | None,
            memory: L.Memory, ledger: L.Ledger, lineages: Sequence[str]) -> None:
    """The open BAD verdicts and the acceptances. With the key: the ledger's open verdicts,
    closed by authentic acceptance lines. Without: every BAD verdict of this (whole) walk."""
    settled = L.Memory(ledger, (*memory.trees, *([notes] if notes else [])))
    opened = ledger.open_bad if key is not None else [v.commit for v in report.bad]
    for commit in dict.fromkeys(opened):
        lines = L.note_lines(repo, commit, settled, None)
        accepted = L.acceptance(key, commit, lines, lineages)
        if accepted is not None:
            report.accepted.append((commit, accepted))
            continue
        if key is None and (unverified := L.unverified_acceptance(lines)) is not None:
            report.remarks.append(f"{commit} has an acceptance that cannot be verified without "
                                  f"{KEY_ENV}, so it does not count: {unverified}")
        report.open_bad.append((commit, L.bad_line(lines) or L.BAD_LINE))
    for commit in ledger.accepted if key is not None else ():
        accepted = L.acceptance(key, commit, L.note_lines(repo, commit, settled, None),
                                lineages)
        if accepted is not None and (commit, accepted) not in report.accepted:
            report.accepted.append((commit, accepted))
