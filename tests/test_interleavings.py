"""Promises 1, 5 and 6 under random interleavings of prepare, push, reconcile and a rival writer.

A property test drives a few jobs (distinct articles) through random sequences of
``git pub prepare`` / ``push`` / ``reconcile`` run in subprocesses, each one possibly SIGKILLed
at a named crash point (``GITPUB_CRASH_AT``, sometimes ``<point>:<n>`` so the kill lands on a
later job of the same run), mixed with another writer that pushes articles of its own with plain
git. After a final ``reconcile`` and ``push`` without kills, every prepared job must be
PUBLISHED (the articles are disjoint), exactly once on the remote, and no remote change lost.

A deterministic test kills ``push`` at every ``delivery.*`` crash point for one job and checks
that ``reconcile`` + ``push`` publish it exactly once. A last one pins promise 5 down when a
rival's commit with an older committer date lands on top of a push whose reply was lost.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import SEED, Result, Site, git, make_site, rounds
from hypothesis import HealthCheck, Phase, event, example, given, note, seed, settings
from hypothesis import strategies as st
from netfaults import DropReplyProxy, GitDaemon

from gitpub.core.crashpoints import CRASH_POINTS
from gitpub.store.jobs import job_id_for_key

LOCAL_POINTS = [p for p in CRASH_POINTS if p.startswith(("prepare.", "commit."))]
DELIVERY_POINTS = [p for p in CRASH_POINTS if p.startswith("delivery.")]

#: RETRY_WAIT is due at once; a draft command (so the draft crash points are on the path) and a
#: dedup judge that always keeps (so the re-check of new remote articles runs, and its points).
CONFIG = (
    "retry: {max_attempts: 50, backoff_base: 0.01, backoff_max: 0.02}\n"
    "draft: 'mkdir -p \"$(dirname \"$GITPUB_OUTPUT/$GITPUB_TARGETS\")\" && "
    "cp \"$GITPUB_SOURCE\" \"$GITPUB_OUTPUT/$GITPUB_TARGETS\"'\n"
    "judge: 'cat > /dev/null; echo KEEP'\n"
)
KILLED = -9
#: Exit codes a run may end with in these scenarios: done, not confirmed yet, SIGKILLed.
#: 1 (unexpected error), 3 (key reused) and 4 (REVIEW/CONFLICT) are all bugs here.
OK_CODES = {0, 5, KILLED}


def article(name: str) -> str:
    return f"---\ntitle: Post {name}\n---\n\n# Post {name}\n\nText of {name}.\n"


def job_key(i: int) -> str:
    return f"ilv-job-{i}"


def job_path(i: int) -> str:
    return f"posts/job-{i}.md"


def remote_job_ids(remote: Path) -> list[str]:
    out = git(remote, "log", "--format=%(trailers:key=Blog-Job-Id,valueonly)", "main")
    return [line.strip() for line in out.splitlines() if line.strip()]


def fsck(repo: Path) -> str | None:
    proc = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=repo,
                          capture_output=True)
    return None if proc.returncode == 0 else proc.stderr.decode("utf-8", "replace")


def commit_now(repo: Path, message: str, days_ago: float = 0) -> None:
    """Commit with the real clock, as gitpub's own commits are (the hermetic environment pins
    dates to 2026-01-01; see ``test_probe_finds_a_push_below_an_older_dated_commit``)."""
    now = f"@{int(time.time() - days_ago * 86400)} +0000"
    subprocess.run(["git", "commit", "-q", "-m", message], cwd=repo, check=True,
                   env={**os.environ, "GIT_AUTHOR_DATE": now, "GIT_COMMITTER_DATE": now})


def crash_env(spec: str | None) -> dict[str, str] | None:
    return None if spec is None else {"GITPUB_CRASH_AT": spec}


def finish(site: Site, log: list[str]) -> Result:
    """The operator's recovery: reconcile, then push (again while delivery is unconfirmed)."""
    r = site.run("reconcile")
    log.append(f"final reconcile -> {r.code}")
    assert r.code in (0, 5), f"final reconcile exit {r.code}\n{r.out}{r.err}\n{render(log)}"
    for _ in range(4):
        r = site.run("push")
        log.append(f"final push -> {r.code}")
        if r.code != 5:
            break
    assert r.code == 0, f"final push exit {r.code}\n{r.out}{r.err}\n{render(log)}"
    return r


def render(log: list[str]) -> str:
    return "actions:\n  " + "\n  ".join(log)


# -- the property ----------------------------------------------------------------------------

Action = tuple[str, int | None, str | None]  # (kind, job index, crash spec)


def crash_specs(points: list[str]) -> st.SearchStrategy[str | None]:
    """No crash (a third of the time), else a point, killed at its first, second or third
    passage (a later job of the same run)."""
    spec = st.tuples(st.sampled_from(points), st.sampled_from([1, 1, 2, 3])).map(
        lambda t: t[0] if t[1] == 1 else f"{t[0]}:{t[1]}")
    return st.one_of(st.none(), spec, spec)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[int, list[Action]]:
    """2 or 3 jobs, each prepared at least once at a random place, among at most 10 actions."""
    n_jobs = draw(st.integers(2, 3))
    action = st.one_of(
        st.tuples(st.just("push"), st.none(), crash_specs(DELIVERY_POINTS)),
        st.tuples(st.just("reconcile"), st.none(),
                  crash_specs(LOCAL_POINTS + DELIVERY_POINTS)),
        st.tuples(st.just("other"), st.none(), st.none()),
        st.tuples(st.just("prepare"), st.integers(0, n_jobs - 1), crash_specs(LOCAL_POINTS)),
    )
    actions: list[Action] = draw(st.lists(action, min_size=2, max_size=10 - n_jobs))
    for i in range(n_jobs):
        at = draw(st.integers(0, len(actions)))
        actions.insert(at, ("prepare", i, draw(crash_specs(LOCAL_POINTS))))
    return n_jobs, actions


@dataclass
class World:
    site: Site
    other: Path
    prepared: set[int] = field(default_factory=set)
    theirs: dict[str, str] = field(default_factory=dict)  # path -> content the rival pushed
    log: list[str] = field(default_factory=list)

    def do(self, kind: str, i: int | None, spec: str | None) -> None:
        label = f"{kind}" + (f"(job {i})" if i is not None else "") + (
            f" crash at {spec}" if spec else "")
        if kind == "other":
            name = f"other-{len(self.theirs)}"
            path = f"posts/{name}.md"
            git(self.other, "pull", "-q", "--ff-only", "origin", "main")
            (self.other / path).write_text(article(name))
            git(self.other, "add", path)
            commit_now(self.other, f"Add {name} by hand")
            git(self.other, "push", "-q", "origin", "HEAD:main")
            self.theirs[path] = article(name)
            self.log.append(f"{label} {path}")
            return
        if kind == "prepare":
            assert i is not None
            r = self.site.run("prepare", "--key", job_key(i), "--to", job_path(i), "-",
                              input=article(f"job-{i}"), env=crash_env(spec))
            self.prepared.add(i)  # the job exists from the first crash point on
        else:
            r = self.site.run(kind, env=crash_env(spec))
        self.log.append(f"{label} -> {r.code}")
        if r.code == KILLED and spec:  # --hypothesis-show-statistics: which kills landed
            event(f"killed {kind} at {spec.partition(':')[0]}")
        assert r.code in OK_CODES, f"{label}: exit {r.code}\n{r.out}{r.err}\n{render(self.log)}"


#: Shrinking a failure re-runs scenarios for minutes; CI reports the unshrunk sequence (it is in
#: the assertion message). Set INTERLEAVINGS_SHRINK=1 locally for a minimal one.
PHASES = (Phase.explicit, Phase.generate) + (
    (Phase.shrink,) if os.environ.get("INTERLEAVINGS_SHRINK") else ())


@pytest.mark.slow
#: Three scenarios per run (about 3 s each) from the run's seed, twelve with GITPUB_TEST_LONG=1;
#: the explicit examples below run every time.
@settings(max_examples=rounds(3, 12), deadline=None, database=None,
          phases=PHASES, print_blob=False,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@seed(SEED)
@given(scenario=scenarios())
@example(scenario=(3, [  # a push killed after its second job landed; the rival moves on
    ("prepare", 0, None), ("prepare", 1, None), ("prepare", 2, None),
    ("push", None, "delivery.pushed:2"), ("other", None, None),
    ("reconcile", None, "delivery.pushing-recorded"), ("push", None, "delivery.fetched")]))
@example(scenario=(2, [  # kills inside the local commit, the re-check and a later reconcile
    ("prepare", 0, "commit.objects-written"), ("other", None, None),
    ("push", None, "delivery.recheck-ran"), ("prepare", 1, "prepare.draft-ran"),
    ("other", None, None), ("reconcile", None, "delivery.pushing-recorded:2")]))
def test_random_interleavings_publish_every_job_once(
        scenario: tuple[int, list[Action]], hermetic: dict[str, str],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    n_jobs, actions = scenario
    root = tmp_path_factory.mktemp("interleaving")
    site = make_site(root, hermetic)  # a fresh site per example: fixtures are shared
    site.write_config(CONFIG)
    other = root / "other"
    git(root, "clone", "-q", str(site.remote), str(other))
    world = World(site, other)
    world.log.append(f"{n_jobs} jobs")
    for kind, i, spec in actions:
        world.do(kind, i, spec)
    note(render(world.log))
    finish(site, world.log)
    why = render(world.log)

    # every prepared job is PUBLISHED (disjoint articles: nothing needs a person)
    status = site.run_here("status", "--all", "--json")
    assert status.code == 0, status.out + status.err
    states = {j["job_id"]: j["state"] for j in status.json()["jobs"]}
    expected = {job_id_for_key(job_key(i)) for i in world.prepared}
    assert set(states) == expected, f"jobs {states} != prepared {expected}\n{why}"
    assert all(s == "PUBLISHED" for s in states.values()), f"{states}\n{why}"

    # nothing published twice, nothing prepared left out
    ids = remote_job_ids(site.remote)
    dupes = [k for k, n in Counter(ids).items() if n > 1]
    assert not dupes, f"job ids on the remote twice: {dupes} in {ids}\n{why}"
    assert set(ids) == expected, f"remote has {ids}, expected {expected}\n{why}"

    # no remote change lost: theirs, ours, and the site's first post
    want = {"posts/welcome.md": "# Welcome\n\nThe first post.\n", **world.theirs}
    want |= {job_path(i): article(f"job-{i}") for i in world.prepared}
    for path, text in want.items():
        got = git(site.remote, "show", f"main:{path}", check=False)
        assert got == text, f"{path} on the remote is {got!r}, expected {text!r}\n{why}"

    for repo in (site.path, site.remote, other):
        problem = fsck(repo)
        assert problem is None, f"git fsck --strict in {repo}: {problem}\n{why}"


# -- every delivery crash point, one job -----------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("point", DELIVERY_POINTS)
def test_kill_push_at_each_delivery_point_then_recover(
        site: Site, tmp_path: Path, point: str) -> None:
    """Kill ``push`` at ``point``, then ``reconcile`` + ``push``: published exactly once.

    The rival writer pushes an article first, so the push has to re-check (the judge runs) and
    rebase. ``delivery.retry-recorded`` is only on the path after a failure that may pass: for
    it the push goes through a proxy that delivers it but drops the reply (the push *landed*).
    """
    site.write_config(CONFIG)
    r = site.run("prepare", "--json", "--key", "one", "--to", "posts/one.md", "-",
                 input=article("one"))
    assert r.code == 0, r.out + r.err
    job_id = r.json()["job_id"]
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(site.remote), str(other))
    site.repos.append(other)
    (other / "posts/theirs.md").write_text(article("theirs"))
    git(other, "add", "posts/theirs.md")
    git(other, "commit", "-q", "-m", "theirs")
    git(other, "push", "-q", "origin", "HEAD:main")
    theirs = git(other, "rev-parse", "HEAD").strip()

    log: list[str] = [f"prepare one; other pushes theirs; push crash at {point}"]
    if point == "delivery.retry-recorded":
        url = git(site.path, "remote", "get-url", "origin").strip()
        with GitDaemon(tmp_path) as daemon, DropReplyProxy(daemon.port) as proxy:
            site.git("remote", "set-url", "origin", proxy.url(site.remote.name))
            proxy.mode = "drop_branch_push_reply"  # the delivery's reply, not the claim's
            r = site.run("push", env={"GITPUB_CRASH_AT": point})
            assert proxy.replies_dropped == 1
        site.git("remote", "set-url", "origin", url)
    else:
        r = site.run("push", env={"GITPUB_CRASH_AT": point})
    assert r.code == KILLED, f"{point} was not reached: exit {r.code}\n{r.out}{r.err}"

    finish(site, log)
    job = site.run("status", "--json", job_id).json()
    assert job["state"] == "PUBLISHED", job
    assert remote_job_ids(site.remote) == [job_id], "exactly one remote commit with the job id"
    assert job["remote_commit"] == git(site.remote, "rev-parse", "main").strip()
    assert git(site.remote, "rev-parse", "main^").strip() == theirs, "rebased onto theirs"
    assert git(site.remote, "show", "main:posts/one.md") == article("one")
    assert git(site.remote, "show", "main:posts/theirs.md") == article("theirs")


# -- a push that landed below an older-dated commit ------------------------------------------

@pytest.mark.slow
def test_probe_finds_a_push_below_an_older_dated_commit(site: Site, tmp_path: Path) -> None:
    """Promise 5 with a rival writer whose clock is behind (or a commit that keeps an old date).

    Job 0 is published, so job 1's base is a commit dated now. Job 1's push lands but the
    process dies before recording it (``delivery.pushed``); then the rival pushes a commit with
    a committer date 30 days back (more than the walk's one-week clock slack before the base).
    ``reconcile`` must still find job 1's commit on the remote and mark it PUBLISHED.
    """
    site.write_config(CONFIG)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(site.remote), str(other))
    site.repos.append(other)
    for i in (0, 1):
        r = site.run("prepare", "--key", job_key(i), "--to", job_path(i), "-",
                     input=article(f"job-{i}"))
        assert r.code == 0, r.out + r.err
        r = site.run("push", env={"GITPUB_CRASH_AT": "delivery.pushed"} if i else None)
        assert r.code == (KILLED if i else 0), r.out + r.err
    landed = git(site.remote, "rev-parse", "main").strip()
    git(other, "pull", "-q", "--ff-only", "origin", "main")
    (other / "posts/theirs.md").write_text(article("theirs"))
    git(other, "add", "posts/theirs.md")
    commit_now(other, "theirs, by a clock 30 days behind", days_ago=30)

    log = ["prepare 0; push; prepare 1; push crash at delivery.pushed; rival pushes"]
    git(other, "push", "-q", "origin", "HEAD:main")
    r = site.run("reconcile")
    log.append(f"reconcile -> {r.code}: {r.out.strip()}")
    job = site.run("status", "--json", job_id_for_key(job_key(1))).json()
    assert job["state"] == "PUBLISHED" and job["remote_commit"] == landed, render(log)
    assert remote_job_ids(site.remote).count(job["job_id"]) == 1
