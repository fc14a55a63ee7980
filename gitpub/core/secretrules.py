"""The secret rules: what ``core.sanitize`` redacts and the secret-scan gate reports.

One table, :data:`RULES`, read as one piece: each rule has a kind, a compiled regex, and a note
on what it matches and why (the policy and the speed reasoning are in ``core.sanitize``). A
regex either matches the secret itself, or marks the secret with a group named ``s``/``s1``/
``s2``/… so that the context around it (a key name, a URL's scheme and host, the
``Authorization: Bearer`` prefix) stays readable. The table's order is its priority: of two
overlapping findings, the earlier rule names the kind.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple


class _LazyRegex:
    """A pattern compiled on first use: compiling the whole table costs ~10 ms, paid by every
    gitpub process at import otherwise, while most texts need few rules or none (see
    ``Rule.needles``)."""

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


class Rule(NamedTuple):
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
        return secret_groups(self.regex)

    def folding_regex(self) -> _LazyRegex:
        """The case-folding twin of a ``ci`` pattern, for texts whose lower() shifts offsets."""
        return _folding_regex(self.regex.pattern, self.regex.flags)


def secret_groups(regex: _LazyRegex) -> tuple[str, ...]:
    """The groups of ``regex`` that mark the secret (``s``, ``s1``, …), from the pattern it
    compiles to anyway when it runs: nothing is compiled that is not run."""
    return _secret_groups(regex.pattern, regex.flags)


@functools.cache
def _secret_groups(pattern: str, flags: int) -> tuple[str, ...]:
    return tuple(g for g in _compile(pattern, flags).groupindex if re.fullmatch(r"s\d*", g))


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
RULES: tuple[Rule, ...] = (
    Rule(
        kind="private-key",
        needles=("-----begin",),
        regex=_LazyRegex(rf"{_BEGIN_KEY}.*?(?:{_END_KEY}|\Z)", re.DOTALL),
        why="PEM/OpenSSH/PGP private keys: the whole block from BEGIN through END, also when "
        "JSON-escaped onto one line; with no END line, to the end of the text.",
    ),
    Rule(
        kind="github-token",
        needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        regex=_LazyRegex(
            r"g(?<![A-Za-z0-9]g)(?:h[pousr]_[A-Za-z0-9]{30,}|ithub_pat_[A-Za-z0-9_]{30,})"
            r"(?![A-Za-z0-9_])"
        ),
        why="GitHub classic (ghp_/gho_/ghu_/ghs_/ghr_ + 36 base62) and fine-grained (github_pat_) "
        "tokens; the prefixes are reserved by GitHub, so no context is needed.",
    ),
    Rule(
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
    Rule(
        kind="slack-token",
        needles=("xox", "xapp-"),
        regex=_LazyRegex(
            r"x(?<![A-Za-z0-9_-]x)(?:ox[abposre]-[A-Za-z0-9-]{10,}|app-[0-9]+-[A-Za-z0-9-]{10,})"
        ),
        why="Slack bot/user/app/config tokens (xoxb-, xoxp-, xoxa-, xoxs-, xoxe-, xoxr-, xapp-).",
    ),
    Rule(
        kind="slack-webhook",
        needles=("hooks.slack.com/",),
        regex=_LazyRegex(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9_/-]+)"
        ),
        why="Slack incoming-webhook URLs: the path is the credential; the host stays readable.",
    ),
    Rule(
        kind="aws-access-key",
        needles=("akia", "asia", "abia", "acca", "a3t"),
        regex=_LazyRegex(
            r"A(?<![A-Za-z0-9]A)(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"
        ),
        why="AWS access key ids: 4-character type prefix + 16 upper-case base32-ish characters, "
        "exactly 20 long (a longer run is something else, e.g. inside base64).",
    ),
    Rule(
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
    Rule(
        kind="anthropic-key",
        needles=("sk-ant-",),
        regex=_LazyRegex(r"sk-ant-(?<![A-Za-z0-9_-]sk-ant-)[A-Za-z0-9_-]{20,}"),
        why="Anthropic API keys (sk-ant-api03-…, sk-ant-admin01-…).",
    ),
    Rule(
        kind="openai-key",
        needles=("sk-",),
        regex=_LazyRegex(r"sk-(?<![A-Za-z0-9_-]sk-)(?=[A-Za-z_-]*[0-9])[A-Za-z0-9_-]{20,}"),
        why="OpenAI-style keys (sk-…, sk-proj-…, sk-svcacct-…): sk- + 20 or more key characters "
        "with at least one digit, so hyphenated words such as sk-learn-style slugs are not hit.",
    ),
    Rule(
        kind="stripe-key",
        needles=("k_live_", "k_test_"),
        regex=_LazyRegex(r"(?<![A-Za-z0-9_])[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"),
        why="Stripe secret and restricted keys (publishable pk_ keys are public and left alone).",
        hints=("k_live_", "k_test_"),
    ),
    Rule(
        kind="google-api-key",
        needles=("aiza",),
        regex=_LazyRegex(r"AIza(?<![A-Za-z0-9_-]AIza)[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"),
        why="Google API keys: AIza + 35 characters.",
    ),
    Rule(
        kind="npm-token",
        needles=("npm_",),
        regex=_LazyRegex(r"npm_(?<![A-Za-z0-9_]npm_)[A-Za-z0-9]{36}(?![A-Za-z0-9_])"),
        why="npm access tokens: npm_ + 36 base62 characters.",
    ),
    Rule(
        kind="pypi-token",
        needles=("pypi-",),
        regex=_LazyRegex(r"pypi-(?:AgEIcHlwaS5vcmc|AgENdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{40,}"),
        why="PyPI / TestPyPI API tokens: macaroons whose base64 starts with the issuer's name.",
    ),
    Rule(
        kind="huggingface-token",
        needles=("hf_",),
        regex=_LazyRegex(r"hf_(?<![A-Za-z0-9_]hf_)[A-Za-z0-9]{30,}(?![A-Za-z0-9_])"),
        why="Hugging Face access tokens: hf_ + 34 base62 characters (hf_snake_case names have _).",
    ),
    Rule(
        kind="jwt",
        needles=("eyj",),
        regex=_LazyRegex(
            r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"
        ),
        why="JSON Web Tokens: base64url('{\"…') . base64url('{\"…') . signature (may be empty).",
    ),
    Rule(
        kind="url-credentials",
        needles=("://",),
        regex=_LazyRegex(r"""://(?<=[A-Za-z0-9]://)(?P<s>[^\s/?#"'<>\[\]\\`]+)@(?=[A-Za-z0-9\[])"""),
        why="Credentials in a URL's userinfo (https://user:pass@host, https://TOKEN@github.com, "
        "postgres://u:p@db): the userinfo up to the last @ is redacted, scheme and host stay.",
        accept=_url_userinfo_is_secret,
    ),
    Rule(
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
    Rule(
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
    Rule(
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
        # every match has its operator (``=``, ``:=``, ``=>``, ``==``, ``:``): a text without
        # one ("gates passed", an event's reason) neither compiles nor runs the pattern
        hints=(":", "="),
        ci=True,
        accept=_not_placeholder,
        classify=_classify_assignment,
    ),
)
