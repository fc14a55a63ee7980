"""The remote as the shared job store: several clones of one git daemon remote as nodes.

Every fault is injected for real: another clone is the racing writer, processes are SIGKILLed
or SIGSTOPped at named crash points, the server lacks atomic push. At the end of each test the
branch has every accepted job exactly once, the remote's job refs agree with the trailers, and
every repository passes ``git fsck --strict`` (the fixture checks).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from conftest import Clock, Site, git, seeds, spawn, wait_stopped
from netfaults import GitDaemon
from test_delivery import article, prepare, remote_job_ids

JOBS = "refs/pub/jobs/"
FAST = "retry: {max_attempts: 50, backoff_base: 0.01, backoff_max: 0.02}\n"



def conflicted_by(site: Site, other: Site) -> str:
    """A job of ``site`` that ends in CONFLICT because ``other`` pushed its own edit of the
    same article first; the CONFLICT is in the remote store. Its job id."""
    job_id = str(prepare(site, "k1", "posts/welcome.md", "# Welcome\n\nMine.\n")["job_id"])
    (other.path / "posts/welcome.md").write_text("# Welcome\n\nTheirs.\n")
    other.git("commit", "-qam", "their edit")
    other.git("push", "-q", "origin", "HEAD:main")
    assert site.call("push").code == 4
    conflict = remote_state(site, job_id)
    assert conflict is not None and conflict["state"] == "CONFLICT"
    return job_id


def node(site: Site, tmp_path: Path, name: str, extra: str = "") -> Site:
    """Another clone of the same remote (same URL as the site's origin): another node. One
    served by ``git daemon`` is cloned from its path over git's pack protocol (``--no-local``:
    a pack received, as over the network) and given the site's URL: the same clone, without
    the daemon's two process starts (~80 ms a clone here)."""
    path = tmp_path / name
    url = site.git("remote", "get-url", "origin").strip()
    if url == str(site.remote):
        git(tmp_path, "clone", "-q", url, str(path))
    else:
        git(tmp_path, "clone", "-q", "--no-local", str(site.remote), str(path))
        git(path, "remote", "set-url", "origin", url)
    site.repos.append(path)
    other = Site(path, site.remote, site.env)
    other.write_config(extra)
    return other


def remote_state(site: Site, job_id: str) -> dict[str, object] | None:
    """The job's record as the remote's job ref says (None: no such ref)."""
    sha = git(site.remote, "rev-parse", "-q", "--verify", JOBS + job_id, check=False).strip()
    if not sha:
        return None
    data: dict[str, object] = json.loads(git(site.remote, "show", f"{sha}:job.json"))
    return data


def branch_tip(site: Site) -> str:
    return git(site.remote, "rev-parse", "main").strip()


def assert_store_agrees(site: Site, job_ids: list[str]) -> None:
    """Each job exactly once on the branch, and its remote job ref PUBLISHED at that commit."""
    ids = remote_job_ids(site)
    assert sorted(ids) == sorted(job_ids), ids
    for job_id in job_ids:
        state = remote_state(site, job_id)
        assert state is not None and state["state"] == "PUBLISHED", state
        commit = str(state["remote_commit"])
        trailers = git(site.remote, "log", "-1", "--format=%(trailers:key=Blog-Job-Id,"
                       "valueonly)", commit).strip()
        assert trailers == job_id
        assert git(site.remote, "merge-base", "--is-ancestor", commit, "main",
                   check=False) == ""




# -- the atomic delivery ---------------------------------------------------------------------

def test_state_travels_with_the_content_in_one_atomic_push(site: Site, daemon: GitDaemon,
                                                           tmp_path: Path) -> None:
    data = prepare(site, "k1", "posts/a.md", article("a"))
    job_id = str(data["job_id"])
    trace = tmp_path / "packets"
    r = site.run_here("push", "--json", env={"GIT_TRACE_PACKET": str(trace)})
    assert r.code == 0, r.out + r.err
    assert_store_agrees(site, [job_id])
    local = site.git("rev-parse", JOBS + job_id).strip()
    assert git(site.remote, "rev-parse", JOBS + job_id).strip() == local, "same state commit"
    packets = trace.read_text("utf-8", "replace")
    # the fetch asks for the branch and the job store only (protocol v2 ref prefixes)
    prefixes = {line.split("ref-prefix ", 1)[1].strip() for line in packets.splitlines()
                if "fetch> ref-prefix " in line}
    # (git expands the branch's full name by its rev-parse rules: refs/tags/refs/heads/main…)
    assert {p for p in prefixes if not p.startswith("refs/") or "refs/heads/main" not in p
            } == {"refs/pub/"}, prefixes
    # one push carries the branch and the PUBLISHED state, with the atomic capability
    pushes = [line for line in packets.splitlines()
              if "refs/heads/main" in line and "push>" in line and "atomic" in line]
    assert pushes, "the delivery push is atomic"
    history = site.call("log", "--json", job_id)
    assert history.code == 0


@pytest.mark.slow
def test_racing_claim_refuses_the_whole_atomic_push(site: Site, daemon: GitDaemon,
                                                    tmp_path: Path, clock: Clock) -> None:
    """Node A is frozen (SIGSTOP) after recording PUSHING, past its lease; node B takes the
    job over by compare-and-swap on the remote and dies (SIGKILL) right after its claim.
    Resumed, A's atomic push would fast-forward the branch, but its job ref's lease no
    longer holds: the server applies none of it. A stops (fenced); a take-over publishes once."""
    site.write_config(FAST + "lease_seconds: 2\n")
    data = prepare(site, "k1", "posts/a.md", article("a"))
    job_id = str(data["job_id"])
    b = node(site, tmp_path, "node-b", FAST + "lease_seconds: 2\n")
    before = branch_tip(site)
    a = spawn(site, "push", env={**clock.env(site),
                                 "GITPUB_PAUSE_AT": "delivery.pushing-recorded"})
    try:
        wait_stopped(a.pid)
        claim = remote_state(site, job_id)
        assert claim is not None and claim["state"] == "LOCAL_COMMITTED", "A claimed it"
        clock.advance(2.3)  # A's lease runs out while it is frozen
        r = b.run("reconcile", env={**clock.env(b), "GITPUB_CRASH_AT": "delivery.claimed"})
        assert r.code == -signal.SIGKILL, r.out + r.err
        taken = remote_state(site, job_id)
        assert taken is not None and taken != claim
    finally:
        os.kill(a.pid, signal.SIGCONT)
    out, err = a.communicate(timeout=120)
    assert branch_tip(site) == before, "A's atomic push landed nothing"
    assert remote_job_ids(site) == []
    assert remote_state(site, job_id) == taken, "A never overwrote B's claim"
    assert b"this node leaves it" in err + out, (out, err)
    # B died on this host: its claim is free at once; A's clone takes it over and publishes
    r = site.run_here("reconcile")
    assert r.code == 0, r.out + r.err
    assert_store_agrees(site, [job_id])
    events = site.call("log", "--json", job_id).json()
    reasons = " | ".join(str(e["reason"]) for e in events["events"])
    assert "taken over from" in reasons


# -- one key, one job across clones ----------------------------------------------------------

def test_same_key_same_content_on_two_clones_is_one_job(site: Site, daemon: GitDaemon,
                                                        tmp_path: Path) -> None:
    b = node(site, tmp_path, "node-b")
    data = prepare(site, "shared-key", "posts/a.md", article("a"))
    assert prepare(b, "shared-key", "posts/a.md", article("a"))["job_id"] == data["job_id"]
    assert site.call("push").code == 0
    tip = branch_tip(site)
    r = b.call("push", "--json")
    assert r.code == 0, r.out + r.err
    (job,) = r.json()["jobs"]
    assert job["state"] == "PUBLISHED" and job["job_id"] == data["job_id"]
    assert branch_tip(site) == tip, "the second clone pushed nothing"
    assert_store_agrees(site, [str(data["job_id"])])
    superseded = b.git("for-each-ref", "--format=%(refname)", "refs/pub/superseded/")
    assert superseded.strip(), "B's own state is kept for inspection"


def test_same_key_other_content_on_another_clone_exits_3(site: Site, daemon: GitDaemon,
                                                         tmp_path: Path) -> None:
    b = node(site, tmp_path, "node-b")
    data = prepare(site, "shared-key", "posts/a.md", article("a"))
    prepare(b, "shared-key", "posts/a.md", article("other"))
    assert site.call("push").code == 0
    tip = branch_tip(site)
    r = b.call("push", "--json")
    assert r.code == 3, r.out + r.err
    (job,) = r.json()["jobs"]
    assert job["state"] == "REVIEW" and job["failure_code"] == "key_reused"
    assert branch_tip(site) == tip
    assert_store_agrees(site, [str(data["job_id"])])


@pytest.mark.slow
def test_same_key_on_two_racing_clones(site: Site, daemon: GitDaemon, tmp_path: Path) -> None:
    """Both nodes deliver the same key at once: the claim's compare-and-swap picks one; the
    other adopts its record. One publication."""
    site.write_config(FAST)
    b = node(site, tmp_path, "node-b", FAST)
    data = prepare(site, "race-key", "posts/a.md", article("a"))
    prepare(b, "race-key", "posts/a.md", article("a"))
    procs = [spawn(n, "push", "--json") for n in (site, b)]
    results = [p.communicate(timeout=180) for p in procs]
    for n in (site, b):  # a loser fenced for its run finishes on the next one
        r = n.run_here("push")
        assert r.code == 0, (results, r.out, r.err)
        assert n.call("status", "--json", str(data["job_id"])).json()["state"] == "PUBLISHED"
    assert_store_agrees(site, [str(data["job_id"])])


# -- take-over -------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("point", ["delivery.claimed", "delivery.pushing-recorded"])
def test_a_dead_nodes_job_is_taken_over_by_another_clone(site: Site, daemon: GitDaemon,
                                                         tmp_path: Path, point: str) -> None:
    """A claims the job and is SIGKILLed; B, a clone that never saw the job, takes it over in
    `reconcile`: probe first, then claim by compare-and-swap, then deliver once."""
    data = prepare(site, "k1", "posts/a.md", article("a"))
    job_id = str(data["job_id"])
    r = site.run("push", env={"GITPUB_CRASH_AT": point})
    assert r.code == -signal.SIGKILL, r.out + r.err
    assert remote_state(site, job_id) is not None and remote_job_ids(site) == []
    b = node(site, tmp_path, "node-b")
    r = b.run_here("status", "--json", job_id)  # any clone sees any job
    assert r.code == 0 and json.loads(r.out)["job_id"] == job_id, r.out + r.err
    r = b.run_here("reconcile")
    assert r.code == 0, r.out + r.err
    assert "taken over from" in r.err + r.out
    assert_store_agrees(site, [job_id])
    log = b.call("log", "--json", job_id).json()
    assert any("taken over from" in str(e["reason"]) for e in log["events"])
    tip = branch_tip(site)
    r = site.run_here("push", "--json")  # A's clone comes back: adopts, pushes nothing
    assert r.code == 0, r.out + r.err
    assert branch_tip(site) == tip
    assert site.call("status", "--json", job_id).json()["state"] == "PUBLISHED"


def test_a_live_lease_is_left_alone(site: Site, daemon: GitDaemon, tmp_path: Path) -> None:
    """A frozen node whose lease still runs holds its job: another clone does not touch it."""
    site.write_config("lease_seconds: 600\n")
    data = prepare(site, "k1", "posts/a.md", article("a"))
    job_id = str(data["job_id"])
    a = spawn(site, "push", env={"GITPUB_PAUSE_AT": "delivery.claimed"})
    try:
        wait_stopped(a.pid)
        claim = remote_state(site, job_id)
        b = node(site, tmp_path, "node-b")
        r = b.run_here("reconcile")
        assert r.code == 0, r.out + r.err
        assert remote_state(site, job_id) == claim, "B left A's live claim alone"
        assert b.git("for-each-ref", JOBS).strip() == ""
    finally:
        os.kill(a.pid, signal.SIGCONT)
    out, err = a.communicate(timeout=120)
    assert a.returncode == 0, out + err
    assert_store_agrees(site, [job_id])


# -- a server without atomic push ------------------------------------------------------------

@pytest.mark.parametrize("point", [None, "shared.pushing-pushed", "shared.content-pushed"])
def test_without_atomic_push_the_safe_order(site: Site, daemon: GitDaemon,
                                            point: str | None) -> None:
    git(site.remote, "config", "receive.advertiseAtomic", "false")
    data = prepare(site, "k1", "posts/a.md", article("a"))
    job_id = str(data["job_id"])
    if point is not None:
        r = site.run("push", env={"GITPUB_CRASH_AT": point})
        assert r.code == -signal.SIGKILL, r.out + r.err
        pushing = remote_state(site, job_id)
        assert pushing is not None and pushing["state"] == "PUSHING", "claim, PUSHING first"
        assert remote_job_ids(site) == ([job_id] if point == "shared.content-pushed" else [])
    r = site.run_here("push")
    assert r.code == 0, r.out + r.err
    if point != "shared.content-pushed":  # (then the probe finds it: nothing to push)
        assert "does not support atomic pushes" in r.err + r.out
    assert_store_agrees(site, [job_id])


# -- any clone resolves any job --------------------------------------------------------------

def test_another_clone_resolves_a_job_it_never_had(site: Site, daemon: GitDaemon,
                                                   tmp_path: Path) -> None:
    """A's job ends in CONFLICT (its state goes to the remote store); B, which never had the
    job, abandons it; A's clone then adopts the remote's SKIPPED and pushes nothing."""
    b = node(site, tmp_path, "node-b")
    job_id = conflicted_by(site, b)
    r = b.call("resolve", "--json", job_id, "--abandon")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "SKIPPED"
    skipped = remote_state(site, job_id)
    assert skipped is not None and skipped["state"] == "SKIPPED", "shared by compare-and-swap"
    tip = branch_tip(site)
    assert site.call("reconcile").code == 0  # fetches the store: syncs the job A has
    assert site.call("status", "--json", job_id).json()["state"] == "SKIPPED"
    assert branch_tip(site) == tip and remote_job_ids(site) == []


# -- three nodes, random kills ---------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("seed", seeds("three-nodes-random-kills", 1, 3))
def test_three_nodes_with_random_kills_publish_each_job_once(site: Site, daemon: GitDaemon,
                                                             tmp_path: Path, seed: int) -> None:
    """Three clones deliver three jobs each at once; each node's first run is SIGKILLed at a
    delivery crash point drawn from a seeded generator. Reconcile (take-over included) on
    every node until nothing is left: every job on the branch exactly once, the remote's job
    refs agreeing with the trailers."""
    import random

    points = ["delivery.fetched", "delivery.claimed", "delivery.pushing-recorded",
              "delivery.pushed", "delivery.published-recorded"]
    rng = random.Random(seed)
    site.write_config(FAST)
    nodes = [site, node(site, tmp_path, "node-b", FAST), node(site, tmp_path, "node-c", FAST)]
    expected = []
    for n, writer in enumerate(nodes):
        for i in range(3):
            data = prepare(writer, f"n{n}-{i}", f"posts/n{n}/{i}.md", article(f"{n}-{i}"))
            expected.append(str(data["job_id"]))
    kills = {str(w.path): f"{rng.choice(points)}:{rng.randint(1, 3)}" for w in nodes}
    procs = [spawn(w, "push", env={"GITPUB_CRASH_AT": kills[str(w.path)]}) for w in nodes]
    for p in procs:
        p.communicate(timeout=300)
    for _ in range(6):
        codes = [w.run("reconcile", timeout=300).code for w in nodes]
        if not codes[0] and not codes[1] and not codes[2] and \
                sorted(remote_job_ids(site)) == sorted(expected):
            break
    assert_store_agrees(site, expected)


# -- hand commits follow their author's branch -------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("who", ["another clone's reconcile", "the author's own push"])
def test_a_hand_commit_amended_while_its_job_was_claimed_is_never_published_stale(
        site: Site, daemon: GitDaemon, tmp_path: Path, who: str) -> None:
    """Issue 23.5: A's sync claims the job of a hand commit and dies; the person amends the
    commit. Neither another clone's reconcile (the lease gone with A's process) nor A's own
    `git pub push` publishes the pre-amend content; A's next sync publishes the amended one,
    once, and the stale job ends SKIPPED (superseded), saying why."""
    from test_sync import hand_commit

    first = hand_commit(site, "posts/welcome.md", "# Welcome\n\nFirst try.\n")
    r = site.run("sync", env={"GITPUB_CRASH_AT": "delivery.claimed"})
    assert r.code == -signal.SIGKILL, r.out + r.err
    (job_id,) = [ref.removeprefix(JOBS) for ref in git(
        site.remote, "for-each-ref", "--format=%(refname)", JOBS).split()]
    (site.path / "posts/welcome.md").write_text("# Welcome\n\nSecond try.\n")
    site.git("commit", "-q", "-a", "--amend", "-m", "edit welcome, better")
    tip = branch_tip(site)
    if who == "another clone's reconcile":
        b = node(site, tmp_path, "node-b")
        r = b.run_here("reconcile")
        assert "hand commit" in r.out + r.err and job_id[:13] in r.out + r.err, r.out + r.err
    else:
        r = site.run_here("push")
        assert "is no longer among local main's unpushed commits" in r.out + r.err, r.out + r.err
    assert branch_tip(site) == tip, "nothing published: " + r.out + r.err
    assert (remote_state(site, job_id) or {}).get("state") != "PUBLISHED"
    r = site.run_here("sync", "--json")
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "show", "main:posts/welcome.md") == "# Welcome\n\nSecond try.\n"
    out = git(site.remote, "log", "--format=%(trailers:key=Blog-Sync-Id,valueonly)", "main")
    (published,) = [line for line in out.splitlines() if line.strip()]
    assert published != first, "the amended commit, once"
    stale = site.call("status", "--json", job_id).json()
    assert (stale["state"], stale["failure_code"]) == ("SKIPPED", "superseded")
