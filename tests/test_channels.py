"""The channel fault matrix (reference §10), end to end: real git, a real HTTP platform on
127.0.0.1 that records every request it accepted, and command channels writing to a local
"platform" file. Every test counts what the platform actually received: one post per intent,
or none with a visible state.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from channelkit import (
    channel,
    command_channel,
    configure,
    events,
    posts,
    prepare,
    status,
    webhook_channel,
)
from conftest import Clock, Site, git, spawn, wait_stopped
from httpfaults import Platform

from gitpub.channels.lease import lease_ref
from gitpub.core.crashpoints import CRASH_POINTS
from gitpub.git.repo import MODE_FILE, Entry, Repository

CHANNEL_POINTS = [p for p in CRASH_POINTS if p.startswith("channels.")]


def remote_main(site: Site) -> str:
    return git(site.remote, "rev-parse", "main").strip()




def published_pending(site: Site, key: str = "k1") -> str:
    """A PUBLISHED job whose channels are recorded pending and nothing sent yet: the push was
    killed right after the channels were initialized."""
    job_id = prepare(site, key)
    r = site.run("push", env={"GITPUB_CRASH_AT": "channels.initialized"})
    assert r.code == -signal.SIGKILL, r.err
    return job_id


# -- the happy path, and never twice ---------------------------------------------------------

def test_command_channel_sends_once_then_never_again(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    job_id = prepare(site)
    r = site.call("push", "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["jobs"]
    assert row["state"] == "PUBLISHED"
    (social,) = row["channels"]
    assert social["status"] == "confirmed" and social["remote_id"] == "post-1"
    assert social["url"] == "https://social.example/post-1" and social["evidence"] == "send"
    for command in ("push", "sync", "reconcile", "push"):
        assert site.call(command).code == 0
    (post,) = posts(platform)
    assert post["key"] == social["intent_key"] and post["job"] == job_id
    assert post["url"] == "https://blog.example/hello/" and post["title"] == "Post k1"
    reasons = [(e["phase"], e["reason"].split(":")[1].strip()) for e in events(site, job_id)
               if e["phase"] in ("channels", "send")]
    assert [p for p, _ in reasons] == ["channels", "send", "send"]
    assert reasons[1][1].startswith("sending") and reasons[2][1] == "confirmed"
    text = site.call("status", job_id).out
    assert "channel social (required, news): confirmed  post-1" in text
    # settled: no longer listed as unfinished
    assert site.call("status").out.strip() == "no unfinished jobs"


@pytest.mark.slow
def test_frozen_payload_is_sent_byte_for_byte_on_every_attempt(site: Site,
                                                               clock: Clock) -> None:
    with Platform(["503:0", "drop"]) as platform:
        configure(site, webhook_channel(platform.url))
        job_id = prepare(site)
        for _ in range(4):
            site.call("reconcile")
            if channel(site, job_id, "hook")["status"] == "confirmed":
                break
            clock.advance(0.25)  # the retry falls due
        assert channel(site, job_id, "hook")["status"] == "confirmed"
        bodies = {r.body for r in platform.requests}
        keys = {r.headers["Idempotency-Key"] for r in platform.requests}
    assert len(platform.requests) == 3 and len(bodies) == 1 and len(keys) == 1
    payload = json.loads(bodies.pop())
    assert payload["url"] == "https://blog.example/hello/"
    assert payload["media"] == ["https://blog.example/hello/images/pk1.png"]
    stored = git(site.path, "show", f"refs/pub/jobs/{job_id}:payload.json").encode()
    assert stored == platform.requests[0].body
    assert len(platform.posts) == 1


# -- same key racing -------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("kind", ["command", "webhook"])
def test_same_intent_racing_sends_once(site: Site, tmp_path: Path, kind: str) -> None:
    platform_file = tmp_path / "platform.jsonl"
    with Platform(default="delay:0.5", idempotent=False) as platform:
        spec = (command_channel(platform_file) if kind == "command"
                else webhook_channel(platform.url))
        configure(site, spec)
        job_id = published_pending(site)
        env = {"CHANNEL_TOOL_MODE": "sleep:0.5"}
        racers = [spawn(site, "reconcile", env=env) for _ in range(4)]
        for proc in racers:
            proc.communicate(timeout=120)
        site.call("reconcile")
        name = "social" if kind == "command" else "hook"
        assert channel(site, job_id, name)["status"] == "confirmed"
        received = len(posts(platform_file)) if kind == "command" else len(platform.requests)
    assert received == 1, "one intent, one send: the account lease serializes the racers"


# -- a lost response -------------------------------------------------------------------------

def test_server_commits_then_drops_the_response(site: Site, clock: Clock) -> None:
    with Platform(["drop"]) as platform:
        configure(site, webhook_channel(platform.url))
        job_id = prepare(site)
        r = site.call("push", "--json")
        hook = channel(site, job_id, "hook")
        assert hook["status"] in ("unknown", "confirmed")
        if hook["status"] == "unknown":
            assert r.code == 5 and hook["code"] == "connection_lost"
            clock.advance(0.3)  # the reconciliation falls due
            assert site.call("reconcile").code == 0
        hook = channel(site, job_id, "hook")
        assert hook["status"] == "confirmed" and hook["remote_id"] == platform.posts[0].id
        assert hook["evidence"] == "HTTP 200", "the platform answered the resend with the original"
        assert len(platform.posts) == 1 and len(platform.requests) == 2
        assert {r.headers["Idempotency-Key"] for r in platform.requests} == {hook["intent_key"]}


@pytest.mark.slow
def test_500_after_commit_is_unknown_and_not_resent_blindly(site: Site, clock: Clock) -> None:
    slow = "{max_attempts: 3, backoff_base: 4, backoff_max: 4, jitter: 0}"
    with Platform(["500"]) as platform:
        configure(site, webhook_channel(platform.url, retry=slow))
        job_id = prepare(site)
        r = site.call("push")
        assert r.code == 5, r.err
        assert channel(site, job_id, "hook")["status"] == "unknown"
        assert channel(site, job_id, "hook")["code"] == "http_500"
        due = channel(site, job_id, "hook")["next_attempt_at"]
        for command in ("reconcile", "push"):
            site.call(command)
        assert time.time() < due, "the machine is too slow for this test's timing"
        assert len(platform.requests) == 1, "unknown waits for its reconciliation, no resend"
        clock.advance(due - time.time() + 0.01)  # the reconciliation is due
        assert site.call("reconcile").code == 0
        assert channel(site, job_id, "hook")["status"] == "confirmed"
        assert len(platform.posts) == 1 and len(platform.requests) == 2


def test_unknown_command_outcome_without_probe_needs_a_person(site: Site,
                                                              tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform, probe=False))
    job_id = prepare(site)
    r = site.run("push", env={"CHANNEL_TOOL_MODE": "unknown"})
    assert r.code == 4, r.err
    assert "hint: check the platform, then `git pub resolve" in r.out
    social = channel(site, job_id)
    assert social["status"] == "needs_manual" and social["needs_person"]
    for _ in range(3):
        assert site.call("reconcile").code == 4
    assert len(posts(platform)) == 1, "never re-sent: a command without a probe cannot tell"
    url = "https://social.example/post-1"
    r = site.call("resolve", job_id, "--channel", "social", "--confirmed", url)
    assert r.code == 0, r.err
    social = channel(site, job_id)
    assert social["status"] == "confirmed" and social["url"] == url
    assert social["evidence"] == "person"
    assert len(posts(platform)) == 1


# -- 429 with Retry-After --------------------------------------------------------------------

@pytest.mark.slow
def test_429_retry_after_is_honoured(site: Site, clock: Clock) -> None:
    """The platform's clock (its requests' times) is this process's: ``clock`` moves both."""
    with Platform(["429:4"]) as platform:
        configure(site, webhook_channel(platform.url))  # backoff 0.05 s: Retry-After wins
        job_id = prepare(site)
        assert site.call("push").code == 5
        hook = channel(site, job_id, "hook")
        assert hook["status"] == "not_sent" and hook["retryable"] and hook["code"] == "http_429"
        assert hook["next_attempt_at"] - platform.requests[0].time >= 3.9
        site.call("reconcile")
        assert len(platform.requests) == 1, "not before Retry-After"
        clock.advance(hook["next_attempt_at"] - time.time() + 0.01)  # Retry-After has passed
        assert site.call("reconcile").code == 0
        assert channel(site, job_id, "hook")["status"] == "confirmed"
        first, second = platform.requests
    assert second.time - first.time >= 4.0
    assert len(platform.posts) == 1


# -- a worker killed between the send and its record ---------------------------------------

def test_killed_after_sending_before_recording_is_probed_not_resent(site: Site,
                                                                    tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    job_id = prepare(site)
    r = site.run("push", env={"GITPUB_CRASH_AT": "channels.sent"})
    assert r.code == -signal.SIGKILL
    assert channel(site, job_id)["status"] == "sending"
    assert len(posts(platform)) == 1
    r = site.call("reconcile")
    assert r.code == 0, r.err
    social = channel(site, job_id)
    assert social["status"] == "confirmed" and social["evidence"] == "probe"
    assert social["remote_id"] == "post-1" and social["attempts"] == 1
    assert len(posts(platform)) == 1
    moves = [e["reason"].split(": ", 2)[1] for e in events(site, job_id)
             if e["phase"] in ("send", "reconcile")]
    assert [m.split(" ")[0].rstrip(",:") for m in moves] == [
        "sending", "sending", "reconciling", "confirmed"]


@pytest.mark.slow
@pytest.mark.parametrize("point", CHANNEL_POINTS)
def test_kill_at_every_channel_point_then_exactly_one_post(site: Site, tmp_path: Path,
                                                           point: str, clock: Clock) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    job_id = prepare(site)
    first = "push"
    if point == "channels.reconciling-recorded":  # reached only when reconciling
        assert site.run("push", env={"GITPUB_CRASH_AT": "channels.sent"}).code < 0
        first = "reconcile"
    r = site.run(first, env={"GITPUB_CRASH_AT": point})
    assert r.code == -signal.SIGKILL, (point, r.err)
    for _ in range(4):
        site.call("reconcile")
        clock.advance(0.2)  # the next retry or probe falls due
    if point in ("channels.sending-recorded", "channels.claimed"):
        # Killed before the send: nothing went out, but nothing can prove it either (a probe
        # that finds nothing is no evidence): a bounded wait, then a person says so.
        assert posts(platform) == []
        assert channel(site, job_id)["status"] == "needs_manual"
        assert site.call("resolve", job_id, "--channel", "social", "--not-sent").code == 0
    assert channel(site, job_id)["status"] == "confirmed", point
    assert len(posts(platform)) == 1, point


# -- a worker frozen past its lease ----------------------------------------------------------

@pytest.mark.slow
def test_sigstopped_past_its_lease_cannot_overwrite(site: Site, tmp_path: Path,
                                                   clock: Clock) -> None:
    """Worker A sends, then is frozen (SIGSTOP) before it records the outcome. Its lease
    expires; worker B turns the record unknown and confirms it by the probe. A, resumed, must
    not overwrite B's state with its own (stale) view."""
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform, timeout=1, lease=4))
    job_id = published_pending(site)
    a = spawn(site, "reconcile", env={**clock.env(site), "GITPUB_PAUSE_AT": "channels.sent"})
    try:
        wait_stopped(a.pid)
        assert channel(site, job_id)["status"] == "sending" and len(posts(platform)) == 1
        assert site.call("reconcile").code == 5 or channel(site, job_id)["status"] == "sending"
        clock.advance(4.2)  # A's lease runs out while it is frozen
        assert site.call("reconcile").code == 0
        by_b = channel(site, job_id)
        assert by_b["status"] == "confirmed" and by_b["evidence"] == "probe"
        head = git(site.path, "rev-parse", f"refs/pub/jobs/{job_id}").strip()
    finally:
        os.kill(a.pid, signal.SIGCONT)
    out, err = a.communicate(timeout=60)
    assert b"fenced off" in out, err
    assert git(site.path, "rev-parse", f"refs/pub/jobs/{job_id}").strip() == head
    assert channel(site, job_id) == by_b
    assert len(posts(platform)) == 1


@pytest.mark.slow
def test_sigstopped_before_the_send_sends_nothing_when_resumed(site: Site, tmp_path: Path,
                                                               clock: Clock) -> None:
    """Frozen after recording SENDING but before the send: once resumed past its lease it
    finds its lease gone and sends nothing; the channel stays visibly unresolved."""
    platform = tmp_path / "platform.jsonl"
    retry = "{max_attempts: 2, backoff_base: 0.05, backoff_max: 0.1, jitter: 0}"
    configure(site, command_channel(platform, timeout=1, lease=4, retry=retry))
    job_id = published_pending(site)
    a = spawn(site, "reconcile", env={**clock.env(site),
                                      "GITPUB_PAUSE_AT": "channels.sending-recorded"})
    try:
        wait_stopped(a.pid)
        clock.advance(4.2)  # A's lease runs out while it is frozen
        for _ in range(3):
            site.call("reconcile")
            clock.advance(0.15)
        after_b = channel(site, job_id)
        assert after_b["status"] == "needs_manual", after_b
    finally:
        os.kill(a.pid, signal.SIGCONT)
    out, _ = a.communicate(timeout=60)
    assert b"not sent: the lease would run out during the send" in out
    assert posts(platform) == [], "the resumed worker saw its lease gone and sent nothing"
    assert channel(site, job_id) == after_b
    assert site.call("reconcile").code == 4


@pytest.mark.slow
def test_external_sigstop_while_the_platform_answers(site: Site, tmp_path: Path,
                                                     clock: Clock) -> None:
    """The same race with the stop coming from outside, at a moment we do not choose exactly:
    after the platform wrote the post, while the command is still finishing."""
    platform = tmp_path / "platform.jsonl"
    ready = tmp_path / "posted"
    configure(site, command_channel(platform, timeout=2, lease=6))
    job_id = published_pending(site)
    a = spawn(site, "reconcile", env={**clock.env(site), "CHANNEL_TOOL_MODE": "sleep:0.5",
                                      "CHANNEL_TOOL_READY": str(ready)})
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(a.pid, signal.SIGSTOP)
        clock.advance(6.2)  # A's lease runs out while it is stopped
        assert site.call("reconcile").code == 0
        by_b = channel(site, job_id)
    finally:
        os.kill(a.pid, signal.SIGCONT)
    a.communicate(timeout=60)
    assert by_b["status"] == "confirmed" and by_b["evidence"] == "probe"
    assert channel(site, job_id) == by_b
    assert len(posts(platform)) == 1


# -- corrupt state ---------------------------------------------------------------------------

def corrupt_channel_record(site: Site, job_id: str, data: bytes) -> str:
    """A new state commit of the job whose ``channels/social.json`` is ``data``."""
    ref = f"refs/pub/jobs/{job_id}"
    with Repository.discover(site.path) as repo:
        head = repo.read_ref(ref)
        assert head is not None
        tree = repo.write_tree(repo.commit(head).tree,
                               {"channels/social.json": Entry(MODE_FILE, repo.write_blob(data))})
        commit = repo.write_commit(tree, [head], b"damaged by a test\n")
        assert repo.cas_ref(ref, head, commit)
    return commit


@pytest.mark.parametrize("damage", [b"", b"{not json", b'{"format": 2}',
                                    b'{"format": 1, "status": "sent"}'])
def test_corrupt_channel_record_stops_with_a_clear_error(site: Site, tmp_path: Path,
                                                         damage: bytes) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    job_id = published_pending(site)
    head = corrupt_channel_record(site, job_id, damage)
    other = prepare(site, "k2", "posts/other.md")
    for command in ("reconcile", "push", "status"):
        r = site.call(command)
        assert r.code == 1, (command, r.out, r.err)
        assert f"job {job_id}: channel state is unreadable" in r.out + r.err
        assert "channels/social.json" in r.out + r.err
    r = site.call("status", job_id)
    assert r.code == 1 and "hint: nothing was sent or changed" in r.err
    assert git(site.path, "rev-parse", f"refs/pub/jobs/{job_id}").strip() == head
    assert [p["job"] for p in posts(platform)] == [other], "the other job went on"
    assert channel(site, other)["status"] == "confirmed"


# -- optional channels -----------------------------------------------------------------------

def test_failing_optional_channel_never_touches_the_published_article(
        site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    with Platform(default="400") as hook:
        configure(site, command_channel(platform),
                  webhook_channel(hook.url, name="cdn", required=False))
        job_id = prepare(site)
        r = site.call("push", "--json")
        assert r.code == 0, r.err
        published = remote_main(site)
        article = git(site.remote, "show", "main:posts/hello.md")
        cdn = channel(site, job_id, "cdn")
        assert cdn["status"] == "not_sent" and cdn["needs_person"] and cdn["code"] == "http_400"
        assert channel(site, job_id)["status"] == "confirmed"
        for command in ("reconcile", "sync", "push"):
            assert site.call(command).code == 0
        assert len(hook.requests) == 1, "a permanent refusal is not retried"
    assert remote_main(site) == published
    assert git(site.remote, "show", "main:posts/hello.md") == article
    assert status(site, job_id)["state"] == "PUBLISHED"
    assert "cdn" in site.call("status").out, "still visible while unsettled"
    assert site.call("resolve", job_id, "--channel", "cdn", "--skip").code == 0
    assert channel(site, job_id, "cdn")["status"] == "skipped"
    assert site.call("status").out.strip() == "no unfinished jobs"
    assert remote_main(site) == published


def test_required_channel_refused_needs_a_person_and_can_be_resent(site: Site,
                                                                   tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    job_id = prepare(site)
    r = site.run("push", env={"CHANNEL_TOOL_MODE": "fail"})
    assert r.code == 4, r.err
    social = channel(site, job_id)
    assert social["status"] == "not_sent" and not social["retryable"]
    r = site.call("resolve", job_id, "--channel", "social", "--not-sent")
    assert r.code == 0, r.err
    after = channel(site, job_id)
    assert after["status"] == "confirmed" and after["intent_key"] == social["intent_key"]
    assert len(posts(platform)) == 1
    r = site.call("resolve", job_id, "--channel", "social", "--skip")
    assert r.code == 2 and "nothing to resolve" in r.err


@pytest.mark.slow
def test_retryable_not_sent_is_bounded(site: Site, tmp_path: Path, clock: Clock) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))  # max_attempts 3, backoff 0.05 s
    job_id = prepare(site)
    env = {"CHANNEL_TOOL_MODE": "not_sent"}
    site.run_here("push", env=env)
    for _ in range(6):
        clock.advance(0.25)  # the retry falls due
        site.run_here("reconcile", env=env)
    social = channel(site, job_id)
    assert social["status"] == "not_sent" and social["attempts"] == 3
    assert social["needs_person"] and social["next_attempt_at"] is None
    assert site.call("reconcile").code == 4
    assert posts(platform) == []


def test_rate_limit_per_account(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform, extra="    rate: 1/hour\n"))
    first = prepare(site, "k1", "posts/one.md")
    second = prepare(site, "k2", "posts/two.md")
    r = site.call("push")
    assert r.code == 5, r.err
    assert "rate limit 1/3600s: next send in" in r.out
    states = sorted(channel(site, j)["status"] for j in (first, second))
    assert states == ["confirmed", "pending"]
    assert len(posts(platform)) == 1


# -- secrets, other entry points -------------------------------------------------------------

def test_no_secret_reaches_channel_state(site: Site, tmp_path: Path) -> None:
    token = "ghp_" + "a1B2" * 9
    platform = tmp_path / "platform.jsonl"
    leaky = tmp_path / "leaky.sh"
    leaky.write_text("#!/bin/sh\ncat >/dev/null\n"
                     "echo '{\"outcome\":\"not_sent\",\"retryable\":false,"
                     f"\"code\":\"denied for {token}\"}}'\n")
    leaky.chmod(0o755)
    with Platform(default="400") as hook:
        hook_spec = webhook_channel(hook.url, extra="    headers: {Authorization: "
                                                    "\"Bearer ${HOOK_TOKEN}\"}\n")
        configure(site, command_channel(platform, send=[str(leaky)]), hook_spec)
        job_id = prepare(site)
        r = site.run("push", env={"HOOK_TOKEN": token})
        assert r.code == 4, r.err
        assert hook.requests[0].headers["Authorization"] == f"Bearer {token}"
    assert channel(site, job_id)["code"] == "denied for [REDACTED:github-token]"
    assert token.encode() not in site.all_objects_text()
    assert token not in r.out + r.err


def test_prepare_push_announces_in_the_same_process(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    r = site.call("prepare", "--push", "--json", "--key", "k1", "--to", "posts/hello.md", "-",
                  input="# Hello\n\nText.\n")
    assert r.code == 0, r.err
    data = r.json()
    assert data["state"] == "PUBLISHED" and data["channels"][0]["status"] == "confirmed"
    assert len(posts(platform)) == 1


def test_hand_edits_get_no_channels(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    (site.path / "posts" / "welcome.md").write_text("# Welcome\n\nFixed a typo.\n")
    r = site.call("sync", "--json")
    assert r.code == 0, r.err
    (job,) = r.json()["jobs"]
    assert job["state"] == "PUBLISHED" and "channels" not in job
    assert posts(platform) == []


def test_corrupt_account_lease_stops_that_channel_only(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform), command_channel(platform, name="weibo"))
    job_id = published_pending(site)
    # The account's ledger is shared: it lives on the remote, never in a clone.
    assert git(site.remote, "for-each-ref", "refs/pub/channel-leases/") == ""  # none taken yet
    bad = git(site.remote, "hash-object", "-w", "--stdin", input=b"garbage").strip()
    git(site.remote, "update-ref", lease_ref("social", "news"), bad)
    r = site.call("reconcile")
    assert r.code == 1
    assert f"channel lease {lease_ref('social', 'news')} (social) on the remote is " \
           "unreadable" in r.out
    assert channel(site, job_id)["status"] == "pending"
    assert channel(site, job_id, "weibo")["status"] == "confirmed"
    assert [p["channel"] for p in posts(platform)] == ["weibo"]


def test_resolve_channel_usage(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    job_id = published_pending(site)
    for args in (["--channel", "social"], ["--not-sent"], ["--channel", "social", "--skip",
                                                           "--not-sent"],
                 ["--channel", "social", "--retry", "--skip"]):
        assert site.call("resolve", job_id, *args).code == 2, args
    r = site.call("resolve", job_id, "--channel", "social", "--confirmed", "not-a-url")
    assert r.code == 2 and "http(s) URL" in r.err
    r = site.call("resolve", job_id, "--channel", "nope", "--skip")
    assert r.code == 2 and "channels: social" in r.err
    assert site.call("resolve", job_id, "--channel", "social", "--skip").code == 0
    assert channel(site, job_id)["status"] == "skipped" and posts(platform) == []


def test_jobs_published_before_channels_are_never_announced(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    job_id = prepare(site)
    assert site.call("push").code == 0
    configure(site, command_channel(platform))
    for args in (["push", job_id], ["reconcile"], ["sync"], ["push"]):
        assert site.call(*args).code == 0, args
    assert "channels" not in status(site, job_id)
    assert posts(platform) == []
    later = prepare(site, "k2", "posts/later.md")
    assert site.call("push").code == 0
    assert [p["job"] for p in posts(platform)] == [later]
