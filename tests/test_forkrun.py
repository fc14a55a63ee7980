"""The test harness's forked ``git pub`` (``forkrun``) is a process of its own that starts as
``python -m gitpub`` would: what the kill tests rely on."""

from __future__ import annotations

import os
import signal
import subprocess

import forkrun
import pytest
from conftest import Clock, Site, spawn, wait_stopped
from test_delivery import article, prepare

import gitpub.cli.main


def test_a_crash_point_kills_the_child_alone(site: Site) -> None:
    prepare(site, "k", "posts/a.md", article("a"))
    r = site.run("push", env={"GITPUB_CRASH_AT": "delivery.claimed"})
    assert r.code == -signal.SIGKILL, r.out + r.err
    r = site.run("push")  # the same process state (counts) as a new process: not killed again
    assert r.code == 0, r.out + r.err


def test_exit_code_output_input_and_environment(site: Site) -> None:
    r = site.run("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-",
                 input=article("a"))
    assert r.code == 0 and r.json()["created"], r.err
    r = site.run("no-such-command")
    assert r.code == 2 and "git-pub: error:" in r.err and r.out == ""
    assert "GITPUB_DEBUG" not in os.environ


def test_the_test_processs_patches_are_not_the_childs(site: Site,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gitpub.cli.main, "__version__", "patched")
    assert site.call("--version").out == "git-pub patched\n"
    assert site.run("--version").out == f"git-pub {gitpub.__version__}\n"


def test_a_clock_on_pythonpath_is_the_childs_clock(site: Site, clock: Clock) -> None:
    assert forkrun.plan({**site.env, **clock.env(site)}) == [str(clock.where)]
    prepare(site, "k", "posts/a.md", article("a"))
    clock.advance(3600)
    r = site.run("status", "--json", env=clock.env(site))
    assert r.code == 0, r.err


def test_paused_then_resumed_from_outside(site: Site) -> None:
    prepare(site, "k", "posts/a.md", article("a"))
    p = spawn(site, "push", env={"GITPUB_PAUSE_AT": "delivery.claimed"})
    try:
        wait_stopped(p.pid)
    finally:
        os.kill(p.pid, signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, out + err


def test_a_child_that_does_not_end_is_killed_at_the_timeout(site: Site) -> None:
    prepare(site, "k", "posts/a.md", article("a"))
    with pytest.raises(subprocess.TimeoutExpired):
        site.run("push", env={"GITPUB_PAUSE_AT": "delivery.claimed"}, timeout=1)
    r = site.run("push")  # killed, not left paused holding the job
    assert r.code == 0, r.out + r.err
