"""Promise 7: a secret in an input never reaches a git object or a log; the job goes to REVIEW."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import Result, Site

# Built by concatenation so this file does not itself look like a leaked credential.
GITHUB = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
AWS = "AKIA" + "QWERTYUIOPASDFGH"
PEM = ("-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEAxyz0123456789abcdef\n"
       "-----END RSA " + "PRIVATE KEY-----")
URL = "https://deploy:" + "hunter2hunter2" + "@git.example.com/site.git"
PLANTED = {"github": GITHUB, "aws": AWS, "pem": "MIIEowIBAAKCAQEAxyz0123456789abcdef",
           "url": "hunter2hunter2"}


def fingerprint(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


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
    r = site.run_here("prepare", "--key", "leaky", "--to", "posts/leak.md", "-", input=article)
    assert r.code == 4, r.out + r.err
    assert "REVIEW" in r.out
    logs = [site.run_here("log", r.out.split()[1]), site.run_here("status", "--all", "--json")]
    assert not leaks(site, r.out, r.err, *(x.out + x.err for x in logs))
    assert "secret" in logs[0].out


def test_secret_in_gate_output_is_redacted(site: Site, tmp_path: Path) -> None:
    site.write_config(f"gates:\n  - name: loud\n    run: 'echo token={GITHUB}; exit 1'\n")
    r = site.run_here("prepare", "--key", "gate-output", "--to", "posts/a.md", "-",
                      input="# Fine\n\nNothing secret here.\n")
    assert r.code == 4, r.err
    job = r.out.split()[1]
    logs = site.run_here("log", job)
    status = site.run_here("status", "--json", job)
    assert not leaks(site, r.out, r.err, logs.out, logs.err, status.out)
    assert "[REDACTED" in status.out


def test_secret_in_the_key_is_refused_and_stored_nowhere(site: Site) -> None:
    refs = site.git("for-each-ref", "refs/pub")
    r = site.run_here("prepare", "--key", f"key-with-{AWS}", "--to", "posts/a.md", "-",
                      input="# Fine\n\nNothing secret here.\n")
    assert r.code == 2, r.err
    assert "secret" in r.err and "[REDACTED" in r.err
    assert site.git("for-each-ref", "refs/pub") == refs == ""
    assert not leaks(site, r.out, r.err)


def test_secret_in_error_message_is_redacted(site: Site) -> None:
    r = site.run_here("prepare", "--key", "k", "--to", "posts/a.md", f"/nonexistent/{GITHUB}")
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

    assert site.run_here("hooks", "install").code == 0
    site.write_config(SECRET_GATE)
    r = site.run_here("prepare", "--key", "cached", "--to", "posts/a.md", "-",
                      input="# A\n\nText.\n")
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
    assert site.run_here("status").code == 0
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
    r = site.run_here("prepare", "--key", "k", "--to", "posts/a.md", "-", input="# Fine\n")
    assert r.code == 2, r.out + r.err
    assert f"{key}: looks like a secret" in r.err
    assert site.git("for-each-ref", "refs/pub") == ""
    assert not leaks(site, r.out, r.err)


def test_a_secret_in_the_author_is_not_published(site: Site) -> None:
    """The author of a job commit comes from git's user.name: sanitized before it is stored."""
    site.git("config", "user.name", f"Deploy {GITHUB}")
    r = site.run_here("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-",
                      input="# Fine\n")
    assert r.code == 0, r.out + r.err
    assert site.run_here("push").code == 0
    assert not leaks(site, r.out, r.err)
    assert GITHUB not in site.git("log", "-1", "--format=%an %ae", "origin/main")


# -- the way out of a secret finding, followed to the letter -----------------------------------

def commands_in(hint: str) -> list[list[str]]:
    """The commands a hint names (its `backticked` spans that start with git), as argument
    lists; other spans (`edit`, a file name) are words of the sentence."""
    return [shlex.split(c) for c in re.findall(r"`(git [^`]+)`", hint)]


def follow(site: Site, command: list[str], env: dict[str, str] | None = None) -> Result:
    """Run a command of a hint as written: ``git pub …`` through gitpub, ``git …`` as git."""
    assert command[0] == "git", command
    if command[1] == "pub":
        return site.run_here(*command[2:], env=env)
    proc = subprocess.run(command, cwd=site.path, env={**site.env, **(env or {})},
                          capture_output=True, text=True)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def gitpub_objects_text(repo: Path) -> bytes:
    """Every object gitpub's refs (jobs, archive, notes) reach in ``repo``."""
    refs = subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/pub/",
                           "refs/notes/", "refs/remotes/origin/pub/"], cwd=repo,
                          capture_output=True, text=True, check=True).stdout.split()
    if not refs:
        return b""
    objects = subprocess.run(["git", "rev-list", "--objects", *refs], cwd=repo,
                             capture_output=True, text=True, check=True).stdout
    ids = "".join(line.split()[0] + "\n" for line in objects.splitlines())
    return subprocess.run(["git", "cat-file", "--batch"], cwd=repo, input=ids.encode(),
                          capture_output=True, check=True).stdout


def remote_objects_text(site: Site) -> bytes:
    return subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch", "--unordered"],
                          cwd=site.remote, capture_output=True, check=True).stdout


def review_hint(site: Site) -> tuple[str, str]:
    """The job in REVIEW (exactly one) and its hint."""
    jobs = site.run_here("status", "--json").json()["jobs"]
    (job,) = [j for j in jobs if j["state"] == "REVIEW"] or [jobs]
    return str(job["job_id"]), str(job["hint"])


@pytest.mark.slow
@pytest.mark.parametrize("where", ["last", "earlier"])
def test_a_hand_commit_with_a_secret_has_a_way_out_that_works(site: Site, where: str) -> None:
    """Issue 24.3: the hint used to say "remove the secret, then --retry", and the retry
    failed with "no stored content". Now: the hint's commands, run as written, publish the
    commit without the secret; the abandoned job, folded into the archive and pushed, holds
    nothing of it, and neither does anything else gitpub stored or the remote."""
    site.write_config("archive_after: 1\n")
    site.git("commit", "-qam", "Fold finished jobs at once")
    site.git("push", "-q", "origin", "main")
    leak = site.path / "posts" / "leak.md"
    leak.write_text(f"# Deploy\n\nThe token: {GITHUB}\n")
    site.git("add", ".")
    site.git("commit", "-q", "-m", "Deploy notes")
    leaky = site.git("rev-parse", "HEAD").strip()
    if where == "earlier":
        (site.path / "posts" / "later.md").write_text("# Later\n")
        site.git("add", ".")
        site.git("commit", "-q", "-m", "A later page")
    r = site.run_here("sync")
    assert r.code == 4, r.out + r.err
    job_id, hint = review_hint(site)
    assert f"commit {leaky[:12]} brings the secret" in hint, hint
    amend, rebase, abandon, sync = commands_in(hint)
    assert amend == ["git", "commit", "--amend"] and abandon[2:] == ["resolve", job_id[:13],
                                                                         "--abandon"]
    editor = {"GIT_EDITOR": "true"}
    if where == "last":
        leak.write_text("# Deploy\n\nThe token is in the vault.\n")
        site.git("add", ".")
        assert follow(site, amend, editor).code == 0
    else:
        assert rebase == ["git", "rebase", "-i", f"{leaky[:12]}^"]
        todo = {"GIT_SEQUENCE_EDITOR": "sed -i 1s/^pick/edit/", **editor}
        assert follow(site, rebase, todo).code == 0  # stops at the commit, as `edit` does
        leak.write_text("# Deploy\n\nThe token is in the vault.\n")
        site.git("add", ".")
        assert follow(site, amend, editor).code == 0
        site.git("-c", "core.editor=true", "rebase", "--continue")
    assert follow(site, abandon).code == 0
    r = follow(site, sync)
    assert r.code == 0, r.out + r.err
    assert "vault" in site.git("show", "origin/main:posts/leak.md")
    assert site.run_here("status", "--json").json()["jobs"] == []
    assert site.git("ls-remote", "origin", "refs/pub/archive")  # the abandoned job went there
    assert GITHUB.encode() not in remote_objects_text(site)
    assert GITHUB.encode() not in gitpub_objects_text(site.path)
    assert pub_files_holding(site, GITHUB) == []  # no cache, log or scratch file under .git/pub
    # (the person's own objects still hold the commit they made: only gitpub's are checked)
    assert GITHUB not in r.out + r.err + site.run_here("log", job_id).out


def test_a_drafted_secret_has_a_way_out_that_works(site: Site) -> None:
    """The draft command wrote a secret: its output was never stored; fixing the command and
    running the hint's retry publishes."""
    draft = 'mkdir -p "$GITPUB_OUTPUT/posts" && printf "# Notes\\n\\n{}\\n" > ' \
            '"$GITPUB_OUTPUT/posts/notes.md"'
    site.write_config(f"draft: {json.dumps(draft.format('token = ' + GITHUB))}\n")
    r = site.run_here("prepare", "--key", "drafted", "--to", "posts/notes.md", "-", input="notes")
    assert r.code == 4, r.out + r.err
    job_id, hint = review_hint(site)
    assert hint.startswith("make the draft command write no secret"), hint
    retry = commands_in(hint)[0]
    assert retry[2:] == ["resolve", job_id[:13], "--retry"]
    site.write_config(f"draft: {json.dumps(draft.format('The token is in the vault.'))}\n")
    r = follow(site, retry)
    assert r.code == 0 and "LOCAL_COMMITTED" in r.out, r.out + r.err
    assert not leaks(site, r.out, r.err)


def test_a_secret_in_the_source_has_a_way_out_that_works(site: Site, tmp_path: Path) -> None:
    """The source was stored redacted: a retry finds the same. The hint's way out, followed as
    written: the page without the secret, given with --retry --from FILE, publishes under the
    same job, and the secret is nowhere."""
    r = site.run_here("prepare", "--key", "leaky", "--to", "posts/leak.md", "-",
                      input=f"# Deploy\n\nThe token: {GITHUB}\n")
    assert r.code == 4, r.out + r.err
    job_id, hint = review_hint(site)
    assert hint.startswith("write posts/leak.md as it should be published"), hint
    (retry,) = commands_in(hint)
    assert retry[2:] == ["resolve", job_id[:13], "--retry", "--from", "FILE"]
    fixed = tmp_path / "leak.md"
    fixed.write_text("# Deploy\n\nThe token is in the vault.\n")
    r = follow(site, [str(fixed) if a == "FILE" else a for a in retry])
    assert r.code == 0 and "LOCAL_COMMITTED" in r.out, r.out + r.err
    r = site.run_here("push", "--json", job_id)
    assert r.json()["jobs"][0]["state"] == "PUBLISHED", r.out + r.err
    assert "vault" in site.git("show", "origin/main:posts/leak.md")
    assert not leaks(site, r.out, r.err, site.run_here("log", job_id).out)
    assert GITHUB.encode() not in remote_objects_text(site)


def test_a_public_example_is_allowed_then_given_as_it_was(site: Site, tmp_path: Path) -> None:
    """The other way the hint names: the value is a documented example; allowed by its
    fingerprint (committed and pushed), the same content given with --from publishes."""
    page = f"# Setup\n\nExample: {AWS}\n"
    r = site.run_here("prepare", "--json", "--key", "example", "--to", "posts/setup.md", "-",
                      input=page)
    assert r.code == 4, r.out + r.err
    _job_id, hint = review_hint(site)
    assert "a public example value can be allowed instead (docs/content-rules.md)" in hint
    printed = re.search(r"fingerprint ([0-9a-f]{16})", r.json()["failure_detail"])
    assert printed is not None and printed.group(1) == fingerprint(AWS)
    (site.path / ".gitpub-allowlist").write_text(f"posts/** {printed.group(1)}\n")
    site.git("add", ".gitpub-allowlist")
    site.git("commit", "-q", "-m", "Allow the documented example key")
    site.git("push", "-q", "origin", "main")
    (retry,) = commands_in(hint)
    given = tmp_path / "setup.md"
    given.write_text(page)
    r = follow(site, [*(str(given) if a == "FILE" else a for a in retry), "--push"])
    assert r.code == 0 and "PUBLISHED" in r.out, r.out + r.err
    assert AWS in site.git("show", "origin/main:posts/setup.md")


def test_several_files_with_a_secret_have_a_way_out_that_works(site: Site,
                                                              tmp_path: Path) -> None:
    """--from gives one article: a job of several files is abandoned and prepared anew."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.md").write_text(f"# A\n\n{GITHUB}\n")
    (tmp_path / "in" / "b.md").write_text("# B\n")
    r = site.run_here("prepare", "--key", "leaky", "--to", "posts/a.md", "--to", "posts/b.md",
                      str(tmp_path / "in" / "a.md"), str(tmp_path / "in" / "b.md"))
    assert r.code == 4, r.out + r.err
    job_id, hint = review_hint(site)
    (abandon,) = commands_in(hint)
    assert abandon[2:] == ["resolve", job_id[:13], "--abandon"]
    assert "then prepare the content without it under a new --key" in hint
    assert follow(site, abandon).code == 0
    (tmp_path / "in" / "a.md").write_text("# A\n\nIn the vault.\n")
    r = site.run_here("prepare", "--key", "clean", "--to", "posts/a.md", "--to", "posts/b.md",
                      str(tmp_path / "in" / "a.md"), str(tmp_path / "in" / "b.md"))
    assert r.code == 0 and "LOCAL_COMMITTED" in r.out, r.out + r.err
    assert not leaks(site, r.out, r.err)


def test_a_hand_commit_failing_a_gate_is_retried_from_its_commit(site: Site) -> None:
    """REVIEW's usual way out for a hand commit: fix the gate, `resolve --retry` (it said
    "no stored content": a sync job has no sources), then `git pub sync`."""
    site.write_config("gates:\n  - name: strict\n    run: 'exit 1'\n")
    site.git("commit", "-qam", "A strict gate")
    site.git("push", "-q", "origin", "main")
    (site.path / "posts" / "hand.md").write_text("# Hand\n\nWritten by hand.\n")
    site.git("add", ".")
    site.git("commit", "-q", "-m", "A page by hand")
    assert site.run_here("sync").code == 4
    job_id, hint = review_hint(site)
    retry = commands_in(hint)[0]
    assert retry[2:] == ["resolve", job_id[:13], "--retry"], hint
    site.write_config()  # the gate fixed (here: gone)
    r = follow(site, retry)
    assert r.code == 0 and "LOCAL_COMMITTED" in r.out, r.out + r.err
    r = site.run_here("sync")
    assert r.code == 0, r.out + r.err
    assert "Written by hand." in site.git("show", "origin/main:posts/hand.md")


def test_uncommitted_changes_with_a_secret_are_never_committed(site: Site) -> None:
    """sync commits uncommitted content changes before delivering them: changes that bring a
    secret are refused first, so the secret never enters a git object (local or remote); the
    way out the output names, followed, publishes."""
    leak = site.path / "posts" / "leak.md"
    leak.write_text(f"# Deploy\n\nThe token: {GITHUB}\n")
    head, status = site.git("rev-parse", "HEAD"), site.git("status", "--porcelain")
    plan = site.run_here("sync", "--dry-run", "--json")
    assert "bring a secret" in plan.json()["hand_edits"]["refused"], plan.out
    r = site.run_here("sync", "--json")
    assert r.code == 4, r.out + r.err
    refused = r.json()["refused"]
    assert "posts/leak.md:3: possible secret (github-token" in refused, r.out
    assert refused.endswith("take it out of the file, then `git pub sync`")
    assert (site.git("rev-parse", "HEAD"), site.git("status", "--porcelain")) == (head, status)
    assert not leaks(site, r.out, r.err)
    assert GITHUB.encode() not in remote_objects_text(site)
    assert pub_files_holding(site, GITHUB) == []
    leak.write_text("# Deploy\n\nThe token is in the vault.\n")
    (sync,) = commands_in(refused)
    r = follow(site, sync)
    assert r.code == 0, r.out + r.err
    assert "vault" in site.git("show", "origin/main:posts/leak.md")


def test_a_hand_commit_fixing_a_typo_next_to_a_key_still_commits(site: Site) -> None:
    """The refusal reads the change, as the gates do: a key the committed page already had,
    unchanged and in place, does not stop the uncommitted typo fix."""
    page = f"# Setup\n\nExample: {AWS}\n\nRun teh command.\n"
    (site.path / "posts" / "setup.md").write_text(page)
    site.git("add", ".")
    site.git("commit", "-q", "-m", "Setup page")
    site.git("push", "-q", "origin", "main")
    (site.path / "posts" / "setup.md").write_text(page.replace("teh", "the"))
    r = site.run_here("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["refused"] is None
    assert "Run the command" in site.git("show", "origin/main:posts/setup.md")


def test_a_hand_commit_whose_message_holds_a_secret_has_a_way_out_that_works(
        site: Site) -> None:
    """The message is published with the commit: a secret there is the commit's, as in a file."""
    (site.path / "posts" / "ok.md").write_text("# Ok\n")
    site.git("add", ".")
    site.git("commit", "-q", "-m", f"Add a page\n\nDeployed with {GITHUB}")
    leaky = site.git("rev-parse", "HEAD").strip()
    r = site.run_here("sync")
    assert r.code == 4, r.out + r.err
    _job_id, hint = review_hint(site)
    assert f"commit {leaky[:12]} brings the secret" in hint, hint
    assert GITHUB.encode() not in remote_objects_text(site)
    amend, _rebase, abandon, sync = commands_in(hint)
    assert follow(site, amend, {"GIT_EDITOR": "sed -i s/Deployed.*/Deployed./"}).code == 0
    assert follow(site, abandon).code == 0
    r = follow(site, sync)
    assert r.code == 0, r.out + r.err
    assert site.git("log", "-1", "--format=%B", "origin/main").startswith(
        "Add a page\n\nDeployed.\n")
    assert GITHUB.encode() not in remote_objects_text(site)
    assert GITHUB.encode() not in gitpub_objects_text(site.path)


def test_a_secret_in_a_draft_input_has_a_way_out_that_works(site: Site, tmp_path: Path) -> None:
    """The draft's input was stored redacted: the hint's --from gives the article itself, and
    the draft does not run again on it."""
    draft = 'mkdir -p "$GITPUB_OUTPUT/posts" && cp "$GITPUB_SOURCE" "$GITPUB_OUTPUT/posts/n.md"'
    site.write_config(f"draft: {json.dumps(draft)}\n")
    r = site.run_here("prepare", "--key", "drafted", "--to", "posts/n.md", "-",
                      input=f"notes with {GITHUB}")
    assert r.code == 4, r.out + r.err
    job_id, hint = review_hint(site)
    (retry,) = commands_in(hint)
    article = tmp_path / "n.md"
    article.write_text("# Notes\n\nWritten by a person.\n")
    r = follow(site, [str(article) if a == "FILE" else a for a in retry])
    assert r.code == 0 and "LOCAL_COMMITTED" in r.out, r.out + r.err
    assert site.run_here("push").code == 0
    assert site.git("show", "origin/main:posts/n.md") == article.read_text()
    assert not leaks(site, r.out, r.err, site.run_here("log", job_id).out)


def test_an_allowlist_that_does_not_parse_has_a_way_out_that_works(site: Site) -> None:
    """The draft wrote an example key and the base's allowlist does not parse: a retry would
    read the same file (the job keeps its base); the hint's way — fix it, push it, abandon,
    prepare anew — publishes, the key allowed by the fixed file."""
    draft = (f'mkdir -p "$GITPUB_OUTPUT/posts" && printf "# Setup\\\\n\\\\nExample: {AWS}\\\\n" '
             '> "$GITPUB_OUTPUT/posts/setup.md"')
    site.write_config(f"draft: {json.dumps(draft)}\n")
    (site.path / ".gitpub-allowlist").write_text(f"posts/** not-hex-{fingerprint(AWS)}\n")
    site.git("add", ".")
    site.git("commit", "-q", "-m", "Allow the example (badly)")
    site.git("push", "-q", "origin", "main")
    r = site.run_here("prepare", "--key", "setup", "--to", "posts/setup.md", "-", input="setup")
    assert r.code == 4, r.out + r.err
    job_id, hint = review_hint(site)
    assert hint.startswith(".gitpub-allowlist of the job's base does not parse"), hint
    push, abandon = commands_in(hint)
    (site.path / ".gitpub-allowlist").write_text(f"posts/** {fingerprint(AWS)}\n")
    site.git("commit", "-q", "-am", "Allow the example")
    assert follow(site, push).code == 0
    assert follow(site, abandon).code == 0
    assert abandon[2:] == ["resolve", job_id[:13], "--abandon"]
    r = site.run_here("prepare", "--key", "setup-2", "--to", "posts/setup.md", "-", input="setup")
    assert r.code == 0 and "LOCAL_COMMITTED" in r.out, r.out + r.err
