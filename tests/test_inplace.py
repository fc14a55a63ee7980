"""A page edited in place, then published as it is: the local branch ends at the published commit.

``git pub prepare --to posts/welcome.md posts/welcome.md`` after editing the file in the working
tree publishes the working file's content; the file is then changed in the working tree exactly
as the published commit has it. The local branch is fast-forwarded with its worktree (nothing to
lose: the file already is the new version) — and left alone, with what to run, whenever moving it
could lose anything: another edit of that file, a staged change, commits of its own.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from conftest import Site, git, spawn, wait_stopped
from test_delivery import article, commit_file, other_writer

from gitpub.delivery.checkout import move_branch
from gitpub.git.repo import Repository

EDITED = "# Welcome\n\nThe first post, edited in place.\n"


def publish_file(site: Site, path: str) -> dict[str, object]:
    r = site.call("prepare", "--json", "--key", path, "--to", path, path)
    assert r.code == 0, r.out + r.err
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    job: dict[str, object] = r.json()["jobs"][0]
    assert job["state"] == "PUBLISHED"
    return job


def remote_tip(site: Site) -> str:
    return git(site.remote, "rev-parse", "main").strip()


def test_edit_in_place_then_publish_fast_forwards(site: Site) -> None:
    (site.path / "posts/welcome.md").write_text(EDITED)
    job = publish_file(site, "posts/welcome.md")
    assert "fast-forwarded" in str(job["note"]), job["note"]
    assert site.git("rev-parse", "HEAD").strip() == remote_tip(site) == job["remote_commit"]
    assert site.git("status", "--porcelain") == ""
    assert (site.path / "posts/welcome.md").read_text() == EDITED


def test_edit_in_place_staged_too(site: Site) -> None:
    (site.path / "posts/welcome.md").write_text(EDITED)
    site.git("add", "posts/welcome.md")
    publish_file(site, "posts/welcome.md")
    assert site.git("rev-parse", "HEAD").strip() == remote_tip(site)
    assert site.git("status", "--porcelain") == ""


def test_new_page_written_in_place_fast_forwards(site: Site) -> None:
    (site.path / "posts/new.md").write_text(article("new"))
    job = publish_file(site, "posts/new.md")
    assert "fast-forwarded" in str(job["note"]), job["note"]
    assert site.git("rev-parse", "HEAD").strip() == remote_tip(site)
    assert site.git("status", "--porcelain") == ""


def test_other_local_changes_stay(site: Site) -> None:
    """Changes to paths the publication does not touch are kept as they were."""
    (site.path / "posts/other.md").write_text("a draft\n")
    site.git("add", "posts/other.md")
    site.git("commit", "-q", "-m", "other")
    site.git("push", "-q", "origin", "main")
    (site.path / "posts/other.md").write_text("a draft, going on\n")
    (site.path / "notes.txt").write_text("untracked\n")
    (site.path / "posts/welcome.md").write_text(EDITED)
    publish_file(site, "posts/welcome.md")
    assert site.git("rev-parse", "HEAD").strip() == remote_tip(site)
    assert site.git("status", "--porcelain") == " M posts/other.md\n?? notes.txt\n"
    assert (site.path / "posts/other.md").read_text() == "a draft, going on\n"


def test_edited_again_after_prepare_is_left_alone(site: Site) -> None:
    (site.path / "posts/welcome.md").write_text(EDITED)
    r = site.call("prepare", "--key", "k", "--to", "posts/welcome.md", "posts/welcome.md")
    assert r.code == 0, r.out + r.err
    (site.path / "posts/welcome.md").write_text(EDITED + "More, not published.\n")
    before = site.git("rev-parse", "HEAD")
    index = site.git("ls-files", "-s")
    r = site.call("push")
    assert r.code == 0, r.out + r.err
    assert "left alone" in r.out and "git merge --ff-only" in r.out, r.out
    assert site.git("rev-parse", "HEAD") == before
    assert site.git("ls-files", "-s") == index
    assert site.git("status", "--porcelain") == " M posts/welcome.md\n"
    assert (site.path / "posts/welcome.md").read_text() == EDITED + "More, not published.\n"


def test_committed_first_says_how_to_catch_up(site: Site) -> None:
    """The edit committed locally, then published by a job: the local branch has a commit of
    its own; moving it would be no fast-forward, so it stays, and the note says what puts it
    on the published commit without losing anything."""
    (site.path / "posts/welcome.md").write_text(EDITED)
    site.git("commit", "-q", "-am", "edit")
    mine = site.git("rev-parse", "HEAD").strip()
    job = publish_file(site, "posts/welcome.md")
    tip = remote_tip(site)
    note = str(job["note"])
    assert "left alone" in note and f"git reset --keep {tip}" in note, note
    assert site.git("rev-parse", "HEAD").strip() == mine
    site.git("reset", "-q", "--keep", tip)
    assert site.git("status", "--porcelain") == ""
    assert (site.path / "posts/welcome.md").read_text() == EDITED


def test_own_commits_elsewhere_get_no_reset_advice(site: Site) -> None:
    (site.path / "posts/mine.md").write_text(article("mine"))
    site.git("add", "posts/mine.md")
    site.git("commit", "-q", "-m", "mine")
    (site.path / "posts/welcome.md").write_text(EDITED)
    job = publish_file(site, "posts/welcome.md")
    note = str(job["note"])
    assert "left alone" in note and "reset" not in note, note


def two_files(site: Site) -> tuple[str, str]:
    """A commit ``new`` on top of HEAD (``old``) changing two pages; main stays at ``old``."""
    old = site.git("rev-parse", "HEAD").strip()
    site.git("checkout", "-q", "-b", "tmp")
    (site.path / "posts/welcome.md").write_text(EDITED)
    (site.path / "posts/b.md").write_text(article("b"))
    site.git("add", ".")
    site.git("commit", "-q", "-m", "two")
    new = site.git("rev-parse", "HEAD").strip()
    site.git("checkout", "-q", "main")
    site.git("branch", "-q", "-D", "tmp")
    return old, new


def test_one_file_in_the_way_puts_the_index_back(site: Site) -> None:
    """One path is already the new version, another holds a different local file: the move
    is refused and the index is exactly as it was (the first path is not left staged)."""
    old, new = two_files(site)
    (site.path / "posts/welcome.md").write_text(EDITED)
    (site.path / "posts/b.md").write_text("the person's own b\n")
    with Repository.discover(site.path) as repo:
        moved = move_branch(repo, "main", old, new, then="x")
    assert not moved.moved and "left alone" in moved.note
    assert site.git("rev-parse", "main").strip() == old
    assert site.git("status", "--porcelain") == " M posts/welcome.md\n?? posts/b.md\n"
    assert site.git("ls-files", "-s") == git(site.path, "ls-tree", "-r", "--format",
                                             "%(objectmode) %(objectname) 0\t%(path)", old)


def test_branch_moving_meanwhile_keeps_the_edit(site: Site) -> None:
    """Frozen after the worktree was updated, the branch moves under it: the worktree is put
    back, and the edited file (already the published version) is kept, not reverted."""
    (site.path / "posts/welcome.md").write_text(EDITED)
    r = site.call("prepare", "--key", "k", "--to", "posts/welcome.md", "posts/welcome.md")
    assert r.code == 0, r.out + r.err
    p = spawn(site, "push", env={"GITPUB_PAUSE_AT": "checkout.worktree-updated"})
    try:
        wait_stopped(p.pid)
        base = site.git("rev-parse", "HEAD").strip()
        tree = site.git("rev-parse", f"{base}^{{tree}}").strip()
        other = site.git("commit-tree", tree, "-p", base, "-m", "moved").strip()
        site.git("update-ref", "refs/heads/main", other, base)
    finally:
        os.kill(p.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, out + err
    assert b"moved meanwhile" in out, out
    assert (site.path / "posts/welcome.md").read_text() == EDITED
    assert site.git("status", "--porcelain") == " M posts/welcome.md\n"


def test_remote_moved_meanwhile_still_fast_forwards(site: Site, tmp_path: Path) -> None:
    """Another writer published in between: the job lands on top of their commit, and the
    local branch fast-forwards over both, their file written, the edited one kept."""
    other = other_writer(tmp_path, site)
    commit_file(other, "posts/theirs.md", article("theirs"))
    (site.path / "posts/welcome.md").write_text(EDITED)
    publish_file(site, "posts/welcome.md")
    assert site.git("rev-parse", "HEAD").strip() == remote_tip(site)
    assert site.git("status", "--porcelain") == ""
    assert (site.path / "posts/theirs.md").read_text() == article("theirs")
    assert (site.path / "posts/welcome.md").read_text() == EDITED
