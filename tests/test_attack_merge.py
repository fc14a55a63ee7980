"""Attacks on edits to the same page (issue 24 point 2): content, configuration and timing
that could make the three-way merge lie, lose a change, run someone's code or publish twice."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
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


def parsed_trailers(site: Site, commit: str) -> dict[str, str]:
    """The commit's trailers as ``git interpret-trailers --parse`` reads its message."""
    message = site.git("log", "-1", "--format=%B", commit)
    proc = subprocess.run(["git", "interpret-trailers", "--parse"], input=message,
                          capture_output=True, text=True, check=True, cwd=site.path)
    return dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)


def manifest_sha(site: Site, commit: str, paths: list[str]) -> str:
    from test_merge_edits import manifest_of
    return hashlib.sha256(manifest_of(site, commit, paths)).hexdigest()


@pytest.mark.parametrize("point", ["merge.gated", "delivery.pushing-recorded",
                                   "delivery.pushed", "delivery.published-recorded"])
def test_killed_around_the_merge_then_reconcile_publishes_once(site: Site, tmp_path: Path,
                                                               point: str) -> None:
    """SIGKILL around the merge, then ``reconcile`` (not ``push``): published exactly once,
    its trailers (as git interpret-trailers reads them) naming the merged content."""
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "crash", PAGE, page(first="Ours."), tmp_path)
    theirs(other, PAGE, page(last="Theirs."))
    r = site.run("push", env={"GITPUB_CRASH_AT": point})
    assert r.code == -9, f"expected SIGKILL at {point}: {r.out}{r.err}"
    r = site.run("reconcile", "--json")
    assert r.code == 0, r.out + r.err
    job = site.call("status", "--json", job_id).json()
    assert job["state"] == "PUBLISHED", job
    published = str(job["remote_commit"])
    assert remote_blob(site, "main", PAGE) == page(first="Ours.", last="Theirs.")
    assert remote_job_ids(site) == [job_id]
    site.git("fetch", "-q", "origin")
    trailers = parsed_trailers(site, published)
    assert trailers["Blog-Job-Id"] == job_id
    assert trailers["Blog-Manifest-Sha256"] == manifest_sha(site, published, [PAGE])
    assert site.run("reconcile").code == 0 and site.run("push").code == 0
    assert remote_job_ids(site) == [job_id]
    fsck_strict(site.remote)


def test_two_clones_merge_onto_the_same_third_version(site: Site, tmp_path: Path) -> None:
    """Two clones each edit another paragraph of the page, a third writer the middle: both
    jobs merge, the second against the first one's publication; all three edits land, each
    job once."""
    start(site, PAGE, page())
    second = Site(other_writer(tmp_path, site, "second"), site.remote, site.env)
    third = other_writer(tmp_path, site, "third")
    a = prepare(site, "a", PAGE, page(first="A's first."), tmp_path)
    b = prepare(second, "b", PAGE, page(last="B's last."), tmp_path)
    theirs(third, PAGE, page(middle="The third's middle."))
    code, job = push(site)
    assert code == 0 and job["state"] == "PUBLISHED", job
    code, job = push(second)
    assert code == 0 and job["state"] == "PUBLISHED", job
    assert remote_blob(site, "main", PAGE) == page(first="A's first.",
                                                   middle="The third's middle.",
                                                   last="B's last.")
    assert sorted(remote_job_ids(site)) == sorted([a, b])
    for s in (site, second):
        s.git("fetch", "-q", "origin")
    for job_id, s in ((a, site), (b, second)):
        commit = str(s.call("status", "--json", job_id).json()["remote_commit"])
        assert parsed_trailers(s, commit)["Blog-Manifest-Sha256"] == \
            manifest_sha(s, commit, [PAGE])
    fsck_strict(site.remote)


def test_marker_like_lines_in_the_page_merge_as_git_merges_them(site: Site,
                                                                tmp_path: Path) -> None:
    """A page about git holds conflict-marker-like lines (``<<<<<<<``, ``=======``,
    ``>>>>>>>``): a clean merge is not mistaken for a conflict, nor a conflict for clean."""
    body = ["---", "title: Markers", "---", "", "First.", "", "```", "<<<<<<< ours", "x",
            "=======", "y", ">>>>>>> theirs", "```", "", "Middle.", "", "Last.", ""]

    def marked(**changes: str) -> bytes:
        lines = list(body)
        for at, text in changes.items():
            lines[{"first": 4, "middle": 14, "last": 16}[at]] = text
        return "\n".join(lines).encode()

    start(site, PAGE, marked())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "markers", PAGE, marked(first="Our first."), tmp_path)
    theirs(other, PAGE, marked(last="Their last."))
    code, job = push(site)
    assert code == 0 and job["state"] == "PUBLISHED", job
    assert remote_blob(site, "main", PAGE) == marked(first="Our first.", last="Their last.")
    assert remote_job_ids(site) == [job_id]
    fsck_strict(site.remote)


def test_their_page_turned_into_a_symlink_is_a_conflict(site: Site, tmp_path: Path) -> None:
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    prepare(site, "ours", PAGE, page(first="Ours."), tmp_path)
    git(other, "pull", "-q", "origin", "main")
    (other / PAGE).unlink()
    (other / PAGE).symlink_to("elsewhere.md")
    git(other, "add", PAGE)
    git(other, "commit", "-q", "-m", "a symlink")
    git(other, "push", "-q", "origin", "HEAD:main")
    tip = git(site.remote, "rev-parse", "main").strip()
    code, job = push(site)
    assert code == 4 and job["state"] == "CONFLICT", job
    assert git(site.remote, "rev-parse", "main").strip() == tip
    assert git(site.remote, "ls-tree", "main", "--", PAGE).split()[0] == "120000"


@pytest.mark.parametrize("overlapping", [False, True])
def test_the_remote_moves_again_between_the_merge_and_the_push(site: Site, tmp_path: Path,
                                                               overlapping: bool) -> None:
    """A gate that runs on the merged page makes the other writer push once more: the push's
    compare-and-swap fails, the next round merges again against the new tip (or stays a
    CONFLICT when that change overlaps ours); their latest version is never overwritten."""
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    armed = tmp_path / "armed"
    again = page(first="Their first.", middle="Their middle.", last="Theirs.") \
        if overlapping else page(middle="Their middle, again.", last="Theirs.")
    (tmp_path / "again.md").write_bytes(again)
    script = tmp_path / "move.sh"
    script.write_text(
        "#!/bin/sh\nset -e\n"
        f"[ -e {armed} ] || exit 0\nrm {armed}\n"
        f"cp {tmp_path / 'again.md'} {other / PAGE}\n"
        f"git -C {other} commit -q -am 'again' >/dev/null\n"
        f"git -C {other} push -q origin HEAD:main >/dev/null 2>&1\n")
    script.chmod(0o755)
    site.write_config(f"gates:\n  - name: mover\n    run: [{script}]\n")
    site.git("commit", "-q", "-am", "a gate")
    site.git("push", "-q", "origin", "main")
    job_id = prepare(site, "ours", PAGE, page(first="Ours."), tmp_path)
    theirs(other, PAGE, page(middle="Their middle.", last="Theirs."))
    armed.touch()
    code, job = push(site)
    assert not armed.exists(), "the gate did not run on the merged page"
    moved = git(site.remote, "rev-parse", "main").strip()
    if overlapping:
        assert code == 4 and job["state"] == "CONFLICT", job
        assert remote_blob(site, "main", PAGE) == again
        assert git(other, "rev-parse", "HEAD").strip() == moved
        assert remote_job_ids(site) == []
    else:
        assert code == 0 and job["state"] == "PUBLISHED", job
        assert remote_blob(site, "main", PAGE) == page(
            first="Ours.", middle="Their middle, again.", last="Theirs.")
        assert remote_job_ids(site) == [job_id]
        assert git(site.remote, "rev-parse", "main^").strip() == \
            git(other, "rev-parse", "HEAD").strip()
    fsck_strict(site.remote)


def test_a_job_skipped_as_already_on_remote_leaves_nothing_for_sync(site: Site,
                                                                    tmp_path: Path) -> None:
    """After SKIPPED (already_on_remote) neither ``sync`` nor ``reconcile`` pushes the
    job's own commit as a hand commit, nor any copy of the page."""
    start(site, PAGE, page())
    other = other_writer(tmp_path, site)
    job_id = prepare(site, "same", PAGE, page(first="The same fix."), tmp_path)
    their_commit = theirs(other, PAGE, page(first="The same fix."))
    code, job = push(site)
    assert code == 0 and job["state"] == "SKIPPED", job
    for command in ("sync", "reconcile", "sync"):
        r = site.call(command, "--json")
        assert r.code == 0, command + r.out + r.err
        assert git(site.remote, "rev-parse", "main").strip() == their_commit, command
    assert site.call("status", "--json", job_id).json()["state"] == "SKIPPED"
    assert remote_job_ids(site) == []
