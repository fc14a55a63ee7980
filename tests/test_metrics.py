"""``git pub metrics``: Prometheus text that prometheus_client's own parser reads, with the
numbers of the store as it is."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from channelkit import command_channel, configure, prepare
from conftest import Site
from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[s.name, tuple(sorted(s.labels.items()))] = s.value
    return found


@pytest.mark.slow
def test_metrics_parse_and_count(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform),
              command_channel(platform, name="weibo", required=False, probe=False))
    prepare(site, "k1", "posts/one.md")
    assert site.call("push").code == 0
    prepare(site, "k2", "posts/two.md")
    r = site.run("push", env={"GITPUB_CRASH_AT": "channels.sent"})  # social of k2: unknown
    assert r.code == -signal.SIGKILL
    prepare(site, "k3", "posts/three.md")  # prepared, not pushed: a pending job
    r = site.call("metrics")
    assert r.code == 0, r.err
    m = samples(r.out)
    assert m["gitpub_pending_jobs", ()] == 1
    assert m["gitpub_oldest_pending_job_age_seconds", ()] >= 0
    # k2: social in flight under a dead worker's lease; "weibo" not sent yet
    assert m["gitpub_pending_channel_sends", ()] == 2
    assert m["gitpub_channel_attempted_total", (("channel", "social"),)] == 2
    assert m["gitpub_channel_confirmed_total", (("channel", "social"),)] == 1
    assert m["gitpub_channel_confirmed_total", (("channel", "weibo"),)] == 1
    assert m["gitpub_key_reuse_refusals_total", ()] == 0
    site.call("reconcile")  # k2's social: expired → unknown → probe → confirmed; k3 published
    m = samples(site.call("metrics").out)
    assert m["gitpub_channel_confirmed_total", (("channel", "social"),)] == 3
    assert m["gitpub_channel_attempted_total", (("channel", "social"),)] == 3
    assert m["gitpub_pending_jobs", ()] == 0
    assert m["gitpub_unknown_outcomes", (("kind", "channel"),)] == 0
    assert m["gitpub_pending_channel_sends", ()] == 0


def test_unknown_and_needs_person_backlog(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    slow = "{max_attempts: 2, backoff_base: 60, backoff_max: 60, jitter: 0}"
    configure(site, command_channel(platform, retry=slow),
              command_channel(platform, name="noprobe", probe=False, required=False))
    prepare(site)
    assert site.run("push", env={"CHANNEL_TOOL_MODE": "unknown"}).code == 5
    m = samples(site.call("metrics").out)
    assert m["gitpub_unknown_outcomes", (("kind", "channel"),)] == 1
    assert m["gitpub_oldest_unknown_outcome_age_seconds", (("kind", "channel"),)] >= 0
    assert m["gitpub_needs_person", (("kind", "channel"), ("state", "needs_manual"))] == 1
    r = site.call("metrics", "--json")
    assert "gitpub_unknown_outcomes" in r.json()["metrics"]


def test_key_reuse_refusals_are_counted(site: Site) -> None:
    from gitpub.core.record import JobRecord
    from gitpub.core.states import FailureCode, State
    from gitpub.git.repo import Repository
    from gitpub.store.jobs import JobStore

    with Repository.discover(site.path) as repo:
        store = JobStore(repo)
        for n in range(2):
            store.create(JobRecord(job_id=f"reused-{n}", idempotency_key=f"k{n}",
                                   request_hash="h" * 64, state=State.REVIEW, node="n",
                                   created_at=1.0, updated_at=1.0,
                                   failure_code=FailureCode.KEY_REUSED), {}, "a test")
    m = samples(site.call("metrics").out)
    assert m["gitpub_key_reuse_refusals_total", ()] == 2
    assert m["gitpub_needs_person", (("kind", "job"), ("state", "REVIEW"))] == 2
