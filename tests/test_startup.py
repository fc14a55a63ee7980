"""What starting the ``git-pub`` executable shows, and the post-commit hook's fast path.

Times are measured in ``bench/startup.py``, never asserted here. Asserted: the exact bytes of
``--version`` (scripts parse them), the command list of ``-h``, a repository whose objects are
in an alternate read as its source is, and the post-commit hook's fast path loading nothing
but the standard library (every commit pays for it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Site
from test_delivery import article, prepare

from gitpub import __version__
from gitpub.hooks import install as hooks


def imported(stderr: str) -> set[str]:
    """The modules ``-X importtime`` (or ``PYTHONPROFILEIMPORTTIME``) reported on ``stderr``."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            names.add(line.split("|")[-1].strip())
    return names


def start(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "gitpub", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr == ""
    return proc.stdout


@pytest.mark.parametrize("args", [["--version"], ["--json", "--version"],
                                  ["--version", "--debug", "--json"], ["--version", "status"],
                                  ["-C", ".", "--version"]])
def test_the_version_bytes(site: Site, args: list[str]) -> None:
    expected = (f'{{"schema_version": 1, "version": "{__version__}"}}\n' if "--json" in args
                else f"git-pub {__version__}\n")
    assert start(args, site.path, site.env) == expected


def test_help_lists_every_command(site: Site) -> None:
    out = start(["-h"], site.path, site.env)
    for command in ("init", "prepare", "status", "log", "push", "sync", "doctor", "reconcile",
                    "resolve", "metrics", "confirm", "demo", "hooks"):
        assert f"\n  {command} " in out, command
    assert "hook-impl" not in out  # hidden: what the shims fall back to


def test_objects_in_an_alternate_are_read(site: Site, tmp_path: Path) -> None:
    """A clone made with ``--shared`` (its objects in the source's store, an alternate) shows
    what the source shows."""
    prepare(site, "alternate", "posts/alternate.md", article("alternate"))
    shared = tmp_path / "shared"
    site.git("clone", "-q", "--shared", str(site.path), str(shared))
    subprocess.run(["git", "fetch", "-q", str(site.path), "refs/pub/*:refs/pub/*"], cwd=shared,
                   env=site.env, check=True)
    site.repos.append(shared)
    for args in (["status", "--all", "--json"], ["log", next(iter(site.job_refs()))[14:]]):
        assert start(args, shared, site.env) == start(args, site.path, site.env), args


def test_post_commit_fast_path_is_stdlib_only(site: Site) -> None:
    hooks.install(site.path)
    env = {**site.env, "PYTHONPROFILEIMPORTTIME": "1"}
    for i in range(2):  # the first commit may fill the fast path's cache
        (site.path / "notes.txt").write_text(f"not content {i}\n")
        site.git("add", "notes.txt")
        proc = subprocess.run(["git", "commit", "-q", "-m", f"notes {i}"], cwd=site.path,
                              env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    names = imported(proc.stderr)
    assert {n for n in names if n.startswith("gitpub")} == {
        "gitpub", "gitpub.hooks", "gitpub.hooks.fast", "gitpub.hooks.shared"}
    assert not {"site", "re", "subprocess", "typing"} & names, names & {"site", "re"}
