"""Attacks on edits to the same page (issue 24 point 2): content, configuration and timing
that could make the three-way merge lie, lose a change, run someone's code or publish twice."""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import Site, git
from test_delivery import commit_file, other_writer, remote_job_ids
from test_fonts import build_font
from test_fontsync import FONT_CONFIG, cmap_of, post
from test_merge_edits import PAGE, page, prepare, push, remote_blob, start, theirs


def fsck_strict(repo: Path) -> None:
    proc = subprocess.run(["git", "fsck", "--strict", "--no-dangling"], cwd=repo,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def add_fonts(site: Site) -> None:
    (site.path / "fonts").mkdir()
    (site.path / "fonts/full.ttf").write_bytes(build_font())
    (site.path / ".gitpub.yaml").write_text(
        (site.path / ".gitpub.yaml").read_text() + FONT_CONFIG)
    site.git("add", "fonts/full.ttf", ".gitpub.yaml")
    site.git("commit", "-q", "-m", "Add the full font")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")


def test_every_article_present_but_their_font_lacks_our_characters(site: Site,
                                                                   tmp_path: Path) -> None:
    """Someone committed our very article by hand, without regenerating the font subset: the
    article is there, the job's font change is not. SKIPPED (already_on_remote) would drop
    it and the page shows missing glyphs; the subset must still reach the remote."""
    add_fonts(site)
    r = site.call("prepare", "--json", "--key", "fonted", "--to", "posts/a.md", "-",
                  input=post("在不了"))
    assert r.code == 0, r.out + r.err
    job_id = r.json()["job_id"]
    assert "static/site.woff2" in r.json()["target_paths"]
    other = other_writer(tmp_path, site)
    commit_file(other, "posts/a.md", post("在不了"), "the same post, by hand")
    git(other, "push", "-q", "origin", "HEAD:main")
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    woff2 = subprocess.run(["git", "show", "main:static/site.woff2"], cwd=site.remote,
                           capture_output=True, check=False).stdout
    assert woff2 and set("在不了") <= cmap_of(woff2), \
        f"the font never reached the remote: {r.json()}"
    job = r.json()["jobs"][0]
    assert job["state"] == "PUBLISHED", job
    published = str(job["remote_commit"])
    # the publication carries the font alone: the article is theirs, unchanged
    changed = git(site.remote, "diff-tree", "-r", "--name-only", "--no-commit-id",
                  published).split()
    assert changed == ["static/site.woff2"]
    assert remote_job_ids(site) == [job_id]
    log = site.call("log", job_id).out
    assert "no longer written by it: posts/a.md" in log
    fsck_strict(site.remote)


def test_every_article_and_its_font_present_skips_the_job(site: Site, tmp_path: Path) -> None:
    """The other writer published our article and the subset it needs: nothing is left to
    publish, SKIPPED, and no commit (no empty one, none carrying only the same font)."""
    add_fonts(site)
    r = site.call("prepare", "--json", "--key", "fonted", "--to", "posts/a.md", "-",
                  input=post("在不了"))
    assert r.code == 0, r.out + r.err
    ours = r.json()["local_commit"]
    woff2 = subprocess.run(["git", "show", f"{ours}:static/site.woff2"], cwd=site.path,
                           capture_output=True, check=True).stdout
    other = other_writer(tmp_path, site)
    (other / "static").mkdir()
    (other / "static/site.woff2").write_bytes(woff2)
    git(other, "add", "static/site.woff2")
    commit_file(other, "posts/a.md", post("在不了"), "the same post and font, by hand")
    git(other, "push", "-q", "origin", "HEAD:main")
    before = git(site.remote, "rev-parse", "main").strip()
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    job = r.json()["jobs"][0]
    assert job["state"] == "SKIPPED" and job["failure_code"] == "already_on_remote", job
    assert job["target_paths"] == ["posts/a.md", "static/site.woff2"]
    assert git(site.remote, "rev-parse", "main").strip() == before
    assert remote_job_ids(site) == []


def test_merge_drivers_and_merge_config_are_never_used(site: Site, tmp_path: Path) -> None:
    """A pushed .gitattributes naming a merge driver (and merge=union), a driver and
    merge.conflictStyle=zdiff3 in the repository's config: the merge is git merge-file's line
    merge, no driver runs, and overlapping edits still conflict."""
    start(site, PAGE, page())
    pwned = tmp_path / "pwned"
    site.git("config", "merge.evil.driver", f"touch {pwned}; cp %B %A; exit 0")
    site.git("config", "merge.evil.name", "evil")
    site.git("config", "merge.conflictStyle", "zdiff3")
    other = other_writer(tmp_path, site)
    git(other, "config", "merge.evil.driver", f"touch {pwned}; exit 0")
    commit_file(other, ".gitattributes", "*.md merge=evil\nposts/** merge=union\n",
                "attributes")
    git(other, "push", "-q", "origin", "HEAD:main")
    prepare(site, "ours", PAGE, page(first="Ours."), tmp_path)
    theirs(other, PAGE, page(last="Theirs."))
    code, job = push(site)
    assert code == 0 and job["state"] == "PUBLISHED", job
    assert remote_blob(site, "main", PAGE) == page(first="Ours.", last="Theirs.")
    assert not pwned.exists()
    # overlapping: still a conflict (a union driver would have merged it)
    prepare(site, "again", PAGE, page(first="Ours.", middle="Our middle.", last="Theirs."),
            tmp_path)
    theirs(other, PAGE, page(first="Ours.", middle="Their middle.", last="Theirs."))
    code, job = push(site)
    assert code == 4 and job["state"] == "CONFLICT", job
    assert not pwned.exists()
    fsck_strict(site.remote)


def test_a_merge_after_resolve_from_file_uses_the_new_snapshot(site: Site,
                                                               tmp_path: Path) -> None:
    """A job merged once (its ``merge-base/`` recorded), then a CONFLICT resolved with
    ``--from FILE``: a new snapshot against the tip. The old merge base is stale; a later
    non-overlapping edit merges against the new snapshot (not a CONFLICT for a base that no
    longer names the job's condition)."""
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "ours", PAGE, page(first="Ours."), tmp_path)
    theirs(other, PAGE, page(last="Theirs."))
    r = site.run("push", env={"GITPUB_CRASH_AT": "delivery.pushing-recorded"})
    assert r.code == -9, r.out + r.err
    theirs(other, PAGE, page(first="Their first.", last="Theirs."))
    code, job = push(site)
    assert code == 4 and job["state"] == "CONFLICT", job
    merged = tmp_path / "merged.md"
    merged.write_bytes(page(first="Ours, and their first.", last="Theirs."))
    r = site.run("resolve", job_id, "--from", str(merged),
                 env={"GITPUB_CRASH_AT": "delivery.fetched"})
    assert r.code == -9, r.out + r.err
    theirs(other, PAGE, page(first="Their first.", middle="A middle.", last="Theirs."))
    code, job = push(site)
    assert code == 0 and job["state"] == "PUBLISHED", job.get("failure_detail")
    assert remote_blob(site, "main", PAGE) == page(first="Ours, and their first.",
                                                   middle="A middle.", last="Theirs.")
    assert remote_job_ids(site) == [job_id]
    fsck_strict(site.remote)
