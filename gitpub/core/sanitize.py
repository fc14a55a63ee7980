"""The secret redactor every persisted text passes through, and the secret-scan gate's detector.

Two faces over one detector:

- :func:`sanitize` / :func:`sanitize_bytes` replace every secret with ``[REDACTED:<kind>]``
  before a text is written anywhere (job records, sources, events, error texts, logs, refs, notes).
- :func:`find_secrets` / :func:`contains_secret` tell the secret-scan gate *where* and *what kind*
  of secret a text holds, so the job goes to REVIEW. A :class:`Finding` never carries the value.

The rule table, the documentation of what is redacted, is ``core.secretrules``.

Why a hand-written pattern table and not ``detect-secrets``
------------------------------------------------------------
``detect-secrets`` 1.5.0 (PyPI, 2024) was tried on the texts gitpub handles and does not fit:

- Speed: scanning a 1 MB Markdown text without secrets took ~2.4 s (this module: ~20 ms);
  importing it took ~65-75 ms and pulls in ``requests`` (budget here: ~20 ms, no network code).
- False positives on what gitpub is full of: its Hex/Base64 high-entropy plugins flag quoted
  40-hex git SHAs and 64-hex SHA-256 digests (``"commit": "<sha>"``, ``sha256: <hex>``).
  Turning those plugins off removes the only coverage it has for generic tokens anyway.
- Coverage gaps: no OpenAI / Anthropic keys, no ``github_pat_`` fine-grained tokens, no
  ``xapp-`` Slack tokens, nothing for ``Authorization: Bearer|Basic|token`` headers.
- It reports lines, not spans: its private-key plugin flags only the ``BEGIN`` line, so a redactor
  built on it would still have to locate the secret in the line itself — the hard part.

So gitpub keeps one table, ``core.secretrules.RULES``: each rule has a kind, a compiled regex,
and a note on what it matches and why; a regex either matches the secret itself or marks it with
a group named ``s``/``s1``/… so that the context around it stays readable.

Speed (1 MB Markdown without secrets: ~20 ms) comes from letting ``re`` use its literal-prefix
search: the patterns start with a literal (``ghp_`` …) and check their left boundary with a
look-behind *after* it (the one that cannot, Stripe's, gets a substring pre-check), since a
leading look-behind or ``re.IGNORECASE`` makes ``re`` try every position (7 ms and 4x slower
per pattern, measured). Case-insensitive rules run on one lowered copy of the text instead;
see ``core.secretrules.Rule``.

Policy decisions
----------------
- Bare hex (git SHAs, SHA-256), UUIDs, base64 blobs, prose, CJK text and Markdown are never
  secrets on their own: only recognisable token formats, or values in a secret-named context, are.
- Generic ``key = value`` rules only fire on keys that *end* with password/passwd/passphrase/
  secret/api key/access key/private key/token (so ``max_tokens: 4096`` or ``password_hash`` are
  left alone). ``key: value`` with an unquoted value only counts with a space after the colon
  and the value ending the line (YAML style), so prose like ``Password: see the wiki`` and
  ``https://x-access-token:…@host`` (a URL rule's business) are left alone.
- Placeholders are *not* redacted in those generic assignments: empty values, ``$VAR``,
  ``${VAR}``, ``${{ secrets.X }}``, ``{{ x }}``, ``<your-token>``, ``%s``, ``null``/``None``/
  ``true``/bare type names, and runs of one repeated character (``********``, ``xxxxxx``).
  They carry no secret, and keeping them visible tells a reader *which* setting was missing.
  Literal stand-ins such as ``changeme`` cannot be told from real values and are redacted.
- When an ``-----BEGIN … PRIVATE KEY-----`` block has no END line, everything to the end of the
  text is redacted: a truncated key is still a key, and there is no safe place to stop earlier.
- Overlapping findings are merged into one span; its kind is the kind of the most specific rule
  (the earliest in the table), e.g. ``Authorization: Bearer ghp_…`` is a ``github-token``.
- Unquoted values are ASCII: a non-ASCII character ends them (CJK prose right after
  ``password=x`` is kept). Quoted values run to the closing quote and may hold anything.
- Line numbers count ``\\n`` only (1-based), like ``git`` and editors do.
- Not covered (too ambiguous without context): ``.netrc``'s ``password x``, ``mysql -pX``,
  keys named in other languages (``密码=``), and high-entropy strings with no context at all.

Guarantees (all tested): ``sanitize`` never raises, is idempotent, its output contains no
finding (``find_secrets(sanitize(x)) == []``), and the marker itself is never a finding.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from typing import NamedTuple

from gitpub.core.secretrules import RULES as _RULES
from gitpub.core.secretrules import secret_groups

__all__ = [
    "REDACTED_PREFIX",
    "Finding",
    "contains_secret",
    "find_secrets",
    "marker",
    "remember_secret",
    "sanitize",
    "sanitize_bytes",
    "secret_spans",
]

REDACTED_PREFIX = "[REDACTED:"

#: Secret values this process holds (``remember_secret``), redacted wherever they appear.
_KNOWN: dict[str, str] = {}


def marker(kind: str) -> str:
    """The text a secret of ``kind`` is replaced with; no rule can match it (see tests)."""
    return f"{REDACTED_PREFIX}{kind}]"


class Finding(NamedTuple):
    """Where a secret was found and what it looks like — deliberately never the value itself,
    so that a Finding can be logged, stored or shown in a REVIEW message without leaking it."""

    kind: str
    line: int  # 1-based line (counting "\n") where the secret starts


# (start, end, rule index, kind)
_Span = tuple[int, int, int, str]

# Bounded: every pass replaces at least one non-marker character, and a second pass is only ever
# needed when a redaction gives a neighbouring token the boundary it lacked before.
_MAX_PASSES = 8


def _scan(text: str, *, first_only: bool = False) -> list[_Span]:
    """All raw matches of all rules, unmerged. Never raises on any ``str``."""
    spans: list[_Span] = []
    lowered = text.lower()
    for index, rule in enumerate(_RULES):
        if not any(n in lowered for n in rule.needles):
            continue
        haystack = text
        regex = rule.regex
        if rule.ci:
            haystack = lowered
            if len(lowered) != len(text):
                regex = rule.folding_regex()
        if rule.hints and not any(h in haystack for h in rule.hints):
            continue
        if regex is not rule.regex:
            haystack = text
        groups = secret_groups(regex)  # of the regex that runs: compiled for it anyway
        for m in regex.finditer(haystack):
            start, end = m.span()
            for g in groups:
                if m.group(g) is not None:
                    start, end = m.span(g)
                    break
            if rule.accept is not None and not rule.accept(text[start:end]):
                continue
            kind = rule.classify(m) if rule.classify is not None else rule.kind
            spans.append((start, end, index, kind))
            if first_only:
                return spans
    return spans


def _merge(spans: list[_Span]) -> list[_Span]:
    """Union overlapping spans; the merged span keeps the kind of its earliest-listed rule."""
    spans.sort(key=lambda s: (s[0], -s[1], s[2]))
    merged: list[_Span] = []
    for start, end, index, kind in spans:
        if merged and start < merged[-1][1]:
            m_start, m_end, m_index, m_kind = merged[-1]
            if index < m_index:
                m_index, m_kind = index, kind
            merged[-1] = (m_start, max(m_end, end), m_index, m_kind)
        else:
            merged.append((start, end, index, kind))
    return merged


def _redact_once(text: str, spans: list[_Span]) -> str:
    parts: list[str] = []
    pos = 0
    for start, end, _, kind in spans:
        parts.append(text[pos:start])
        parts.append(marker(kind))
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def find_secrets(text: str) -> list[Finding]:
    """Each secret in ``text``, in order, as kind + 1-based line; overlapping hits count once."""
    spans = _merge(_scan(text))
    if not spans:
        return []
    newlines = [m.start() for m in re.finditer("\n", text)]
    return [Finding(kind=kind, line=bisect_right(newlines, start - 1) + 1)
            for start, _, _, kind in spans]


def contains_secret(text: str) -> bool:
    """Whether ``text`` holds any secret; stops at the first one (the gate's yes/no question)."""
    return bool(_scan(text, first_only=True))


#: A span the caller wants left as it is: ``keep(text, start, end, kind)`` (see ``sanitize``).
Keep = Callable[[str, int, int, str], bool]


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """Each secret in ``text`` as (start, end, kind), in order; overlapping hits count once.
    For callers that must look at the value (the allowlist); never store what they see."""
    return [(start, end, kind) for start, end, _, kind in _merge(_scan(text))]


def remember_secret(value: str, kind: str) -> None:
    """Redact ``value`` (a secret this process was given, e.g. CI's confirm key, which no rule
    would recognise) from every text ``sanitize`` sees from now on."""
    if len(value) >= 4:
        _KNOWN[value] = kind


def _known(text: str) -> str:
    for value, kind in _KNOWN.items():
        if value in text:
            text = text.replace(value, marker(kind))
    return text


def sanitize(text: str, keep: Keep | None = None) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``; unchanged (the same object)
    when there is none. Idempotent, and the result has no findings: redacting can hand a
    neighbouring token the boundary it lacked, so passes repeat until nothing is found.

    ``keep`` (content only: the allowlist of known non-secrets, ``core.allowlist``) leaves the
    spans it accepts as they are; then the result's findings are exactly the kept ones. Records,
    events, errors and logs never pass a ``keep``."""
    if _KNOWN:
        text = _known(text)
    for _ in range(_MAX_PASSES):
        spans = _merge(_scan(text))
        if keep is not None:
            spans = [s for s in spans if not keep(text, s[0], s[1], s[3])]
        if not spans:
            break
        text = _redact_once(text, spans)
    return text


def sanitize_bytes(data: bytes, keep: Keep | None = None) -> bytes:
    """:func:`sanitize` for bytes. Decoding with ``surrogateescape`` maps each invalid byte to a
    lone surrogate that encodes back to the same byte, so everything outside a redaction comes
    back byte for byte, whatever the encoding; unchanged input returns the same object."""
    text = data.decode("utf-8", "surrogateescape")
    cleaned = sanitize(text, keep)
    if cleaned is text:
        return data
    return cleaned.encode("utf-8", "surrogateescape")
