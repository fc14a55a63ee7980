"""Promise 1 for delivery: SIGKILL at every named delivery crash point, then reconcile + push.

Whatever point the process dies at — after the fetch, after the dedup re-check ran, after
PUSHING was recorded but before the push, after the push but before its outcome was recorded,
after PUBLISHED was recorded, after a retry was recorded — the job ends PUBLISHED with exactly
one commit on the remote, and the other writer's article is intact.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Site, git
from test_delivery import article, commit_file, other_writer, prepare, remote_job_ids

from gitpub.core.crashpoints import CRASH_POINTS

DELIVERY_POINTS = [p for p in CRASH_POINTS if p.startswith("delivery.")]
FAST_RETRY = "retry: {max_attempts: 50, backoff_base: 0.01, backoff_max: 0.02}\n"


def setup_job(site: Site, tmp_path: Path) -> tuple[str, Path]:
    """A prepared job, a dedup judge that counts its runs, and a remote that moved (a new
    article by another writer), so that every delivery phase has work to do."""
    counter = tmp_path / "judge-runs"
    site.write_config(FAST_RETRY + f"judge: 'echo x >> {counter}; cat >/dev/null; echo KEEP'\n")
    data = prepare(site, "crash-job", "posts/mine.md", article("mine"))
    other = other_writer(tmp_path, site)
    commit_file(other, "posts/theirs.md", article("theirs"))
    return str(data["job_id"]), counter


def judge_runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def break_remote(site: Site) -> str:
    """A transient failure: nothing listens at the remote's address (a misconfigured one, such
    as a path that is no repository, is a usage error and uses no attempt)."""
    from netfaults import free_port

    url = site.git("remote", "get-url", "origin").strip()
    site.git("remote", "set-url", "origin", f"git://127.0.0.1:{free_port()}/site.git")
    return url


def test_every_delivery_crash_point_is_reached(site: Site, tmp_path: Path) -> None:
    setup_job(site, tmp_path)
    trace = tmp_path / "trace"
    url = break_remote(site)
    r = site.run("push", env={"GITPUB_CRASH_TRACE": str(trace)})
    assert r.code == 5, r.out + r.err
    site.git("remote", "set-url", "origin", url)
    r = site.run("push", env={"GITPUB_CRASH_TRACE": str(trace)})
    assert r.code == 0, r.out + r.err
    missing = [p for p in DELIVERY_POINTS if p not in trace.read_text().split()]
    assert not missing, f"delivery crash points never reached: {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("point", DELIVERY_POINTS)
def test_kill_push_then_reconcile_and_push(site: Site, tmp_path: Path, point: str) -> None:
    job_id, counter = setup_job(site, tmp_path)
    url = break_remote(site) if point == "delivery.retry-recorded" else None
    r = site.run("push", env={"GITPUB_CRASH_AT": point})
    assert r.code == -9, f"expected SIGKILL at {point}: {r.out}{r.err}"
    if url:
        site.git("remote", "set-url", "origin", url)
    r = site.run_here("reconcile")
    assert r.code in (0, 5), r.out + r.err
    r = site.run_here("push", "--json")
    assert r.code == 0, r.out + r.err
    status = site.run_here("status", "--json", job_id).json()
    assert status["state"] == "PUBLISHED"
    assert remote_job_ids(site) == [job_id], "exactly one remote commit for the job"
    assert git(site.remote, "show", "main:posts/theirs.md") == article("theirs")
    assert git(site.remote, "show", "main:posts/mine.md") == article("mine")
    # the remote's job store agrees: its job ref says PUBLISHED at that very commit
    record = json.loads(git(site.remote, "show", f"refs/pub/jobs/{job_id}:job.json"))
    assert record["state"] == "PUBLISHED" and record["remote_commit"] == status["remote_commit"]
    # one run in prepare, one re-check of the remote delta (two if killed before recording it)
    assert judge_runs(counter) <= 3
    if point in ("delivery.pushing-recorded", "delivery.pushed", "delivery.published-recorded"):
        assert judge_runs(counter) == 2, "a recorded re-check is not repeated"


def test_kill_reconcile_mid_push_then_reconcile(site: Site, tmp_path: Path) -> None:
    job_id, _ = setup_job(site, tmp_path)
    r = site.run("reconcile", env={"GITPUB_CRASH_AT": "delivery.pushed"})
    assert r.code == -9
    r = site.run_here("reconcile", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    assert remote_job_ids(site) == [job_id]
