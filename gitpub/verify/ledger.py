"""The confirm ledger: what ``git pub confirm`` remembers between runs, inside ``refs/notes/pub``.

Three facts must survive from one CI run to the next, in a fresh clone, at a cost that does not
grow with the history:

- **where the last run stopped** (the checked-through points): the next run walks only
  ``tip ^points``;
- **which BAD verdicts are still open** (not accepted by a person): BAD is sticky, so every run
  fails while one is open, not just the run that found it;
- **which commit published each job id**: a later commit claiming the same job id is BAD.

The first two are lines in the message of every notes commit that ``confirm`` writes (the
*ledger*; one small object, read from the notes ref's tip). A run carries the ledger forward:
the points it checked through, the open BAD verdicts of the ledger it built on plus its own,
less those a person accepted (``confirm --accept``), and the acceptances recorded since. Notes
commits written by others (``git notes merge``, the post-commit hook) carry no ledger: the
reader looks through them to the newest ledger on every path (a merge has two).

The job-id index is one note per job id, attached to a name derived from the id
(``job_key``: the id of the blob ``gitpub-job-id <id>\\n``; no object needs to exist), so a
lookup is one path in the notes tree. Its lines are ``gitpub-confirm: published-by <commit>``.
``git notes prune`` would drop these notes (their object is absent): do not prune
``refs/notes/pub``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from gitpub.git.repo import Repository

VERSION_LINE = "Gitpub-Confirm-Ledger: v1"
POINT = "Gitpub-Checked-Through: "
OPEN = "Gitpub-Open-Bad: "
ACCEPTED = "Gitpub-Accepted: "
PUBLISHED_BY = "gitpub-confirm: published-by "
ACCEPT_LINE = "gitpub-confirm: accepted"
#: How many notes commits the reader looks through for the newest ledger on each path.
SEARCH_LIMIT = 64
#: How many checked-through points and recent acceptances a ledger keeps.
MAX_POINTS = 4
MAX_ACCEPTED = 20


@dataclass(frozen=True)
class Ledger:
    points: tuple[str, ...] = ()  # commits through which everything reachable was verified
    open_bad: tuple[str, ...] = ()  # commits with a BAD verdict no person has accepted
    accepted: tuple[str, ...] = ()  # BAD commits a person accepted (the newest first)

    def merged(self, other: Ledger) -> Ledger:
        """Both ledgers' facts: two runs that raced keep each other's."""
        accepted = _unique((*self.accepted, *other.accepted))[:MAX_ACCEPTED]
        return Ledger(_unique((*self.points, *other.points))[:MAX_POINTS],
                      tuple(c for c in _unique((*self.open_bad, *other.open_bad))
                            if c not in accepted), accepted)

    def checked_through(self, tip: str) -> Ledger:
        return replace(self, points=_unique((tip, *self.points))[:MAX_POINTS])

    def with_bad(self, commits: Iterable[str]) -> Ledger:
        return replace(self, open_bad=_unique((*self.open_bad, *commits)))

    def accept(self, commit: str) -> Ledger:
        return Ledger(self.points, tuple(c for c in self.open_bad if c != commit),
                      _unique((commit, *self.accepted))[:MAX_ACCEPTED])

    def message(self, subject: str) -> str:
        lines = [VERSION_LINE, *(POINT + p for p in self.points),
                 *(OPEN + c for c in self.open_bad), *(ACCEPTED + c for c in self.accepted)]
        return f"{subject}\n\n" + "\n".join(lines)


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _is_sha(text: str) -> bool:
    return len(text) == 40 and all(c in "0123456789abcdef" for c in text)


def parse_ledger(message: bytes) -> Ledger | None:
    """The ledger in a notes commit's message, or None if it has none."""
    lines = message.decode("utf-8", "replace").splitlines()
    if VERSION_LINE not in lines:
        return None
    def values(prefix: str) -> tuple[str, ...]:
        return _unique(v for ln in lines if ln.startswith(prefix)
                       and _is_sha(v := ln[len(prefix):].strip()))
    return Ledger(values(POINT), values(OPEN), values(ACCEPTED))


def read_ledger(repo: Repository, notes_tip: str | None) -> Ledger:
    """The newest ledger on every path back from ``notes_tip``, merged."""
    ledger = Ledger()
    todo = [] if notes_tip is None else [notes_tip]
    seen: set[str] = set()
    while todo and len(seen) < SEARCH_LIMIT:
        sha = todo.pop(0)
        if sha in seen or not repo.has_object(sha):
            continue
        seen.add(sha)
        info = repo.commit(sha)
        found = parse_ledger(info.message)
        if found is not None:
            ledger = ledger.merged(found)
        else:
            todo.extend(info.parents)
    return ledger


def job_key(job_id: str) -> str:
    """The name the job-id index note hangs on: the blob id of ``gitpub-job-id <id>\\n``."""
    data = f"gitpub-job-id {job_id}\n".encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def published_by(lines: Sequence[str]) -> list[str]:
    return [ln[len(PUBLISHED_BY):].strip() for ln in lines if ln.startswith(PUBLISHED_BY)]


def acceptance(lines: Sequence[str]) -> str | None:
    """The acceptance line of a commit's note, if a person accepted its BAD verdict."""
    return next((ln for ln in lines if ln.startswith(ACCEPT_LINE)), None)
