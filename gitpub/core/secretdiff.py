"""Which secrets a change brings: a file's findings judged against its version in the job's base.

A typo fixed on a documentation page that shows an AWS example key must not send the job to
REVIEW: the key is on the branch already, and what is on the branch is the branch's business
(``git pub secrets baseline`` lists it for a person, who allows it or removes it). So the secret
scan judges what a job *adds or changes*:

- a file with no version in the base is the job's whole;
- a changed file is scanned whole as well — a secret that runs across lines, or whose context
  (a key name, a quote) lies on a neighbouring line, is found as in any other text — and each
  finding is then the job's unless it is *inherited*: it lies wholly inside one run of lines the
  line diff keeps unchanged, and the base version has the very same finding (same extent) on the
  lines the diff pairs them with.

Everything else is the job's: a secret moved from another file (only the same path's base
version counts), one moved within the file (a removed and an added line), one split across a
changed line (it leaves the unchanged run), one on an unchanged line that only became a finding
through a change next to it (the base had no such finding), a key block whose END line was
removed (it now runs on into other lines).

The diff is ``difflib``'s over lines (``str.splitlines``'s line breaks), after the common head
and tail are cut off. A diff that is not minimal only makes more findings the job's, never
fewer: a run it reports is always equal lines, whatever it pairs.
"""

from __future__ import annotations

from bisect import bisect_right
from difflib import SequenceMatcher
from itertools import accumulate

from gitpub.core.sanitize import secret_spans

#: (start, end, start in the base): a run of ``new``'s text the line diff keeps from the base.
Run = tuple[int, int, int]


def _offsets(lines: list[str]) -> list[int]:
    """Where each line starts, and the text's end."""
    return [0, *accumulate(len(line) for line in lines)]


def unchanged_runs(old: str, new: str) -> list[Run]:
    """The runs of whole lines of ``new`` that the line diff keeps from ``old``, in order, each
    as (start, end, where it starts in ``old``); adjacent runs are merged."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    middle = SequenceMatcher(None, a[head:len(a) - tail], b[head:len(b) - tail])
    blocks = [(0, 0, head)]
    blocks += [(head + i, head + j, n) for i, j, n in middle.get_matching_blocks() if n]
    blocks.append((len(a) - tail, len(b) - tail, tail))
    at, bt = _offsets(a), _offsets(b)
    runs: list[Run] = []
    for i, j, n in blocks:
        if not n:
            continue
        start, end, from_old = bt[j], bt[j + n], at[i]
        if runs and runs[-1][1] == start and runs[-1][2] + (start - runs[-1][0]) == from_old:
            runs[-1] = (runs[-1][0], end, runs[-1][2])  # continues the run before, in both
        else:
            runs.append((start, end, from_old))
    return runs


class Inherited:
    """The findings of a file's base version that a new version keeps where they were.

    ``covers`` is asked about each finding of a new version (by ``core.allowlist``, also from
    ``sanitize``'s passes over a text being redacted: each text's diff is computed once)."""

    def __init__(self, old: str | None) -> None:
        self.old = old
        self._spans: frozenset[tuple[int, int]] | None = None
        self._runs: dict[str, list[Run]] = {}

    def covers(self, text: str, start: int, end: int) -> bool:
        """Whether the finding ``text[start:end]`` was in the base, unchanged and in place."""
        if self.old is None:
            return False
        runs = self._runs_of(text)
        i = bisect_right(runs, (start, len(text) + 1, 0)) - 1
        if i < 0 or not (runs[i][0] <= start and end <= runs[i][1]):
            return False
        shift = runs[i][2] - runs[i][0]
        return (start + shift, end + shift) in self._old_spans()

    def _runs_of(self, text: str) -> list[Run]:
        runs = self._runs.get(text)
        if runs is None:
            assert self.old is not None
            if len(self._runs) > 4:
                self._runs.clear()
            runs = self._runs[text] = unchanged_runs(self.old, text)
        return runs

    def _old_spans(self) -> frozenset[tuple[int, int]]:
        if self._spans is None:
            assert self.old is not None
            self._spans = frozenset((s, e) for s, e, _kind in secret_spans(self.old))
        return self._spans


#: A file new to the base: nothing of it is inherited.
NOTHING = Inherited(None)
