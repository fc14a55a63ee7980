"""What a command imports before it answers: a deterministic guard on start-up cost.

Times are measured in ``bench/startup.py``, never asserted here; *which modules* a command loads
is exact, and it is what the time follows. Each test starts a real process with
``-X importtime`` (every module imported, on stderr) and checks the set.
"""

from __future__ import annotations

import io
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from conftest import Site
from test_delivery import article, prepare

from gitpub.cli import entry, output
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


def test_status_and_log_load_only_what_reading_jobs_needs(site: Site) -> None:
    job = prepare(site, "startup", "posts/startup.md", article("startup"))
    site.run("status")  # the configuration's cache is made by the first run
    for args in (["status"], ["status", "--json"], ["log", str(job["job_id"])]):
        out, names = start(["-m", "gitpub", *args], site.path, site.env)
        assert str(job["job_id"])[:8] in out or "LOCAL_COMMITTED" in out, args
        assert not loaded(names, HEAVY), (args, loaded(names, HEAVY))


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

