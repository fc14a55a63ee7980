"""Edges of the command line a person (or a script) runs into: an empty job id, `init` given an
option as a branch name, `doctor --fix` and a remote that does not exist. Real git, real
repositories (the ``site`` fixture)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Result, Site, wait_stopped


def prepare(site: Site, key: str = "k1") -> str:
    r = site.call("prepare", "--json", "--key", key, "--to", "posts/a.md", "-", input="# A\n")
    assert r.code == 0, r.out + r.err
    return str(r.json()["job_id"])


@pytest.mark.parametrize("ref", ["", "   ", "abc"])
@pytest.mark.parametrize("command", [["resolve", "--abandon"], ["status"], ["log"],
                                     ["push"]])
def test_a_job_id_too_short_never_picks_a_job(site: Site, ref: str, command: list[str]) -> None:
    """Attack repro r16: `resolve "$JOB" --abandon` with JOB unset abandoned the only job."""
    job_id = prepare(site)
    r = site.call("--json", command[0], ref, *command[1:])
    assert r.code == 2, r.out + r.err
    assert "too short" in r.json()["error"] and r.json()["hint"]
    assert site.call("status", "--json", job_id).json()["state"] == "LOCAL_COMMITTED"


@pytest.mark.parametrize("branch", ["--json", "-x", "a..b", "a b", "main.lock"])
def test_init_never_writes_a_config_no_command_can_read(site: Site, branch: str) -> None:
    """Attack repro r15: `init --branch --json` wrote `branch: "--json"`, and then every
    command (init again included) failed on the file it had written."""
    site.git("rm", "-q", "--cached", ".gitpub.yaml")
    (site.path / ".gitpub.yaml").unlink()
    r = site.call("init", "--branch", branch)
    assert r.code == 2, r.out + r.err
    assert "hint: " in r.err
    assert not (site.path / ".gitpub.yaml").exists()
    assert site.call("init", "--branch", "main").code == 0
    assert site.call("status").code == 0



def test_a_lost_race_exits_5_with_a_hint_not_1(site: Site) -> None:
    """Two people abandon the same REVIEW job at once. The first is frozen (SIGSTOP) while it
    writes its new state's objects — after it read the job, before its compare-and-swap — and
    the second finishes; the first then loses the swap. That is "run again", exit 5 with a
    hint, not an unexpected error (exit 1)."""
    r = site.call("prepare", "--json", "--key", "s", "--to", "posts/s.md", "-",
                  input="# S\n\ntoken = ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8\n")
    job_id = str(r.json()["job_id"])
    assert r.json()["state"] == "REVIEW", r.out
    first = subprocess.Popen(
        [sys.executable, "-m", "gitpub", "-C", str(site.path), "--json", "resolve", job_id,
         "--abandon"], env={**site.env, "GITPUB_PAUSE_AT": "git.object-locked",
                            # (a trace installs the git.* points, as a crash point does)
                            "GITPUB_CRASH_TRACE": str(site.path.parent / "trace")},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_stopped(first.pid)
        second = site.run("resolve", job_id, "--abandon")
        assert second.code == 0, second.out + second.err
    finally:
        os.kill(first.pid, signal.SIGCONT)
        out, err = first.communicate(timeout=60)
    assert first.returncode == 5, (out + err).decode()
    data = json.loads(out)
    assert data["exit"] == 5 and data["hint"] and "another process" in data["error"], data
    assert b"unexpected" not in err
    assert site.call("status", "--json", job_id).json()["state"] == "SKIPPED"


@pytest.mark.parametrize("args", [["-h", "--json"], ["--json", "--help"], ["push", "-h", "--json"],
                                  ["--json", "resolve", "--help"], ["doctor", "--json", "-h"]])
def test_help_under_json_is_json(site: Site, args: list[str]) -> None:
    r = site.run(*args)
    assert r.code == 0, r.out + r.err
    data = r.json()  # validated against help.json
    assert data["help"].startswith("Usage: git-pub") and r.err == ""
    assert data["help"] == site.run(*[a for a in args if a != "--json"]).out


def test_a_dash_h_that_is_a_value_is_not_help(site: Site) -> None:
    r = site.run("--json", "prepare", "--key", "-h", "--to", "posts/h.md", "-", input="# H\n")
    assert r.code == 0, r.out + r.err
    assert r.json()["state"] == "LOCAL_COMMITTED"


# -- every non-OK outcome says what to do next -------------------------------------------------

def _outcomes(site: Site, tmp_path: Path) -> list[tuple[str, Result]]:
    """One run per kind of non-OK outcome, each in its own fault."""
    found = []
    review = site.call("prepare", "--key", "r", "--to", "posts/r.md", "-",
                       input="# R\n\ntoken = ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8\n")
    found.append(("REVIEW", review))
    found.append(("no such job", site.call("status", "zzzzzzzz")))
    found.append(("click usage error", site.call("prepar")))
    found.append(("bad option", site.call("push", "--bogus")))
    found.append(("hooks outside a repository", site.run("-C", str(tmp_path), "hooks", "install")))
    ref = site.path / ".git" / "refs" / "pub" / "jobs" / "00000000-dead-5bad-8bad-000000000000"
    ref.write_text("")  # the crash symptom: an empty ref file
    found.append(("a damaged job among healthy ones", site.call("reconcile")))
    ref.unlink()
    site.write_config("retry: {max_attempts: three}\n")
    found.append(("invalid configuration", site.call("status")))
    (site.path / ".gitpub.yaml").write_text("remote: [\n")
    found.append(("configuration that is not YAML", site.call("status")))
    return found


def test_every_non_ok_outcome_prints_a_hint(site: Site, tmp_path: Path) -> None:
    for what, r in _outcomes(site, tmp_path):
        assert r.code != 0, (what, r.out + r.err)
        assert "hint: " in r.out + r.err, (what, r.out + r.err)
        assert "Traceback" not in r.err, (what, r.err)


def test_every_non_ok_outcome_has_a_hint_under_json(site: Site, tmp_path: Path) -> None:
    site.write_config("retry: {max_attempts: three}\n")
    for args in (["status"], ["push"], ["resolve", "zzzzzzzz", "--abandon"]):
        r = site.call("--json", *args)
        assert r.code == 2 and r.json()["hint"], (args, r.out)
