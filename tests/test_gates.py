from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import Site
from hypothesis import given
from hypothesis import strategies as st
from test_delivery import commit_file, other_writer

from gitpub.config.load import StrictLoader
from gitpub.pipeline.frontmatter import problem as front_matter_problem
from gitpub.pipeline.frontmatter import title_of


@pytest.mark.parametrize("line", ["title: Hello", 'title: "Quoted: x"', "title: 你好 世界",
                                  "title: 'single'", "title: with-dash and.dots",
                                  "title: 'it''s'", "title: x # comment", 'title: "a\\"b"'])
def test_titles_read_as_yaml_does(line: str) -> None:
    assert title_of("posts/a.md", f"---\n{line}\n---\n".encode()) == yaml.safe_load(line)["title"]


@given(st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30))
def test_a_title_line_agrees_with_yaml(value: str) -> None:
    line = f"title: {value}"
    try:
        parsed = yaml.load(line, StrictLoader)
    except yaml.YAMLError:
        assert front_matter_problem(f"---\n{line}\n---\n") is not None
        return
    found = title_of("posts/a.md", f"---\n{line}\n---\n# H\n".encode())
    value = parsed.get("title") if isinstance(parsed, dict) else None
    expected = " ".join(value.split()) if isinstance(value, str) else ""
    assert found == (expected or "H")


def test_title_falls_back_to_the_first_heading() -> None:
    assert title_of("posts/a.md", b"# Heading\n\ntext\n") == "Heading"
    assert title_of("posts/a.md", b"---\ntitle: [1, 2]\n---\n# H\n") == "H"
    assert front_matter_problem("---\ntitle: x\n") is not None


# -- the secret scan reads the change -------------------------------------------------------

# Built by concatenation so this file does not itself look like a leaked credential.
AWS = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's own documentation example
GHP = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
PAGE = f"# Credentials\n\nSet the key:\n\n    aws_access_key_id = {AWS}\n\nThen run teh command.\n"


def publish_by_hand(site: Site, files: dict[str, str]) -> None:
    for path, text in files.items():
        (site.path / path).parent.mkdir(parents=True, exist_ok=True)
        (site.path / path).write_text(text)
    site.git("add", ".")
    site.git("commit", "-q", "-m", "Pages written by hand")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")


def prepared(site: Site, key: str, target: str, text: str) -> dict[str, object]:
    r = site.call("prepare", "--json", "--key", key, "--to", target, "-", input=text)
    assert r.code in (0, 4), r.out + r.err
    data: dict[str, object] = r.json()
    return data


def test_a_typo_fix_on_a_page_with_an_example_key_publishes(site: Site) -> None:
    publish_by_hand(site, {"posts/creds.md": PAGE})
    fixed = PAGE.replace("teh", "the")
    data = prepared(site, "typo", "posts/creds.md", fixed)
    assert data["state"] == "LOCAL_COMMITTED", data
    assert site.call("push").code == 0
    assert site.git("show", "origin/main:posts/creds.md") == fixed  # the key as it was
    log = site.call("log", "--json", str(data["job_id"])).json()
    assert any("posts/creds.md:5 aws-access-key" in e["reason"]
               and "(unchanged from the base)" in e["reason"] for e in log["events"]), log


def test_a_hand_commit_fixing_a_typo_there_syncs(site: Site) -> None:
    publish_by_hand(site, {"posts/creds.md": PAGE})
    (site.path / "posts" / "creds.md").write_text(PAGE.replace("teh", "the"))
    site.git("commit", "-q", "-am", "Fix a typo")
    r = site.call("sync")
    assert r.code == 0, r.out + r.err
    assert "run the command" in site.git("show", "origin/main:posts/creds.md")


def test_a_drafted_update_keeping_the_example_key_passes(site: Site) -> None:
    publish_by_hand(site, {"posts/creds.md": PAGE})
    script = 'mkdir -p "$GITPUB_OUTPUT/posts" && sed s/teh/the/ "$GITPUB_SOURCE" ' \
             '> "$GITPUB_OUTPUT/posts/creds.md"'
    site.write_config(f"draft: {json.dumps(script)}\n")
    data = prepared(site, "drafted", "posts/creds.md", "fix the typo")
    assert data["state"] == "LOCAL_COMMITTED", data  # the draft input holds no key itself
    data = prepared(site, "drafted-2", "posts/creds.md", PAGE)
    assert data["state"] == "REVIEW" and data["failure_code"] == "secret_in_source", data


@pytest.mark.parametrize(("target", "text"), [
    # a new secret on the line after the unchanged example key
    ("posts/creds.md", PAGE.replace("\nThen run", f"\nToken: {GHP}\nThen run")),
    # the example key moved to another file (new, then existing)
    ("posts/new.md", f"# New\n\n    aws_access_key_id = {AWS}\n"),
    ("posts/other.md", f"# Other\n\nText.\n\n    aws_access_key_id = {AWS}\n"),
    # the key's line changed along with the typo
    ("posts/creds.md", PAGE.replace("teh", "the").replace(" = ", "=")),
])
def test_what_the_job_adds_or_changes_is_scanned(site: Site, target: str, text: str) -> None:
    publish_by_hand(site, {"posts/creds.md": PAGE, "posts/other.md": "# Other\n\nText.\n"})
    data = prepared(site, "k", target, text)
    assert data["state"] == "REVIEW" and data["failure_code"] == "secret_in_source", data
    assert GHP.encode() not in site.all_objects_text()


def test_a_hand_commit_moving_a_secret_to_another_file_goes_to_review(site: Site) -> None:
    publish_by_hand(site, {"posts/creds.md": PAGE, "posts/other.md": "# Other\n\nText.\n"})
    (site.path / "posts" / "creds.md").write_text(PAGE.replace(f" = {AWS}", " = (see other)"))
    (site.path / "posts" / "other.md").write_text(f"# Other\n\nText.\n\n    key = {AWS}\n")
    site.git("commit", "-q", "-am", "Move the example")
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert "posts/other.md:5: possible secret (aws-access-key" in r.out


# -- end to end, as a person runs it (separate processes) ------------------------------------

def test_a_typo_fix_publishes_through_prepare_and_push_after_another_writer(
        site: Site, tmp_path: Path) -> None:
    """Issue 24.3, as the Hugo docs team met it: a page already shows AWS's example key; the typo
    fix is prepared from a file, another writer publishes meanwhile (the delivery rebases), and
    the fix lands with the key as it was, the job's history naming the finding it let through."""
    publish_by_hand(site, {"posts/creds.md": PAGE})
    fixed = tmp_path / "creds.md"
    fixed.write_text(PAGE.replace("teh", "the"))
    r = site.run("prepare", "--json", "--key", "typo", "--to", "posts/creds.md", str(fixed))
    assert r.code == 0 and r.json()["state"] == "LOCAL_COMMITTED", r.out + r.err
    job_id = r.json()["job_id"]
    commit_file(other_writer(tmp_path, site), "posts/other.md", "# Other\n")
    r = site.run("push", "--json")
    assert r.code == 0 and r.json()["jobs"][0]["state"] == "PUBLISHED", r.out + r.err
    assert site.git("show", "origin/main:posts/creds.md") == fixed.read_text()
    assert site.git("show", "origin/main:posts/other.md") == "# Other\n"
    log = site.run("log", job_id).out
    assert "posts/creds.md:5 aws-access-key" in log and "unchanged from the base" in log, log


@pytest.mark.parametrize("committed", [True, False])
def test_a_typo_fix_by_hand_publishes_through_sync(site: Site, committed: bool) -> None:
    """The same fix made in the working tree: committed by hand, or left for sync to commit."""
    publish_by_hand(site, {"posts/creds.md": PAGE})
    (site.path / "posts" / "creds.md").write_text(PAGE.replace("teh", "the"))
    if committed:
        site.git("commit", "-q", "-am", "Fix a typo")
    r = site.run("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert [c["status"] for c in r.json()["commits"]] == ["published"], r.out
    assert site.git("show", "origin/main:posts/creds.md") == PAGE.replace("teh", "the")
    assert site.git("rev-parse", "main") == site.git("rev-parse", "origin/main")
    assert site.git("status", "--porcelain") == ""
