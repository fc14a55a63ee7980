"""A branch moves only together with the worktree that has it checked out, or not at all.

``main`` checked out in a *linked* worktree while gitpub runs in another checkout: after a job
is published, that worktree's ``git status`` is clean and shows the article — or ``main`` did not
move and the output names the worktree and what to run there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import Site, git
from test_delivery import article, commit_file, other_writer
from test_sync import hand_commit


def linked_main(site: Site, tmp_path: Path) -> Path:
    """The site's own checkout moves to a branch ``side``; ``main`` goes to a linked worktree."""
    site.git("checkout", "-q", "-b", "side")
    wt = tmp_path / "main-wt"
    site.git("worktree", "add", "-q", str(wt), "main")
    return wt


def publish(site: Site, name: str) -> dict[str, object]:
    r = site.call("prepare", "--json", "--push", "--key", name, "--to", f"posts/{name}.md", "-",
                  input=article(name))
    assert r.code == 0, r.out + r.err
    data: dict[str, object] = r.json()
    assert data["state"] == "PUBLISHED"
    return data


def test_main_in_a_linked_worktree_moves_with_its_files(site: Site, tmp_path: Path) -> None:
    wt = linked_main(site, tmp_path)
    data = publish(site, "wt")
    assert f"in worktree {wt}" in str(data["note"])
    assert git(wt, "status", "--porcelain") == ""
    assert (wt / "posts/wt.md").read_text() == article("wt")
    assert git(wt, "rev-parse", "HEAD") == git(site.remote, "rev-parse", "main")
    assert site.git("rev-parse", "side") != site.git("rev-parse", "main"), "side stays"


def test_local_changes_in_that_worktree_keep_main_where_it_is(site: Site,
                                                              tmp_path: Path) -> None:
    wt = linked_main(site, tmp_path)
    (wt / "posts").mkdir(exist_ok=True)
    (wt / "posts/wt.md").write_text("the person's own, untracked\n")
    before = git(wt, "rev-parse", "HEAD")
    data = publish(site, "wt")
    note = str(data["note"])
    assert "left alone" in note and str(wt) in note and "git merge --ff-only" in note, note
    assert git(wt, "rev-parse", "HEAD") == before
    assert (wt / "posts/wt.md").read_text() == "the person's own, untracked\n"
    assert git(wt, "status", "--porcelain") == "?? posts/wt.md\n"


def test_a_vanished_worktree_keeps_main_where_it_is(site: Site, tmp_path: Path) -> None:
    wt = linked_main(site, tmp_path)
    before = site.git("rev-parse", "main")
    shutil.rmtree(wt)
    data = publish(site, "gone")
    assert "git worktree prune" in str(data["note"])
    assert site.git("rev-parse", "main") == before


def test_sync_from_another_checkout_updates_the_worktree(site: Site, tmp_path: Path) -> None:
    wt = linked_main(site, tmp_path)
    (wt / "posts/wt.md").write_text(article("by hand"))
    git(wt, "add", "posts/wt.md")
    git(wt, "commit", "-q", "-m", "a hand commit in the worktree")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert [c["status"] for c in r.json()["commits"]] == ["published"]
    assert f"in worktree {wt}" in r.json()["local"]
    assert git(wt, "status", "--porcelain") == ""
    assert git(wt, "rev-parse", "HEAD") == git(site.remote, "rev-parse", "main")


def test_sync_stops_when_the_worktree_could_not_follow(site: Site, tmp_path: Path) -> None:
    """The remote changed a file the worktree has local changes to: the local branch could
    not follow, so sync delivers nothing and says which worktree is in the way."""
    commit_file(other_writer(tmp_path, site), "README.md", "theirs\n", "their readme")
    wt = linked_main(site, tmp_path)
    (wt / "README.md").write_text("mine, uncommitted\n")
    hand_commit_in(wt, "posts/x.md", article("x"))
    before = git(wt, "rev-parse", "HEAD"), git(wt, "status", "--porcelain=v2")
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert [c["status"] for c in r.json()["commits"]] == ["blocked"]
    assert f"checked out in worktree {wt}" in r.json()["local"]
    assert (git(wt, "rev-parse", "HEAD"), git(wt, "status", "--porcelain=v2")) == before
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/x.md") == ""


def hand_commit_in(repo: Path, path: str, text: str) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git(repo, "add", path)
    git(repo, "commit", "-q", "-m", f"edit {path}", "--", path)


def test_a_crash_between_worktree_and_branch_heals_on_the_next_sync(site: Site) -> None:
    hand_commit(site, "posts/welcome.md", "# Welcome\n\nEdited.\n")
    r = site.run("sync", env={"GITPUB_CRASH_AT": "checkout.worktree-updated"})
    assert r.code < 0, r.out + r.err
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert site.git("status", "--porcelain") == ""
    assert site.git("rev-parse", "main") == git(site.remote, "rev-parse", "main")


def test_a_branch_being_rebased_is_neither_delivered_nor_moved(site: Site) -> None:
    """Mid-rebase (stopped at an `edit`), HEAD is detached but git holds ``main``: sync must
    not publish the commits being rewritten nor move ``main`` under the rebase (which would
    then fail: "cannot lock ref"). Afterwards the rebase ends as if sync never ran."""
    from test_sync import snapshot

    hand_commit(site, "posts/a.md", article("a"))
    hand_commit(site, "posts/b.md", article("b"))
    site.git("-c", "sequence.editor=sed -i 1s/^pick/edit/", "rebase", "-q", "-i", "origin/main")
    before, main = snapshot(site), site.git("rev-parse", "main")
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert [c["status"] for c in r.json()["commits"]] == ["blocked", "blocked"]
    assert "held by a rebase in progress here" in r.json()["local"]
    assert snapshot(site) == before and site.git("rev-parse", "main") == main
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/") == "posts/welcome.md\n"
    (site.path / "posts/a.md").write_text(article("a, reworded in the rebase"))
    site.git("commit", "-q", "-a", "--amend", "--no-edit")
    site.git("rebase", "--continue")  # would fail if main had moved
    assert site.git("symbolic-ref", "HEAD") == "refs/heads/main\n"
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "show", "main:posts/a.md") == article("a, reworded in the rebase")


def test_a_branch_bisected_in_a_linked_worktree_is_not_moved(site: Site,
                                                             tmp_path: Path) -> None:
    wt = linked_main(site, tmp_path)
    hand_commit_in(wt, "posts/x.md", article("x"))
    hand_commit_in(wt, "posts/y.md", article("y"))
    git(wt, "push", "-q", "origin", "main")
    git(wt, "bisect", "start", "HEAD", "HEAD~2")
    before = site.git("rev-parse", "main")
    data = publish(site, "bisected")
    note = str(data["note"])
    assert "held by a bisect in progress" in note and str(wt) in note, note
    assert site.git("rev-parse", "main") == before
    git(wt, "bisect", "reset")
    assert git(wt, "status", "--porcelain") == ""


def test_a_branch_checked_out_in_two_worktrees_is_not_moved(site: Site,
                                                            tmp_path: Path) -> None:
    """``git worktree add --force`` checks ``main`` out twice: moving it with one worktree
    would leave the other's index at the old commit (its next commit reverting the article)."""
    wt = linked_main(site, tmp_path)
    twin = tmp_path / "twin"
    site.git("worktree", "add", "-q", "--force", str(twin), "main")
    before = site.git("rev-parse", "main")
    data = publish(site, "twice")
    note = str(data["note"])
    assert "checked out in 2 worktrees" in note and str(twin) in note, note
    assert site.git("rev-parse", "main") == before
    assert git(wt, "status", "--porcelain") == "" and git(twin, "status", "--porcelain") == ""
