"""Promise 7: a secret in an input never reaches a git object or a log; the job goes to REVIEW."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Site

# Built by concatenation so this file does not itself look like a leaked credential.
GITHUB = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
AWS = "AKIA" + "QWERTYUIOPASDFGH"
PEM = ("-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEAxyz0123456789abcdef\n"
       "-----END RSA " + "PRIVATE KEY-----")
URL = "https://deploy:" + "hunter2hunter2" + "@git.example.com/site.git"
PLANTED = {"github": GITHUB, "aws": AWS, "pem": "MIIEowIBAAKCAQEAxyz0123456789abcdef",
           "url": "hunter2hunter2"}


def leaks(site: Site, *texts: str) -> list[str]:
    blob = site.all_objects_text()
    found = []
    for name, value in PLANTED.items():
        if value.encode() in blob:
            found.append(f"{name} in git objects")
        found.extend(f"{name} in output" for t in texts if value in t)
    return found


@pytest.mark.parametrize("secret", [GITHUB, AWS, PEM, URL])
def test_secret_in_source_goes_to_review_and_is_never_written(site: Site, secret: str) -> None:
    article = f"# Notes\n\nHow we deploy:\n\n    {secret}\n"
    r = site.run("prepare", "--key", "leaky", "--to", "posts/leak.md", "-", input=article)
    assert r.code == 4, r.out + r.err
    assert "REVIEW" in r.out
    logs = [site.run("log", r.out.split()[1]), site.run("status", "--all", "--json")]
    assert not leaks(site, r.out, r.err, *(x.out + x.err for x in logs))
    assert "secret" in logs[0].out


def test_secret_in_gate_output_is_redacted(site: Site, tmp_path: Path) -> None:
    site.write_config(f"gates:\n  - name: loud\n    run: 'echo token={GITHUB}; exit 1'\n")
    r = site.run("prepare", "--key", "gate-output", "--to", "posts/a.md", "-",
                 input="# Fine\n\nNothing secret here.\n")
    assert r.code == 4, r.err
    job = r.out.split()[1]
    logs = site.run("log", job)
    status = site.run("status", "--json", job)
    assert not leaks(site, r.out, r.err, logs.out, logs.err, status.out)
    assert "[REDACTED" in status.out


def test_secret_in_the_key_is_refused_and_stored_nowhere(site: Site) -> None:
    refs = site.git("for-each-ref", "refs/pub")
    r = site.run("prepare", "--key", f"key-with-{AWS}", "--to", "posts/a.md", "-",
                 input="# Fine\n\nNothing secret here.\n")
    assert r.code == 2, r.err
    assert "secret" in r.err and "[REDACTED" in r.err
    assert site.git("for-each-ref", "refs/pub") == refs == ""
    assert not leaks(site, r.out, r.err)


def test_secret_in_error_message_is_redacted(site: Site) -> None:
    r = site.run("prepare", "--key", "k", "--to", "posts/a.md", f"/nonexistent/{GITHUB}")
    assert r.code == 2
    assert GITHUB not in r.err and GITHUB not in r.out


# -- caches under .git/pub/ hold no secret -----------------------------------------------------

SECRET_GATE = (f"gates:\n  - name: notify\n    run: 'curl -s -H \"Authorization: Bearer {GITHUB}\" "
               "https://ci.example.com/hook || true'\n")


def pub_files_holding(site: Site, secret: str) -> list[str]:
    root = site.path / ".git" / "pub"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and secret.encode() in p.read_bytes())


def test_caches_hold_no_secret_from_the_configuration(site: Site) -> None:
    """A token inside a gate command of .gitpub.yaml: prepare, a commit with the hooks
    installed (hook cache); nothing under .git/pub holds the token, and the hook cache still
    works for a file without one."""
    from gitpub.hooks import shared

    assert site.run("hooks", "install").code == 0
    site.write_config(SECRET_GATE)
    r = site.run("prepare", "--key", "cached", "--to", "posts/a.md", "-", input="# A\n\nText.\n")
    assert r.code == 0, r.err
    (site.path / "posts" / "hand.md").write_text("# Hand\n")
    site.git("add", "posts/hand.md")
    site.git("commit", "-q", "-m", "hand edit")  # post-commit refreshes the hook cache
    assert pub_files_holding(site, GITHUB) == []
    git_dir = str(site.path / ".git")
    config_bytes = (site.path / ".gitpub.yaml").read_bytes()
    assert shared.read_cache(git_dir, config_bytes) == ("Blog", ("posts/",))  # by its digest
    assert shared.read_cache(git_dir, config_bytes + b"\n") is None

    site.write_config()  # no secret: the hook cache is written with the file's data again
    assert site.run("status").code == 0
    (site.path / "posts" / "hand2.md").write_text("# Hand 2\n")
    site.git("add", "posts/hand2.md")
    site.git("commit", "-q", "-m", "another hand edit")
    assert (site.path / ".gitpub.yaml").read_bytes() in (
        site.path / ".git" / "pub" / shared.CACHE_NAME).read_bytes()


@pytest.mark.parametrize("key", ["node", "trailer_prefix"])
def test_a_secret_as_node_or_trailer_prefix_is_refused(site: Site, key: str) -> None:
    """t6: both end up in every commit's trailers and job record: refused, nothing stored."""
    config = site.path / ".gitpub.yaml"
    kept = [ln for ln in config.read_text().splitlines() if not ln.startswith(f"{key}:")]
    config.write_text("\n".join([*kept, f"{key}: {AWS}"]) + "\n")
    r = site.run("prepare", "--key", "k", "--to", "posts/a.md", "-", input="# Fine\n")
    assert r.code == 2, r.out + r.err
    assert f"{key}: looks like a secret" in r.err
    assert site.git("for-each-ref", "refs/pub") == ""
    assert not leaks(site, r.out, r.err)


def test_a_secret_in_the_author_is_not_published(site: Site) -> None:
    """The author of a job commit comes from git's user.name: sanitized before it is stored."""
    site.git("config", "user.name", f"Deploy {GITHUB}")
    r = site.run("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-", input="# Fine\n")
    assert r.code == 0, r.out + r.err
    assert site.run("push").code == 0
    assert not leaks(site, r.out, r.err)
    assert GITHUB not in site.git("log", "-1", "--format=%an %ae", "origin/main")
