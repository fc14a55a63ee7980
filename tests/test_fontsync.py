"""Fonts in the pipeline: subsets in the article's commit, font-only conflicts resolved."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import Site, git, spawn
from test_delivery import other_writer, remote_job_ids
from test_fonts import build_font

FONT_CONFIG = """fonts:
  - source: fonts/full.ttf
    output: static/site.woff2
    text: ["posts/**/*.md"]
"""


def cmap_of(data: bytes) -> set[str]:
    from fontTools.ttLib import TTFont

    font: Any = TTFont(io.BytesIO(data))
    return {chr(c) for c in font.getBestCmap()}


@pytest.fixture
def fonted(site: Site) -> Site:
    (site.path / "fonts").mkdir()
    (site.path / "fonts/full.ttf").write_bytes(build_font())
    (site.path / ".gitpub.yaml").write_text(
        (site.path / ".gitpub.yaml").read_text() + FONT_CONFIG)
    site.git("add", "fonts/full.ttf", ".gitpub.yaml")
    site.git("commit", "-q", "-m", "Add the full font")
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")
    return site


def post(chars: str) -> str:
    return f"# Post\n\n{chars}\n"


def prepare(site: Site, key: str, path: str, text: str) -> dict[str, Any]:
    r = site.call("prepare", "--json", "--key", key, "--to", path, "-", input=text)
    assert r.code == 0, r.out + r.err
    data: dict[str, Any] = r.json()
    return data


def test_subset_lands_in_the_article_commit(fonted: Site) -> None:
    data = prepare(fonted, "a", "posts/a.md", post("的一是"))
    commit = data["local_commit"]
    files = fonted.git("show", "--name-only", "--format=", commit).split()
    assert sorted(files) == ["posts/a.md", "static/site.woff2"]
    woff2 = subprocess.run(["git", "show", f"{commit}:static/site.woff2"], cwd=fonted.path,
                           capture_output=True, check=True).stdout
    assert set("的一是Post#") <= cmap_of(woff2)
    assert "static/site.woff2" in data["target_paths"]


def test_subset_is_deterministic_across_clones(fonted: Site, tmp_path: Path) -> None:
    a = prepare(fonted, "a", "posts/a.md", post("在不了"))
    clone = Site(other_writer(tmp_path, fonted), fonted.remote, fonted.env)
    b = prepare(clone, "b", "posts/a.md", post("在不了"))
    assert a["manifest_sha256"] == b["manifest_sha256"]


def test_no_new_characters_no_font_write(fonted: Site) -> None:
    prepare(fonted, "a", "posts/a.md", post("有和人"))
    assert fonted.call("push").code == 0
    data = prepare(fonted, "b", "posts/b.md", post("人和有"))
    assert data["target_paths"] == ["posts/b.md"]


def test_missing_characters_are_reported_not_fatal(fonted: Site) -> None:
    data = prepare(fonted, "a", "posts/a.md", post("的龘"))
    job = fonted.git("show", f"refs/pub/jobs/{data['job_id']}:job.json")
    assert "not in the font" in job and "龘" in job


@pytest.mark.slow
def test_two_writers_with_new_characters_both_land(fonted: Site, tmp_path: Path) -> None:
    second = Site(other_writer(tmp_path, fonted, "writer2"), fonted.remote, fonted.env)
    for s in (fonted, second):
        s.write_config("retry: {max_attempts: 20, backoff_base: 0.01, backoff_max: 0.02}\n"
                       + FONT_CONFIG)
    first = prepare(fonted, "w1", "posts/w1.md", post("在不了"))
    other = prepare(second, "w2", "posts/w2.md", post("有和人"))
    procs = [spawn(s, "push") for s in (fonted, second)]
    outs = [p.communicate(timeout=120) for p in procs]
    for s in (fonted, second):
        r = s.run("push")
        assert r.code == 0, (outs, r.out, r.err)
    assert sorted(remote_job_ids(fonted)) == sorted([first["job_id"], other["job_id"]])
    woff2 = subprocess.run(["git", "show", "main:static/site.woff2"], cwd=fonted.remote,
                           capture_output=True, check=True).stdout
    assert set("在不了有和人") <= cmap_of(woff2), "the final subset covers the union"


def test_font_conflict_resolved_but_article_conflict_is_not(fonted: Site,
                                                            tmp_path: Path) -> None:
    second = Site(other_writer(tmp_path, fonted, "writer2"), fonted.remote, fonted.env)
    prepare(fonted, "w1", "posts/same.md", post("在不了"))
    prepare(second, "w2", "posts/same.md", post("有和人"))
    assert second.call("push").code == 0
    r = fonted.call("push", "--json")
    assert r.code == 4 and r.json()["jobs"][0]["state"] == "CONFLICT"
    assert git(fonted.remote, "show", "main:posts/same.md") == post("有和人")


def test_font_only_conflict_regenerates_from_the_union(fonted: Site, tmp_path: Path) -> None:
    second = Site(other_writer(tmp_path, fonted, "writer2"), fonted.remote, fonted.env)
    mine = prepare(fonted, "w1", "posts/mine.md", post("在不了"))
    prepare(second, "w2", "posts/theirs.md", post("有和人"))
    assert second.call("push").code == 0  # their subset lands first: ours now conflicts
    r = fonted.call("push", "--json")
    assert r.code == 0, r.out + r.err
    job = r.json()["jobs"][0]
    assert job["state"] == "PUBLISHED" and job["manifest_sha256"] != mine["manifest_sha256"]
    woff2 = subprocess.run(["git", "show", "main:static/site.woff2"], cwd=fonted.remote,
                           capture_output=True, check=True).stdout
    assert set("在不了有和人") <= cmap_of(woff2)
    log = fonted.call("log", job["job_id"]).out
    assert "font-only resolution" in log


# -- a font source that is not where prepare reads it from -----------------------------------

UNCOMMITTED_FONT = ("fonts:\n  - source: fonts/site.ttf\n    output: static/site.woff2\n"
               "    text: ['posts/**/*.md']\n")


def test_a_font_only_in_the_working_tree_says_commit_and_push_it(site: Site) -> None:
    site.write_config(UNCOMMITTED_FONT)
    (site.path / "fonts").mkdir()
    (site.path / "fonts" / "site.ttf").write_bytes(b"not committed yet")
    r = site.call("prepare", "--json", "--key", "f1", "--to", "posts/a.md", "-", input="# A\n")
    data = r.json()
    assert data["state"] == "REVIEW" and data["failure_code"] == "font_failed"
    assert ("font source fonts/site.ttf is not in the base commit: commit it and push it first"
            in data["failure_detail"])


def test_a_font_nowhere_says_put_it_in_the_repository(site: Site) -> None:
    site.write_config(UNCOMMITTED_FONT)
    r = site.call("prepare", "--json", "--key", "f2", "--to", "posts/a.md", "-", input="# A\n")
    assert "nor in the working tree: put the font file at that path" in r.json()[
        "failure_detail"]
