"""Tests for gitpub.sanitize: one detector, two faces (redact / report).

Fake secrets are assembled at run time from split prefixes and seeded random filler, so this file
holds nothing that a secret scanner would take for a leaked credential.
"""

from __future__ import annotations

import base64
import random
import re
import string
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gitpub.core.sanitize import (
    _RULES,
    Finding,
    contains_secret,
    find_secrets,
    marker,
    sanitize,
    sanitize_bytes,
)
from gitpub.core.secretrules import Rule

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "_-"
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"

# Prefixes split so that no complete token prefix appears literally in this file.
GH = "g" + "h"
GHP, GHO, GHU, GHS, GHR = (GH + c + "_" for c in "pousr")
GITHUB_PAT = "github" + "_pat_"
GLPAT = "gl" + "pat-"
XOXB, XOXP, XOXA, XOXS = ("xo" + "x" + c + "-" for c in "bpas")
XAPP = "xa" + "pp-"
AKIA, ASIA = "AK" + "IA", "AS" + "IA"
SK = "s" + "k-"
SK_ANT = SK + "ant-"
SK_PROJ = SK + "proj-"
JWT_HEAD = "ey" + "J"
BEGIN_PEM = "-----BEGIN "
END_PEM = "-----END "
PK = "PRIVATE " + "KEY-----"
SLACK_HOOK = "https://hooks." + "slack.com/services/"


def fill(n: int, alphabet: str = ALNUM, seed: int = 0) -> str:
    """Deterministic filler, with a digit somewhere (real keys practically always have one)."""
    rnd = random.Random(f"{seed}-{n}-{alphabet}")
    out = [rnd.choice(alphabet) for _ in range(n)]
    digits = [c for c in alphabet if c.isdigit()]
    if digits and not any(c.isdigit() for c in out):
        out[n // 2] = rnd.choice(digits)
    return "".join(out)


def pem(kind: str = "RSA ", lines: int = 4, seed: int = 0, end: bool = True, nl: str = "\n") -> str:
    body = nl.join(fill(64, B64, seed + i) for i in range(lines))
    text = f"{BEGIN_PEM}{kind}{PK}{nl}{body}"
    return text + (f"{nl}{END_PEM}{kind}{PK}" if end else "")


# --------------------------------------------------------------------------------------------
# One example per kind: (id, text, expected kind, the secret that must vanish, context kept)
# --------------------------------------------------------------------------------------------

TOKEN_GHP = GHP + fill(36, seed=1)
JWT = (
    JWT_HEAD + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    + JWT_HEAD + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    + fill(43, B64URL, 2)
)
BASIC = base64.b64encode(b"alice:" + fill(12, seed=3).encode()).decode()

EXAMPLES: list[tuple[str, str, str, str, str]] = [
    ("bearer", "Authorization: Bearer " + fill(40, seed=4), "bearer-token",
     fill(40, seed=4), "Authorization: Bearer "),
    ("bearer-json", '{"headers": {"Authorization": "Bearer ' + fill(30, seed=5) + '"}}',
     "bearer-token", fill(30, seed=5), '"Authorization": "Bearer '),
    ("bearer-curl", "curl -H 'authorization: bearer " + fill(30, seed=6) + "' https://api.x",
     "bearer-token", fill(30, seed=6), "https://api.x"),
    ("bearer-bare", "sent Bearer " + fill(32, seed=7) + " to the API", "bearer-token",
     fill(32, seed=7), "to the API"),
    ("basic", "Authorization: Basic " + BASIC, "basic-auth", BASIC, "Authorization: Basic "),
    ("token-scheme", "Authorization: token " + fill(40, HEX, 8), "bearer-token",
     fill(40, HEX, 8), "Authorization: token "),
    ("ghp", "GITHUB_TOKEN=" + TOKEN_GHP, "github-token", TOKEN_GHP, "GITHUB_TOKEN="),
    ("gho", "got " + GHO + fill(36, seed=9) + ".", "github-token", GHO + fill(36, seed=9), "got "),
    ("ghu", GHU + fill(36, seed=10), "github-token", GHU + fill(36, seed=10), ""),
    ("ghs", "(" + GHS + fill(36, seed=11) + ")", "github-token", GHS + fill(36, seed=11),
     "([REDACTED:github-token])"),
    ("ghr", GHR + fill(36, seed=12), "github-token", GHR + fill(36, seed=12), ""),
    ("github_pat", "pat " + GITHUB_PAT + fill(22, seed=13) + "_" + fill(59, seed=14),
     "github-token", fill(59, seed=14), "pat "),
    ("glpat", "token " + GLPAT + fill(20, B64URL, 15), "gitlab-token", fill(20, B64URL, 15),
     "token "),
    ("gldt", "gl" + "dt-" + fill(20, seed=16), "gitlab-token", fill(20, seed=16), ""),
    ("glrt", "runner gl" + "rt-" + fill(24, seed=17), "gitlab-token", fill(24, seed=17), "runner"),
    ("glptt", "gl" + "ptt-" + fill(40, HEX, 18), "gitlab-token", fill(40, HEX, 18), ""),
    ("xoxb", XOXB + "1234567890-1234567890123-" + fill(24, seed=19), "slack-token",
     fill(24, seed=19), ""),
    ("xoxp", XOXP + "1234567890-1234567890-1234567890-" + fill(32, HEX, 20), "slack-token",
     fill(32, HEX, 20), ""),
    ("xoxa", XOXA + "2-" + fill(30, seed=21), "slack-token", fill(30, seed=21), ""),
    ("xoxs", XOXS + fill(30, seed=22), "slack-token", fill(30, seed=22), ""),
    ("xapp", XAPP + "1-A0123456789-1234567890123-" + fill(64, HEX, 23), "slack-token",
     fill(64, HEX, 23), ""),
    ("slack-webhook", "hook: " + SLACK_HOOK + "T" + fill(8, UPPER_DIGITS, 24) + "/B"
     + fill(8, UPPER_DIGITS, 25) + "/" + fill(24, seed=26), "slack-webhook", fill(24, seed=26),
     "https://hooks.slack.com/services/"),
    ("akia", "aws_access_key_id = " + AKIA + fill(16, UPPER_DIGITS, 27), "aws-access-key",
     fill(16, UPPER_DIGITS, 27), "aws_access_key_id = "),
    ("asia", '"AccessKeyId": "' + ASIA + fill(16, UPPER_DIGITS, 28) + '"', "aws-access-key",
     fill(16, UPPER_DIGITS, 28), '"AccessKeyId": "'),
    ("aws-secret", "aws_secret_access_key = " + fill(40, B64, 29), "aws-secret-key",
     fill(40, B64, 29), "aws_secret_access_key = "),
    ("aws-secret-json", '"SecretAccessKey": "' + fill(40, B64, 30) + '"', "aws-secret-key",
     fill(40, B64, 30), '"SecretAccessKey": "'),
    ("openai", "OPENAI_API_KEY=" + SK + fill(48, seed=31), "openai-key", fill(48, seed=31),
     "OPENAI_API_KEY="),
    ("openai-proj", "key " + SK_PROJ + fill(120, B64URL, 32), "openai-key",
     fill(120, B64URL, 32), "key "),
    ("anthropic", "x " + SK_ANT + "api03-" + fill(93, B64URL, 33) + "AA", "anthropic-key",
     fill(93, B64URL, 33), "x "),
    ("stripe", "s" + "k_live_" + fill(24, seed=34), "stripe-key", fill(24, seed=34), ""),
    ("google", "AI" + "za" + fill(35, B64URL, 35), "google-api-key", fill(35, B64URL, 35), ""),
    ("npm", "//registry/:_authToken=np" + "m_" + fill(36, seed=36), "npm-token",
     fill(36, seed=36), "_authToken="),
    ("pypi", "py" + "pi-AgEIcHlwaS5vcmc" + fill(60, B64URL, 37), "pypi-token",
     fill(60, B64URL, 37), ""),
    ("huggingface", "HF_TOKEN=h" + "f_" + fill(34, seed=38), "huggingface-token",
     fill(34, seed=38), "HF_TOKEN="),
    ("jwt", "id_token " + JWT, "jwt", JWT, "id_token "),
    ("private-key", "key:\n" + pem(seed=39) + "\nafter", "private-key", fill(64, B64, 40),
     "after"),
    ("password=", "password=" + fill(12, seed=41), "password-assignment", fill(12, seed=41),
     "password="),
    ("passwd:", "passwd: " + fill(12, seed=42), "password-assignment", fill(12, seed=42),
     "passwd: "),
    ("password-yaml-comment", "  db_password: " + fill(12, seed=43) + "  # prod",
     "password-assignment", fill(12, seed=43), "# prod"),
    ("password-json", '{"user": "bob", "password": "' + fill(10, seed=44) + '"}',
     "password-assignment", fill(10, seed=44), '"password": "'),
    ("password-json-escaped", '"msg": "{\\"password\\":\\"' + fill(10, seed=45) + '\\"}"',
     "password-assignment", fill(10, seed=45), '\\"password\\":\\"'),
    ("password-spaces-quoted", "PASSWORD = 'correct horse " + fill(8, seed=46) + "'",
     "password-assignment", "correct horse " + fill(8, seed=46), "PASSWORD = '"),
    ("password-ruby", "'password' => '" + fill(10, seed=47) + "'", "password-assignment",
     fill(10, seed=47), "'password' => '"),
    ("pgpassword", "PGPASSWORD=" + fill(10, seed=48) + " psql", "password-assignment",
     fill(10, seed=48), " psql"),
    ("mysql_pwd", "MYSQL_PWD=" + fill(10, seed=49), "password-assignment", fill(10, seed=49),
     "MYSQL_PWD="),
    ("secret=", "client_secret=" + fill(20, seed=50) + "&grant_type=x", "secret-assignment",
     fill(20, seed=50), "&grant_type=x"),
    ("secret-key", "SECRET_KEY: '" + fill(30, seed=51) + "'", "secret-assignment",
     fill(30, seed=51), "SECRET_KEY: '"),
    ("api_key", "api_key=" + fill(20, seed=52), "api-key-assignment", fill(20, seed=52),
     "api_key="),
    ("apikey-yaml", "apikey: " + fill(20, seed=53), "api-key-assignment", fill(20, seed=53),
     "apikey: "),
    ("export-api-key", "export API_KEY=\"" + fill(20, seed=54) + "\"", "api-key-assignment",
     fill(20, seed=54), "export API_KEY=\""),
    ("x-api-key", "X-Api-Key: " + fill(20, seed=55), "api-key-assignment", fill(20, seed=55),
     "X-Api-Key: "),
    ("token=", "https://x.test/cb?token=" + fill(20, seed=56) + "&state=1", "token-assignment",
     fill(20, seed=56), "&state=1"),
    ("access_token", '{"access_token": "' + fill(30, seed=57) + '", "expires_in": 3600}',
     "token-assignment", fill(30, seed=57), '"expires_in": 3600'),
    ("go-assign", "token := \"" + fill(20, seed=58) + "\"", "token-assignment",
     fill(20, seed=58), "token := \""),
    ("url-credentials", "git clone https://alice:" + fill(12, seed=59) + "@example.com/r.git",
     "url-credentials", fill(12, seed=59), "https://"),
    ("url-credentials-db", "DATABASE_URL=postgres://app:" + fill(16, seed=60) + "@db:5432/x",
     "url-credentials", fill(16, seed=60), "@db:5432/x"),
    ("url-token-only", "https://" + fill(40, HEX, 61) + "@github.com/o/r.git",
     "url-credentials", fill(40, HEX, 61), "@github.com/o/r.git"),
    ("url-x-access-token", "https://x-access-token:" + fill(20, seed=62) + "@github.com/o/r",
     "url-credentials", fill(20, seed=62), "@github.com/o/r"),
    ("url-github-token", "https://" + TOKEN_GHP + "@github.com/o/r", "github-token", TOKEN_GHP,
     "@github.com/o/r"),
]


@pytest.mark.parametrize(
    ("text", "kind", "secret", "kept"), [e[1:] for e in EXAMPLES], ids=[e[0] for e in EXAMPLES]
)
def test_each_kind_is_found_and_redacted(text: str, kind: str, secret: str, kept: str) -> None:
    assert secret in text  # the example is well-formed
    findings = find_secrets(text)
    assert [f.kind for f in findings] == [kind]
    assert contains_secret(text)
    out = sanitize(text)
    assert secret not in out
    assert marker(kind) in out
    assert kept in out
    assert find_secrets(out) == []
    assert sanitize(out) == out


def test_every_rule_kind_has_an_example() -> None:
    """Keeps the table and the tests in step: a new rule needs an example above."""
    produced = {e[2] for e in EXAMPLES}
    rule_kinds = {r.kind for r in _RULES} | {"basic-auth"} | {
        f"{k}-assignment" for k in ("password", "secret", "api-key", "token")
    }
    assert rule_kinds <= produced


def test_every_rule_says_what_and_why() -> None:
    for rule in _RULES:
        assert re.fullmatch(r"[a-z0-9-]+", rule.kind)
        assert len(rule.why) > 30


def test_key_names_stay_readable() -> None:
    out = sanitize("export API_KEY=" + fill(24) + "\nDB_PASSWORD: " + fill(12) + "\n")
    assert out == (
        "export API_KEY=[REDACTED:api-key-assignment]\n"
        "DB_PASSWORD: [REDACTED:password-assignment]\n"
    )


def test_url_keeps_scheme_host_and_path() -> None:
    out = sanitize("remote: https://bob:" + fill(12) + "@git.example.org:8443/team/repo.git")
    assert out == "remote: https://[REDACTED:url-credentials]@git.example.org:8443/team/repo.git"


def test_url_password_with_at_sign_is_redacted_up_to_the_last_at() -> None:
    pw = "p@" + fill(10)
    out = sanitize(f"https://bob:{pw}@example.com/")
    assert out == "https://[REDACTED:url-credentials]@example.com/"


# ---------------------------------------------------------------------------------- private keys


@pytest.mark.parametrize("kind", ["RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", "DSA ", ""])
def test_private_key_whole_block(kind: str) -> None:
    key = pem(kind, lines=6, seed=70)
    text = f"line one\n{key}\nline after\n"
    assert sanitize(text) == "line one\n[REDACTED:private-key]\nline after\n"
    assert find_secrets(text) == [Finding("private-key", 2)]


def test_pgp_private_key_block() -> None:
    body = fill(64, B64, 71)
    text = f"{BEGIN_PEM}PGP PRIVATE KEY BLOCK-----\n\n{body}\n{END_PEM}PGP PRIVATE KEY BLOCK-----"
    assert sanitize("a\n" + text + "\nb") == "a\n[REDACTED:private-key]\nb"


def test_private_key_without_end_is_redacted_to_end_of_text() -> None:
    text = "config:\n" + pem(lines=3, seed=72, end=False) + "\nmore: stuff\n"
    assert sanitize(text) == "config:\n[REDACTED:private-key]"
    assert find_secrets(text) == [Finding("private-key", 2)]


def test_private_key_json_escaped_on_one_line() -> None:
    key = pem(lines=3, seed=73, nl="\\n")
    text = '{"deploy_key": "' + key + '\\n", "name": "ci"}'
    assert sanitize(text) == '{"deploy_key": "[REDACTED:private-key]\\n", "name": "ci"}'


def test_two_private_keys_are_two_findings() -> None:
    text = pem(seed=74) + "\nbetween\n" + pem("EC ", seed=75)
    assert sanitize(text) == "[REDACTED:private-key]\nbetween\n[REDACTED:private-key]"
    assert find_secrets(text) == [Finding("private-key", 1), Finding("private-key", 8)]


def test_public_key_and_certificate_are_not_secrets() -> None:
    text = f"{BEGIN_PEM}PUBLIC KEY-----\n{fill(64, B64)}\n{END_PEM}PUBLIC KEY-----\n"
    text += f"{BEGIN_PEM}CERTIFICATE-----\n{fill(64, B64, 1)}\n{END_PEM}CERTIFICATE-----\n"
    text += "ssh-ed25519 " + fill(68, B64, 2) + " me@host\n"
    assert sanitize(text) is text


# ------------------------------------------------------------------------- findings and overlap


def test_finding_lines_and_order() -> None:
    text = (
        "intro\n"
        "password=" + fill(10) + "\n"
        "\n"
        "x " + AKIA + fill(16, UPPER_DIGITS) + " and " + TOKEN_GHP + "\n"
        + pem(seed=80) + "\n"
    )
    assert find_secrets(text) == [
        Finding("password-assignment", 2),
        Finding("aws-access-key", 4),
        Finding("github-token", 4),
        Finding("private-key", 5),
    ]


def test_finding_never_holds_the_value() -> None:
    assert list(Finding._fields) == ["kind", "line"]
    text = "password=" + fill(16, seed=81)
    assert fill(16, seed=81) not in repr(find_secrets(text))


def test_overlap_is_one_finding_named_after_the_most_specific_rule() -> None:
    text = "Authorization: Bearer " + TOKEN_GHP
    assert find_secrets(text) == [Finding("github-token", 1)]
    assert sanitize(text) == "Authorization: Bearer [REDACTED:github-token]"
    text = '"password": "' + JWT + '"'
    assert find_secrets(text) == [Finding("jwt", 1)]
    assert sanitize(text) == '"password": "[REDACTED:jwt]"'


def test_line_counts_only_newlines() -> None:
    text = "a\rb\u2028c\r\nd " + TOKEN_GHP
    assert find_secrets(text) == [Finding("github-token", 2)]


def test_lowering_that_shifts_offsets_uses_the_case_folding_twin() -> None:
    # "İ".lower() is two characters long, so the lowered copy cannot be used for offsets.
    assert len("İ".lower()) == 2
    text = "İİ PassWord=" + fill(10) + " İ Authorization: BEARER " + fill(20, seed=1)
    out = sanitize(text)
    assert out == (
        "İİ PassWord=[REDACTED:password-assignment] İ Authorization: BEARER "
        "[REDACTED:bearer-token]"
    )


def test_sanitize_returns_the_same_object_when_clean() -> None:
    text = "nothing to see " * 10
    assert sanitize(text) is text
    data = text.encode()
    assert sanitize_bytes(data) is data


# ---------------------------------------------------------------------------- non-redaction


NOT_SECRETS = [
    "commit " + fill(40, HEX),
    "tree " + fill(40, HEX, 1) + "\nparent " + fill(40, HEX, 2) + "\n",
    "sha256:" + fill(64, HEX, 3),
    '{"sha256": "' + fill(64, HEX, 4) + '", "commit": "' + fill(40, HEX, 5) + '"}',
    "digest=" + fill(64, HEX, 6),
    "id 3f2b8c1e-9a4d-4e6f-8b2a-1c3d5e7f9a0b",
    '{"job_id": "123e4567-e89b-12d3-a456-426614174000"}',
    "Please reset your password here, then update the secret handshake.",
    "Your password: must be at least 8 characters long.",
    "Password: see the wiki for details",
    "**Secret:** there is none",
    "password: ",
    "password:",
    "password=",
    '"password": ""',
    "token=\n",
    "passwords: []",
    "password_hash = " + fill(64, HEX, 7),
    "max_tokens: 4096\ninput_tokens=123\ntokenizer: cl100k",
    "这是一个普通的中文段落，讨论密码学与安全。日本語の文章もあります。한국어 문장.",
    "# Title\n\n- item **bold** `code`\n\n[link](https://example.com/a/b?c=d)\n> quote\n",
    "![img](data:image/png;base64," + fill(120, B64, 8) + ")",
    "ssh://git@github.com/owner/repo.git and git@github.com:owner/repo.git",
    "mail alice@example.com or see https://medium.com/@alice/post",
    "https://alice@example.com/",
    "https://example.com:8443/path?x=1#frag",
    "The Bearer authentication scheme; bearer tokens are opaque.",
    "Authorization: Basic auth is insecure",
    "Authorization: Bearer <token>",
    "Authorization: Bearer $TOKEN",
    "curl -H \"Authorization: Bearer ${GITHUB_TOKEN}\" https://api.github.com",
    "task-force-risk-desk-sk-learn",
    "def f(token: str, password: Optional[str] = None) -> None:",
    "    token: str\n    password: SecretStr\n",
    "glibc-devel-x86_64-linux-gnu-2.31",
    "1.0.0-" + fill(20, HEX, 9),
    "v" + fill(40, HEX, 10) + ".tar.gz",
]

PLACEHOLDERS = [
    "password: ${DB_PASSWORD}",
    "password=$DB_PASSWORD",
    "api_key: ${{ secrets.API_KEY }}",
    'token: "{{ vault_token }}"',
    "password = '<your password>'",
    "secret: '********'",
    "PASSWORD=xxxxxxxx",
    '"token": null',
    "token=None",
    "password: %(pw)s",
    "password=$(cat /run/secrets/pw)",
    "top_secret: true",
]


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_not_secrets_are_untouched(text: str) -> None:
    assert find_secrets(text) == []
    assert not contains_secret(text)
    assert sanitize(text) is text


@pytest.mark.parametrize("text", PLACEHOLDERS)
def test_placeholders_are_kept(text: str) -> None:
    """Policy: references and masks carry no secret, and show which setting was missing."""
    assert find_secrets(text) == []
    assert sanitize(text) is text


def test_literal_stand_ins_are_redacted() -> None:
    """``changeme`` cannot be told from a real password, so it is treated as one."""
    assert sanitize("password=changeme") == "password=[REDACTED:password-assignment]"


# ------------------------------------------------------------------- markers and idempotence


KINDS = sorted(
    {r.kind for r in _RULES}
    | {"basic-auth", "password-assignment", "secret-assignment", "api-key-assignment",
       "token-assignment"}
)


@pytest.mark.parametrize("kind", KINDS)
def test_marker_is_never_a_finding(kind: str) -> None:
    m = marker(kind)
    for text in (
        m,
        f"password={m}",
        f"password: {m}",
        f'"api_key": "{m}"',
        f"Authorization: Bearer {m}",
        f"Bearer {m}",
        f"https://{m}@github.com/o/r",
        f"{SLACK_HOOK}{m}",
        f"token={m}{m}",
    ):
        assert find_secrets(text) == [], text


def test_redaction_that_creates_a_boundary_is_resolved() -> None:
    """Redacting a value can give its neighbour the boundary it lacked; sanitize repeats passes
    until clean, so find_secrets(sanitize(x)) is always empty."""
    akia = AKIA + fill(16, UPPER_DIGITS)
    pypi = "py" + "pi-AgEIcHlwaS5vcmc" + fill(60, B64URL)
    text = akia + pypi  # the key id lacks its right boundary until the PyPI token is redacted
    assert [f.kind for f in find_secrets(text)] == ["pypi-token"]
    out = sanitize(text)
    assert out == "[REDACTED:aws-access-key][REDACTED:pypi-token]"
    assert find_secrets(out) == []


# --------------------------------------------------------------------------------- bytes


def test_sanitize_bytes_keeps_non_utf8_bytes() -> None:
    raw = b"\xff\xfe latin-1 caf\xe9 \x80 " + b"password=" + fill(12).encode() + b" \xc3\x28 end"
    out = sanitize_bytes(raw)
    assert out == (
        b"\xff\xfe latin-1 caf\xe9 \x80 password=[REDACTED:password-assignment] \xc3\x28 end"
    )


def test_sanitize_bytes_utf8() -> None:
    raw = ("密码 token: " + fill(20) + "\n结束").encode()
    assert sanitize_bytes(raw) == "密码 token: [REDACTED:token-assignment]\n结束".encode()


# -------------------------------------------------------------------------------- speed


def _markdown_mb(seed: int = 0) -> str:
    rnd = random.Random(seed)
    words = [
        "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "password", "reset",
        "your", "secret", "token", "key", "api", "access", "commit", "merge", "branch",
        "release", "notes", "密码", "安全", "文章", "发布", "仓库", "提交", "日本語", "テキスト",
    ]
    parts: list[str] = []
    size = 0
    while size < 1_000_000:
        k = rnd.random()
        if k < 0.1:
            s = "## " + " ".join(rnd.choice(words) for _ in range(4)) + "\n\n"
        elif k < 0.2:
            s = "commit " + "".join(rnd.choice(HEX) for _ in range(40)) + "\n"
        elif k < 0.25:
            s = "- sha256: `" + "".join(rnd.choice(HEX) for _ in range(64)) + "`\n"
        elif k < 0.3:
            s = f"[link](https://example.com/{rnd.choice(words)}?q={size}): see above\n"
        else:
            s = " ".join(rnd.choice(words) for _ in range(rnd.randint(5, 25))) + ".\n"
        parts.append(s)
        size += len(s.encode())
    return "".join(parts)


def test_one_megabyte_of_markdown_is_left_alone() -> None:
    """A large ordinary article (headings, commit ids, checksums, links) has nothing to redact.
    Its speed is measured in ``bench/``, never asserted here."""
    text = _markdown_mb()
    assert sanitize(text) is text


def test_import_is_cheap() -> None:
    """Every persisting code path imports this module: it pulls in the standard library and
    ``gitpub.core`` only (what it costs is measured in ``bench/``, never asserted here)."""
    root = Path(__file__).resolve().parent.parent
    code = (
        "import sys; before = set(sys.modules); import gitpub.core.sanitize; "
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    added = subprocess.run([sys.executable, "-c", code], cwd=root, check=True,
                           capture_output=True, text=True).stdout.split()
    assert "gitpub.core.sanitize" in added
    third_party = [m for m in added if not m.startswith(("gitpub.core", "gitpub"))
                   and m.split(".")[0] not in sys.stdlib_module_names]
    assert third_party == [], third_party
    assert [m for m in added if m.startswith("gitpub.") and not m.startswith("gitpub.core")] == []


# --------------------------------------------------------------------------------- properties


@dataclass(frozen=True)
class Planted:
    text: str  # the fragment to embed, on its own line
    values: tuple[str, ...]  # what must not survive sanitize


def _chars(alphabet: str, lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=lo, max_size=hi)


def _with_digit(alphabet: str, lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.tuples(_chars(alphabet, lo - 1, hi - 1), st.sampled_from(string.digits)).map(
        lambda t: t[0][: len(t[0]) // 2] + t[1] + t[0][len(t[0]) // 2 :]
    )


def _planted(fmt: str, value: st.SearchStrategy[str]) -> st.SearchStrategy[Planted]:
    return value.map(lambda v: Planted(fmt.format(v=v), (v,)))


_PASSWORDISH = ALNUM + "!#%^*+=._-/@~"
_KEYS = ["password", "passwd", "db_password", "secret", "client_secret", "api_key", "apikey",
         "API_KEY", "access_token", "token", "X-Api-Key", "SECRET_KEY", "passphrase"]
_FORMS = ["{k}={v}", "{k} = {v}", "{k}: {v}", '"{k}": "{v}"', "export {k}={v}", "{k} = '{v}'",
          "'{k}' => '{v}'", '{k}: "{v}"']


def _assignment() -> st.SearchStrategy[Planted]:
    # A digit and two distinct characters: placeholders such as "undefined" or "00000000"
    # are kept by design (see test_placeholders_are_kept).
    value = _with_digit(_PASSWORDISH, 8, 30).filter(lambda v: len(set(v)) > 1)
    return st.tuples(st.sampled_from(_KEYS), st.sampled_from(_FORMS), value).map(
        lambda t: Planted(t[1].format(k=t[0], v=t[2]), (t[2],))
    )


def _pem() -> st.SearchStrategy[Planted]:
    line = _chars(B64, 16, 64)
    return st.tuples(
        st.sampled_from(["RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", ""]),
        st.lists(line, min_size=1, max_size=5),
        st.booleans(),
    ).map(
        lambda t: Planted(
            f"{BEGIN_PEM}{t[0]}{PK}\n" + "\n".join(t[1])
            + (f"\n{END_PEM}{t[0]}{PK}" if t[2] else ""),
            tuple(t[1]),
        )
    )


def _url() -> st.SearchStrategy[Planted]:
    return st.tuples(
        st.sampled_from(["https", "http", "postgres", "redis", "ftp", "git+https"]),
        _chars(ALNUM + "._-", 1, 12),
        _chars(ALNUM + "._~!*+=%-", 6, 24),
        st.sampled_from(["example.com", "db:5432", "10.0.0.1", "git.example.org"]),
    ).map(lambda t: Planted(f"{t[0]}://{t[1]}:{t[2]}@{t[3]}/path", (t[2],)))


PLANTERS: dict[str, st.SearchStrategy[Planted]] = {
    "github": st.tuples(st.sampled_from([GHP, GHO, GHU, GHS, GHR]), _chars(ALNUM, 36, 36)).map(
        lambda t: Planted(t[0] + t[1], (t[1],))
    ),
    "github_pat": st.tuples(_chars(ALNUM, 22, 22), _chars(ALNUM, 59, 59)).map(
        lambda t: Planted(GITHUB_PAT + t[0] + "_" + t[1], (t[0] + "_" + t[1],))
    ),
    "gitlab": st.tuples(
        st.sampled_from(["pat", "dt", "rt", "ptt", "ft", "imt", "agent", "cbt", "oas"]),
        _chars(B64URL, 20, 40),
    ).map(lambda t: Planted("gl" + t[0] + "-" + t[1], (t[1],))),
    "slack": st.tuples(st.sampled_from([XOXB, XOXP, XOXA, XOXS]), _chars(ALNUM + "-", 20, 50)).map(
        lambda t: Planted(t[0] + t[1], (t[1],))
    ),
    "slack_app": _planted(XAPP + "1-{v}", _chars(ALNUM + "-", 20, 60)),
    "slack_webhook": _planted(SLACK_HOOK + "T0123ABCD/B0123ABCD/{v}", _chars(ALNUM, 24, 24)),
    "aws_key_id": st.tuples(st.sampled_from([AKIA, ASIA]), _chars(UPPER_DIGITS, 16, 16)).map(
        lambda t: Planted(t[0] + t[1], (t[0] + t[1],))
    ),
    "aws_secret": _planted("aws_secret_access_key = {v}", _chars(B64, 40, 40)),
    "openai": _planted(SK + "{v}", _with_digit(ALNUM, 40, 60)),
    "openai_proj": _planted(SK_PROJ + "{v}", _with_digit(B64URL, 40, 160)),
    "anthropic": _planted(SK_ANT + "api03-{v}", _chars(B64URL, 80, 100)),
    "jwt": st.tuples(_chars(B64URL, 8, 40), _chars(B64URL, 8, 80), _chars(B64URL, 0, 60)).map(
        lambda t: Planted(
            f"{JWT_HEAD}{t[0]}.{JWT_HEAD}{t[1]}.{t[2]}", (f"{t[0]}.{JWT_HEAD}{t[1]}",)
        )
    ),
    "bearer": st.tuples(
        st.sampled_from(["Bearer", "bearer", "token", "Basic", "Bot"]),
        _chars(ALNUM + "._~+/-", 8, 60),
    ).map(lambda t: Planted(f"Authorization: {t[0]} {t[1]}", (t[1],))),
    "assignment": _assignment(),
    "private_key": _pem(),
    "url_credentials": _url(),
}


_MARKER = re.compile(r"\[REDACTED:[a-z0-9-]+\]")
_FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_ANY_TEXT = st.text(max_size=200)


@pytest.mark.parametrize("name", sorted(PLANTERS))
@_FAST
@given(data=st.data())
def test_planted_secret_is_found_and_removed(name: str, data: st.DataObject) -> None:
    planted = data.draw(PLANTERS[name], label="secret")
    host = data.draw(_ANY_TEXT, label="text")
    for v in planted.values:
        assume(v not in host)
    at = data.draw(st.integers(0, len(host)), label="position")
    text = host[:at] + "\n" + planted.text + "\n" + host[at:]
    line = host[:at].count("\n") + 2

    assert any(f.line == line for f in find_secrets(text)), find_secrets(text)
    assert contains_secret(text)
    out = sanitize(text)
    outside_markers = _MARKER.sub("\0", out)  # a random value may spell e.g. "bearer-t"
    for v in planted.values:
        assert v not in outside_markers
    assert find_secrets(out) == []
    assert sanitize(out) == out


@_FAST
@given(_ANY_TEXT)
def test_sanitize_is_idempotent_and_total_on_any_text(text: str) -> None:
    out = sanitize(text)
    assert sanitize(out) == out
    assert find_secrets(out) == []
    assert contains_secret(text) == bool(find_secrets(text))


@_FAST
@given(st.lists(st.one_of(_ANY_TEXT, *PLANTERS.values()), max_size=6))
def test_idempotent_on_mixtures(parts: list[str | Planted]) -> None:
    text = " ".join(p.text if isinstance(p, Planted) else p for p in parts)
    out = sanitize(text)
    assert sanitize(out) == out
    assert find_secrets(out) == []


@_FAST
@given(st.binary(max_size=300))
def test_sanitize_bytes_is_total_and_round_trips_clean_bytes(data: bytes) -> None:
    out = sanitize_bytes(data)
    if not contains_secret(data.decode("utf-8", "surrogateescape")):
        assert out == data
    assert sanitize_bytes(out) == out


_PLAIN = (
    string.ascii_letters + " \n\t" + string.punctuation
    + "，。；：！？「」、密码安全文章发布仓库提交日本語テキスト한국어"
)


@_FAST
@given(st.text(alphabet=_PLAIN, max_size=300))
def test_text_without_secrets_comes_back_unchanged(text: str) -> None:
    assert sanitize(text) is text
    assert find_secrets(text) == []


_HASHY = st.one_of(
    _chars(HEX, 40, 40),
    _chars(HEX, 64, 64),
    st.uuids().map(str),
    _chars(HEX, 7, 12),
    st.sampled_from(["commit", "sha256:", "tree", "parent", "Merge:", "id", "-", "`"]),
    st.text(alphabet=_PLAIN, max_size=20),
)


@_FAST
@given(st.lists(_HASHY, max_size=20), st.sampled_from([" ", "\n", ", ", " | "]))
def test_hashes_and_uuids_are_never_redacted(parts: list[str], sep: str) -> None:
    text = sep.join(parts)
    assert sanitize(text) is text


_HINTED = [rule for rule in _RULES if rule.hints]


@pytest.mark.parametrize("rule", _HINTED, ids=[r.kind for r in _HINTED])
@_FAST
@given(data=st.data())
def test_a_rules_hints_are_a_sound_pre_check(rule: Rule, data: st.DataObject) -> None:
    """A text (lower-cased for a case-insensitive rule, as ``_scan`` runs it) with none of a
    rule's hints is one its pattern never matches: skipping it there changes no finding. The
    texts are biased towards what the pattern looks for (its needles, key names, operators)."""
    pieces = st.sampled_from([*rule.needles, *rule.hints, "password", "api_key", "token",
                              "secret_key", " ", "\t", '"', "'", "\\", ":", "=", ">", "==",
                              ":=", "=>", "\n", "value", "x" * 12, "k_live_", "A1b2C3d4e5"])
    text = "".join(data.draw(st.lists(st.one_of(pieces, st.text(max_size=4)), max_size=12)))
    for hint in rule.hints:
        text = text.replace(hint, "")
    for haystack in ([text.lower()] if rule.ci else [text]):
        assume(not any(h in haystack for h in rule.hints))
        assert list(rule.regex.finditer(haystack)) == []
        if rule.ci:
            assert list(rule.folding_regex().finditer(text)) == []
