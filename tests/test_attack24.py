"""Attacks on issue 24's landings: the in-place fast-forward (``delivery.checkout``),
``sync --dry-run`` and the take-over re-gating. Each test is a hole found, then closed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Site, git, spawn, wait_stopped
from netfaults import GitDaemon
from test_delivery import article
from test_inplace import EDITED, remote_tip
from test_shared import JOBS, node
from test_shared_attack import SECRET, claimed_and_killed, no_traceback, push_raw, remote_sha

from gitpub.delivery.checkout import move_branch
from gitpub.git.repo import Repository


def three_files(site: Site) -> tuple[str, str]:
    """A commit ``new`` on top of HEAD (``old``): welcome.md edited, b.md added, hidden.md
    deleted; main stays at ``old``."""
    (site.path / "posts/hidden.md").write_text(article("hidden"))
    site.git("add", "posts/hidden.md")
    site.git("commit", "-q", "-m", "hidden")
    old = site.git("rev-parse", "HEAD").strip()
    site.git("checkout", "-q", "-b", "tmp")
    (site.path / "posts/welcome.md").write_text(EDITED)
    (site.path / "posts/b.md").write_text(article("b"))
    site.git("rm", "-q", "posts/hidden.md")
    site.git("add", ".")
    site.git("commit", "-q", "-m", "three")
    new = site.git("rev-parse", "HEAD").strip()
    site.git("checkout", "-q", "main")
    site.git("branch", "-q", "-D", "tmp")
    return old, new


def test_refused_move_keeps_skip_worktree_and_assume_unchanged_bits(site: Site) -> None:
    """A sparse checkout leaves hidden.md out (skip-worktree, no file); welcome.md is marked
    assume-unchanged and edited to the new version; b.md is in the way. The move is refused,
    and the index must be exactly as it was: its bits too. Put back through
    ``update-index --index-info`` they were dropped: hidden.md then showed as deleted (a
    ``git commit -a`` would delete it from the branch), welcome.md's edit as a change."""
    old, new = three_files(site)
    site.git("update-index", "--skip-worktree", "posts/hidden.md")
    (site.path / "posts/hidden.md").unlink()
    site.git("update-index", "--assume-unchanged", "posts/welcome.md")
    (site.path / "posts/welcome.md").write_text(EDITED)
    (site.path / "posts/b.md").write_text("the person's own b\n")
    before = site.git("ls-files", "-s", "-t", "-v")
    status = site.git("status", "--porcelain")
    with Repository.discover(site.path) as repo:
        moved = move_branch(repo, "main", old, new, then="x")
    assert not moved.moved and "left alone" in moved.note
    assert site.git("rev-parse", "main").strip() == old
    assert site.git("ls-files", "-s", "-t", "-v") == before
    assert site.git("status", "--porcelain") == status == "?? posts/b.md\n"


def test_refused_move_keeps_an_intent_to_add_entry(site: Site) -> None:
    """``git rm --cached`` then ``git add -N`` of an empty page (a staged deletion, the file
    re-announced): the index entry looks like the old one (the empty blob) but is no such
    entry. A refused move must leave it so, not turn it into a staged empty file."""
    (site.path / "posts/empty.md").write_text("")
    site.git("add", "posts/empty.md")
    site.git("commit", "-q", "-m", "empty")
    old = site.git("rev-parse", "HEAD").strip()
    site.git("checkout", "-q", "-b", "tmp")
    (site.path / "posts/empty.md").write_text(article("filled"))
    (site.path / "posts/b.md").write_text(article("b"))
    site.git("add", ".")
    site.git("commit", "-q", "-m", "two")
    new = site.git("rev-parse", "HEAD").strip()
    site.git("checkout", "-q", "main")
    site.git("branch", "-q", "-D", "tmp")
    site.git("rm", "-q", "--cached", "posts/empty.md")
    (site.path / "posts/empty.md").write_text(article("filled"))
    site.git("add", "-N", "posts/empty.md")
    (site.path / "posts/b.md").write_text("the person's own b\n")
    status = site.git("status", "--porcelain")
    assert status.startswith("DA posts/empty.md\n"), status
    with Repository.discover(site.path) as repo:
        moved = move_branch(repo, "main", old, new, then="x")
    assert not moved.moved
    assert site.git("status", "--porcelain") == status
    assert git(site.path, "rev-parse", "main").strip() == old


# -- C. what a take-over trusts -------------------------------------------------------------

def forge(site: Site, job_id: str, files: dict[str, bytes], *, deleted: tuple[str, ...] = (),
          edit: Callable[[dict[str, Any]], None] = lambda record: None,
          parents: tuple[str, ...] = ()) -> str:
    """A state commit on top of the remote's job ref with these artifacts, a manifest listing
    them (and ``deleted``), a record agreeing with the manifest then changed by ``edit``, no
    lease; extra ``parents`` carry any objects the forger wants the taker to have. Forced onto
    the remote's job ref (what a clone allowed to push ``refs/pub/*`` can do)."""
    from gitpub.core.manifest import Manifest

    base = remote_sha(site, job_id)
    assert base is not None
    site.git("fetch", "-q", str(site.remote), f"+{JOBS}{job_id}:refs/hostile/{job_id}")
    manifest = Manifest.build([(p, 0o100644, d) for p, d in files.items()], deleted=deleted)
    record = json.loads(site.git("show", f"{base}:job.json"))
    record.update(lease=None, manifest_sha256=manifest.sha256())
    edit(record)
    env = {**os.environ, "GIT_INDEX_FILE": str(site.path / ".git" / "hostile-index")}

    def plumb(*args: str, data: bytes | None = None) -> str:
        return subprocess.run(["git", *args], cwd=site.path, env=env, input=data,
                              capture_output=True, check=True).stdout.decode().strip()

    plumb("read-tree", base)
    plumb("rm", "-q", "-r", "--cached", "--ignore-unmatch", "artifacts")
    named = {f"artifacts/{p}": d for p, d in files.items()}
    for name, data in {**named, "manifest": manifest.serialize(),
                       "job.json": (json.dumps(record, indent=1) + "\n").encode()}.items():
        blob = plumb("hash-object", "-w", "--stdin", data=data)
        plumb("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}")
    tree = plumb("write-tree")
    commit = site.git("commit-tree", tree, "-p", base,
                      *[a for p in parents for a in ("-p", p)], "-m", "forged").strip()
    push_raw(site, commit, JOBS + job_id)
    return commit


def test_forged_deletion_outside_the_scope_is_not_taken_over(
        site: Site, daemon: GitDaemon, tmp_path: Path) -> None:
    """The forger keeps the dead job's article and target, and adds to the manifest the
    deletion of ``src/app.py`` (outside ``publish``): the record's targets do not name it, so
    the take-over's scope check passed it, and the commit built from the manifest deleted
    it from the branch."""
    (site.path / "src").mkdir()
    (site.path / "src/app.py").write_text("print('app')\n")
    site.git("add", "src/app.py")
    site.git("commit", "-q", "-m", "app")
    site.git("push", "-q", "origin", "main")
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    git(site.path, "update-ref", "-d", JOBS + job_id)
    hostile = node(site, tmp_path, "hostile")
    forge(hostile, job_id, {"posts/a.md": article("a").encode()}, deleted=("src/app.py",))
    c = node(site, tmp_path, "node-c")
    r = c.run("reconcile")
    no_traceback(r.out, r.err)
    assert "src/app.py" in git(site.remote, "ls-tree", "-r", "--name-only", "main"), r.err
    shown = c.call("status", job_id, "--json").json()
    assert shown["state"] == "REVIEW" and "src/app.py" in shown["failure_detail"], (
        shown, r.err)


def test_forged_base_commit_does_not_let_a_secret_through(
        site: Site, daemon: GitDaemon, tmp_path: Path) -> None:
    """The forger writes a secret into the article and points the record's ``base_commit``
    at a commit of its own (carried as a second parent of the forged state) whose version of
    the article already has it: the diff-based scan took the secret for one already there."""
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    git(site.path, "update-ref", "-d", JOBS + job_id)
    hostile = node(site, tmp_path, "hostile")
    text = f"# Post a\n\nDeploy with token {SECRET}.\n".encode()
    blob = hostile.git("hash-object", "-w", "--stdin", input=text).strip()
    tree = hostile.git("mktree", input=f"100644 blob {blob}\ta.md\n".encode()).strip()
    top = hostile.git("mktree", input=f"040000 tree {tree}\tposts\n".encode()).strip()
    evil = hostile.git("commit-tree", top, "-m", "a base of my own").strip()

    def rebase(record: dict[str, Any]) -> None:
        record["base_commit"] = evil

    forge(hostile, job_id, {"posts/a.md": text}, edit=rebase, parents=(evil,))
    c = node(site, tmp_path, "node-c")
    r = c.run("reconcile")
    no_traceback(r.out, r.err)
    assert SECRET not in git(site.remote, "log", "-p", "main"), "forged base let a secret out"
    shown = c.call("status", job_id, "--json").json()
    assert shown["state"] == "REVIEW", (shown, r.err)


def test_forged_author_does_not_write_headers_into_the_published_commit(
        site: Site, daemon: GitDaemon, tmp_path: Path) -> None:
    """The record's ``author`` goes into the commit's author and committer lines as it is: a
    forger's line break there wrote an author, a committer and a message of its choosing
    into the published commit, ahead of the real message (whose trailers still verified)."""
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    git(site.path, "update-ref", "-d", JOBS + job_id)
    hostile = node(site, tmp_path, "hostile")

    def spoof(record: dict[str, Any]) -> None:
        record["author"] = ("Mallory <m@x> 1 +0000\ncommitter Mallory <m@x> 1 +0000\n\n"
                            "Approved by the security team\n\nx <y>")

    forge(hostile, job_id, {"posts/a.md": article("a").encode()}, edit=spoof)
    c = node(site, tmp_path, "node-c")
    r = c.run("reconcile")
    no_traceback(r.out, r.err)
    log = git(site.remote, "log", "--format=%an%n%B", "main")
    assert "Mallory" not in log and "Approved by the security team" not in log, log
    shown = c.call("status", job_id, "--json").json()
    assert shown["state"] == "REVIEW" and "author" in shown["failure_detail"], (shown, r.err)


def test_forged_node_name_is_left_for_a_person(site: Site, daemon: GitDaemon,
                                               tmp_path: Path) -> None:
    """The record's ``node`` goes into the commit's Writer-Node trailer, whose values are
    checked as the commit is built: a forged node with a line break must leave the job for
    a person (REVIEW), not fail the run with an unexpected error on every attempt."""
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    git(site.path, "update-ref", "-d", JOBS + job_id)
    hostile = node(site, tmp_path, "hostile")

    def rename(record: dict[str, Any]) -> None:
        record["node"] = "evil\nGitpub-Job: 00000000-0000-0000-0000-000000000000"

    forge(hostile, job_id, {"posts/a.md": article("a").encode()}, edit=rename)
    c = node(site, tmp_path, "node-c")
    r = c.run("reconcile")
    no_traceback(r.out, r.err)
    assert "unexpected error" not in r.err, r.err
    assert "00000000-0000" not in git(site.remote, "log", "--format=%B", "main")
    shown = c.call("status", job_id, "--json").json()
    assert shown["state"] == "REVIEW", (shown, r.err)


# -- A. killed in the middle of the in-place move ---------------------------------------------

@pytest.mark.parametrize("point", ["delivery.published-recorded", "checkout.worktree-updated"])
def test_killed_during_the_in_place_move_a_rerun_finishes_it(site: Site, point: str) -> None:
    """Killed after PUBLISHED is recorded (before the move) or after the worktree was updated
    (before the branch moved): the page edited in place is safe either way, but the rerun
    ``git pub push`` says "nothing to deliver" and leaves local main behind for good — with
    the edit unstaged (``git merge --ff-only`` then refuses: the very state issue 24.4 ended)
    or with the published change staged over the old HEAD (``git pub sync`` then calls the
    published content an uncommitted change in conflict with the remote). checkout.py said
    of the second: "a rerun heals it"; push and reconcile now finish that one
    (``finish_interrupted_move``), and the first (``Deliverer.bring_along``)."""
    (site.path / "posts/welcome.md").write_text(EDITED)
    r = site.call("prepare", "--key", "k", "--to", "posts/welcome.md", "posts/welcome.md")
    assert r.code == 0, r.out + r.err
    r = site.run("push", env={"GITPUB_CRASH_AT": point})
    assert r.code == -signal.SIGKILL, r.out + r.err
    assert (site.path / "posts/welcome.md").read_text() == EDITED
    r = site.run("push")
    assert r.code == 0, r.out + r.err
    assert (site.path / "posts/welcome.md").read_text() == EDITED
    assert site.git("rev-parse", "HEAD").strip() == remote_tip(site)
    assert site.git("status", "--porcelain") == ""


def test_a_person_pulling_during_the_move_keeps_a_clean_checkout(site: Site) -> None:
    """Frozen after the worktree was updated, the person pulls (``git merge --ff-only``): the
    branch is now at the published commit, with its worktree. The compare-and-swap fails
    (the branch is not at ``old`` any more) and the put-back reverted the worktree to the old
    commit under the published branch: the page deleted again, its deletion staged, for the
    next ``git commit`` to publish."""
    r = site.call("prepare", "--key", "k", "--to", "posts/new.md", "-",
                  input=article("new"))
    assert r.code == 0, r.out + r.err
    p = spawn(site, "push", env={"GITPUB_PAUSE_AT": "checkout.worktree-updated"})
    try:
        wait_stopped(p.pid)
        site.git("fetch", "-q", "origin")
        site.git("merge", "-q", "--ff-only", "origin/main")
    finally:
        os.kill(p.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, out + err
    assert site.git("rev-parse", "HEAD").strip() == remote_tip(site)
    assert site.git("status", "--porcelain") == ""
    assert (site.path / "posts/new.md").read_text() == article("new")
