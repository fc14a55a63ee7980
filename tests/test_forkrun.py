"""The test harness's forked ``git pub`` (``forkrun``) is a process of its own that starts as
``python -m gitpub`` would: what the kill tests rely on."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import subprocess
from pathlib import Path

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


def test_a_paused_child_holds_none_of_the_test_processs_files(site: Site,
                                                             tmp_path: Path) -> None:
    """Forked while the test process holds a lock and the write end of a pipe (as an
    in-process command holds its delivery lock and its update-ref session), the child, paused,
    holds neither: the lock is taken again and the pipe's reader sees its end (kept, they made
    a test wait on a paused child for ever)."""
    prepare(site, "k", "posts/a.md", article("a"))
    lock = os.open(tmp_path / "held.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_EX)
    read_end, write_end = os.pipe()
    p = spawn(site, "push", env={"GITPUB_PAUSE_AT": "delivery.claimed"})
    try:
        wait_stopped(p.pid)
        os.close(lock)
        os.close(write_end)
        again = os.open(tmp_path / "held.lock", os.O_RDWR)
        fcntl.flock(again, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while the child holds it
        os.close(again)
        assert select.select([read_end], [], [], 5)[0] and os.read(read_end, 1) == b""
    finally:
        os.kill(p.pid, signal.SIGCONT)
        os.close(read_end)
    p.communicate(timeout=60)
    assert p.returncode == 0
