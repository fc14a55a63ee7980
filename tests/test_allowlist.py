"""Known non-secrets: the inline pragma and the committed allowlist each let one known value
through, while the same value anywhere else is still caught — and never reaches a record.

The values are the two that blocked real pages of the Hugo documentation: a configuration
example (``HUGOxPARAMSxAPI_KEY=abcdefgh``) and a GitHub Actions permission (``id-token: write``).
"""

from __future__ import annotations

import hashlib
import json

import pytest
from conftest import Site
from hypothesis import given
from hypothesis import strategies as st

from gitpub.core.allowlist import (
    NO_RULES,
    Allowlist,
    AllowlistError,
    fingerprint,
    keep,
    scan,
)
from gitpub.core.sanitize import find_secrets, sanitize

VALUE = "abcdefgh"
EXAMPLE = f"HUGOxPARAMSxAPI_KEY={VALUE}"
PRAGMA = "# pragma: allowlist secret"
FP = hashlib.sha256(VALUE.encode()).hexdigest()[:16]


def allowed(text: str, allowlist: Allowlist = NO_RULES, path: str = "posts/a.md") -> list[
        tuple[int, str | None]]:
    return [(h.line, h.allowed_by) for h in scan(text, (path,), allowlist, path)]


# -- the rules ------------------------------------------------------------------------------

def test_a_pragma_allows_its_own_line_only() -> None:
    text = f"```sh\n{EXAMPLE}  {PRAGMA}\n{EXAMPLE}\n```\n"
    assert allowed(text) == [(2, "pragma"), (3, None)]


def test_a_nextline_pragma_allows_the_next_line_only() -> None:
    text = f"<!-- pragma: allowlist nextline secret -->\n{EXAMPLE}\n{EXAMPLE}\n"
    assert allowed(text) == [(2, "pragma on the line before"), (3, None)]


GHP = "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"


def test_a_pragma_on_an_unterminated_key_block_covers_nothing_after_it() -> None:
    """Attack repro r06 (a): the block runs to the end of the text, swallowing later secrets."""
    text = (f"# Keys\n\n<!-- {PRAGMA} --> -----BEGIN RSA PRIVATE KEY-----\n\nProse.\n\n"
            f"Deploy token {GHP} and\n")
    hits = allowed(text)
    assert hits and all(by is None for _, by in hits), hits


@pytest.mark.parametrize("eol", ["\r", "\r\n", "\v", "\u2028"])
def test_a_pragma_line_ends_at_any_line_break(eol: str) -> None:
    """Attack repro r06 (b): with \\r-only line endings one pragma covered the whole file."""
    text = eol.join(["# CR only", f"<!-- {PRAGMA} -->", "Some text.", f'token = "{GHP}"', ""])
    assert allowed(text) == [(4, None)]
    text = eol.join(["# Own line", f'token = "{GHP}" <!-- {PRAGMA} -->', f'token = "{GHP}"', ""])
    assert allowed(text) == [(2, "pragma"), (3, None)]
    nextline = "<!-- pragma: allowlist nextline secret -->"
    text = eol.join([nextline, f'token = "{GHP}"', f'token = "{GHP}"', ""])
    assert allowed(text) == [(2, "pragma on the line before"), (3, None)]


def test_an_unterminated_key_with_a_pragma_goes_to_review(site: Site) -> None:
    text = (f"# Keys\n\n<!-- {PRAGMA} --> -----BEGIN RSA PRIVATE KEY-----\n\nDeploy token "
            f"{GHP}\n")
    data = prepare(site, "posts/pk.md", text, "pk")
    assert data["state"] == "REVIEW" and data["failure_code"] == "secret_in_source", data


def test_a_fingerprint_rule_is_scoped_to_its_paths() -> None:
    rules = Allowlist.parse(f"# examples in the docs\n\ncontent/docs/**  {FP}\n")
    assert fingerprint(VALUE) == FP
    assert allowed(EXAMPLE, rules, "content/docs/env.md") == [(1, ".gitpub-allowlist:3")]
    assert allowed(EXAMPLE, rules, "content/blog/post.md") == [(1, None)]
    assert allowed("API_KEY=abcdefgX", rules, "content/docs/env.md") == [(1, None)]


def test_a_full_sha256_is_a_fingerprint_too() -> None:
    full = hashlib.sha256(VALUE.encode()).hexdigest()
    assert allowed(EXAMPLE, Allowlist.parse(f"** {full}"))[0][1] == ".gitpub-allowlist:1"


def test_a_regex_rule_must_match_the_whole_value() -> None:
    rules = Allowlist.parse("content/** re:write\n** re:abc\n")
    assert allowed("id-token: write\n", rules, "content/ci.md") == [(1, ".gitpub-allowlist:1")]
    assert allowed("id-token: writer\n", rules, "content/ci.md") == [(1, None)]
    assert allowed(EXAMPLE, rules, "content/ci.md") == [(1, None)]  # abc is not abcdefgh


@pytest.mark.parametrize(("text", "expected"), [
    ("content/**\n", ".gitpub-allowlist:1: expected '<path glob> <fingerprint>'"),
    ("\n/abs/** re:x\n", ".gitpub-allowlist:2: path glob must be relative"),
    ("** re:(\n", ".gitpub-allowlist:1: invalid regex"),
    ("** abc123\n", ".gitpub-allowlist:1: expected a fingerprint"),
    ("** " + FP.upper() + "\n", "expected a fingerprint"),
])
def test_a_bad_rule_names_its_line(text: str, expected: str) -> None:
    with pytest.raises(AllowlistError) as e:
        Allowlist.parse(text)
    assert expected in e.value.message


def test_sanitize_keeps_exactly_what_is_allowed() -> None:
    text = f"a {EXAMPLE} {PRAGMA}\nb {EXAMPLE}\nc ghp_{'x1' * 18}\n"
    out = sanitize(text, keep(("posts/a.md",), NO_RULES))
    assert out.count(VALUE) == 1 and "[REDACTED:api-key-assignment]" in out
    assert [f.line for f in find_secrets(out)] == [1]
    assert VALUE not in sanitize(text)  # records are sanitized without the allowlist


@given(st.lists(st.sampled_from([EXAMPLE, f"{EXAMPLE} {PRAGMA}", "id-token: write", "prose",
                                 f"token: ghp_{'y2' * 18}", ""]), max_size=8))
def test_what_sanitize_keeps_is_what_scan_allows(lines: list[str]) -> None:
    text = "\n".join(lines)
    rules = Allowlist.parse("** re:write\n")
    out = sanitize(text, keep(("posts/a.md",), rules))
    assert all(h.allowed_by for h in scan(out, ("posts/a.md",), rules, "a"))
    kept = [h for h in scan(text, ("posts/a.md",), rules, "a") if h.allowed_by]
    assert len(scan(out, ("posts/a.md",), rules, "a")) == len(kept)


# -- through the pipeline -------------------------------------------------------------------

ARTICLE = f"# Configure Hugo\n\n```sh\nexport {EXAMPLE}  {PRAGMA}\n```\n"


def prepare(site: Site, target: str, text: str, key: str) -> dict[str, object]:
    r = site.call("prepare", "--json", "--key", key, "--to", target, "-", input=text)
    assert r.code in (0, 4), r.err
    data: dict[str, object] = r.json()
    return data


def records(site: Site, job_id: object) -> str:
    """Everything the job store says about a job besides its content: events and records."""
    ref = f"refs/pub/jobs/{job_id}"
    events = site.git("log", "--format=%B", ref)
    states = [site.git("show", f"{c}:job.json")
              for c in site.git("rev-list", "--first-parent", ref).split()]
    return events + "".join(states)


def test_a_pragma_lets_the_value_through_and_the_history_says_so(site: Site) -> None:
    data = prepare(site, "posts/hugo.md", ARTICLE, "p1")
    assert data["state"] == "LOCAL_COMMITTED", data
    published = site.git("show", f"{data['local_commit']}:posts/hugo.md")
    assert published == ARTICLE  # the content, as written
    log = site.call("log", "--json", str(data["job_id"])).json()
    uses = [e["reason"] for e in log["events"] if "known non-secrets" in e["reason"]]
    assert len(uses) == 2  # accepted, and the gates
    assert all(f"posts/hugo.md:4 api-key-assignment {FP} (pragma)" in u for u in uses)
    assert VALUE not in records(site, data["job_id"])


def test_the_same_value_without_the_pragma_is_still_caught(site: Site) -> None:
    text = ARTICLE + f"\nAnd again: {EXAMPLE}\n"
    data = prepare(site, "posts/hugo.md", text, "p2")
    assert data["state"] == "REVIEW" and data["failure_code"] == "secret_in_source"
    assert f"posts/hugo.md:7: possible secret (api-key-assignment, fingerprint {FP})" in str(
        data["failure_detail"])
    stored = site.git("show", f"refs/pub/jobs/{data['job_id']}:source/posts/hugo.md")
    assert stored.count(VALUE) == 1 and "And again: HUGOxPARAMSxAPI_KEY=[REDACTED:" in stored
    assert VALUE not in records(site, data["job_id"])


def commit_allowlist(site: Site, text: str) -> None:
    (site.path / ".gitpub-allowlist").write_text(text)
    site.git("add", ".gitpub-allowlist")
    site.git("commit", "-q", "-m", "Allow known examples")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")


@pytest.mark.parametrize("rule", [f"posts/docs/** {FP}", "posts/docs/*.md re:abcdefgh"])
def test_an_allowlist_rule_lets_one_value_through_in_its_paths(site: Site, rule: str) -> None:
    commit_allowlist(site, f"# known examples\n{rule}\n")
    text = f"# Env\n\n    {EXAMPLE}\n"
    data = prepare(site, "posts/docs/env.md", text, "a1")
    assert data["state"] == "LOCAL_COMMITTED", data
    assert site.git("show", f"{data['local_commit']}:posts/docs/env.md") == text
    log = site.call("log", "--json", str(data["job_id"])).json()
    assert any(f"posts/docs/env.md:3 api-key-assignment {FP} (.gitpub-allowlist:2)"
               in e["reason"] for e in log["events"])
    assert VALUE not in records(site, data["job_id"])
    elsewhere = prepare(site, "posts/blog.md", text, "a2")
    assert elsewhere["state"] == "REVIEW" and elsewhere["failure_code"] == "secret_in_source"
    other = prepare(site, "posts/docs/env2.md", "# Env\n\nAPI_KEY=abcdefgX\n", "a3")
    assert other["state"] == "REVIEW"


def test_the_allowlist_is_read_from_the_base_not_the_working_tree(site: Site) -> None:
    (site.path / ".gitpub-allowlist").write_text(f"** {FP}\n")  # written, never committed
    data = prepare(site, "posts/x.md", f"# X\n\n{EXAMPLE}\n", "w1")
    assert data["state"] == "REVIEW" and data["failure_code"] == "secret_in_source"


def test_a_bad_allowlist_stops_prepare_and_writes_nothing(site: Site) -> None:
    commit_allowlist(site, "posts/** not-a-fingerprint\n")
    r = site.call("prepare", "--key", "b1", "--to", "posts/x.md", "-", input=f"# X\n{EXAMPLE}\n")
    assert r.code == 2 and ".gitpub-allowlist:1: expected a fingerprint" in r.err
    assert site.job_refs() == {}
    clean = site.call("prepare", "--json", "--key", "b2", "--to", "posts/y.md", "-",
                      input="# Y\n\nNo secret here.\n")
    assert clean.code == 0  # the allowlist is read only when something was found


def test_a_drafted_article_uses_the_allowlist_too(site: Site) -> None:
    commit_allowlist(site, "posts/** re:write\n")
    script = 'mkdir -p "$GITPUB_OUTPUT/posts" && printf "# CI\\n\\nid-token: write\\n" ' \
             '> "$GITPUB_OUTPUT/posts/ci.md"'
    site.write_config(f"draft: {json.dumps(script)}\n")
    data = prepare(site, "posts/ci.md", "notes", "d1")
    assert data["state"] == "LOCAL_COMMITTED", data
    log = site.call("log", "--json", str(data["job_id"])).json()
    assert any("posts/ci.md:3 token-assignment" in e["reason"] and "(.gitpub-allowlist:1)"
               in e["reason"] for e in log["events"]), json.dumps(log, indent=1)
