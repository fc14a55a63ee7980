"""The secret redactor every persisted text passes through, and the secret-scan gate's detector.

Two faces over one detector:

- :func:`sanitize` / :func:`sanitize_bytes` replace every secret with ``[REDACTED:<kind>]``
  before a text is written anywhere (job records, sources, events, error texts, logs, refs, notes).
- :func:`find_secrets` / :func:`contains_secret` tell the secret-scan gate *where* and *what kind*
  of secret a text holds, so the job goes to REVIEW. A :class:`Finding` never carries the value.

(Past 500 lines on purpose: most of it is the rule table, which is the documentation of what is
redacted and must be read as one piece.)

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

So this module keeps one table, :data:`_RULES`: each rule has a kind, a compiled regex, and a note
on what it matches and why. A regex either matches the secret itself, or marks the secret with a
group named ``s``/``s1``/``s2``/… so that the context around it (a key name, a URL's scheme and
host, the ``Authorization: Bearer`` prefix) stays readable.

Speed (1 MB Markdown without secrets: ~20 ms) comes from letting ``re`` use its literal-prefix
search: the patterns start with a literal (``ghp_`` …) and check their left boundary with a
look-behind *after* it (the one that cannot, Stripe's, gets a substring pre-check), since a
leading look-behind or ``re.IGNORECASE`` makes ``re`` try every position (7 ms and 4x slower
per pattern, measured). Case-insensitive rules run on one lowered copy of the text instead;
see :class:`_Rule`.

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

import functools
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Finding:
    """Where a secret was found and what it looks like — deliberately never the value itself,
    so that a Finding can be logged, stored or shown in a REVIEW message without leaking it."""

    kind: str
    line: int  # 1-based line (counting "\n") where the secret starts


class _LazyRegex:
    """A pattern compiled on first use: compiling the whole table costs ~10 ms, paid by every
    gitpub process at import otherwise, while most texts need few rules or none (see
    ``_Rule.needles``)."""

    __slots__ = ("flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags

    @property
    def compiled(self) -> re.Pattern[str]:
        return _compile(self.pattern, self.flags)

    @property
    def groupindex(self) -> Mapping[str, int]:
        return self.compiled.groupindex

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(text)


@functools.cache
def _compile(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


@dataclass(frozen=True)
class _Rule:
    """One entry of the detector table.

    ``needles``: lower-case literal substrings one of which the *lower-cased* text must contain
    for the rule to match at all (lower-casing keeps every ASCII letter ASCII, so this is a sound
    pre-check for case-sensitive and case-insensitive rules alike). A rule whose needles are all
    absent is neither compiled nor run: typical texts (event reasons, paths, hashes) never pay
    for the table. The tests plant every kind to prove each rule's needles sound.
    ``hints``: the same, for patterns that cannot start with a literal, looked up in the text the
    rule runs on.
    ``ci``: ASCII case-insensitive. Such a pattern is written in lower case and run, case
    sensitively, on ``text.lower()`` (its hints are looked up there too): ``re.IGNORECASE`` makes
    ``re`` give up its prefix search and costs 4x on a 1 MB text. Offsets only carry over when
    lowering kept every character one character long; otherwise (e.g. U+0130) the same pattern
    runs on the original text with ``IGNORECASE | ASCII``. Either way a hint is a sound pre-check.
    ``accept``: optional check on the secret's text, taken from the original (e.g. no placeholder).
    ``classify``: optional refinement of ``kind`` from the match (e.g. Basic vs Bearer).
    """

    kind: str
    regex: _LazyRegex
    why: str
    needles: tuple[str, ...]
    hints: tuple[str, ...] = ()
    ci: bool = False
    accept: Callable[[str], bool] | None = None
    classify: Callable[[re.Match[str]], str] | None = None

    def secret_groups(self) -> tuple[str, ...]:
        return tuple(g for g in self.regex.groupindex if re.fullmatch(r"s\d*", g))

    def folding_regex(self) -> _LazyRegex:
        """The case-folding twin of a ``ci`` pattern, for texts whose lower() shifts offsets."""
        return _folding_regex(self.regex.pattern, self.regex.flags)


def _folding_regex(pattern: str, flags: int) -> _LazyRegex:
    return _LazyRegex(pattern, (flags & ~re.UNICODE) | re.IGNORECASE | re.ASCII)


# Characters allowed in an unquoted assignment value: printable ASCII minus whitespace, quotes,
# backslash (escapes in JSON-in-JSON), and the separators that end a value in query strings,
# argument lists and shell (`, ; & < >`).
_UNQUOTED = r"""[^\x00-\x20\x7f-\U0010ffff"'`,;&<>\\]+"""
# Where an unquoted `key: value` must end to count (YAML style): end of line, a trailing comment,
# a JSON-escaped newline or the closing quote of an enclosing string.
_YAML_END = r"""(?=[ \t]*(?:\#[^\r\n]*)?(?:[\r\n]|\Z|\\[nr]|\\*["']))"""
# A quoted value: the opening quote (possibly backslash-escaped, as in JSON embedded in JSON),
# then anything but a newline up to the same quote; a missing closing quote runs to end of line.
# The group names are parameters so the two alternatives below get distinct names.
_QUOTED = r"""\\*(?P<{q}>["'])(?P<{s}>(?:(?!\\*(?P={q}))[^\r\n])+)"""

_PLACEHOLDER = _LazyRegex(
    r"""
      \[REDACTED:.*                     # our own marker: keeps sanitize idempotent
    | \$[A-Za-z_][A-Za-z0-9_]*          # $VAR
    | \$\{.*                            # ${VAR}, ${{ secrets.X }}
    | \$\(.*                            # $(command)
    | \{\{.*\}\}                        # {{ template }}
    | <[^<>]*>                          # <your-token>
    | %\(?[A-Za-z_]*\)?s                # %s, %(name)s
    | (.)\1*                            # ********, xxxxxxxx, ....
    | null|none|nil|undefined|true|false
    | str|string|bytes|int|bool|any|object|optional|secretstr   # type annotations
    """,
    re.VERBOSE | re.IGNORECASE | re.DOTALL,
)


def _not_placeholder(value: str) -> bool:
    return _PLACEHOLDER.compiled.fullmatch(value.strip()) is None


def _url_userinfo_is_secret(userinfo: str) -> bool:
    """``user:pass@`` always is; a lone ``user@`` only when it looks like a token (``TOKEN@host``),
    so ``ssh://git@github.com`` and ``https://alice@example.com`` stay as they are."""
    if ":" in userinfo:
        return True
    return (
        len(userinfo) >= 16
        and any(c.isdigit() for c in userinfo)
        and any(c.isalpha() for c in userinfo)
    )


def _classify_assignment(m: re.Match[str]) -> str:
    key = m.group("k").lower()
    if key.startswith(("pass", "_pwd")):
        return "password-assignment"
    if key == "token":
        return "token-assignment"
    if key.startswith(("api", "access")):
        return "api-key-assignment"
    return "secret-assignment"


def _classify_auth(m: re.Match[str]) -> str:
    return "basic-auth" if m.group("scheme").lower() == "basic" else "bearer-token"


_BEGIN_KEY = r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
_END_KEY = r"-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"

# The table. Order matters only for naming: when findings overlap, the kind of the earliest rule
# wins, so specific formats come before generic contexts.
_RULES: tuple[_Rule, ...] = (
    _Rule(
        kind="private-key",
        needles=("-----begin",),
        regex=_LazyRegex(rf"{_BEGIN_KEY}.*?(?:{_END_KEY}|\Z)", re.DOTALL),
        why="PEM/OpenSSH/PGP private keys: the whole block from BEGIN through END, also when "
        "JSON-escaped onto one line; with no END line, to the end of the text.",
    ),
    _Rule(
        kind="github-token",
        needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        regex=_LazyRegex(
            r"g(?<![A-Za-z0-9]g)(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{30,})"
            r"(?![A-Za-z0-9_])"
        ),
        why="GitHub classic (ghp_/gho_/ghu_/ghs_/ghr_ + 36 base62) and fine-grained (github_pat_) "
        "tokens; the prefixes are reserved by GitHub, so no context is needed.",
    ),
    _Rule(
        kind="gitlab-token",
        needles=("glpat-", "gldt-", "glrt-", "glrtr-", "glptt-", "glft-", "glimt-", "glagent-",
                 "glcbt-", "glsoat-", "gloas-", "glffct-", "glwt-"),
        regex=_LazyRegex(
            r"gl(?<![A-Za-z0-9_-]gl)(?:pat|dt|rt|rtr|ptt|ft|imt|agent|cbt|soat|oas|ffct|wt)-"
            r"[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+)*"
        ),
        why="GitLab personal/deploy/runner/trigger/feed/… tokens (documented gl*- prefixes), "
        "including the newer routable form with dot-separated parts. An explicit prefix list, "
        "since a generic gl[a-z]+- would hit package names like glibc-devel-….",
    ),
    _Rule(
        kind="slack-token",
        needles=("xox", "xapp-"),
        regex=_LazyRegex(
            r"x(?<![A-Za-z0-9_-]x)(?:ox[abposre]-[A-Za-z0-9-]{10,}|app-[0-9]+-[A-Za-z0-9-]{10,})"
        ),
        why="Slack bot/user/app/config tokens (xoxb-, xoxp-, xoxa-, xoxs-, xoxe-, xoxr-, xapp-).",
    ),
    _Rule(
        kind="slack-webhook",
        needles=("hooks.slack.com/",),
        regex=_LazyRegex(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_/-]+)"
        ),
        why="Slack incoming-webhook URLs: the path is the credential; the host stays readable.",
    ),
    _Rule(
        kind="aws-access-key",
        needles=("akia", "asia", "abia", "acca", "a3t"),
        regex=_LazyRegex(
            r"A(?<![A-Za-z0-9]A)(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"
        ),
        why="AWS access key ids: 4-character type prefix + 16 upper-case base32-ish characters, "
        "exactly 20 long (a longer run is something else, e.g. inside base64).",
    ),
    _Rule(
        kind="aws-secret-key",
        needles=("access",),
        regex=_LazyRegex(
            r"""secret_?access_?key(?:\\*["'])?[ \t]*(?:[:=]|=>)[ \t]*(?:\\*["'])?"""
            r"""(?P<s>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"""
        ),
        why="AWS secret access keys (40 base64 characters) after aws_secret_access_key / "
        "SecretAccessKey; the value alone is indistinguishable from other base64.",
        ci=True,
    ),
    _Rule(
        kind="anthropic-key",
        needles=("sk-ant-",),
        regex=_LazyRegex(r"sk-ant-(?<![A-Za-z0-9_-]sk-ant-)[A-Za-z0-9_-]{20,}"),
        why="Anthropic API keys (sk-ant-api03-…, sk-ant-admin01-…).",
    ),
    _Rule(
        kind="openai-key",
        needles=("sk-",),
        regex=_LazyRegex(r"sk-(?<![A-Za-z0-9_-]sk-)(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{20,}"),
        why="OpenAI-style keys (sk-…, sk-proj-…, sk-svcacct-…): sk- + 20 or more key characters "
        "with at least one digit, so hyphenated words such as sk-learn-style slugs are not hit.",
    ),
    _Rule(
        kind="stripe-key",
        needles=("k_live_", "k_test_"),
        regex=_LazyRegex(r"(?<![A-Za-z0-9_])[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"),
        why="Stripe secret and restricted keys (publishable pk_ keys are public and left alone).",
        hints=("k_live_", "k_test_"),
    ),
    _Rule(
        kind="google-api-key",
        needles=("aiza",),
        regex=_LazyRegex(r"AIza(?<![A-Za-z0-9_-]AIza)[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
        why="Google API keys: AIza + 35 characters.",
    ),
    _Rule(
        kind="npm-token",
        needles=("npm_",),
        regex=_LazyRegex(r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9_])"),
        why="npm access tokens: npm_ + 36 base62 characters.",
    ),
    _Rule(
        kind="pypi-token",
        needles=("pypi-",),
        regex=_LazyRegex(r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{40,}"),
        why="PyPI / TestPyPI API tokens: macaroons whose base64 starts with the issuer's name.",
    ),
    _Rule(
        kind="huggingface-token",
        needles=("hf_",),
        regex=_LazyRegex(r"hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}(?![A-Za-z0-9_])"),
        why="Hugging Face access tokens: hf_ + 34 base62 characters (hf_snake_case names have _).",
    ),
    _Rule(
        kind="jwt",
        needles=("eyj",),
        regex=_LazyRegex(
            r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
        ),
        why="JSON Web Tokens: base64url('{\"…') . base64url('{\"…') . signature (may be empty).",
    ),
    _Rule(
        kind="url-credentials",
        needles=("://",),
        regex=_LazyRegex(r"""://(?<=[A-Za-z0-9]://)(?P<s>[^\s/?#"'<>\[\]\\`]+)@(?=[A-Za-z0-9\[])"""),
        why="Credentials in a URL's userinfo (https://user:pass@host, https://TOKEN@github.com, "
        "postgres://u:p@db): the userinfo up to the last @ is redacted, scheme and host stay.",
        accept=_url_userinfo_is_secret,
    ),
    _Rule(
        kind="bearer-token",
        needles=("authorization",),
        regex=_LazyRegex(
            r"""authorization(?:\\*["'])?[ \t]*[:=][ \t]*(?:\\*["'])?[ \t]*"""
            r"""(?P<scheme>bearer|basic|token|bot|oauth|apikey)[ \t]+"""
            r"""(?P<s>[A-Za-z0-9._~+/-]{8,}=*)"""
        ),
        why="Authorization / Proxy-Authorization headers (also as JSON or dict entries) with "
        "the Bearer, Basic (-> basic-auth), token, Bot, OAuth or ApiKey scheme. $VAR and "
        "<token> placeholders do not match the token alphabet.",
        ci=True,
        classify=_classify_auth,
    ),
    _Rule(
        kind="bearer-token",
        needles=("bearer",),
        regex=_LazyRegex(
            r"bearer(?<![A-Za-z0-9_-]bearer)[ \t]+"
            r"(?P<s>(?=[A-Za-z._~+/-]*[0-9])[A-Za-z0-9._~+/-]{16,}=*)"
        ),
        why="'Bearer <token>' outside a header (curl lines, logs): 16+ token characters with a "
        "digit, so prose like 'Bearer authentication' is not hit.",
        ci=True,
    ),
    _Rule(
        kind="password-assignment",
        needles=("pass", "_pwd", "secret", "private", "api", "access", "token"),
        regex=_LazyRegex(
            r"(?P<k>pass(?:word|wd|phrase)|_pwd|secret(?:[_-]?key)?|private[_-]?key"
            r"|api[_-]?key|access[_-]?key|token)"
            r"""(?:\\*["'])?[ \t]*"""
            r"(?:(?::=|=>|==?)[ \t]*(?:" + _QUOTED.format(q="q1", s="s1") + r"|(?P<s2>"
            + _UNQUOTED + r"))"
            r"|:(?:[ \t]*" + _QUOTED.format(q="q2", s="s3") + r"|[ \t]+(?P<s4>" + _UNQUOTED + r")"
            + _YAML_END + r"))"
        ),
        why="Values assigned to a key that ends in password/passwd/passphrase/_pwd (kind "
        "password-assignment), secret/secret_key/private_key (secret-assignment), api_key/"
        "apikey/access_key (api-key-assignment) or token (token-assignment): key=value, "
        "key: value (YAML: a space after the colon, value ends the line), \"key\": \"value\" "
        "(JSON, also escaped), export KEY=value, key => value, key := value. The key name "
        "stays; placeholders are kept.",
        ci=True,
        accept=_not_placeholder,
        classify=_classify_assignment,
    ),
)

@functools.cache
def _secret_groups(index: int) -> tuple[str, ...]:
    return _RULES[index].secret_groups()

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
        groups = _secret_groups(index)
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
