"""Edges of the command line a person (or a script) runs into: an empty job id, `init` given an
option as a branch name, `doctor --fix` and a remote that does not exist. Real git, real
repositories (the ``site`` fixture)."""

from __future__ import annotations

import pytest
from conftest import Site


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
