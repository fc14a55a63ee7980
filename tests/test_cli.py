"""The command-line contract: names, -C, --json, exit codes, one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Site
from test_delivery import article, prepare

from gitpub import __version__


def test_version_and_help(site: Site) -> None:
    r = site.run("--version")
    assert r.code == 0 and __version__ in r.out
    for flag in ("-h", "--help"):
        r = site.run(flag)
        assert r.code == 0 and "prepare" in r.out and "push" in r.out


def test_runs_as_git_subcommand(site: Site, tmp_path: Path) -> None:
    """`git pub …` finds the git-pub executable on PATH, as git does for any subcommand."""
    shim = tmp_path / "bin" / "git-pub"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m gitpub \"$@\"\n")
    shim.chmod(0o755)
    env = site.env | {"PATH": f"{shim.parent}:{os.environ['PATH']}"}
    proc = subprocess.run(["git", "pub", "status", "--json"], cwd=site.path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('{"errors": [], "jobs": []')


def test_dash_c_is_honoured_like_git(site: Site, tmp_path: Path) -> None:
    r = site.call("prepare", "--key", "k", "--to", "posts/a.md", "-", input="# A\n")
    assert r.code == 0
    from gitpub.cli.main import main

    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        code = main(["-C", site.path.name, "-C", "posts", "status", "--all"])
    finally:
        os.chdir(old)
    assert code == 0


def test_not_a_repository(tmp_path: Path, hermetic: dict[str, str]) -> None:
    from gitpub.cli.main import main

    assert main(["-C", str(tmp_path), "status"]) == 2


def test_usage_errors_exit_2_without_traceback(site: Site) -> None:
    for args in (["nonsense"], ["prepare", "-"], ["resolve", "x"], ["status", "nosuchjob"]):
        r = site.run(*args)
        assert r.code == 2, (args, r.out, r.err)
        assert "Traceback" not in r.err


def test_config_error_names_file_and_key(site: Site) -> None:
    site.write_config("retry: {max_attempts: three}\n")
    r = site.run("status", "--json")
    assert r.code == 2
    assert ".gitpub.yaml" in r.err and "retry.max_attempts" in r.err
    assert r.json()["error"].startswith(".gitpub.yaml")


def test_init_writes_config_once(site: Site) -> None:
    (site.path / ".gitpub.yaml").unlink()
    r = site.run("init", "--json")
    assert r.code == 0 and r.json()["created"] is True
    text = (site.path / ".gitpub.yaml").read_text()
    assert "trailer_prefix" in text
    r = site.run("init", "--json")
    assert r.code == 0 and r.json()["created"] is False
    assert (site.path / ".gitpub.yaml").read_text() == text


def test_json_job_fields(site: Site) -> None:
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-", input="# A\n")
    data = r.json()
    for key in ("job_id", "idempotency_key", "state", "attempt", "local_commit",
                "remote_commit", "failure_code", "target_paths"):
        assert key in data
    listing = site.call("status", "--json", "--all").json()
    assert [j["job_id"] for j in listing["jobs"]] == [data["job_id"]]
    log = site.call("log", "--json", data["job_id"][:8]).json()
    assert log["job_id"] == data["job_id"] and log["events"][0]["to"] == "RECEIVED"


def test_unexpected_errors_are_one_line_unless_debug(site: Site) -> None:
    (site.path / ".git" / "refs" / "pub" / "jobs").mkdir(parents=True)
    (site.path / ".git" / "refs" / "pub" / "jobs" / "x").write_text("garbage\n")
    r = site.run("status", "--all")
    assert r.code == 1 and "Traceback" not in r.err
    (site.path / ".git" / "refs" / "pub" / "jobs" / "x").unlink()


def _to_a_closed_pipe(site: Site, args: list[str]) -> tuple[int, bytes]:
    """``git pub ARGS`` writing to a pipe whose reader has gone (``git pub status | head
    -0``): exit code and stderr."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "gitpub", "-C", str(site.path), *args],
                              stdout=write, stderr=subprocess.PIPE, env=site.env, timeout=120)
    finally:
        os.close(write)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("args", [["status", "--all"], ["--json", "status", "--all"]])
def test_a_closed_pipe_ends_the_run_quietly(site: Site, args: list[str]) -> None:
    """A run whose stdout is a broken pipe ends quietly, exit 1, as click ends it (not with
    ``unexpected error: BrokenPipeError``)."""
    prepare(site, "piped", "posts/piped.md", article("piped"))
    assert _to_a_closed_pipe(site, args) == (1, b"")
