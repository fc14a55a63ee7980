"""`git pub sync`: hand edits reach the remote like jobs, and nothing unrelated is staged."""

from __future__ import annotations

from pathlib import Path

from conftest import Site, git
from test_delivery import article, commit_file, other_writer, prepare, remote_job_ids


def hand_commit(site: Site, path: str, text: str) -> str:
    (site.path / path).parent.mkdir(parents=True, exist_ok=True)
    (site.path / path).write_text(text)
    site.git("add", path)
    site.git("commit", "-q", "-m", f"edit {path}")
    return site.git("rev-parse", "HEAD").strip()


def test_hand_commit_reaches_the_remote(site: Site) -> None:
    hand_commit(site, "posts/welcome.md", "# Welcome\n\nFixed a typo.\n")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    (job,) = r.json()["jobs"]
    assert job["state"] == "PUBLISHED" and job["idempotency_key"].startswith("sync:")
    assert git(site.remote, "show", "main:posts/welcome.md") == "# Welcome\n\nFixed a typo.\n"
    sync_id = git(site.remote, "log", "-1", "--format=%(trailers:key=Blog-Sync-Id,valueonly)",
                  "main").strip()
    assert sync_id == job["idempotency_key"].removeprefix("sync:")
    assert site.git("rev-parse", "main") == git(site.remote, "rev-parse", "main")
    assert site.git("status", "--porcelain") == ""
    assert site.call("sync").code == 0 and len(remote_job_ids(site)) == 1


def test_uncommitted_content_is_synced_and_nothing_else_is_staged(site: Site) -> None:
    (site.path / "posts/new.md").write_text(article("new"))
    (site.path / "README.md").write_text("not content\n")
    (site.path / "notes.txt").write_text("untracked, not content\n")
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "show", "main:posts/new.md") == article("new")
    assert git(site.remote, "ls-tree", "--name-only", "main", "README.md") == ""
    status = site.git("status", "--porcelain").splitlines()
    assert sorted(status) == ["?? README.md", "?? notes.txt"]


def test_with_every_hook_event_lost_reconcile_and_sync_deliver(site: Site,
                                                               tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    commit_file(other, "posts/theirs.md", article("theirs"))
    hand_commit(site, "posts/committed.md", article("committed"))
    (site.path / "posts/uncommitted.md").write_text(article("uncommitted"))
    r = site.call("reconcile", "--json")
    assert r.code == 0, r.out + r.err
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    for name in ("committed", "uncommitted", "theirs"):
        assert git(site.remote, "show", f"main:posts/{name}.md") == article(name)
    assert (site.path / "posts/theirs.md").read_text() == article("theirs")


def test_hand_edit_racing_a_remote_change_is_a_conflict(site: Site, tmp_path: Path) -> None:
    other = other_writer(tmp_path, site)
    hand_commit(site, "posts/welcome.md", "# Welcome\n\nMine.\n")
    commit_file(other, "posts/welcome.md", "# Welcome\n\nTheirs.\n")
    r = site.call("sync", "--json")
    assert r.code == 4, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "CONFLICT"
    assert git(site.remote, "show", "main:posts/welcome.md") == "# Welcome\n\nTheirs.\n"


def test_commit_with_non_content_paths_is_left_to_a_person(site: Site) -> None:
    (site.path / "README.md").write_text("readme\n")
    hand_commit(site, "posts/welcome.md", "# Welcome\n\nEdited.\n")
    site.git("add", "README.md")
    site.git("commit", "-q", "-m", "readme too")
    before = git(site.remote, "rev-parse", "main")
    r = site.call("sync")
    assert r.code == 0
    assert "push it yourself" in r.err + r.out
    assert git(site.remote, "rev-parse", "main") == before


def test_jobs_and_hand_edits_in_one_sync(site: Site) -> None:
    prepare(site, "job", "posts/job.md", article("job"))
    hand_commit(site, "posts/hand.md", article("hand"))
    r = site.call("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert sorted(j["state"] for j in r.json()["jobs"]) == ["PUBLISHED", "PUBLISHED"]
    assert len(remote_job_ids(site)) == 2


def test_reconcile_registers_lost_events_and_sync_clears_them(site: Site) -> None:
    commit = hand_commit(site, "posts/welcome.md", "# Welcome\n\nLost event.\n")
    r = site.call("reconcile")
    assert r.code == 0 and "pending hand edits" in r.err
    assert site.git("for-each-ref", "--format=%(objectname)", "refs/pub/outbox/").split() == [
        commit]
    assert site.call("sync").code == 0
    assert site.git("for-each-ref", "refs/pub/outbox/") == ""
