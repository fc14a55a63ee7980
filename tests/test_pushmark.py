"""gitpub's own push is not checked twice; every other push still is (``core.pushmark``).

Whether the pre-push hook took its slow path is observed from outside, without mocks: the
slow path is the only place the hook (started with ``-S``) runs ``site.main()``, which imports
``sitecustomize`` from ``PYTHONPATH``; the one here logs that it ran, only in an interpreter
started without site (gitpub's own process starts with it, and stays silent).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, Site
from test_delivery import article, prepare
from test_hooks import LEGACY_PRE_PUSH, hooks_dir, job_branch, run_git, tamper, write_hook

from gitpub.core import pushmark
from gitpub.git.run import git_env
from gitpub.hooks import install as hooks

ZERO = "0" * 40
SITECUSTOMIZE = """\
import os, sys
if sys.flags.no_site and os.environ.get("SLOW_PATH_LOG"):
    with open(os.environ["SLOW_PATH_LOG"], "a") as f:
        f.write("pre-push slow path\\n")
"""
LEGACY_SEES_MARK = LEGACY_PRE_PUSH + (
    'echo "mark: ${GITPUB_VERIFIED_PUSH:-none}" \\\n'
    '    >> "$(git rev-parse --git-dir)/legacy-pre-push.log"\n')


@pytest.fixture
def observed(site: Site, tmp_path: Path) -> Path:
    """The log of the hook's slow path; ``site``'s processes (and the hooks they start) log."""
    where = tmp_path / "observe"
    where.mkdir()
    (where / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = tmp_path / "slow-path.log"
    site.env = {**site.env, "PYTHONPATH": f"{where}:{ROOT}", "SLOW_PATH_LOG": str(log)}
    return log


def git_push(site: Site, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "push", *args], cwd=site.path, capture_output=True, text=True,
                          env={**site.env, **(env or {})})


def test_gitpub_push_skips_the_recheck_and_still_runs_the_legacy_hook(
        site: Site, observed: Path) -> None:
    write_hook(hooks_dir(site) / "pre-push", LEGACY_SEES_MARK)
    hooks.install(site.path)
    assert (hooks_dir(site) / "pre-push.legacy").exists()
    job = prepare(site, "own-push", "posts/own.md", article("own"))
    r = site.run("push", "--json")
    assert r.code == 0, r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    pushed = site.git("rev-parse", "origin/main").strip()
    assert site.git("log", "-1", "--format=%(trailers:key=Blog-Job-Id,valueonly)",
                    pushed).strip() == job["job_id"]
    log = (site.path / ".git/legacy-pre-push.log").read_text()
    assert f"args: origin {site.remote}" in log and f" {pushed} refs/heads/main " in log
    assert "mark: none" in log  # the mark vouches for gitpub's push, not for the legacy hook
    assert not observed.exists()  # gitpub's check was not run a second time


def test_a_persons_push_of_a_good_job_commit_is_still_checked(site: Site,
                                                                observed: Path) -> None:
    hooks.install(site.path)
    job_branch(site)
    r = git_push(site, "-q", "origin", "pub")
    assert r.returncode == 0, r.stderr
    assert observed.read_text() == "pre-push slow path\n"  # the observation works


@pytest.mark.slow
def test_a_mark_for_another_commit_ref_old_value_or_repository_does_not_skip_the_check(
        site: Site, observed: Path, tmp_path: Path) -> None:
    hooks.install(site.path)
    good, _ = job_branch(site)
    bad = tamper(site)
    git_dir = str(site.path / ".git")
    forged = {
        "another commit": pushmark.entry(git_dir, good, "refs/heads/pub", ZERO),
        "another ref": pushmark.entry(git_dir, bad, "refs/heads/main", ZERO),
        "another old value": pushmark.entry(git_dir, bad, "refs/heads/pub", good),
        "another repository": pushmark.entry(str(tmp_path / "elsewhere"), bad,
                                              "refs/heads/pub", ZERO),
        "another version": pushmark.entry(git_dir, bad, "refs/heads/pub",
                                           ZERO).replace("v1", "v0", 1),
        "garbage": "refs/heads/pub;" + bad,
    }
    observed.unlink(missing_ok=True)
    for what, value in forged.items():
        r = git_push(site, "origin", "pub", env={pushmark.ENV: value})
        assert r.returncode != 0, what
        assert "refusing to push" in r.stderr and bad[:12] in r.stderr, what
    assert run_git(site, "ls-remote", "origin", "refs/heads/pub").out == ""
    assert observed.read_text().count("slow path") == len(forged)


def test_a_mark_covers_a_push_only_if_it_names_every_update(site: Site) -> None:
    git_dir = str(site.path / ".git")
    a, b, old = "a" * 40, "b" * 40, "c" * 40
    value = pushmark.mark([pushmark.entry(git_dir, a, "refs/heads/main", old)])
    assert pushmark.covers(value, git_dir, [(a, "refs/heads/main", old)])
    assert pushmark.covers(value, str(site.path / ".git" / "."), [(a, "refs/heads/main", old)])
    assert not pushmark.covers(value, git_dir, [(a, "refs/heads/main", old),
                                                (b, "refs/heads/other", ZERO)])
    assert not pushmark.covers(value, git_dir, [])
    assert not pushmark.covers(None, git_dir, [(a, "refs/heads/main", old)])
    deletion = pushmark.mark([pushmark.entry(git_dir, ZERO, "refs/heads/main", old)])
    assert not pushmark.covers(deletion, git_dir, [(ZERO, "refs/heads/main", old)])


def test_gitpub_never_passes_on_a_mark_it_inherited(site: Site,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A mark left exported (an agent's shell) reaches no git that gitpub runs: only the mark
    gitpub makes for its own push does."""
    monkeypatch.setenv(pushmark.ENV, pushmark.entry(str(site.path / ".git"), "d" * 40,
                                                    "refs/heads/main", ZERO))
    assert pushmark.ENV not in git_env(site.path / ".git")
    assert git_env(site.path / ".git", extra={pushmark.ENV: "ours"})[pushmark.ENV] == "ours"
