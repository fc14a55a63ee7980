"""`git pub secrets baseline`: the findings already on the branch become allowlist rules — by
fingerprint, never the value — that a person reviews, commits and pushes; idempotent."""

from __future__ import annotations

import hashlib
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import Site

from gitpub.app.secrets import glob_for
from gitpub.core.allowlist import Allowlist, scan

# Built by concatenation so this file does not itself look like a leaked credential.
AWS = "AKIA" + "IOSFODNN7EXAMPLE"  # AWS's own documentation example
GHP = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
PAGE = f"# Credentials\n\nSet the key:\n\n    aws_access_key_id = {AWS}\n\nThen run it.\n"
ALLOWLIST = ".gitpub-allowlist"


def fp(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def publish_by_hand(site: Site, files: dict[str, str]) -> None:
    for path, text in files.items():
        (site.path / path).parent.mkdir(parents=True, exist_ok=True)
        (site.path / path).write_text(text)
    site.git("add", ".")
    site.git("commit", "-q", "-m", "Pages written by hand")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")


def test_baseline_writes_a_rule_per_finding_and_never_the_value(site: Site) -> None:
    publish_by_hand(site, {"posts/creds.md": PAGE + f"\nAgain: {AWS}\n",
                           "docs/ci.md": f"token: {GHP}\n"})
    r = site.run_here("secrets", "baseline", "--json")
    assert r.code == 0, r.out + r.err
    data = r.json()
    assert data["written"] is True and data["dry_run"] is False
    assert data["ref"] == "refs/remotes/origin/main"
    assert data["commit"] == site.git("rev-parse", "origin/main").strip()
    added = {(a["path"], a["fingerprint"]): a for a in data["added"]}
    assert set(added) == {("posts/creds.md", fp(AWS)), ("docs/ci.md", fp(GHP))}
    assert added["posts/creds.md", fp(AWS)]["lines"] == [5, 9]  # one rule for both lines
    assert added["posts/creds.md", fp(AWS)]["kind"] == "aws-access-key"
    text = (site.path / ALLOWLIST).read_text()
    rules = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert sorted(rules) == sorted([f"posts/creds.md {fp(AWS)}", f"docs/ci.md {fp(GHP)}"])
    for value in (AWS, GHP):
        assert value not in text and value not in r.out and value not in r.err
    pub = site.path / ".git" / "pub"
    assert not [p for p in pub.rglob("*") if p.is_file() and GHP.encode() in p.read_bytes()]
    assert site.git("status", "--porcelain") == f"?? {ALLOWLIST}\n"  # nothing else touched


def test_baseline_is_idempotent_and_keeps_what_is_there(site: Site) -> None:
    publish_by_hand(site, {"posts/creds.md": PAGE, ALLOWLIST: "# ours\nposts/** re:write\n"})
    assert site.run_here("secrets", "baseline").code == 0
    first = (site.path / ALLOWLIST).read_bytes()
    assert first.startswith(b"# ours\nposts/** re:write\n\n# git pub secrets baseline: ")
    r = site.run_here("secrets", "baseline", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["added"] == [] and r.json()["written"] is False
    assert r.json()["already_allowed"] == 1
    assert (site.path / ALLOWLIST).read_bytes() == first
    r = site.run_here("secrets", "baseline")
    assert "nothing to add" in r.out and "left as it was" in r.out


def test_baseline_dry_run_writes_nothing(site: Site) -> None:
    publish_by_hand(site, {"posts/creds.md": PAGE})
    r = site.run_here("secrets", "baseline", "--dry-run", "--json")
    assert r.code == 0, r.out + r.err
    data = r.json()
    assert data["dry_run"] is True and data["written"] is False
    assert [a["rule"] for a in data["added"]] == [f"posts/creds.md {fp(AWS)}"]
    assert not (site.path / ALLOWLIST).exists()
    r = site.run_here("secrets", "baseline", "--dry-run")
    assert f"would add to {site.path / ALLOWLIST}" in r.out and "nothing written" in r.out
    assert not (site.path / ALLOWLIST).exists()


def test_following_the_next_steps_lets_an_edit_of_the_keys_line_publish(site: Site) -> None:
    """What the baseline adds to reading the change: an edit of the very line holding the
    example key (judged whole without it) publishes once the rules are committed and pushed as
    the next steps say; the same value in another file is still a secret."""
    publish_by_hand(site, {"posts/creds.md": PAGE})
    edited = PAGE.replace("    aws_access_key_id = ", "    aws_access_key_id=")
    r = site.run_here("prepare", "--json", "--key", "before", "--to", "posts/creds.md", "-",
                      input=edited)
    assert r.json()["state"] == "REVIEW", r.out  # the line changed: the finding is the job's
    r = site.run_here("secrets", "baseline", "--json")
    steps = r.json()["next_steps"]
    command = steps[-1].split(": ", 1)[1]
    assert command.startswith("git add .gitpub-allowlist && git commit")
    proc = subprocess.run(command, shell=True, cwd=site.path, env=site.env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert site.git("show", f"origin/main:{ALLOWLIST}") == (site.path / ALLOWLIST).read_text()
    r = site.run_here("prepare", "--json", "--key", "after", "--to", "posts/creds.md", "-",
                      input=edited)
    assert r.json()["state"] == "LOCAL_COMMITTED", r.out + r.err
    assert site.run_here("push").code == 0
    assert site.git("show", "origin/main:posts/creds.md") == edited
    r = site.run_here("prepare", "--json", "--key", "elsewhere", "--to", "posts/other.md", "-",
                      input=f"# Other\n\n{AWS}\n")
    assert r.json()["state"] == "REVIEW", r.out


def test_baseline_refuses_when_the_branch_has_an_allowlist_the_work_tree_lacks(
        site: Site) -> None:
    publish_by_hand(site, {"posts/creds.md": PAGE, ALLOWLIST: "posts/** re:write\n"})
    (site.path / ALLOWLIST).unlink()
    r = site.run_here("secrets", "baseline")
    assert r.code == 2, r.out + r.err
    assert "not in the working tree" in r.err and "git pull" in r.err
    assert not (site.path / ALLOWLIST).exists()


def test_baseline_refuses_an_allowlist_that_does_not_parse(site: Site) -> None:
    publish_by_hand(site, {"posts/creds.md": PAGE})
    (site.path / ALLOWLIST).write_text("posts/creds.md not-a-fingerprint\n")
    r = site.run_here("secrets", "baseline")
    assert r.code == 2, r.out + r.err
    assert f"{ALLOWLIST}:1" in r.err
    assert (site.path / ALLOWLIST).read_text() == "posts/creds.md not-a-fingerprint\n"


def test_baseline_with_no_branch_yet_writes_nothing(tmp_path: Path, site: Site) -> None:
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "init", "-q", "-b", "main", str(fresh)], check=True, env=site.env)
    (fresh / ".gitpub.yaml").write_text("remote: origin\nbranch: main\n")
    r = site.run_here("-C", str(fresh), "secrets", "baseline", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["ref"] is None and r.json()["added"] == []
    assert not (fresh / ALLOWLIST).exists()


@pytest.mark.parametrize("path", ["posts/a b.md", "posts/star*.md", "posts/[x]?.md",
                                  "posts/#hash.md"])
def test_a_rule_names_a_path_with_glob_characters(path: str) -> None:
    rules = Allowlist.parse(f"{glob_for(path)} {fp(GHP)}\n")
    (hit,) = scan(f"token: {GHP}\n", (path,), rules, path)
    assert hit.allowed_by == f"{ALLOWLIST}:1"
    (hit,) = scan(f"token: {GHP}\n", ("posts/other.md",), rules, "posts/other.md")
    assert hit.allowed_by is None
    assert shlex.split(glob_for(path).replace("?", "x"))  # one word: no space left in it
