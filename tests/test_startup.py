"""What a command imports before it answers: a deterministic guard on start-up cost.

Times are measured in ``bench/startup.py``, never asserted here; *which modules* a command loads
is exact, and it is what the time follows. Each test starts a real process with
``-X importtime`` (every module imported, on stderr) and checks the set.

``status`` and ``log`` run without click (``cli.quick``), without dulwich (``git.odb`` reads the
store), without building the configuration (``config.source``) and without defining a single
dataclass: the tests below hold them to it on every layout of the store (loose, packed by
``git gc``, refs packed, a linked worktree), check that what they print is what the full path
(click; dulwich) prints, and that where the fast reader cannot answer (objects in an alternate)
dulwich does, with the same output.
"""

from __future__ import annotations

import io
import subprocess
import sys
from contextlib import chdir, redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from conftest import Site
from test_delivery import article, prepare

from gitpub.cli import entry, output, quick
from gitpub.cli.main import cli, run_click
from gitpub.cli.main import main as click_main
from gitpub.hooks import install as hooks

#: Never needed to show a version, usage, a job's status or its history.
HEAVY = ("yaml", "httpx", "fontTools", "jsonschema", "brotli", "merge3", "gitpub.pipeline.prepare",
         "gitpub.fonts.subset", "gitpub.delivery", "gitpub.verify",
         "gitpub.app.sources", "gitpub.app.doctor", "gitpub.hooks.install")


def imported(stderr: str) -> set[str]:
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            names.add(line.split("|")[-1].strip())
    return names


def start(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[str, set[str]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, imported(proc.stderr)


def loaded(names: set[str], prefixes: tuple[str, ...]) -> set[str]:
    return {n for n in names if any(n == p or n.startswith(p + ".") for p in prefixes)}


@pytest.mark.parametrize("args", [["--version"], ["--json", "--version"],
                                  ["--version", "--debug", "--json"]])
def test_version_imports_nothing_but_its_answer(site: Site, args: list[str]) -> None:
    out, names = start(["-m", "gitpub", *args], site.path, site.env)
    assert {n for n in names if n.startswith("gitpub")} == {"gitpub", "gitpub.cli",
                                                             "gitpub.cli.entry"}
    assert "click" not in names
    clicked = io.StringIO()
    with redirect_stdout(clicked):
        assert click_main(args) == 0
    assert out == clicked.getvalue()  # the same bytes as the click command writes


def test_version_fast_path_and_output_agree_on_the_schema_version() -> None:
    assert entry.SCHEMA_VERSION == output.SCHEMA_VERSION
    assert entry.version_text(True) == output.as_json({"version": entry.__version__})


def test_other_arguments_go_to_the_command_line(site: Site) -> None:
    for args in (["-C", str(site.path), "--version"], ["--version", "status"]):
        _, names = start(["-m", "gitpub", *args], site.path, site.env)
        assert "click" in names, args


def test_help_loads_click_but_not_the_commands(site: Site) -> None:
    out, names = start(["-m", "gitpub", "-h"], site.path, site.env)
    assert "hooks" in out and "status" in out  # the lazily registered commands are listed
    assert not loaded(names, ("gitpub.app", "gitpub.git", "gitpub.store", "dulwich", *HEAVY))


def test_an_alternate_is_read_through_dulwich_with_the_same_output(site: Site,
                                                                  tmp_path: Path) -> None:
    """Objects only in an alternate: the fast reader does not answer, dulwich does."""
    prepare(site, "alternate", "posts/alternate.md", article("alternate"))
    shared = tmp_path / "shared"
    site.git("clone", "-q", "--shared", str(site.path), str(shared))
    subprocess.run(["git", "fetch", "-q", str(site.path), "refs/pub/*:refs/pub/*"], cwd=shared,
                   env=site.env, check=True)
    site.repos.append(shared)
    for args in (["status", "--all", "--json"], ["log", next(iter(site.job_refs()))[14:]]):
        out, names = start(["-m", "gitpub", *args], shared, site.env)
        assert "dulwich.repo" in names and "click" not in names, args
        assert out == start(["-m", "gitpub", *args], site.path, site.env)[0], args


PLAIN = [["status"], ["--json", "status"], ["status", "--all"], ["status", "--json", "JOB"],
         ["--debug", "status", "JOB", "--json"], ["log", "JOB"], ["log", "JOB", "--json"],
         ["-C", "SITE", "--json", "status"], ["status", "zzzz"], ["status", "zz"],
         ["log", "zzzzzzzz", "--json"], ["-C", "/no/such/dir", "status"],
         ["-C", "/no/such/dir", "--json", "log", "JOB"]]


@pytest.mark.parametrize("args", PLAIN, ids=" ".join)
def test_the_quick_way_prints_what_click_prints(site: Site, args: list[str]) -> None:
    """Every plain form (errors included) gives the same code, stdout and stderr both ways."""
    job = prepare(site, "quick", "posts/quick.md", article("quick"))
    args = [str(job["job_id"]) if a == "JOB" else str(site.path) if a == "SITE" else a
            for a in args]
    assert quick.parse(args) is not None
    runs = []
    for way in (click_main, run_click):  # main takes the quick way for these
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err), chdir(site.path):
            code = way(list(args))
        runs.append((code, out.getvalue(), err.getvalue()))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("args", [
    [], ["-h"], ["status", "-h"], ["status", "--help"], ["--version", "status"], ["status", "--"],
    ["status", "a", "b"], ["status", "--bogus"], ["log"], ["log", "--all", "x"], ["-C"],
    ["-C", "-x", "status"], ["status", "-C", "x"], ["--all", "status"], ["log", "-"],
    ["log", ""], ["status", "--json=1"], ["prepare", "--key", "k"], ["-Cx", "status"]])
def test_every_other_form_goes_to_click(args: list[str]) -> None:
    assert quick.parse(args) is None


def test_the_quick_way_knows_the_commands_click_defines() -> None:
    assert set(quick.COMMANDS) == set(cli.commands) - {"hooks", "hook-impl"}


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

