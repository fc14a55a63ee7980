"""Lock files left by killed processes heal by the documented rule (``gitpub.git.locks``).

SIGKILL while dulwich holds a lock (``git.ref-locked``, ``git.object-locked``: its ``.lock`` is
written, not yet renamed) during ``prepare``, ``push`` and the post-commit hook, repeated: the
next run is never blocked past the staleness rule, and says what it removed. A lock whose holder
may be alive is respected, and waiting for it ends in one line, never in ``FileLocked``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, Site, set_up_once
from test_delivery import remote_job_ids

from gitpub.core.errors import GitpubError
from gitpub.git.repo import Repository
from gitpub.runtime import pubdir as locks
from gitpub.runtime.session import open_repository


def prepare(site: Site, key: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """``prepare`` of ``key``: in a process of its own with ``env`` (to be killed), else here."""
    args = ("prepare", "--json", "--key", key, "--to", f"posts/{key}.md", "-")
    text = f"# {key}\n\nThe text of {key}.\n"
    r = site.call(*args, input=text) if env is None else site.run(*args, input=text, env=env)
    return r.code, r.out + r.err


def leftover_locks(site: Site) -> list[str]:
    git_dir = site.path / ".git"
    return sorted(str(p.relative_to(git_dir)) for p in git_dir.rglob("*.lock")
                  if p.name not in ("delivery.lock", "heal.lock"))


def points_reached(site: Site, tmp_path: Path, *args: str, input: str = "") -> dict[str, int]:
    """How often each git.* crash point is reached by one uninterrupted run of ``args``."""
    trace = tmp_path / f"trace-{time.monotonic_ns()}"
    r = site.run(*args, input=input, env={"GITPUB_CRASH_TRACE": str(trace)})
    assert r.code == 0, r.out + r.err
    names = trace.read_text().split() if trace.exists() else []
    return {p: names.count(p) for p in ("git.ref-locked", "git.object-locked")}


def prepare_probed(site: Site) -> dict[str, int]:
    """``points_reached`` by the ``prepare`` of a probe job, which ``site`` then holds (made
    once per test process and copied in)."""
    return set_up_once(site, "locks-prepare-probe", lambda t, d: points_reached(
        t, d, "prepare", "--key", "probe", "--to", "posts/probe.md", "-",
        input="# Probe\n\nText.\n"))


def push_probed(site: Site) -> dict[str, int]:
    """``points_reached`` by the ``push`` of a prepared probe job, which ``site`` then holds
    published (made once per test process and copied in)."""
    def build(template: Site, where: Path) -> dict[str, int]:
        code, out = prepare(template, "probe")
        assert code == 0, out
        return points_reached(template, where, "push")
    return set_up_once(site, "locks-push-probe", build)


# -- the rule ---------------------------------------------------------------------------------

def age(path: Path, seconds: float) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_an_old_lock_is_removed_with_a_line(site: Site) -> None:
    code, out = prepare(site, "a")
    assert code == 0, out
    (ref,) = site.job_refs()
    lock = site.path / ".git" / f"{ref}.lock"
    lock.write_bytes(b"")
    age(lock, 3600)
    r = site.run("push")
    assert r.code == 0, r.out + r.err
    assert f"removed a stale lock {ref}.lock" in r.err
    assert not lock.exists()


def test_a_young_lock_nobody_may_hold_is_removed_at_once(site: Site) -> None:
    """No process that could hold it is alive (its holder was killed a moment ago): no age to
    wait for."""
    code, out = prepare(site, "a")
    assert code == 0, out
    (ref,) = site.job_refs()
    lock = site.path / ".git" / f"{ref}.lock"
    lock.write_bytes(b"")
    r = site.run("push")
    assert r.code == 0, r.out + r.err
    assert "removed a stale lock" in r.err


def hold_ref_lock(site: Site, ref: str) -> subprocess.Popen[bytes]:
    """A live C git ref transaction holding ``ref``'s lock (prepared, not committed): what a
    slow ``git fetch`` or a person's ``git update-ref --stdin`` holds while no gitpub runs."""
    sha = site.git("rev-parse", ref).strip()
    proc = subprocess.Popen(["git", "update-ref", "--stdin"], cwd=site.path, env=site.env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"start\nupdate {ref} {sha} {sha}\nprepare\n".encode())
    proc.stdin.flush()
    assert proc.stdout.readline() == b"start: ok\n"
    assert proc.stdout.readline() == b"prepare: ok\n"
    return proc


def test_a_lock_live_c_git_holds_is_never_removed(site: Site) -> None:
    """Issue 23 point 10: a C git transaction holding a ref's lock, old or young, and no
    gitpub alive: gitpub waits, fails with a clear error naming the process, and the lock and
    the transaction stay; once git commits, gitpub goes on."""
    code, out = prepare(site, "a")
    assert code == 0, out
    (ref,) = site.job_refs()
    git_proc = hold_ref_lock(site, ref)
    lock = site.path / ".git" / f"{ref}.lock"
    try:
        assert lock.exists()
        age(lock, 3600)
        with open_repository(site.path, print) as repo:
            repo.lock_wait = 0.5
            sha = repo.read_ref(ref)
            assert sha is not None
            with pytest.raises(locks.LockedError) as info:
                repo.cas_ref(ref, sha, sha)
            assert f"pid {git_proc.pid} (git update-ref --stdin)" in info.value.message
            assert repo.sweep_stale_locks() == 0
        assert lock.exists()
    finally:
        assert git_proc.stdin is not None
        git_proc.stdin.write(b"commit\n")
        git_proc.stdin.close()
        assert git_proc.wait(30) == 0  # its transaction was never broken
    assert not lock.exists()
    assert site.call("push").code == 0


def hold_presence(site: Site) -> subprocess.Popen[bytes]:
    """Another live gitpub process with the repository open (and nothing else)."""
    code = ("import sys, time; from pathlib import Path; from gitpub.runtime import pubdir; "
            f"p = pubdir.Presence(pubdir.ensure_pub_dir(Path({str(site.path / '.git/pub')!r}))); "
            "print('ready', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            env={**site.env, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


def test_a_lock_is_respected_while_another_gitpub_may_hold_it(site: Site) -> None:
    code, out = prepare(site, "a")
    assert code == 0, out
    (ref,) = site.job_refs()
    lock = site.path / ".git" / f"{ref}.lock"
    lock.write_bytes(b"")
    age(lock, 3600)  # however old
    holder = hold_presence(site)
    try:
        with open_repository(site.path, print) as repo:
            repo.lock_wait = 0.3
            sha = repo.read_ref(ref)
            assert sha is not None
            with pytest.raises(locks.LockedError) as info:
                repo.cas_ref(ref, sha, sha)
            assert isinstance(info.value, GitpubError)
            assert f"ref {ref} is locked by another process" in info.value.message
            assert lock.exists()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    with open_repository(site.path, print) as repo:  # its holder may have been that process
        repo.lock_wait = 0.3
        sha = repo.read_ref(ref)
        assert sha is not None and repo.cas_ref(ref, sha, sha)
    assert not lock.exists()
    assert os.listdir(site.path / ".git/pub/live") == []  # the dead one's file went too


def test_a_users_index_lock_is_never_touched(site: Site) -> None:
    with open_repository(site.path, print) as repo:
        lock = site.path / ".git/index.lock"
        lock.write_bytes(b"")
        age(lock, 3600)
        assert not repo.heal_lock(lock)
        assert lock.exists()
        lock.unlink()


# -- SIGKILL while a lock is held ----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("point", ["git.object-locked", "git.ref-locked"])
def test_prepare_killed_while_holding_a_lock_repeatedly(site: Site, point: str) -> None:
    reached = prepare_probed(site)[point]
    assert reached > 0
    picks = sorted({1, max(1, reached // 2), reached})
    for n in picks:  # killed at several of them, one after the other, on the same job
        code, out = prepare(site, "k", {"GITPUB_CRASH_AT": f"{point}:{n}"})
        assert code in (-9, 0), out
    code, out = prepare(site, "k")  # a lock still in the way would fail it (LockedError)
    assert code == 0, out
    assert "Traceback" not in out and "FileLocked" not in out
    r = site.call("reconcile")  # sweeps what no write ran into (a lock of an unneeded object)
    assert r.code == 0, r.out + r.err
    assert leftover_locks(site) == []


@pytest.mark.slow
@pytest.mark.parametrize("point", ["git.object-locked", "git.ref-locked"])
def test_prepare_killed_at_every_locked_write(site: Site, point: str) -> None:
    """One job per write position, killed while that write's lock is held; one reconcile
    then finishes and delivers all of them, unblocked by what the kills left."""
    reached = prepare_probed(site)[point]
    keys = [f"w{n}" for n in range(1, reached + 1)]
    for n, key in enumerate(keys, start=1):
        code, out = prepare(site, key, {"GITPUB_CRASH_AT": f"{point}:{n}"})
        assert code == -9, f"write {n} of {reached} was not reached: {out}"
    assert leftover_locks(site) != []
    r = site.call("reconcile")
    assert r.code == 0, r.out + r.err
    assert "Traceback" not in r.err and "FileLocked" not in r.err
    for key in keys:  # a kill before the job's ref existed accepted nothing: ask again
        code, out = prepare(site, key)
        assert code == 0, out
    r = site.call("push")
    assert r.code == 0, r.out + r.err
    published = remote_job_ids(site)
    ids = {j["job_id"] for j in site.call("status", "--all", "--json").json()["jobs"]}
    assert len(ids) == reached + 1 and sorted(published) == sorted(ids)  # each exactly once
    assert leftover_locks(site) == []


@pytest.mark.slow
@pytest.mark.parametrize("point", ["git.object-locked", "git.ref-locked"])
def test_push_killed_at_every_locked_write(site: Site, point: str) -> None:
    reached = push_probed(site)[point]
    assert reached > 0
    for n in range(1, reached + 1):
        job = site.call("prepare", "--json", "--key", f"w{n}", "--to", f"posts/w{n}.md", "-",
                        input=f"# W{n}\n").json()["job_id"]
        r = site.run("push", job, env={"GITPUB_CRASH_AT": f"{point}:{n}"})
        assert r.code == -9, f"write {n} of {reached} was not reached: {r.out + r.err}"
    r = site.call("push")  # a lock still in the way would fail it (LockedError)
    assert r.code == 0, r.out + r.err
    assert "Traceback" not in r.err and "FileLocked" not in r.err
    r = site.call("reconcile")
    assert r.code == 0, r.out + r.err
    ids = {j["job_id"] for j in site.call("status", "--all", "--json").json()["jobs"]}
    assert sorted(remote_job_ids(site)) == sorted(ids)  # each exactly once
    assert leftover_locks(site) == []


def install_hooks(site: Site) -> None:
    r = site.call("hooks", "install")
    assert r.code == 0, r.err


def job_message(i: int) -> str:
    """A commit message with job trailers: post-commit links it with a note (objects + ref)."""
    return (f"Publish {i} by hand\n\nBlog-Job-Id: {i}f6c1d2e-job\nBlog-Manifest-Sha256: "
            + "ab" * 32 + "\n")


def hook_commit(site: Site, i: int, kind: str, env: dict[str, str] | None = None,
                ) -> subprocess.CompletedProcess[bytes]:
    (site.path / f"posts/hand{i}.md").write_text(f"# Hand {i}\n")
    site.git("add", ".")
    message = job_message(i) if kind == "note" else f"hand {i}"
    return subprocess.run(["git", "commit", "-q", "-m", message], cwd=site.path,
                          env={**site.env, **(env or {})}, capture_output=True)


@pytest.mark.parametrize(("point", "kind", "writes"), [("git.object-locked", "note", 3),
                                                       ("git.ref-locked", "note", 1),
                                                       ("git.ref-locked", "outbox", 1)])
def test_post_commit_killed_at_every_locked_write(site: Site, point: str, kind: str,
                                                  writes: int) -> None:
    """A note is a blob, a tree and a commit, then the notes ref; an outbox entry is a ref."""
    install_hooks(site)
    for n in range(1, writes + 1):
        for again in range(2):  # repeated: the next kill meets the last one's leftover
            proc = hook_commit(site, 10 * n + again, kind, {"GITPUB_CRASH_AT": f"{point}:{n}"})
            assert proc.returncode == 0, proc.stderr  # a killed hook never fails the commit
            assert b"Traceback" not in proc.stderr
    assert leftover_locks(site) != [], "the kill should have left a lock"
    started = time.monotonic()
    proc = hook_commit(site, 99, kind)
    took = time.monotonic() - started
    assert proc.returncode == 0 and took < 8, (took, proc.stderr)  # not a 10 s wait
    if (point, kind) == ("git.ref-locked", "note"):  # the one lock the next commit needs
        assert b"removed a stale lock refs/notes/pub.lock" in proc.stderr
    r = site.call("reconcile")  # sweeps the others; rediscovers what the killed hooks missed
    assert "Traceback" not in r.err
    assert leftover_locks(site) == []


@pytest.mark.slow
def test_post_commit_never_waits_long_on_a_notes_lock(site: Site) -> None:
    install_hooks(site)
    lock = site.path / ".git/refs/notes/pub.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_bytes(b"")
    holder = hold_presence(site)  # a live gitpub: the lock is respected, not waited for long
    try:
        message = ("Publish by hand\n\nBlog-Job-Id: 3f6c1d2e-job\nBlog-Manifest-Sha256: "
                   + "ab" * 32 + "\n")
        (site.path / "posts/x.md").write_text("# X\n")
        site.git("add", ".")
        started = time.monotonic()
        proc = subprocess.run(["git", "commit", "-q", "-m", message], cwd=site.path,
                              env=site.env, capture_output=True)
        assert proc.returncode == 0
        assert time.monotonic() - started < 8, proc.stderr  # the hook waits 1 s at most
        assert b"locked by another process" in proc.stderr
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    (site.path / "posts/y.md").write_text("# Y\n")
    site.git("add", ".")
    started = time.monotonic()
    proc = subprocess.run(["git", "commit", "-q", "-m", message.replace("3f6c", "4f6c")],
                          cwd=site.path, env=site.env, capture_output=True)
    assert proc.returncode == 0 and time.monotonic() - started < 8
    assert b"removed a stale lock refs/notes/pub.lock" in proc.stderr
    assert not lock.exists()


# -- the delivery lock ------------------------------------------------------------------------

def test_the_delivery_lock_dies_with_its_holder_not_with_its_children(site: Site) -> None:
    """An flock whose descriptor is not inherited: a child left running keeps nothing."""
    code = ("import subprocess, sys, time; from pathlib import Path; "
            "from gitpub.git.repo import Repository; "
            "from gitpub.delivery.lock import delivery_lock; "
            f"repo = Repository.discover(Path({str(site.path)!r})); "
            "cm = delivery_lock(repo); cm.__enter__(); "
            "child = subprocess.Popen(['sleep', '60']); "
            "print(child.pid, flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            env={**site.env, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    try:
        from gitpub.delivery.lock import delivery_lock

        with Repository.discover(site.path) as repo:
            with (pytest.raises(locks.LockedError, match=f"pid {proc.pid}"),
                  delivery_lock(repo, wait=0.2)):
                pass
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            with delivery_lock(repo, wait=0.2):  # at once: the sleeping child holds nothing
                pass
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
