"""The confirm ledger: what ``git pub confirm`` remembers between runs, inside ``refs/notes/pub``,
and why it can be believed.

Five facts must survive from one CI run to the next, in a fresh clone, at a cost that does not
grow with the history:

- **which branch the runs confirm** (v4): a pushed ``.gitpub.yaml`` never redirects a run, and
  a **serial** that grows by one each run, which CI's rollback anchor compares
  (``verify.anchor``), and the **lineage** (a random name per ``--first-run``, kept in the
  anchor): a ledger of another lineage — another repository's CI with the same key — is not
  believed;
- **where the last run stopped** (the checked-through points): the next run walks only
  ``tip ^points``;
- **which BAD verdicts are still open** (not accepted by a person): BAD is sticky;
- **which trailer prefixes were ever checked**: a change of ``trailer_prefix`` never stops
  the old one from being checked;
- **which commit published each job id** (the job-id index): a later commit claiming the same
  job id is BAD.

Anyone who can push can push ``refs/notes/pub`` too, so none of this is taken on trust. CI
holds a secret key, ``GITPUB_CONFIRM_KEY`` (never stored, never shown: the sanitizer redacts
it and no child process inherits it), and everything ``confirm`` relies on is authenticated
with it (HMAC-SHA256, ``Key``):

- the *ledger* — the branch and serial, the checked-through points, the open BAD verdicts, the
  recent acceptances and the prefixes, as lines in the message of the notes commit a run
  writes — carries one MAC over all of its lines *and the notes commit's tree*. A reader
  believes only ledgers whose MAC is valid (``read_memory``): a forged point, a ledger
  without the open BAD lines, or an acceptance line appended by hand are ignored, and the
  newest authentic ledger below them applies (a forged point only means a longer walk from
  the last authentic one). A MAC proves a ledger authentic, not newest: CI's anchor
  (``verify.anchor``) catches a rollback;
- the job-id index is looked up in the *trees of authentic ledgers*, not in the notes tip: a
  note erased after the last authentic run is still there. Its lines carry their own MAC
  (``published_line``), so an index line added by hand is ignored too;
- an acceptance (``confirm --accept``) is a note line with a MAC over the commit and the line
  (``acceptance_line``): one written without the key accepts nothing.

A run writes its notes commit on top of the remote's notes (a fast-forward), with its tree the
union of the remote's notes and of every authentic tree it read (``restore``): what someone
erased since is put back, and nobody's notes are dropped.

Without a key there is nothing ``confirm`` can believe of the notes: it walks the whole history
every time, judges every claim again, and acceptances do not count (see ``verify.confirm``).

Notes commits written by others (``git notes merge``, the post-commit hook, an attacker) are
looked through to the newest authentic ledger on every path (a merge has two), at most
``SEARCH_LIMIT`` commits deep. The job-id index is one note per job id, attached to a name
derived from the id (``job_key``: the id of the blob ``gitpub-job-id <id>\\n``; no object
needs to exist). ``git notes prune`` would drop these notes (their object is absent): do not
prune ``refs/notes/pub``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from gitpub.core.sanitize import sanitize
from gitpub.git.notes import check_size, read_note
from gitpub.git.objects import ObjectFormat
from gitpub.git.repo import Repository

VERSION_LINE = "Gitpub-Confirm-Ledger: v2"
#: A ledger with facts lines (written by older gitpubs; read, never written).
VERSION_3 = "Gitpub-Confirm-Ledger: v3"
#: A ledger that names the branch it confirms and counts the runs (``serial``): what a rollback
#: anchor (``verify.anchor``) compares. Older readers see no ledger in it at all.
VERSION_4 = "Gitpub-Confirm-Ledger: v4"
FACTS = "Gitpub-Config-Facts: "
BRANCH = "Gitpub-Confirmed-Branch: "
SERIAL = "Gitpub-Ledger-Serial: "
#: The lineage a ledger belongs to (v4, optional): a random name a person's ``--first-run``
#: gives the ledgers of one repository's CI, kept in its anchor. Another repository whose CI
#: has the same key writes ledgers of another lineage, which this one's runs do not believe.
LINEAGE = "Gitpub-Ledger-Lineage: "
#: How many ``.gitpub.yaml`` files' facts a ledger keeps (the newest first).
MAX_FACTS = 4
POINT = "Gitpub-Checked-Through: "
OPEN = "Gitpub-Open-Bad: "
ACCEPTED = "Gitpub-Accepted: "
PREFIX = "Gitpub-Checked-Prefix: "
MAC = "Gitpub-Ledger-Mac: hmac-sha256:"
PUBLISHED_BY = "gitpub-confirm: published-by "
ACCEPT_LINE = "gitpub-confirm: accepted"
BAD_LINE = "gitpub-confirm: BAD"
#: How many notes commits the reader looks through for the newest authentic ledger.
SEARCH_LIMIT = 1024
#: How many checked-through points and recent acceptances a ledger keeps.
MAX_POINTS = 4
MAX_ACCEPTED = 20
#: The largest note, and the largest notes commit, ``confirm`` reads (bytes): anyone who can
#: push can push ``refs/notes/pub``, and CI's cost must not be theirs to choose. A ledger is a
#: few hundred bytes (its open BAD verdicts at 50 bytes each), a note a few lines.
MAX_NOTE_BYTES = 1 << 20
MAX_NOTES_COMMIT_BYTES = 1 << 20
#: The shortest key accepted (bytes): a MAC is only as strong as its key.
MIN_KEY_BYTES = 16
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_PREFIX_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
_TAG = re.compile(r" \[mac ([0-9a-f]{64})\]$")
_FACTS_LINE = re.compile(r"\{[ -~]*\}")  # one line of ASCII JSON (an older memo)
_BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")
_DIGITS = re.compile(r"[0-9]{1,18}")
LINEAGE_NAME = re.compile(r"[0-9a-f]{32}")


class Key(NamedTuple):
    """CI's secret: the MAC key of everything ``confirm`` must be able to believe."""

    secret: bytes

    def mac(self, *parts: str) -> str:
        data = "\0".join(("gitpub-confirm v2", *parts)).encode("utf-8", "surrogateescape")
        return hmac.new(self.secret, data, hashlib.sha256).hexdigest()

    def valid(self, tag: str, *parts: str) -> bool:
        return hmac.compare_digest(tag, self.mac(*parts))


class Ledger(NamedTuple):
    points: tuple[str, ...] = ()  # commits through which everything reachable was verified
    open_bad: tuple[str, ...] = ()  # commits with a BAD verdict no person has accepted
    accepted: tuple[str, ...] = ()  # BAD commits a person accepted (the newest first)
    prefixes: tuple[str, ...] = ()  # every trailer prefix a run has checked
    facts: tuple[str, ...] = ()  # an older gitpub's .gitpub.yaml memo lines (v3: read only)
    branch: str = ""  # the remote branch the runs confirm ("": an older ledger, v2 or v3)
    serial: int = 0  # how many keyed runs wrote a ledger before this one (v4)
    lineage: str = ""  # whose ledgers these are (v4; "": written before lineages)

    @property
    def version(self) -> int:
        return 4 if self.branch else 3 if self.facts else 2

    def merged(self, other: Ledger) -> Ledger:
        """Both ledgers' facts: two runs that raced keep each other's. A v4 ledger (ours)
        merged with anything is v4; an older ledger's memo lines are dropped then."""
        accepted = _unique((*self.accepted, *other.accepted))[:MAX_ACCEPTED]
        branch = self.branch or other.branch
        return Ledger(_unique((*self.points, *other.points))[:MAX_POINTS],
                      tuple(c for c in _unique((*self.open_bad, *other.open_bad))
                            if c not in accepted), accepted,
                      _unique((*self.prefixes, *other.prefixes)),
                      () if branch else _unique((*self.facts, *other.facts))[:MAX_FACTS],
                      branch, max(self.serial, other.serial), self.lineage or other.lineage)

    def next_run(self, branch: str, lineage: str) -> Ledger:
        """The ledger a run writes on top of this one: v4, confirming ``branch``, counted, of
        ``lineage``."""
        return self._replace(facts=(), branch=branch, serial=self.serial + 1, lineage=lineage)

    def checked_through(self, tip: str, dropped: Iterable[str] = ()) -> Ledger:
        gone = set(dropped)
        return self._replace(points=_unique(
            (tip, *(p for p in self.points if p not in gone)))[:MAX_POINTS])

    def without_points(self, dropped: Iterable[str]) -> Ledger:
        gone = set(dropped)
        return self._replace(points=tuple(p for p in self.points if p not in gone))

    def with_bad(self, commits: Iterable[str]) -> Ledger:
        return self._replace(open_bad=_unique((*self.open_bad, *commits)))

    def with_prefixes(self, prefixes: Iterable[str]) -> Ledger:
        return self._replace(prefixes=_unique((*self.prefixes, *prefixes)))

    def accept(self, commit: str) -> Ledger:
        return self._replace(points=tuple(p for p in self.points if p != commit),
                             open_bad=tuple(c for c in self.open_bad if c != commit),
                             accepted=_unique((commit, *self.accepted))[:MAX_ACCEPTED])

    def lines(self) -> list[str]:
        """The ledger's lines, as its version writes them (the MAC is over these)."""
        head = {4: [VERSION_4, BRANCH + self.branch, SERIAL + str(self.serial),
                    *([LINEAGE + self.lineage] if self.lineage else [])],
                3: [VERSION_3], 2: [VERSION_LINE]}[self.version]
        return [*head, *(POINT + p for p in self.points),
                *(OPEN + c for c in self.open_bad), *(ACCEPTED + c for c in self.accepted),
                *(PREFIX + p for p in self.prefixes),
                *(FACTS + f for f in self.facts if self.version == 3)]

    def message(self, subject: str, key: Key | None, tree: str) -> str:
        """The notes commit's message: the subject, then (with a key) the ledger and its MAC
        over the lines and ``tree``, the notes commit's tree. Without a key no ledger is
        written: nobody could believe it."""
        if key is None:
            return subject
        lines = self.lines()
        return f"{subject}\n\n" + "\n".join([*lines, MAC + key.mac("ledger", tree, *lines)])


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def parse_ledger(message: bytes) -> tuple[Ledger, str | None] | None:
    """The ledger in a notes commit's message and its MAC tag, or None if it has none."""
    lines = message.decode("utf-8", "replace").splitlines()
    if VERSION_LINE not in lines and VERSION_3 not in lines and VERSION_4 not in lines:
        return None

    def values(prefix: str, pattern: re.Pattern[str]) -> tuple[str, ...]:
        return _unique(v for ln in lines if ln.startswith(prefix)
                       and pattern.fullmatch(v := ln[len(prefix):].strip()))

    tag = next((ln[len(MAC):].strip() for ln in lines if ln.startswith(MAC)), None)
    if VERSION_4 in lines:
        branch = next((v for v in values(BRANCH, _BRANCH)), "")
        serial = next((int(v) for v in values(SERIAL, _DIGITS)), 0)
        lineage = next((v for v in values(LINEAGE, LINEAGE_NAME)), "")
        return Ledger(values(POINT, _SHA), values(OPEN, _SHA), values(ACCEPTED, _SHA),
                      values(PREFIX, _PREFIX_TOKEN), (), branch or "?", serial, lineage), tag
    facts = values(FACTS, _FACTS_LINE) if VERSION_3 in lines else ()
    return Ledger(values(POINT, _SHA), values(OPEN, _SHA), values(ACCEPTED, _SHA),
                  values(PREFIX, _PREFIX_TOKEN), facts), tag


def authentic(key: Key, message: bytes, tree: str) -> Ledger | None:
    """The ledger of a notes commit (``message``, ``tree``) if its MAC is valid."""
    found = parse_ledger(message)
    if found is None or found[1] is None:
        return None
    ledger, tag = found
    return ledger if key.valid(tag or "", "ledger", tree, *ledger.lines()) else None


class Memory(NamedTuple):
    """What ``confirm`` may believe of the notes: the authentic ledgers' facts, merged, and the
    notes trees they were written with (where the job-id index is looked up)."""

    ledger: Ledger = Ledger()
    trees: tuple[str, ...] = ()  # the notes commits of the authentic ledgers
    unauthentic: int = 0  # ledgers passed on the way whose MAC is missing or wrong
    foreign: int = 0  # authentic ledgers of another lineage passed on the way

    @property
    def found(self) -> bool:
        return bool(self.trees)


def read_memory(repo: Repository, notes_tip: str | None, key: Key | None,
                lineage: str | None = None) -> Memory:
    """The newest authentic ledger of ``lineage`` on every path back from ``notes_tip``, merged
    (nothing without a key). An authentic ledger of another lineage (another repository whose
    CI has the same key, or ledgers from before a ``--first-run``) is looked through like a
    forged one. ``lineage`` None: the lineage of the newest (highest serial) authentic ledger
    found — what a run without an anchor, or a person's ``--accept``, goes by."""
    if key is None or notes_tip is None:
        return Memory()
    memory, lineages = _read(repo, notes_tip, key, lineage)
    if lineage is None and len(lineages) > 1:
        memory, _ = _read(repo, notes_tip, key, memory.ledger.lineage)
    return memory


def _read(repo: Repository, notes_tip: str, key: Key,
          lineage: str | None) -> tuple[Memory, set[str]]:
    found: list[tuple[str, Ledger]] = []
    skipped = foreign = 0
    todo, seen = [notes_tip], set[str]()
    while todo and len(seen) < SEARCH_LIMIT:
        sha = todo.pop(0)
        if sha in seen or not repo.has_object(sha):
            continue
        seen.add(sha)
        check_size(repo, sha, MAX_NOTES_COMMIT_BYTES, f"notes commit {sha}")
        info = repo.commit(sha)
        good = authentic(key, info.message, info.tree)
        if good is not None and lineage in (None, good.lineage):
            found.append((sha, good))
            continue
        foreign += good is not None
        skipped += good is None and parse_ledger(info.message) is not None
        todo.extend(info.parents)
    # The newest first (the highest serial), whatever the order of a merge's parents: a notes
    # merge whose first parents are older authentic ledgers must not push the newest points
    # (those that show a rewritten branch) out of the ``MAX_POINTS`` kept, nor name the branch.
    found.sort(key=lambda f: -f[1].serial)
    ledger = Ledger()
    for _, good in found:
        ledger = ledger.merged(good)
    return (Memory(ledger, tuple(sha for sha, _ in found), skipped, foreign),
            {good.lineage for _, good in found})


# -- note lines that carry their own MAC ------------------------------------------------------

def job_key(job_id: str, fmt: ObjectFormat) -> str:
    """The name the job-id index note hangs on: the blob id of ``gitpub-job-id <id>\\n`` (in
    the repository's hash)."""
    return fmt.object_id(b"blob", f"gitpub-job-id {job_id}\n".encode())


def _tagged(text: str) -> tuple[str, str | None]:
    found = _TAG.search(text)
    return (text, None) if found is None else (text[:found.start()], found.group(1))


def published_line(key: Key, job_id: str, commit: str) -> str:
    line = PUBLISHED_BY + commit
    return f"{line} [mac {key.mac('published-by', job_id, commit)}]"


def published_by(key: Key | None, job_id: str, lines: Sequence[str]) -> list[str]:
    """The commits the authentic index lines among ``lines`` name as ``job_id``'s publication."""
    if key is None:
        return []
    found = []
    for ln in lines:
        text, tag = _tagged(ln)
        if not text.startswith(PUBLISHED_BY) or tag is None:
            continue
        commit = text[len(PUBLISHED_BY):].strip()
        if key.valid(tag, "published-by", job_id, commit):
            found.append(commit)
    return found


def acceptance_line(key: Key, commit: str, who: str, reason: str, lineage: str) -> str:
    """A person's acceptance of the BAD verdict on ``commit``: sanitized, one line, with a MAC
    over the commit, the line and the lineage of the ledgers it was given in (``""``: a
    ledger from before lineages) — so an acceptance given in another repository whose CI has
    the same key (a fork, with the same commits) accepts nothing here."""
    text = one_line(f"{ACCEPT_LINE} by {who}: {reason}")
    return f"{text} [mac {_acceptance_mac(key, lineage, commit, text)}]"


def _acceptance_mac(key: Key, lineage: str, commit: str, text: str) -> str:
    if not lineage:
        return key.mac("accepted", commit, text)
    return key.mac("accepted-in", lineage, commit, text)


def acceptance(key: Key | None, commit: str, lines: Sequence[str],
               lineages: Iterable[str]) -> str | None:
    """The authentic acceptance among ``commit``'s note lines (without its MAC), if any: one
    given in one of ``lineages`` (the lineages whose ledgers the run believes)."""
    if key is None:
        return None
    tags = set(lineages)
    for ln in lines:
        text, tag = _tagged(ln)
        if text.startswith(ACCEPT_LINE) and tag is not None and any(
                key.valid(tag, *(("accepted-in", lin) if lin else ("accepted",)), commit, text)
                for lin in tags):
            return text
    return None


def unverified_acceptance(lines: Sequence[str]) -> str | None:
    """An acceptance line whatever its MAC (to say that it was not counted)."""
    return next((_tagged(ln)[0] for ln in lines if ln.startswith(ACCEPT_LINE)), None)


def bad_line(lines: Sequence[str]) -> str | None:
    return next((ln for ln in lines if ln.startswith(BAD_LINE)), None)


def one_line(text: str) -> str:
    """A note line: sanitized, no control characters."""
    return "".join(ch if ch.isprintable() else " " for ch in sanitize(text))


def note_lines(repo: Repository, commit: str, memory: Memory, tip: str | None) -> list[str]:
    """``commit``'s note lines in the notes at ``tip`` and in every authentic tree (what was
    erased since the last authentic run is still found)."""
    lines: dict[str, None] = {}
    for notes in dict.fromkeys((*memory.trees, *([tip] if tip else []))):
        lines.update(dict.fromkeys(read_note(repo, commit, notes, MAX_NOTE_BYTES)))
    return list(lines)
