"""Known non-secrets: what the secret scan lets through, the way secret scanners do it.

A documentation site shows configuration examples (``HUGOxPARAMSxAPI_KEY=abcdefgh``,
``id-token: write``) that look like secrets and are not. Two ways to say so, both committed with
the site, so every writer and every reviewer sees the same rules:

- **an inline pragma** (detect-secrets' spelling): a line containing ``pragma: allowlist secret``
  lets the secrets *wholly on that line* through; ``pragma: allowlist nextline secret`` those
  wholly on the next line (for Markdown, where the pragma can hide in an HTML comment above a code
  line). A line ends at any line break (``\n``, ``\r\n``, a lone ``\r``, …); a secret that
  runs past the line's end (an unterminated private-key block) is not covered;
- **the allowlist file** ``.gitpub-allowlist`` at the repository root (as gitleaks' ignore
  file), read from the job's *base commit*, never the working tree: what is allowed is what was
  committed and pushed. One rule a line, ``#`` starts a comment::

      <path glob> <fingerprint>     the value whose fingerprint this is, in files matching the glob
      <path glob> re:<regex>        any value the regex matches in full, in those files

  The fingerprint is the first 16 hex digits (or more) of the SHA-256 of the value, as the
  REVIEW message prints it (``printf %s VALUE | sha256sum`` computes it too). Like the hashed
  secrets of a detect-secrets baseline, it names a value without spelling it, but confirms a
  guess: allowlist only values that are public anyway.

Each rule is scoped to its paths and each pragma to its line: the same value anywhere else is
still a secret. A third thing lets a finding through without anybody saying so: the base version
of the same file had it, unchanged and in place (``core.secretdiff``) — it is the branch's, not
the job's, and ``git pub secrets baseline`` turns such findings into rules a person reviews.
Every use is recorded in the job's history (path, line, kind, fingerprint and the
rule, never the value). What is allowed may appear in the published content — and so in the
job's source and artifacts, which are that content — but never in records, events, errors or
logs: those are sanitized with no allowlist at all.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gitpub.core.errors import UsageError
from gitpub.core.globs import matcher, path_problem
from gitpub.core.sanitize import Keep, secret_spans
from gitpub.core.secretdiff import NOTHING, Inherited

ALLOWLIST_FILE = ".gitpub-allowlist"
PRAGMA = "pragma: allowlist secret"
NEXTLINE_PRAGMA = "pragma: allowlist nextline secret"
#: What lets through a finding the job's base already had, unchanged and in place.
INHERITED = "unchanged from the base"
FINGERPRINT_LENGTH = 16
_HEX = re.compile(rf"[0-9a-f]{{{FINGERPRINT_LENGTH},64}}")


class AllowlistError(UsageError):
    """A line of ``.gitpub-allowlist`` that is not a rule."""


def fingerprint(value: str) -> str:
    """The name of a secret's value in messages and allowlist rules (never the value)."""
    digest = hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()
    return digest[:FINGERPRINT_LENGTH]


@dataclass(frozen=True)
class Rule:
    line: int  # in ALLOWLIST_FILE, for the record of its uses
    glob: str
    fingerprint: str | None = None  # a hex prefix of the value's SHA-256
    pattern: str | None = None  # a regex the value must match in full

    def allows(self, paths: Sequence[str], value: str) -> bool:
        if not any(matcher((self.glob,))(p) for p in paths):
            return False
        if self.fingerprint is not None:
            digest = hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()
            return digest.startswith(self.fingerprint)
        assert self.pattern is not None
        return re.fullmatch(self.pattern, value) is not None

    @property
    def name(self) -> str:
        return f"{ALLOWLIST_FILE}:{self.line}"


@dataclass(frozen=True)
class Allowlist:
    rules: tuple[Rule, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Allowlist:
        """The rules of an allowlist file; ``AllowlistError`` names the first bad line."""
        return cls(tuple(rule for n, line in enumerate(text.splitlines(), 1)
                         if (rule := _rule(n, line)) is not None))

    def rule_for(self, paths: Sequence[str], value: str) -> Rule | None:
        return next((r for r in self.rules if r.allows(paths, value)), None)


def _rule(n: int, line: str) -> Rule | None:
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    glob, _, matcher_text = line.partition(" ")
    matcher_text = matcher_text.strip()
    where = f"{ALLOWLIST_FILE}:{n}"
    if not matcher_text:
        raise AllowlistError(f"{where}: expected '<path glob> <fingerprint>' or "
                             "'<path glob> re:<regex>'", hint="see docs/content-rules.md, "
                             "'Known non-secrets'; '**' as the glob means every path")
    problem = path_problem(glob)
    if problem is not None:
        raise AllowlistError(f"{where}: path glob {problem[0]}", hint=problem[1])
    if matcher_text.startswith("re:"):
        try:
            re.compile(matcher_text[3:])
        except re.error as e:
            raise AllowlistError(f"{where}: invalid regex: {e}") from None
        return Rule(n, glob, pattern=matcher_text[3:])
    if not _HEX.fullmatch(matcher_text):
        raise AllowlistError(
            f"{where}: expected a fingerprint ({FINGERPRINT_LENGTH} to 64 lower-case hex "
            "digits) or re:<regex>", hint="the REVIEW message prints each finding's fingerprint")
    return Rule(n, glob, fingerprint=matcher_text)


# -- scanning with the allowlist ------------------------------------------------------------

@dataclass(frozen=True)
class Hit:
    """One secret found in a file: where, what kind, its fingerprint, and what allowed it
    (None: nothing did, it is a secret). Never the value."""

    label: str  # the file, for messages
    line: int
    kind: str
    fingerprint: str
    allowed_by: str | None

    def problem(self) -> str:
        return (f"{self.label}:{self.line}: possible secret ({self.kind}, "
                f"fingerprint {self.fingerprint})")

    def use(self) -> str:
        return f"{self.label}:{self.line} {self.kind} {self.fingerprint} ({self.allowed_by})"


#: Every line break a reader may see, as ``str.splitlines`` knows them (CommonMark's ``\r\n``,
#: ``\r`` and ``\n`` among them): a pragma's line ends at the first of any of them, so a file with
#: ``\r``-only line endings is not one long line for a pragma to cover.
_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_BREAK = re.compile("\r\n|[" + _BREAKS + "]")


def _line_bounds(text: str, pos: int) -> tuple[int, int]:
    """(start, end) of the line holding ``pos`` (``end``: where its line break starts)."""
    start = max(text.rfind(c, 0, pos) for c in _BREAKS) + 1
    ends = [i for c in _BREAKS if (i := text.find(c, pos)) >= 0]
    return start, min(ends, default=len(text))


def _line_number(text: str, pos: int) -> int:
    return len(_BREAK.findall(text, 0, pos)) + 1


def _allowed_by(text: str, start: int, end: int, paths: Sequence[str],
                allowlist: Allowlist, inherited: Inherited = NOTHING) -> str | None:
    """What lets the secret ``text[start:end]`` through, or None. A pragma covers only a
    secret that lies wholly on its own line (``nextline``: wholly on the next line): a
    private-key block with no END line runs to the end of the text, and a pragma on its BEGIN
    line must not let through what follows. A finding the base version of the file already had
    where it is now is not the job's (``core.secretdiff``)."""
    line_start, line_end = _line_bounds(text, start)
    on_one_line = end <= line_end
    if on_one_line and PRAGMA in text[line_start:line_end]:
        return "pragma"
    if on_one_line and line_start > 0:
        previous_end = line_start - 1
        if previous_end > 0 and text[previous_end - 1:previous_end + 1] == "\r\n":
            previous_end -= 1
        previous_start, _ = _line_bounds(text, previous_end)
        if NEXTLINE_PRAGMA in text[previous_start:previous_end]:
            return "pragma on the line before"
    rule = allowlist.rule_for(paths, text[start:end]) if allowlist.rules else None
    if rule is not None:
        return rule.name
    return INHERITED if inherited.covers(text, start, end) else None


def scan(text: str, paths: Sequence[str], allowlist: Allowlist, label: str,
         inherited: Inherited = NOTHING) -> list[Hit]:
    """Every secret of ``text`` (a file to publish at one of ``paths``, whose version in the
    job's base ``inherited`` knows), allowed or not."""
    hits = []
    for start, end, kind in secret_spans(text):
        hits.append(Hit(label, _line_number(text, start), kind,
                        fingerprint(text[start:end]),
                        _allowed_by(text, start, end, paths, allowlist, inherited)))
    return hits


#: No rules: only pragmas allow anything.
NO_RULES = Allowlist()


def keep(paths: Sequence[str], allowlist: Allowlist, inherited: Inherited = NOTHING) -> Keep:
    """The ``sanitize`` predicate that keeps exactly what ``scan`` reports as allowed."""

    def keep_span(text: str, start: int, end: int, _kind: str) -> bool:
        return _allowed_by(text, start, end, paths, allowlist, inherited) is not None

    return keep_span
