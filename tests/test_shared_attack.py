"""Attacks on the shared job store: a hostile or careless second writer of ``refs/pub/*``.

Each test plays another clone of a ``git daemon`` remote on 127.0.0.1 that does what a real
second writer may do: forge or damage a job's remote ref, squat a key with a lease that never
ends, run with a clock an hour off, race a take-over with ``resolve --abandon``, refuse
``refs/pub/*`` on the server. At the end of each: every accepted job on the branch exactly
once, the remote's job refs agreeing with the trailers, no traceback, the documented exit
codes, and ``git fsck --strict`` on every repository (the fixture checks).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import Clock, Site, git, seeds, set_up_once, spawn, wait_stopped
from netfaults import GitDaemon
from test_delivery import article, prepare, remote_job_ids
from test_shared import (
    FAST,
    JOBS,
    assert_store_agrees,
    branch_tip,
    conflicted_by,
    node,
    remote_state,
)

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"



def no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text, text


def remote_sha(site: Site, job_id: str) -> str | None:
    out = git(site.remote, "rev-parse", "-q", "--verify", JOBS + job_id, check=False).strip()
    return out or None


def push_raw(site: Site, sha: str, ref: str) -> None:
    """Put ``ref`` on the remote at ``sha`` unconditionally, as a hostile clone with push
    access would (objects from the site's repository)."""
    site.git("push", "-q", "--force", "--no-verify", str(site.remote), f"{sha}:{ref}")


def forge_state(site: Site, job_id: str, edit: Callable[[dict[str, Any]], dict[str, Any]],
                *, parent: str | None = None) -> str:
    """A state commit whose ``job.json`` is the remote's (or ``parent``'s) record edited by
    ``edit``, child of that state commit, forced onto the remote's job ref."""
    base = parent or remote_sha(site, job_id)
    assert base is not None
    site.git("fetch", "-q", str(site.remote), f"+{JOBS}{job_id}:refs/hostile/{job_id}")
    record = json.loads(site.git("show", f"{base}:job.json"))
    blob = site.git("hash-object", "-w", "--stdin",
                    input=(json.dumps(edit(record), indent=1) + "\n").encode()).strip()
    listing = [line for line in site.git("ls-tree", base).splitlines()
               if not line.endswith("\tjob.json")]
    listing.append(f"100644 blob {blob}\tjob.json")
    tree = site.git("mktree", input=("\n".join(listing) + "\n").encode()).strip()
    commit = site.git("commit-tree", tree, "-p", base, "-m", "forged").strip()
    push_raw(site, commit, JOBS + job_id)
    return commit


def claimed_and_killed(site: Site, key: str, path: str, text: str) -> str:
    """A job of the site's, claimed on the remote by a process that was then SIGKILLed."""
    job_id = str(prepare(site, key, path, text)["job_id"])
    r = site.run("push", env={"GITPUB_CRASH_AT": "delivery.claimed"})
    assert r.code == -signal.SIGKILL, r.out + r.err
    assert remote_state(site, job_id) is not None
    return job_id


def all_refs_text(repos: list[Path]) -> str:
    """Every ref name, and every commit message under refs/pub and refs/notes."""
    out = []
    for repo in repos:
        out.append(git(repo, "for-each-ref", "--format=%(refname)"))
        out.append(git(repo, "log", "--format=%B", "--glob=refs/pub/*", "--glob=refs/notes/*",
                       check=False))
    return "\n".join(out)


# -- forged and damaged remote job refs ------------------------------------------------------

@pytest.mark.slow
def test_a_forged_published_record_does_not_drop_the_job(site: Site, daemon: GitDaemon,
                                                         tmp_path: Path) -> None:
    """A hostile clone moves the remote's job ref to a record saying PUBLISHED, for a commit
    that is not on the branch. PUBLISHED means the branch has the publication (BRIEF §3): the
    node that has the job does not believe the record, delivers the job, once."""
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    hostile = node(site, tmp_path, "hostile")
    welcome = hostile.git("rev-parse", "HEAD").strip()
    forge_state(hostile, job_id, lambda r: {**r, "state": "PUBLISHED", "lease": None,
                                             "remote_commit": welcome})
    r = site.run_here("push", "--json")
    no_traceback(r.out, r.err)
    assert r.code == 0, r.out + r.err
    assert_store_agrees(site, [job_id])
    c = node(site, tmp_path, "node-c")
    r = c.run_here("reconcile")
    assert r.code == 0, r.out + r.err
    assert_store_agrees(site, [job_id])


def damage(site: Site, job_id: str, kind: str) -> str:
    """The remote's job ref moved (by a hostile or broken clone) to something unreadable."""
    if kind == "tree":
        sha = site.git("rev-parse", "HEAD^{tree}").strip()
    elif kind == "blob":
        sha = site.git("hash-object", "-w", "--stdin", input=b"not a state\n").strip()
    elif kind == "garbage":
        return _garbage_state(site, job_id)
    elif kind == "other-job":
        return forge_state(site, job_id, lambda r: {**r, "job_id": "0" * 8 + r["job_id"][8:]})
    elif kind == "format":
        return forge_state(site, job_id, lambda r: {**r, "format": 99})
    else:
        raise AssertionError(kind)
    push_raw(site, sha, JOBS + job_id)
    return sha


def _garbage_state(site: Site, job_id: str) -> str:
    blob = site.git("hash-object", "-w", "--stdin", input=b"{\"state\": \x00garbage").strip()
    tree = site.git("mktree", input=f"100644 blob {blob}\tjob.json\n".encode()).strip()
    commit = site.git("commit-tree", tree, "-m", "garbage").strip()
    push_raw(site, commit, JOBS + job_id)
    return commit


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["garbage", "tree", "blob", "other-job", "format"])
def test_a_damaged_remote_job_ref_is_reported_and_left_for_repair(
        site: Site, daemon: GitDaemon, tmp_path: Path, kind: str) -> None:
    """The remote's job ref is unreadable (not a state commit, garbage record, another job's
    record, an unknown format): every clone reports it clearly (exit 1, no traceback), none
    takes it over or overwrites it; once a person deletes it, the job is delivered once."""
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    local = site.git("rev-parse", JOBS + job_id).strip()
    hostile = node(site, tmp_path, "hostile")
    bad = damage(hostile, job_id, kind)
    r = site.run_here("push")
    no_traceback(r.out, r.err)
    assert r.code == 1, r.out + r.err
    assert job_id in r.out + r.err and "hint:" in r.out + r.err, r.err
    assert remote_sha(site, job_id) == bad, "left intact for repair"
    assert site.git("rev-parse", JOBS + job_id).strip() == local
    c = node(site, tmp_path, "node-c")
    r = c.run_here("reconcile")
    no_traceback(r.out, r.err)
    assert r.code == 1 and job_id in r.out + r.err, r.out + r.err
    assert remote_sha(site, job_id) == bad
    assert c.git("for-each-ref", JOBS).strip() == ""
    r = c.run_here("status", job_id)
    no_traceback(r.out, r.err)
    assert r.code == 1 and job_id in r.err and "hint:" in r.err, r.out + r.err
    r = c.run_here("log", job_id)
    no_traceback(r.out, r.err)
    assert r.code == 1, r.out + r.err
    git(site.remote, "update-ref", "-d", JOBS + job_id)  # a person repairs the remote
    r = site.run_here("push")
    assert r.code == 0, r.out + r.err
    assert_store_agrees(site, [job_id])


# -- leases a hostile or broken clone wrote --------------------------------------------------

def test_a_lease_that_never_ends_does_not_squat_the_job(site: Site, daemon: GitDaemon,
                                                        tmp_path: Path) -> None:
    """Another host's claim with an expiry ten years ahead (a squatter, or a clock far off):
    no node may hold a job longer than a lease lasts, so it is not believed — neither the job's
    own node nor a take-over leaves the job waiting for ten years."""
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    hostile = node(site, tmp_path, "hostile")
    squat = {"token": "f" * 32, "owner": "elsewhere:4242:1", "expires_at": time.time() + 3e8}
    forge_state(hostile, job_id, lambda r: {**r, "lease": squat})
    r = site.run_here("push")
    no_traceback(r.out, r.err)
    assert r.code == 0, r.out + r.err
    assert_store_agrees(site, [job_id])


def test_a_squatted_job_is_taken_over(site: Site, daemon: GitDaemon, tmp_path: Path) -> None:
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    git(site.path, "update-ref", "-d", JOBS + job_id)  # the job's node is gone for good
    hostile = node(site, tmp_path, "hostile")
    squat = {"token": "f" * 32, "owner": "elsewhere:4242:1", "expires_at": time.time() + 3e8}
    forge_state(hostile, job_id, lambda r: {**r, "lease": squat})
    c = node(site, tmp_path, "node-c")
    r = c.run_here("reconcile")
    no_traceback(r.out, r.err)
    assert r.code == 0, r.out + r.err
    assert_store_agrees(site, [job_id])


SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@pytest.mark.slow
@pytest.mark.parametrize("owner", [f"evil\x1b[2J\x1b]0;pwned\x07 {SECRET}\r\nforged line",
                                   "x" * 1_000_000])
def test_a_hostile_lease_holder_reaches_no_terminal_and_no_ref(
        site: Site, daemon: GitDaemon, tmp_path: Path, owner: str) -> None:
    """The holder string of an expired remote lease is another clone's text: a secret,
    terminal control sequences, a megabyte. Taking the job over quotes it (output, the job's
    history) sanitized, printable and short."""
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    git(site.path, "update-ref", "-d", JOBS + job_id)
    hostile = node(site, tmp_path, "hostile")
    lease = {"token": "e" * 32, "owner": owner, "expires_at": time.time() - 60}
    forge_state(hostile, job_id, lambda r: {**r, "lease": lease})
    c = node(site, tmp_path, "node-c")
    for args in (("reconcile",), ("status", job_id), ("log", job_id), ("log", "--json", job_id)):
        r = c.run_here(*args)
        no_traceback(r.out, r.err)
        assert r.code == 0, r.out + r.err
        for text in (r.out, r.err):
            assert SECRET not in text and "\x1b" not in text and "\x07" not in text, text
            assert len(text) < 20_000, len(text)
    assert_store_agrees(site, [job_id])
    for repo in (c.path, site.remote):
        history = git(repo, "log", "--format=%B", f"{JOBS}{job_id}")
        assert SECRET not in history and "\x1b" not in history, history
        assert len(history) < 50_000
    text = all_refs_text([c.path, site.path, site.remote])
    assert SECRET not in text and "\x1b" not in text


# -- a person on one clone, a take-over on another -------------------------------------------

@pytest.mark.slow
def test_abandon_racing_a_take_over_does_not_say_abandoned(
        site: Site, daemon: GitDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """B abandons a dead node's job (it probed the branch: absent) while C takes it over: C's
    claim lands on the remote between B's probe and B's record. B's abandon is then not
    what the remote says — it must not report the job abandoned (exit 0) while C publishes
    it: B exits 5 (nothing of its change stands) and shows the remote's state."""
    import gitpub.delivery.resolve as resolve_module

    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    b = node(site, tmp_path, "node-b")
    c = node(site, tmp_path, "node-c")
    racer: list[subprocess.Popen[bytes]] = []
    record_abandon = resolve_module._record_abandon

    def take_over_first(ctx: Any, job: Any, reason: str) -> Any:
        racer.append(spawn(c, "reconcile", env={"GITPUB_PAUSE_AT": "delivery.claimed"}))
        wait_stopped(racer[0].pid)
        return record_abandon(ctx, job, reason)

    monkeypatch.setattr(resolve_module, "_record_abandon", take_over_first)
    try:
        r = b.call("resolve", "--json", job_id, "--abandon")
    finally:
        for p in racer:
            os.kill(p.pid, signal.SIGCONT)
    out, err = racer[0].communicate(timeout=120)
    assert racer[0].returncode == 0, out + err
    assert_store_agrees(site, [job_id])  # C's take-over published it
    assert r.code == 5, r.out + r.err
    assert b.call("status", "--json", job_id).json()["state"] != "SKIPPED"
    assert b.call("reconcile").code == 0
    assert b.call("status", "--json", job_id).json()["state"] == "PUBLISHED"
    assert_store_agrees(site, [job_id])


# -- servers that refuse part of it ----------------------------------------------------------

def refuse(site: Site, hook: str, pattern: str) -> Path:
    """A server hook (``pre-receive`` or ``update``) that refuses refs matching ``pattern``,
    as a protected-refs rule would."""
    path = site.remote / "hooks" / hook
    if hook == "update":
        body = f'case "$1" in {pattern}) echo "refusing $1: protected" >&2; exit 1;; esac\n'
    else:
        body = ("while read old new ref; do\n"
                f'  case "$ref" in {pattern}) echo "refusing $ref: protected" >&2; exit 1;; '
                "esac\ndone\n")
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def refused_push(site: Site, hook: str, refs: str, code: int) -> tuple[str, Path, Any]:
    """One prepared job pushed to a remote whose ``hook`` refuses ``refs``: exit ``code``,
    no traceback, the branch unchanged. (job id, the hook's path, the run)."""
    job_id = str(prepare(site, "k1", "posts/a.md", article("a"))["job_id"])
    before = branch_tip(site)
    path = refuse(site, hook, refs)
    r = site.run("push")
    no_traceback(r.out, r.err)
    assert r.code == code, r.out + r.err
    assert branch_tip(site) == before
    return job_id, path, r


@pytest.mark.parametrize("hook", ["pre-receive", "update"])
def test_a_remote_refusing_the_job_store_stops_clearly(site: Site, daemon: GitDaemon,
                                                       hook: str) -> None:
    """The server refuses ``refs/pub/*`` (a protected-refs rule): delivery stops with exit 2
    and a hint naming refs/pub, nothing on the branch, no attempt used; once allowed, the job
    is published once."""
    job_id, path, r = refused_push(site, hook, "refs/pub/*", 2)
    assert "refs/pub" in r.err and "hint:" in r.err, r.err
    status = site.call("status", "--json", job_id).json()
    assert status["state"] == "LOCAL_COMMITTED" and status["attempt"] == 0, status
    path.unlink()
    r = site.run("push")
    assert r.code == 0, r.out + r.err
    assert_store_agrees(site, [job_id])


@pytest.mark.parametrize("hook", ["pre-receive", "update"])
def test_a_remote_refusing_the_branch_is_a_rejection_not_a_race(site: Site, daemon: GitDaemon,
                                                                 hook: str) -> None:
    """The server accepts the job store but refuses the branch (branch protection): the
    atomic push is refused as a whole. That is a rejection — one attempt, RETRY_WAIT naming
    the refusal, exit 5 — not eight rounds of "the remote moved" rebases."""
    job_id, path, r = refused_push(site, hook, "refs/heads/*", 5)
    status = site.call("status", "--json", job_id).json()
    assert status["state"] == "RETRY_WAIT" and status["attempt"] == 1, status
    assert "protected" in str(status["failure_detail"]) or "declined" in str(
        status["failure_detail"]), status
    assert "moved" not in str(status["failure_detail"]), status
    path.unlink()
    r = site.run_here("push", job_id)
    assert r.code == 0, r.out + r.err
    assert_store_agrees(site, [job_id])


@pytest.mark.slow
def test_a_remote_refusing_non_fast_forwards_of_job_refs_still_works(
        site: Site, daemon: GitDaemon, tmp_path: Path) -> None:
    """A server that refuses every non-fast-forward update, job refs included (an ``update``
    hook; git's own ``receive.denyNonFastForwards`` covers branches only). Every move gitpub
    makes of a job's remote ref is a fast-forward (a claim, a take-over, an adoption, a
    person's resolution write on top of the remote's value), so all of them still work."""
    hook = site.remote / "hooks" / "update"
    hook.write_text("#!/bin/sh\n"
                    'case "$2" in 0000000000000000000000000000000000000000) exit 0;; esac\n'
                    'case "$3" in 0000000000000000000000000000000000000000) exit 0;; esac\n'
                    'git merge-base --is-ancestor "$2" "$3" && exit 0\n'
                    'echo "non-fast-forward of $1 refused" >&2; exit 1\n')
    hook.chmod(0o755)
    b = node(site, tmp_path, "node-b")
    c = node(site, tmp_path, "node-c")
    first = str(prepare(site, "shared", "posts/a.md", article("a"))["job_id"])
    prepare(b, "shared", "posts/a.md", article("a"))
    assert site.run_here("push").code == 0
    r = b.run_here("push")
    assert r.code == 0, r.out + r.err
    second = claimed_and_killed(site, "k2", "posts/b.md", article("b"))
    r = c.run_here("reconcile")
    assert r.code == 0 and "taken over" in r.err, r.out + r.err
    assert_store_agrees(site, [first, second])
    assert site.run_here("push").code == 0
    assert b.run_here("reconcile").code == 0
    third = str(prepare(site, "k3", "posts/welcome.md", "# Welcome\n\nMine.\n")["job_id"])
    b.git("fetch", "-q", "origin")
    b.git("reset", "-q", "--hard", "origin/main")
    (b.path / "posts/welcome.md").write_text("# Welcome\n\nTheirs.\n")
    b.git("commit", "-qam", "their edit")
    b.git("push", "-q", "origin", "HEAD:main")
    assert site.call("push").code == 4
    r = c.call("resolve", "--json", third, "--abandon")
    assert r.code == 0, r.out + r.err
    assert remote_state(site, third) == remote_state(c, third)
    assert (remote_state(site, third) or {}).get("state") == "SKIPPED"
    assert site.run_here("reconcile").code == 0
    assert_store_agrees(site, [first, second])
    forced = subprocess.run(["git", "push", "--force", "origin", f"HEAD:{JOBS}{first}"],
                            cwd=site.path, capture_output=True)
    assert forced.returncode != 0, "the hook refuses a forced non-fast-forward"


# -- clocks that disagree --------------------------------------------------------------------

def elsewhere(tmp_path: Path, host: str, seconds: float = 0.0,
              clock: Clock | None = None) -> dict[str, str]:
    """The environment of a node on another host (``os.uname``'s node name) whose clock is
    ``seconds`` off (Python's ``time.time``; its git commands keep the hermetic dates), and
    moved on with ``clock`` if given."""
    where = tmp_path / f"{host}{seconds:+.0f}{'-clock' if clock else ''}"
    where.mkdir(exist_ok=True)
    moved = "0.0" if clock is None else f"float(open({str(clock.file)!r}).read())"
    (where / "sitecustomize.py").write_text(
        "import os, time\n_real, _uname = time.time, os.uname()\n"
        f"time.time = lambda: _real() + {seconds!r} + {moved}\n"
        f"_other = os.uname_result((_uname.sysname, {host!r}, _uname.release, "
        "_uname.version, _uname.machine))\n"
        "os.uname = lambda: _other\n")
    return {"PYTHONPATH": f"{where}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
                          f"{os.pathsep}{Path(__file__).resolve().parent.parent}"}


@pytest.mark.slow
@pytest.mark.parametrize("who", ["thief-ahead", "holder-ahead"])
def test_clocks_an_hour_apart_never_publish_twice(site: Site, daemon: GitDaemon,
                                                  tmp_path: Path, who: str) -> None:
    """A node's clock is an hour off (the documented limit is a small fraction of
    ``lease_seconds``). The take-over then happens while the holder still works — a thief
    ahead sees the live lease expired; a holder ahead writes one that claims to run far
    longer than a lease, which is not believed. The holder runs on another host (only its
    lease's expiry tells whether it still works). Either way the holder is fenced: its late
    atomic push is refused, and the job is on the branch once."""
    site.write_config("lease_seconds: 600\n")
    job_id = str(prepare(site, "k1", "posts/a.md", article("a"))["job_id"])
    c = node(site, tmp_path, "node-c", "lease_seconds: 600\n")
    holder_env = elsewhere(tmp_path, "host-a", 3600 if who == "holder-ahead" else 0)
    thief_env = elsewhere(tmp_path, "host-c", 3600) if who == "thief-ahead" else {}
    a = spawn(site, "push", env={**holder_env, "GITPUB_PAUSE_AT": "delivery.claimed"})
    try:
        wait_stopped(a.pid)
        r = c.run("reconcile", env=thief_env)
        no_traceback(r.out, r.err)
        assert r.code == 0 and "taken over" in r.err, r.out + r.err
        assert_store_agrees(site, [job_id])
        tip = branch_tip(site)
    finally:
        os.kill(a.pid, signal.SIGCONT)
    out, err = a.communicate(timeout=120)
    no_traceback(out.decode(), err.decode())
    assert a.returncode in (0, 5), out + err
    assert branch_tip(site) == tip, "the holder's late push landed nothing"
    assert_store_agrees(site, [job_id])
    assert site.run("push", env=holder_env).code == 0
    assert site.call("status", "--json", job_id).json()["state"] == "PUBLISHED"


# -- lost replies ----------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("lost", ["delivery", "claim", "content-without-atomic"])
def test_a_lost_push_reply_then_another_node(site: Site, daemon: GitDaemon, tmp_path: Path,
                                             lost: str) -> None:
    """Node A's push lands but its reply is lost (a proxy swallows it): the atomic delivery,
    A's claim alone, or — on a server without atomic push — the content push. A does not know
    (exit 5); another node reconciles at once (takes over what A's dead process held, or
    finds it finished), then A runs again. Nothing is pushed twice; everything agrees."""
    from netfaults import DropReplyProxy

    if lost == "content-without-atomic":
        git(site.remote, "config", "receive.advertiseAtomic", "false")
    site.write_config(FAST)
    b = node(site, tmp_path, "node-b", FAST)
    job_id = str(prepare(site, "k1", "posts/a.md", article("a"))["job_id"])
    with DropReplyProxy(daemon.port) as proxy:
        site.git("remote", "set-url", "origin", proxy.url(site.remote.name))
        proxy.mode = "drop_push_reply" if lost == "claim" else "drop_branch_push_reply"
        r = site.run("push")
        no_traceback(r.out, r.err)
        assert r.code == 5, r.out + r.err
        assert proxy.replies_dropped >= 1
        proxy.mode = "pass"
        landed = remote_job_ids(site)
        assert landed == ([] if lost == "claim" else [job_id])
        r = b.run("reconcile")
        no_traceback(r.out, r.err)
        assert r.code == 0, r.out + r.err
        assert_store_agrees(site, [job_id])
        tip = branch_tip(site)
        r = site.run("push")
        no_traceback(r.out, r.err)
        assert r.code == 0, r.out + r.err
        assert branch_tip(site) == tip
    assert site.call("status", "--json", job_id).json()["state"] == "PUBLISHED"
    assert b.call("status", "--json", job_id).json()["state"] == "PUBLISHED"
    assert_store_agrees(site, [job_id])


# -- one key on three nodes at once ----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("contents", [("a", "a", "a"), ("a", "b", "a"), ("a", "b", "c")])
def test_one_key_on_three_nodes_at_once(site: Site, daemon: GitDaemon, tmp_path: Path,
                                        contents: tuple[str, str, str]) -> None:
    """Three nodes prepare the same key (same or different content) and deliver at once. The
    claim's compare-and-swap picks one request: it is published once; every node with the
    same content ends PUBLISHED (exit 0), every other one in REVIEW ``key_reused`` (exit 3)
    and pushes nothing; nobody's output has a traceback."""
    site.write_config(FAST)
    nodes = [site, node(site, tmp_path, "node-b", FAST), node(site, tmp_path, "node-c", FAST)]
    job_ids = {str(prepare(n, "one-key", "posts/k.md", article(c))["job_id"])
               for n, c in zip(nodes, contents, strict=True)}
    (job_id,) = job_ids
    procs = [spawn(n, "push") for n in nodes]
    codes = []
    for n, p in zip(nodes, procs, strict=True):
        out, err = p.communicate(timeout=300)
        no_traceback(out.decode(), err.decode())
        code = p.returncode
        for _ in range(3):  # a node fenced in its run (exit 5) finishes on the next one
            if code != 5:
                break
            r = n.run_here("push")
            no_traceback(r.out, r.err)
            code = r.code
        codes.append(code)
    assert remote_job_ids(site) == [job_id]
    winner = str(git(site.remote, "show", f"{branch_tip(site)}:posts/k.md"))
    for n, c, code in zip(nodes, contents, codes, strict=True):
        state = n.call("status", "--json", job_id).json()
        if article(c) == winner:
            assert code == 0 and state["state"] == "PUBLISHED", (code, state)
        else:
            assert code == 3, (code, state)
            assert state["state"] == "REVIEW" and state["failure_code"] == "key_reused", state
    state = remote_state(site, job_id)
    assert state is not None and state["state"] == "PUBLISHED"


# -- every crash point, on the node that delivers and on the one that takes over -------------

ATOMIC_POINTS = ["delivery.fetched", "delivery.claimed", "delivery.pushing-recorded",
                 "delivery.pushed", "delivery.published-recorded", "git.ref-locked:1",
                 "git.ref-locked:2", "git.ref-locked:3", "git.ref-locked:4", "git.ref-locked:5",
                 "git.object-locked:1", "git.object-locked:4"]
IN_ORDER_POINTS = ["shared.pushing-pushed", "shared.content-pushed", "delivery.pushed"]


def delivering_set_up(site: Site, tmp_path: Path) -> tuple[Site, Site, str]:
    """Nodes B and C (clones of the site's origin) and a job prepared on the site, all with
    ``FAST`` retries: made once per test process and copied in, the nodes' origin the site's."""
    def build(template: Site, where: Path) -> tuple[Path, str]:
        template.write_config(FAST)
        for name in ("node-b", "node-c"):
            node(template, where, name, FAST)
        return where, str(prepare(template, "k1", "posts/a.md", article("a"))["job_id"])

    where, job_id = set_up_once(site, "killed-while-delivering", build)
    url = site.git("remote", "get-url", "origin").strip()
    nodes = []
    for name in ("node-b", "node-c"):
        path = tmp_path / name
        if where != tmp_path:  # else made in place (the user's configuration may shape it)
            shutil.copytree(where / name, path, symlinks=True)
            site.repos.append(path)
        other = Site(path, site.remote, site.env)
        other.git("remote", "set-url", "origin", url)
        other.git("update-index", "-q", "--refresh")  # the copies' inodes are new
        nodes.append(other)
    return nodes[0], nodes[1], job_id


@pytest.mark.slow
@pytest.mark.parametrize(("atomic", "point"),
                         [(True, p) for p in ATOMIC_POINTS] +
                         [(False, p) for p in IN_ORDER_POINTS])
def test_killed_while_delivering_and_again_while_taking_over(
        site: Site, daemon: GitDaemon, tmp_path: Path, atomic: bool, point: str) -> None:
    """Node A is SIGKILLed at a crash point of its delivery; node B, taking the job over,
    is SIGKILLed at the same point; node C takes it over from B and finishes. Then A and B
    come back. The job is on the branch once, every node says PUBLISHED, the remote's job
    ref agrees, every command exits without a traceback."""
    b, c, job_id = delivering_set_up(site, tmp_path)
    if not atomic:
        git(site.remote, "config", "receive.advertiseAtomic", "false")
    for n, command in ((site, "push"), (b, "reconcile")):
        r = n.run(command, env={"GITPUB_CRASH_AT": point})
        no_traceback(r.out, r.err)
        assert r.code in (-signal.SIGKILL, 0), (n.path.name, r.code, r.out + r.err)
    for n in (c, site, b, c):
        r = n.run_here("reconcile")
        no_traceback(r.out, r.err)
        assert r.code == 0, (n.path.name, r.out + r.err)
    assert_store_agrees(site, [job_id])
    for n in (site, b, c):
        assert n.call("status", "--json", job_id).json()["state"] == "PUBLISHED", n.path.name


@pytest.mark.slow
@pytest.mark.parametrize("point", ["delivery.claimed", "delivery.pushing-recorded",
                                   "shared.pushing-pushed"])
def test_frozen_past_its_lease_without_atomic_push(site: Site, daemon: GitDaemon,
                                                   tmp_path: Path, point: str,
                                                   clock: Clock) -> None:
    """On a server without atomic push, node A (another host) is frozen (SIGSTOP) past its
    lease at a point of its in-order delivery; node C takes the job over and publishes it.
    Resumed, A's late writes — the PUSHING state, the content, PUBLISHED — are each refused
    or harmless: the job is on the branch once, and A ends agreeing with the remote."""
    git(site.remote, "config", "receive.advertiseAtomic", "false")
    site.write_config(FAST + "lease_seconds: 2\n")
    job_id = str(prepare(site, "k1", "posts/a.md", article("a"))["job_id"])
    c = node(site, tmp_path, "node-c", FAST + "lease_seconds: 2\n")
    a = spawn(site, "push", env={**elsewhere(tmp_path, "host-a", clock=clock),
                                 "GITPUB_PAUSE_AT": point})
    try:
        wait_stopped(a.pid)
        clock.advance(2.5)  # A's lease runs out while it is frozen
        r = c.run_here("reconcile")
        no_traceback(r.out, r.err)
        assert r.code == 0 and "taken over" in r.err, r.out + r.err
        assert_store_agrees(site, [job_id])
        tip = branch_tip(site)
        taken = remote_state(site, job_id)
    finally:
        os.kill(a.pid, signal.SIGCONT)
    out, err = a.communicate(timeout=120)
    no_traceback(out.decode(), err.decode())
    assert a.returncode in (0, 5), out + err
    assert branch_tip(site) == tip, "A's late content push landed nothing"
    assert remote_state(site, job_id) == taken, "A never overwrote C's state"
    r = site.run("push", env=elsewhere(tmp_path, "host-a", clock=clock))
    assert r.code == 0, r.out + r.err
    assert site.call("status", "--json", job_id).json()["state"] == "PUBLISHED"
    assert_store_agrees(site, [job_id])


# -- any clone, any job ------------------------------------------------------------------------

@pytest.mark.slow
def test_a_clone_that_never_saw_the_job(site: Site, daemon: GitDaemon, tmp_path: Path) -> None:
    """``status``, ``log`` (by id or unique prefix) on a clone that never had the job read the
    remote's job store; an id nobody has is a usage error; a remote that does not answer is
    said so, with a hint — never a traceback, and nothing is adopted by looking."""
    job_id = str(prepare(site, "k1", "posts/a.md", article("a"))["job_id"])
    assert site.run_here("push").code == 0
    c = node(site, tmp_path, "node-c")
    for args in (("status", "--json", job_id), ("status", "--json", job_id[:8]),
                 ("log", "--json", job_id), ("log", job_id[:13])):
        r = c.run_here(*args)
        no_traceback(r.out, r.err)
        assert r.code == 0, (args, r.out + r.err)
        if "--json" in args:
            assert r.json()["job_id"] == job_id
    events = c.call("log", "--json", job_id).json()["events"]
    assert [e["to"] for e in events][-1] == "PUBLISHED", events
    assert c.git("for-each-ref", JOBS).strip() == "", "looking adopts nothing"
    r = c.run_here("status", "0" * 8 + job_id[8:])
    no_traceback(r.out, r.err)
    assert r.code == 2 and "neither here nor on the remote" in r.err, r.out + r.err
    git(site.remote, "update-ref", f"{JOBS}{job_id[:4]}-squat", f"{JOBS}{job_id}")
    r = c.run_here("status", job_id[:4])  # a hostile ref sharing the prefix
    no_traceback(r.out, r.err)
    assert r.code == 2 and "ambiguous" in r.err and "hint:" in r.err, r.out + r.err
    git(site.remote, "update-ref", "-d", f"{JOBS}{job_id[:4]}-squat")
    daemon.stop()
    r = c.run_here("log", job_id)
    no_traceback(r.out, r.err)
    assert r.code in (2, 5) and "hint:" in r.err, r.out + r.err


# -- channel claims another clone damaged ----------------------------------------------------

@pytest.mark.parametrize("kind", ["blob", "tree", "commit"])
def test_a_channel_claim_squatted_by_another_clone_is_never_ours(site: Site, daemon: GitDaemon,
                                                                 kind: str) -> None:
    """Another clone put something at an intent's claim ref on the remote first — a blob, a
    tree, a commit of its own: the claim is never read as ours (no send), whatever it is."""
    from gitpub.channels.claim import Claimed, Claims, claim_ref
    from gitpub.channels.model import ChannelRecord, Status
    from gitpub.git.remote import Remote
    from gitpub.git.repo import Repository

    ref = claim_ref("k-squat")
    if kind == "blob":
        sha = site.git("hash-object", "-w", "--stdin", input=b"mine\n").strip()
    elif kind == "tree":
        sha = site.git("rev-parse", "HEAD^{tree}").strip()
    else:
        sha = site.git("commit-tree", EMPTY_TREE, "-m", "a claim of my own").strip()
    push_raw(site, sha, ref)
    site.git("update-ref", "-d", ref, check=False)
    record = ChannelRecord(channel="social", account="news", kind="command", required=True,
                           after="publish", operation="create", intent_key="k-squat",
                           payload_sha256="0" * 64, status=Status.PENDING,
                           created_at=1_800_000_000.0, updated_at=1_800_000_000.0)
    with Repository.discover(site.path) as repo:
        verdict = Claims(repo, Remote(repo, "origin", "main"), "host:1:1").claim("job", record)
    assert verdict.claimed in (Claimed.THEIRS, Claimed.REFUSED), verdict
    assert git(site.remote, "rev-parse", ref).strip() == sha


def test_a_job_waiting_for_a_person_is_not_taken_over(site: Site, daemon: GitDaemon,
                                                      tmp_path: Path) -> None:
    """A's job is in CONFLICT (its record on the remote, no lease: it rests, waiting for a
    person). It is nobody's dead work: another node's cron ``reconcile`` does not take it over
    (no "taken over" event, no exit 4 on every node for another node's job) — any clone still
    shows it and a person resolves it anywhere."""
    b = node(site, tmp_path, "node-b")
    c = node(site, tmp_path, "node-c")
    job_id = conflicted_by(site, b)
    conflict = remote_state(site, job_id)
    r = c.run_here("reconcile")
    no_traceback(r.out, r.err)
    assert r.code == 0, r.out + r.err
    assert "taken over" not in r.out + r.err
    assert c.git("for-each-ref", JOBS).strip() == ""
    assert remote_state(site, job_id) == conflict
    assert c.call("status", "--json", job_id).json()["state"] == "CONFLICT"


def test_a_ref_named_like_the_job_store_itself(site: Site, daemon: GitDaemon,
                                               tmp_path: Path) -> None:
    """A careless clone pushes a commit to ``refs/pub/jobs`` (a typo: no job id), so the
    remote can hold no ``refs/pub/jobs/<id>`` any more. Delivery cannot work; it says so in
    the server's words (a transient: RETRY_WAIT, bounded) — not "lost to another node" run
    after run — and works again once the ref is gone."""
    careless = node(site, tmp_path, "careless")
    careless.git("push", "-q", "origin", "HEAD:refs/pub/jobs")
    job_id = str(prepare(site, "k1", "posts/a.md", article("a"))["job_id"])
    r = site.run_here("push")
    no_traceback(r.out, r.err)
    assert r.code == 5, r.out + r.err
    assert "another node" not in r.out + r.err
    status = site.call("status", "--json", job_id).json()
    assert status["state"] == "RETRY_WAIT" and "refs/pub/jobs" in status["failure_detail"]
    git(site.remote, "update-ref", "-d", "refs/pub/jobs")
    r = site.run_here("push", job_id)
    assert r.code == 0, r.out + r.err
    assert_store_agrees(site, [job_id])


@pytest.mark.slow
def test_a_huge_remote_record_is_taken_over_and_published(site: Site, daemon: GitDaemon,
                                                          tmp_path: Path) -> None:
    """Another clone left a 4 MB record (a failure detail of that size): another node still
    reads it, takes the job over and publishes it, in bounded time."""
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    git(site.path, "update-ref", "-d", JOBS + job_id)
    hostile = node(site, tmp_path, "hostile")
    forge_state(hostile, job_id, lambda r: {**r, "lease": None,
                                             "failure_detail": "x" * 4_000_000})
    c = node(site, tmp_path, "node-c")
    started = time.monotonic()
    r = c.run("reconcile", timeout=120)
    no_traceback(r.out, r.err)
    assert r.code == 0, r.out[-2000:] + r.err[-2000:]
    assert time.monotonic() - started < 60
    assert_store_agrees(site, [job_id])


# -- what a take-over trusts -------------------------------------------------------------------

def forge_artifact(site: Site, job_id: str, path: str, text: bytes) -> str:
    """A state commit on top of the remote's whose artifact ``path`` is ``text``, with a
    manifest and record that agree with it (what a clone allowed to push ``refs/pub/*`` can
    write: the record's targets name ``path``), no lease; forced onto the remote's job ref."""
    from gitpub.core.manifest import Manifest

    base = remote_sha(site, job_id)
    assert base is not None
    site.git("fetch", "-q", str(site.remote), f"+{JOBS}{job_id}:refs/hostile/{job_id}")
    manifest = Manifest.build([(path, 0o100644, text)])
    record = json.loads(site.git("show", f"{base}:job.json"))
    record.update(lease=None, manifest_sha256=manifest.sha256(),
                  targets=[{**record["targets"][0], "path": path}])
    index = {"GIT_INDEX_FILE": str(site.path / ".git" / "hostile-index")}
    env = {**os.environ, **index}

    def plumb(*args: str, data: bytes | None = None) -> str:
        return subprocess.run(["git", *args], cwd=site.path, env=env, input=data,
                              capture_output=True, check=True).stdout.decode().strip()

    plumb("read-tree", base)
    for name, data in ((f"artifacts/{path}", text), ("manifest", manifest.serialize()),
                       ("job.json", (json.dumps(record, indent=1) + "\n").encode())):
        blob = plumb("hash-object", "-w", "--stdin", data=data)
        plumb("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}")
    tree = plumb("write-tree")
    commit = site.git("commit-tree", tree, "-p", base, "-m", "forged artifacts").strip()
    push_raw(site, commit, JOBS + job_id)
    return commit


@pytest.mark.slow
def test_forged_artifacts_are_not_published_by_a_take_over(site: Site, daemon: GitDaemon,
                                                           tmp_path: Path) -> None:
    """A clone that may push ``refs/pub/*`` (but not the branch: its protection asks for a
    review) rewrites a dead node's job: another article, with a secret, under a matching
    manifest. A take-over must not publish what this node's gates would refuse."""
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    git(site.path, "update-ref", "-d", JOBS + job_id)
    hostile = node(site, tmp_path, "hostile")
    forge_artifact(hostile, job_id, "posts/a.md",
                   f"# Post a\n\nDeploy with token {SECRET}.\n".encode())
    c = node(site, tmp_path, "node-c")
    r = c.run("reconcile")
    published = git(site.remote, "log", "-p", "main")
    assert SECRET not in published, "a take-over published forged content with a secret"
    assert "do not pass this node's gates" in r.err, r.out + r.err
    shown = c.call("status", job_id, "--json").json()
    assert shown["state"] == "REVIEW" and shown["failure_code"] == "secret_in_content", shown


def test_forged_targets_outside_the_write_scope_are_not_taken_over(
        site: Site, daemon: GitDaemon, tmp_path: Path) -> None:
    """The same forger rewrites the dead node's job to write ``src/app.py`` (outside
    ``publish``), record and manifest agreeing: a take-over leaves it for a person and the
    branch never gets the file."""
    job_id = claimed_and_killed(site, "k1", "posts/a.md", article("a"))
    git(site.path, "update-ref", "-d", JOBS + job_id)
    hostile = node(site, tmp_path, "hostile")
    forge_artifact(hostile, job_id, "src/app.py", b"print('owned')\n")
    c = node(site, tmp_path, "node-c")
    r = c.run("reconcile")
    assert "src/app.py" not in git(site.remote, "ls-tree", "-r", "--name-only", "main")
    shown = c.call("status", job_id, "--json").json()
    assert shown["state"] == "REVIEW" and "src/app.py" in shown["failure_detail"], (
        shown, r.err)


def test_abandon_of_a_job_another_node_is_delivering(site: Site, daemon: GitDaemon,
                                                     tmp_path: Path) -> None:
    """Node A (another host) delivers the job right now (frozen after its claim, its lease
    live); a person on B abandons it: refused, exit 5, nothing changed anywhere; A publishes."""
    job_id = str(prepare(site, "k1", "posts/a.md", article("a"))["job_id"])
    b = node(site, tmp_path, "node-b")
    a = spawn(site, "push", env={**elsewhere(tmp_path, "host-a"),
                                 "GITPUB_PAUSE_AT": "delivery.claimed"})
    try:
        wait_stopped(a.pid)
        claim = remote_state(site, job_id)
        r = b.run_here("resolve", job_id, "--abandon")
        no_traceback(r.out, r.err)
        assert r.code == 5 and "hint:" in r.err, r.out + r.err
        assert remote_state(site, job_id) == claim
    finally:
        os.kill(a.pid, signal.SIGCONT)
    out, err = a.communicate(timeout=120)
    assert a.returncode == 0, out + err
    assert_store_agrees(site, [job_id])


# -- chaos: three nodes, random kills, shared keys -------------------------------------------

CHAOS_POINTS = ["delivery.fetched", "delivery.claimed", "delivery.pushing-recorded",
                "delivery.pushed", "delivery.published-recorded", "delivery.retry-recorded",
                "git.ref-locked", "git.object-locked", None]


@pytest.mark.slow
@pytest.mark.parametrize("seed", seeds("three-nodes-shared-keys", 1, 3))
def test_three_nodes_random_kills_and_shared_keys(site: Site, daemon: GitDaemon,
                                                  tmp_path: Path, seed: int,
                                                  clock: Clock) -> None:
    """Three nodes, each with jobs of its own and one key all three were given (same
    content), run ``push`` and ``reconcile`` concurrently for three rounds, each process
    SIGKILLed at a crash point drawn from a seeded generator (or not at all). Then every
    node reconciles until nothing is left. Every job once on the branch, the remote's job
    refs agreeing with the trailers, every node agreeing, no traceback anywhere."""
    import random

    rng = random.Random(seed)
    site.write_config(FAST + "lease_seconds: 3\n")
    nodes = [site] + [node(site, tmp_path, f"node-{x}", FAST + "lease_seconds: 3\n")
                      for x in "bc"]
    expected = []
    for n, writer in enumerate(nodes):
        for i in range(2):
            expected.append(str(prepare(writer, f"n{n}-{i}", f"posts/n{n}/{i}.md",
                                        article(f"{n}-{i}"))["job_id"]))
        shared = str(prepare(writer, "everyone", "posts/shared.md", article("s"))["job_id"])
    expected.append(shared)
    for _ in range(3):
        procs = []
        for w in nodes:
            point = rng.choice(CHAOS_POINTS)
            env = {} if point is None else {"GITPUB_CRASH_AT": f"{point}:{rng.randint(1, 4)}"}
            procs.append(spawn(w, rng.choice(["push", "reconcile"]), env={**clock.env(w), **env}))
        for p in procs:
            out, err = p.communicate(timeout=300)
            no_traceback(out.decode(), err.decode())
            assert p.returncode in (0, 5, -signal.SIGKILL), (out, err)
    clock.advance(3.1)  # every lease a killed process left has run out
    for _ in range(6):
        codes = [w.run("reconcile", env=clock.env(w), timeout=300).code for w in nodes]
        if codes == [0, 0, 0] and sorted(remote_job_ids(site)) == sorted(expected):
            break
    assert_store_agrees(site, expected)
    for w in nodes:
        for job_id in expected:
            state = w.call("status", "--json", job_id).json()["state"]
            assert state == "PUBLISHED", (w.path.name, job_id, state)


def test_reconcile_with_the_remote_down(site: Site, daemon: GitDaemon, tmp_path: Path) -> None:
    """The remote does not answer: reconcile on a node (with and without jobs of its own)
    says so and exits 5 (not confirmed: run again later), never a traceback."""
    c = node(site, tmp_path, "node-c")
    prepare(site, "k1", "posts/a.md", article("a"))
    daemon.stop()
    for n in (c, site):
        r = n.run_here("reconcile")
        no_traceback(r.out, r.err)
        assert r.code == 5, (n.path.name, r.out + r.err)
        assert "negotiation-tip" not in r.out + r.err
        assert "not confirmed" in r.out + r.err, r.out + r.err
