"""`git pub confirm` against an attacker who can push the branch *and* ``refs/notes/pub``:
forged ledgers, hand-written acceptances, erased notes, a force-push that rewrites the
checked-through point, a trailer-prefix switch over two pushes, claims that are no gitpub job
id, claims that change nothing. Each attack is what a second clone can push; CI runs in a
fresh clone, with the key (``ci_clone``) or without it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import Site, git
from test_confirm import (
    FORGED_JOB,
    attacker_clone,
    ci_clone,
    commit_as,
    job_commit_message,
    message_of,
    publish,
    remote_notes,
    report_unrecorded,
)

from gitpub.git.repo import Repository
from gitpub.verify import rules


def keyless(site: Site, tmp_path: Path, name: str) -> Site:
    clone = ci_clone(site, tmp_path, name, depth=None)
    env = {k: v for k, v in clone.env.items() if k != "GITPUB_CONFIRM_KEY"}
    return Site(clone.path, clone.remote, env)


def forged_notes_commit(repo: Path, lines: list[str], parent: str = "refs/notes/pub") -> str:
    """A notes commit on top of the remote's notes whose message is a ledger of ``lines``."""
    git(repo, "fetch", "-q", "origin", "+refs/notes/pub:refs/notes/pub")
    tree = git(repo, "rev-parse", "refs/notes/pub^{tree}").strip()
    message = ("notes\n\n" + "\n".join(lines) + "\n").encode()
    return git(repo, "commit-tree", tree, "-p", parent, input=message).strip()


def tamper_on_top(site: Site, tmp_path: Path, good: str) -> tuple[Path, str]:
    """The publication's whole message on a commit that adds a CI workflow."""
    evil = attacker_clone(site, tmp_path)
    bad = commit_as(evil, message_of(evil, good), {".github/workflows/evil.yml": "on: push\n"})
    return evil, bad


def test_a_forged_checked_through_point_is_not_believed(site: Site, tmp_path: Path) -> None:
    """t2: a forged commit and a notes commit saying "checked through it", pushed together."""
    (good,) = publish(site, 1)
    assert ci_clone(site, tmp_path, "ci0").run_here("confirm").code == 0
    evil, bad = tamper_on_top(site, tmp_path, good)
    for mac in ("", "Gitpub-Ledger-Mac: hmac-sha256:" + "0" * 64):
        notes = forged_notes_commit(evil, ["Gitpub-Confirm-Ledger: v2",
                                           f"Gitpub-Checked-Through: {bad}", mac])
        git(evil, "push", "-q", "-f", "origin", "HEAD:main", f"{notes}:refs/notes/pub")
        r = ci_clone(site, tmp_path, f"ci-{len(mac)}").run_here("confirm", "--json")
        assert r.code == 1, r.out + r.err
        assert [b["commit"] for b in r.json()["open_bad"]] == [bad]
        assert r.json()["bad"] == ([bad] if not mac else [])  # the 2nd run: still open
        assert r.json()["authenticated"] is True
        assert any("without a valid MAC were ignored" in m for m in r.json()["remarks"])


@pytest.mark.slow
def test_without_the_key_the_whole_history_is_checked_and_said_so(site: Site,
                                                                  tmp_path: Path) -> None:
    (good,) = publish(site, 1)
    assert ci_clone(site, tmp_path, "ci0").run_here("confirm").code == 0
    evil, bad = tamper_on_top(site, tmp_path, good)
    notes = forged_notes_commit(evil, ["Gitpub-Confirm-Ledger: v2",
                                       f"Gitpub-Checked-Through: {bad}"])
    git(evil, "push", "-q", "origin", "HEAD:main", f"{notes}:refs/notes/pub")
    total = int(git(site.remote, "rev-list", "--count", "main").strip())
    for run in range(2):  # and the next run still finds it: nothing is remembered, all re-judged
        r = keyless(site, tmp_path, f"plain{run}").run_here("confirm", "--json")
        assert r.code == 1, r.out + r.err
        data = r.json()
        assert data["authenticated"] is False and data["checked"] == total
        assert data["bad"] == [bad] and [b["commit"] for b in data["open_bad"]] == [bad]
        assert any("GITPUB_CONFIRM_KEY is not set" in m for m in data["remarks"])
    # and --accept needs the key: an acceptance anyone could write would accept nothing
    plain = keyless(site, tmp_path, "plain-accept")
    r = plain.run_here("confirm", "--accept", bad, "--reason", "x")
    assert r.code == 2 and "GITPUB_CONFIRM_KEY" in r.err


@pytest.mark.slow
def test_a_ledger_without_the_open_bad_and_a_hand_acceptance_do_not_close_it(
        site: Site, tmp_path: Path) -> None:
    """t3/t3b: after the run that found BAD, the attacker appends an acceptance line by hand,
    then pushes a ledger that copies the authentic one minus its open BAD line."""
    (good,) = publish(site, 1)
    assert ci_clone(site, tmp_path, "ci0").run_here("confirm").code == 0
    evil, bad = tamper_on_top(site, tmp_path, good)
    git(evil, "push", "-q", "origin", "HEAD:main")
    assert ci_clone(site, tmp_path, "ci1").run_here("confirm").code == 1
    git(evil, "fetch", "-q", "origin", "+refs/notes/pub:refs/notes/pub")
    git(evil, "notes", "--ref=pub", "append", "-m",
        "gitpub-confirm: accepted by Maintainer <boss@example.com>: reviewed, fine", bad)
    git(evil, "push", "-q", "origin", "refs/notes/pub")
    r = ci_clone(site, tmp_path, "ci2").run_here("confirm", "--json")
    assert r.code == 1 and [b["commit"] for b in r.json()["open_bad"]] == [bad], r.out
    authentic = git(evil, "log", "-1", "--format=%B", "refs/notes/pub~1").splitlines()
    assert any(ln.startswith("Gitpub-Open-Bad: ") for ln in authentic)
    copied = [ln for ln in authentic if ln.startswith("Gitpub-")
              and not ln.startswith("Gitpub-Open-Bad: ")]
    git(evil, "push", "-q", "origin", f"{forged_notes_commit(evil, copied)}:refs/notes/pub")
    r = ci_clone(site, tmp_path, "ci3").run_here("confirm", "--json")
    assert r.code == 1 and [b["commit"] for b in r.json()["open_bad"]] == [bad], r.out


def test_an_erased_index_note_does_not_hide_a_second_publication(site: Site,
                                                                  tmp_path: Path) -> None:
    """t22: the job-id index note is removed from the notes, then the job's message is pushed
    again on a commit that changes nothing."""
    (good,) = publish(site, 1)
    assert ci_clone(site, tmp_path, "ci0").run_here("confirm").code == 0
    evil = attacker_clone(site, tmp_path)
    git(evil, "fetch", "-q", "origin", "+refs/notes/pub:refs/notes/pub")
    for line in git(evil, "notes", "--ref=pub", "list").splitlines():
        note, target = line.split()
        if "published-by" in git(evil, "cat-file", "-p", note):
            git(evil, "notes", "--ref=pub", "remove", target)
    git(evil, "push", "-q", "-f", "origin", "refs/notes/pub")
    again = commit_as(evil, message_of(evil, good), {})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = ci_clone(site, tmp_path, "ci1").run_here("confirm", "--json")
    assert r.code == 1 and r.json()["bad"] == [again], r.out


def test_a_claim_that_changes_nothing_is_bad(site: Site, tmp_path: Path) -> None:
    """A commit with a job's trailers and no change (``git commit --allow-empty -C``): even as
    the first claim of its job id (a copied message of a job published elsewhere)."""
    evil = attacker_clone(site, tmp_path)
    files = {"posts/new.md": "# New\n"}
    commit_as(evil, b"Add it\n", files)
    empty = commit_as(evil, job_commit_message(files), {})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = ci_clone(site, tmp_path, "ci").run_here("confirm", "--json")
    assert r.code == 1 and r.json()["bad"] == [empty], r.out
    row = next(c for c in r.json()["commits"] if c["commit"] == empty)
    assert row["problems"] == ["it changes nothing against its first parent"]


def test_a_job_id_that_is_no_uuid_is_bad_and_never_shown(site: Site, tmp_path: Path) -> None:
    """t12: a valid-looking publication whose Blog-Job-Id is a secret-shaped value."""
    secret = "AKIAQWERTYUIOPASDFGH"
    report_unrecorded(site)
    evil = attacker_clone(site, tmp_path)
    files = {"posts/n.md": "hello\n"}
    bad = commit_as(evil, job_commit_message(files, job_id=secret), files)
    ok = commit_as(evil, job_commit_message({"posts/m.md": "m\n"}, job_id=FORGED_JOB),
                   {"posts/m.md": "m\n"})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = ci_clone(site, tmp_path, "ci").run_here("confirm", "--json")
    assert r.code == 1 and r.json()["bad"] == [bad], r.out
    assert secret not in r.out and secret not in r.err
    row = next(c for c in r.json()["commits"] if c["commit"] == bad)
    assert row["job_id"] == "[REDACTED:aws-access-key]"
    assert any("is not a gitpub job id (a UUID)" in p for p in row["problems"])
    assert next(c for c in r.json()["commits"] if c["commit"] == ok)["ok"]
    assert secret not in remote_notes(site, bad)
    r = ci_clone(site, tmp_path, "ci-text").run_here("confirm")
    assert secret not in r.out and secret not in r.err


# -- the rules come from the trusted start, never from the tree being judged -------------------

def use_prefix(site: Site, prefix: str) -> None:
    config = site.path / ".gitpub.yaml"
    config.write_text(config.read_text() + f"trailer_prefix: {prefix}\n")
    site.git("commit", "-q", "-am", f"config: trailer_prefix {prefix}")
    site.git("push", "-q", "origin", "HEAD:main")


@pytest.mark.slow
def test_a_force_push_that_switches_the_prefix_does_not_hide_a_rewritten_publication(
        site: Site, tmp_path: Path) -> None:
    """t7: the site uses ``Site``; a force-push amends the publication (tampered content, a CI
    workflow, message kept) and switches the prefix at the tip to ``Other``."""
    use_prefix(site, "Site")
    (good,) = publish(site, 1)
    assert ci_clone(site, tmp_path, "ci0").run_here("confirm").code == 0
    evil = attacker_clone(site, tmp_path)
    text = (evil / "posts/p0.md").read_text() + "<script>evil()</script>\n"
    rewritten = commit_as(evil, message_of(evil, good),
                          {"posts/p0.md": text, ".github/workflows/x.yml": "on: push\n"},
                          amend=True)
    config = (evil / ".gitpub.yaml").read_text().replace("trailer_prefix: Site",
                                                          "trailer_prefix: Other")
    commit_as(evil, b"tweak config\n", {".gitpub.yaml": config})
    git(evil, "push", "-q", "-f", "origin", "HEAD:main")
    for name in ("ci1", "ci2"):  # and it stays red
        r = ci_clone(site, tmp_path, name).run_here("confirm", "--json")
        assert r.code == 1, r.out + r.err
        data = r.json()
        assert rewritten in data["bad"] or rewritten in [b["commit"] for b in data["open_bad"]]
        assert good in data["rewritten"] or good in [b["commit"] for b in data["open_bad"]]
        assert "Site" in data["prefixes"]
    # a fresh clone without the key: the claim is judged too (the prefix its own tree names)
    r = keyless(site, tmp_path, "plain").run_here("confirm", "--json")
    assert r.code == 1 and rewritten in r.json()["bad"], r.out


def test_a_prefix_switch_over_two_pushes_keeps_the_old_prefix_checked(
        site: Site, tmp_path: Path) -> None:
    """t15: push 1 switches ``Site`` to ``Other`` (reported, green); push 2 carries a tampered
    commit claiming ``Site-Job-Id``."""
    use_prefix(site, "Site")
    (good,) = publish(site, 1)
    assert ci_clone(site, tmp_path, "ci0").run_here("confirm").code == 0
    evil = attacker_clone(site, tmp_path)
    config = (evil / ".gitpub.yaml").read_text().replace("trailer_prefix: Site",
                                                          "trailer_prefix: Other")
    switch = commit_as(evil, b"config: tidy\n", {".gitpub.yaml": config})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = ci_clone(site, tmp_path, "ci1").run_here("confirm", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["config_changes"] == [switch]
    bad = commit_as(evil, message_of(evil, good), {".github/workflows/evil.yml": "on: push\n"})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = ci_clone(site, tmp_path, "ci2").run_here("confirm", "--json")
    assert r.code == 1 and r.json()["bad"] == [bad], r.out
    assert r.json()["prefixes"][:1] == ["Other"] and "Site" in r.json()["prefixes"]


def test_a_replace_ref_does_not_hide_a_tampered_publication(site: Site, tmp_path: Path) -> None:
    """C git follows ``refs/replace/*`` (``git replace``): a replace ref that swaps the
    tampered commit for a harmless one would make confirm's walk read the harmless one. Every
    git gitpub runs reads the objects as stored (``GIT_NO_REPLACE_OBJECTS``), so the tampered
    commit is BAD with the replace ref fetched into the CI clone too."""
    (good,) = publish(site, 1)
    evil, bad = tamper_on_top(site, tmp_path, good)
    git(evil, "reset", "-q", "--hard", good)
    harmless = commit_as(evil, b"An ordinary change\n", {"notes.txt": "hello\n"})
    git(evil, "reset", "-q", "--hard", bad)
    git(evil, "replace", bad, harmless)
    git(evil, "push", "-q", "origin", "HEAD:main", "refs/replace/*:refs/replace/*")
    ci = ci_clone(site, tmp_path, "ci", depth=None)
    git(ci.path, "fetch", "-q", "origin", "refs/replace/*:refs/replace/*")
    assert git(ci.path, "log", "-1", "--format=%s", "main").strip() == "An ordinary change"
    r = ci.run_here("confirm", "--json")
    assert r.code == 1 and r.json()["bad"] == [bad], r.out


def test_the_configuration_changes_are_read_whatever_the_output_encoding(
        tmp_path: Path) -> None:
    """confirm's ``git log`` of the commits changing ``.gitpub.yaml`` printed its ids in
    UTF-16 under ``i18n.logOutputEncoding=UTF-16``, and confirm died on a UnicodeDecodeError;
    and ``log.follow`` made it follow renames into the file."""
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "other.yaml").write_text("a: 0\n", encoding="utf-8")
    git(repo, "add", "other.yaml")
    git(repo, "commit", "-qm", "c0")
    start = git(repo, "rev-parse", "HEAD").strip()
    (repo / "other.yaml").write_text("a: 1\n", encoding="utf-8")
    git(repo, "commit", "-qam", "c1")
    git(repo, "mv", "other.yaml", ".gitpub.yaml")
    git(repo, "commit", "-qm", "c2")
    for i in (3, 4):
        (repo / ".gitpub.yaml").write_text(f"a: {i}\n", encoding="utf-8")
        git(repo, "commit", "-qam", f"c{i}")
    expected = git(repo, "log", "--format=%H", "--reverse", "HEAD", f"^{start}", "--",
                   ".gitpub.yaml").split()
    assert len(expected) == 3
    git(repo, "config", "i18n.logOutputEncoding", "UTF-16")
    git(repo, "config", "log.follow", "true")

    class Facts:  # only which blob is at a commit matters here: a different one at each
        @staticmethod
        def blob_at(commit: str) -> str:
            return commit

    with Repository.discover(repo) as r:
        assert rules._config_changes(r, Facts(), start, "HEAD") == expected  # type: ignore[arg-type]
