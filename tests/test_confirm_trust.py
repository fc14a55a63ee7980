"""``git pub confirm`` attacked by someone with push access (issue 22): the notes rolled back or
deleted, the branch redirected by a pushed ``.gitpub.yaml``, a self-consistent commit that
writes outside the write scope or links out of the repository.

CI is modelled as it runs: a fresh clone per run with the key, and an anchor file kept between
runs (``ci_clone``: ``GITPUB_CONFIRM_ANCHOR`` in the test's "CI cache"). The attacker is a clone
with push access; what CI holds (the key, the anchor) it never touches — except where a test
says so (a forged anchor).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import Site, git, set_up_once
from test_confirm import (
    KEY,
    attacker_clone,
    ci_clone,
    commit_as,
    job_commit_message,
    message_of,
    publish,
    remote_notes,
    report_unrecorded,
)


def keyed_run(site: Site, tmp_path: Path, name: str, *args: str, first_runs: bool = False,  # type: ignore[no-untyped-def]
              env: dict[str, str] | None = None):
    """One CI run in a fresh clone; no automatic ``--first-run`` unless asked. In a process of
    its own when it is to be killed."""
    ci = ci_clone(site, tmp_path, name, depth=None, first_runs=first_runs)
    if env and "GITPUB_CRASH_AT" in env:
        return ci.run("confirm", "--json", *args, env=env)
    return ci.run_here("confirm", "--json", *args, env=env)


def anchored(site: Site, tmp_path: Path, *, report: bool = False) -> list[str]:
    """Two publications, confirmed by a first run (a person's) that wrote the anchor (after
    ``report_unrecorded`` when ``report``): made once per test process and copied in
    (``set_up_once``), the anchor file with them (it names no path: the notes commit, the
    serial, the branch, the lineage, a MAC); ``site`` must be as the fixture made it."""
    assert site.git("rev-list", "--count", "--all").strip() == "1" and not site.job_refs(), \
        "anchored starts from a fresh site (it copies its set-up over it)"

    def build(template: Site, where: Path) -> tuple[list[str], Path]:
        if report:
            report_unrecorded(template)
        commits = publish(template, 2)
        r = keyed_run(template, where, "ci0", "--first-run")
        assert r.code == 0, r.out + r.err
        return commits, where

    commits, where = set_up_once(site, f"confirm-anchored-{report}", build)
    if where != tmp_path:  # else made in place (the user's configuration may shape it)
        shutil.copytree(where / "ci-cache", tmp_path / "ci-cache")
    assert (tmp_path / "ci-cache/confirm-anchor.json").exists()
    return list(commits)


def push_forged(site: Site, tmp_path: Path, files: dict[str, str], name: str = "evil") -> str:
    evil = attacker_clone(site, tmp_path, name)
    bad = commit_as(evil, job_commit_message(files), files)
    git(evil, "push", "-q", "origin", "HEAD:main")
    return bad


# -- 1. the notes rolled back to an older authentic ledger -------------------------------------

@pytest.mark.slow
def test_a_rollback_of_the_notes_is_refused(site: Site, tmp_path: Path) -> None:
    """An open BAD is recorded; the attacker sets refs/notes/pub back to the ledger before it,
    force-pushes the bad commit away and deletes a job ref: exit 1, naming the rollback."""
    good = anchored(site, tmp_path)
    old_notes = git(site.remote, "rev-parse", "refs/notes/pub").strip()
    evil = attacker_clone(site, tmp_path)
    bad = commit_as(evil, message_of(evil, good[0]), {"evil.js": "x\n"})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1 and r.json()["open_bad"][0]["commit"] == bad, r.out
    # the attack
    git(evil, "reset", "-q", "--hard", "HEAD~1")
    git(evil, "push", "-q", "-f", "origin", "HEAD:main")
    git(site.remote, "update-ref", "refs/notes/pub", old_notes)
    jobs = git(site.remote, "for-each-ref", "--format=%(refname)", "refs/pub/jobs/").split()
    git(site.remote, "update-ref", "-d", jobs[0])
    r = keyed_run(site, tmp_path, "ci2")
    assert r.code == 1, r.out + r.err
    assert "rolled back or deleted" in r.out and "--first-run" in r.out
    assert r.json()["exit"] == 1


def test_deleted_notes_are_refused(site: Site, tmp_path: Path) -> None:
    anchored(site, tmp_path)
    git(site.remote, "update-ref", "-d", "refs/notes/pub")
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1 and "rolled back or deleted" in r.out, r.out + r.err


@pytest.mark.slow
def test_a_forged_ledger_on_top_of_a_rollback_is_refused(site: Site, tmp_path: Path) -> None:
    """Rolled back, then a notes commit on top whose ledger claims a high serial: its MAC is
    wrong, the authentic one below is older than the anchor."""
    from test_confirm_gate import forged_notes_commit

    anchored(site, tmp_path)
    old = git(site.remote, "rev-parse", "refs/notes/pub").strip()
    assert keyed_run(site, tmp_path, "ci1").code == 0  # a second ledger: serial 2
    reader = attacker_clone(site, tmp_path, "reader")
    forged = forged_notes_commit(reader, ["Gitpub-Confirm-Ledger: v4",
                                          "Gitpub-Confirmed-Branch: main",
                                          "Gitpub-Ledger-Serial: 99",
                                          "Gitpub-Ledger-Mac: hmac-sha256:" + "0" * 64],
                                 parent=old)
    git(reader, "push", "-q", "-f", "origin", f"{forged}:refs/notes/pub")
    r = keyed_run(site, tmp_path, "ci2")
    assert r.code == 1 and "rolled back or deleted" in r.out, r.out + r.err


def test_the_notes_moving_on_from_the_anchor_are_fine(site: Site, tmp_path: Path) -> None:
    """A notes commit on top of the anchored one (a publisher's linked-job note, a forged
    ledger) is no rollback: the run goes on from the newest authentic ledger."""
    from test_confirm_gate import forged_notes_commit

    anchored(site, tmp_path)
    reader = attacker_clone(site, tmp_path, "reader")
    on_top = forged_notes_commit(reader, ["Gitpub-Confirm-Ledger: v4",
                                          "Gitpub-Ledger-Mac: hmac-sha256:" + "0" * 64])
    git(reader, "push", "-q", "origin", f"{on_top}:refs/notes/pub")
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 0, r.out + r.err


# -- the anchor itself -----------------------------------------------------------------------

@pytest.mark.slow
def test_a_first_keyed_run_needs_a_persons_first_run(site: Site, tmp_path: Path) -> None:
    publish(site, 1)
    r = keyed_run(site, tmp_path, "ci0")
    assert r.code == 1 and "--first-run" in r.out, r.out + r.err
    assert not (tmp_path / "ci-cache/confirm-anchor.json").exists()
    assert keyed_run(site, tmp_path, "ci1", "--first-run").code == 0
    assert keyed_run(site, tmp_path, "ci2").code == 0  # anchored from now on


@pytest.mark.slow
def test_a_lost_anchor_is_refused_until_a_first_run(site: Site, tmp_path: Path) -> None:
    anchored(site, tmp_path)
    (tmp_path / "ci-cache/confirm-anchor.json").unlink()
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1 and "no rollback anchor" in r.out, r.out + r.err
    assert keyed_run(site, tmp_path, "ci2", "--first-run").code == 0
    assert keyed_run(site, tmp_path, "ci3").code == 0


@pytest.mark.parametrize("tamper", ["serial", "notes", "mac", "garbage", "other key"])
def test_a_tampered_anchor_is_refused(site: Site, tmp_path: Path, tamper: str) -> None:
    anchored(site, tmp_path)
    path = tmp_path / "ci-cache/confirm-anchor.json"
    data = json.loads(path.read_text())
    if tamper == "serial":
        data["serial"] = 0
    elif tamper == "notes":
        data["notes"] = git(site.remote, "rev-parse", "main").strip()
    elif tamper == "mac":
        data["mac"] = "0" * 64
    if tamper == "garbage":
        path.write_text("{not json")
    elif tamper == "other key":
        ci = ci_clone(site, tmp_path, "other", depth=None, first_runs=False)
        r = ci.run_here("confirm", env={"GITPUB_CONFIRM_KEY": "another-secret-0123456789"})
        assert r.code == 1 and "not written with this" in r.out + r.err, r.out + r.err
        return
    else:
        path.write_text(json.dumps(data))
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1, r.out + r.err
    assert "anchor" in r.out and "Traceback" not in r.err


def test_with_the_key_an_anchor_or_no_anchor_must_be_said(site: Site, tmp_path: Path) -> None:
    publish(site, 1)
    ci = ci_clone(site, tmp_path, "ci0", depth=None)
    r = ci.run_here("confirm", env={"GITPUB_CONFIRM_ANCHOR": ""})
    assert r.code == 2 and "--anchor FILE" in r.err + r.out, r.out + r.err
    r = ci.run_here("confirm", "--json", "--no-anchor", "--first-run",
               env={"GITPUB_CONFIRM_ANCHOR": ""})
    assert r.code == 0, r.out + r.err
    r = ci_clone(site, tmp_path, "ci1", depth=None).run_here(
        "confirm", "--json", "--no-anchor", env={"GITPUB_CONFIRM_ANCHOR": ""})
    assert r.code == 0 and any("--no-anchor" in m for m in r.json()["remarks"]), r.out


def test_no_anchor_is_written_when_the_notes_are_not_pushed(site: Site, tmp_path: Path) -> None:
    publish(site, 1)
    r = keyed_run(site, tmp_path, "ci0", "--first-run", "--no-push-notes")
    assert r.code == 0, r.out + r.err
    assert not (tmp_path / "ci-cache/confirm-anchor.json").exists()


# -- 2. deleting the notes to launder a forged commit ------------------------------------------

def test_deleting_the_notes_does_not_launder_a_forged_commit(site: Site,
                                                              tmp_path: Path) -> None:
    """The tip says ``confirm_unrecorded: report`` and the notes are gone: a forged commit
    without a job record must not pass as a first run's."""
    anchored(site, tmp_path)
    report_unrecorded(site)  # pushed by the attacker, in the tip's configuration
    push_forged(site, tmp_path, {"posts/forged.md": "# Forged\n"})
    git(site.remote, "update-ref", "-d", "refs/notes/pub")
    for args in ([], ["--no-anchor"]):
        r = keyed_run(site, tmp_path, f"ci-{len(args)}", *args)
        assert r.code == 1, r.out + r.err
        assert "rolled back or deleted" in r.out or "no authentic ledger" in r.out


def test_deleting_the_notes_after_a_force_push_does_not_hide_it(site: Site,
                                                                 tmp_path: Path) -> None:
    anchored(site, tmp_path)
    evil = attacker_clone(site, tmp_path)
    git(evil, "reset", "-q", "--hard", "HEAD~1")
    git(evil, "push", "-q", "-f", "origin", "HEAD:main")
    git(site.remote, "update-ref", "-d", "refs/notes/pub")
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1, r.out + r.err
    git(site.remote, "update-ref", "-d", "refs/notes/pub", check=False)
    r = keyed_run(site, tmp_path, "ci2", "--no-anchor")
    assert r.code == 1 and "no authentic ledger" in r.out, r.out + r.err


# -- 3. a pushed .gitpub.yaml names another branch -------------------------------------------

@pytest.mark.slow
def test_a_pushed_branch_decoy_does_not_redirect_confirm(site: Site, tmp_path: Path) -> None:
    anchored(site, tmp_path)
    evil = attacker_clone(site, tmp_path)
    (evil / ".gitpub.yaml").write_text((evil / ".gitpub.yaml").read_text().replace(
        "branch: main", "branch: decoy"))
    git(evil, "commit", "-qam", "point confirm elsewhere")
    git(evil, "push", "-q", "origin", "HEAD:main", "HEAD:decoy")
    bad = push_forged(site, tmp_path, {"posts/forged.md": "# Forged\n"}, "evil2")
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1, r.out + r.err
    data = r.json()
    assert data["checked"] == 2 and bad in data["bad"]
    assert any("decoy" in m and "never the pushed tree" in m for m in data["remarks"])
    r = keyed_run(site, tmp_path, "ci2")  # the run after, the branch from the ledger
    assert r.code == 1 and bad in [c["commit"] for c in r.json()["open_bad"]], r.out


def test_the_branch_comes_from_ci_then_the_ledger(site: Site, tmp_path: Path) -> None:
    publish(site, 1)
    site.git("push", "-q", "origin", "main:release")
    r = keyed_run(site, tmp_path, "ci0", "--first-run", "--branch", "release")
    assert r.code == 0, r.out + r.err
    notes = git(site.remote, "log", "-1", "--format=%B", "refs/notes/pub")
    assert "Gitpub-Confirmed-Branch: release" in notes
    evil = attacker_clone(site, tmp_path)
    git(evil, "checkout", "-q", "-b", "release", "origin/release")
    bad = commit_as(evil, job_commit_message({"posts/f.md": "f\n"}), {"posts/f.md": "f\n"})
    git(evil, "push", "-q", "origin", "HEAD:release")
    r = keyed_run(site, tmp_path, "ci1")  # no --branch: the ledger's
    assert r.code == 1 and bad in r.out, r.out + r.err


@pytest.mark.parametrize("value", ["--upload-pack=x", "a..b", "main.lock", "-x", "a b"])
def test_a_hostile_branch_argument_is_refused(site: Site, tmp_path: Path, value: str) -> None:
    ci = ci_clone(site, tmp_path, "ci0", depth=None)
    r = ci.run_here("confirm", f"--branch={value}", "--no-anchor")
    assert r.code == 2, r.out + r.err


# -- 4. a self-consistent commit outside the write scope, or linking out ----------------------

def test_a_forged_publication_outside_the_write_scope_is_bad(site: Site,
                                                            tmp_path: Path) -> None:
    anchored(site, tmp_path, report=True)  # records are another test's rule: only scope here
    bad = push_forged(site, tmp_path, {"src/app.py": "import os\n"})
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1, r.out + r.err
    assert "src/app.py: is outside the write scope" in r.out
    assert "BAD" in remote_notes(site, bad)


def test_a_scope_widened_in_the_same_push_does_not_apply_yet(site: Site,
                                                            tmp_path: Path) -> None:
    anchored(site, tmp_path, report=True)
    evil = attacker_clone(site, tmp_path)
    (evil / ".gitpub.yaml").write_text((evil / ".gitpub.yaml").read_text()
                                       + 'publish: ["**"]\n')
    git(evil, "commit", "-qam", "widen the scope")
    files = {"src/app.py": "import os\n"}
    bad = commit_as(evil, job_commit_message(files), files)
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = keyed_run(site, tmp_path, "ci1")
    assert r.code == 1 and bad in r.out and "outside the write scope" in r.out, r.out


@pytest.mark.parametrize(("target", "bad"), [("../../etc/passwd", True), ("/etc/passwd", True),
                                              ("../.git/config", True), ("other.md", False),
                                              ("../posts/other.md", False)])
def test_a_published_symlink_must_stay_inside(site: Site, tmp_path: Path, target: str,
                                              bad: bool) -> None:
    from gitpub.core.manifest import Manifest, ManifestEntry, content_sha256

    anchored(site, tmp_path, report=True)
    evil = attacker_clone(site, tmp_path)
    (evil / "posts").mkdir(exist_ok=True)
    (evil / "posts/link.md").symlink_to(target)
    git(evil, "add", "posts/link.md")
    manifest = Manifest.of([ManifestEntry("posts/link.md", 0o120000,
                                          content_sha256(target.encode()))])
    message = (b"Publish: a link\n\n" + manifest.serialize() + b"\nBlog-Job-Id: "
               b"0badf00d-0000-5000-8000-000000000000\nBlog-Manifest-Sha256: "
               + manifest.sha256().encode() + b"\n")
    commit = commit_as(evil, message, {})
    git(evil, "push", "-q", "origin", "HEAD:main")
    r = keyed_run(site, tmp_path, "ci1")
    assert (r.code == 1) == bad, r.out + r.err
    assert (commit in r.json()["bad"]) == bad


# -- without the key nothing changes: nothing to anchor, the whole history every time -----------

def test_without_the_key_no_anchor_is_needed(site: Site, tmp_path: Path) -> None:
    publish(site, 1)
    ci = ci_clone(site, tmp_path, "ci0", depth=None)
    r = ci.run_here("confirm", "--json",
                    env={"GITPUB_CONFIRM_KEY": "", "GITPUB_CONFIRM_ANCHOR": ""})
    assert r.code == 0, r.out + r.err
    assert not r.json()["authenticated"]
    assert KEY not in r.out
