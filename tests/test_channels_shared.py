"""Channel state shared through the remote (issue 23.9): two clones of one remote count in one
rate window, never re-send what the other confirmed, show and resolve each other's channels,
and keep counters that never go down. Real git, a real HTTP platform on 127.0.0.1
(``httpfaults``) or a command channel writing a "platform" file; every test counts what the
platform received.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from channelkit import (
    FAST_RETRY,
    channel,
    command_channel,
    configure,
    events,
    posts,
    prepare,
    settled_intents,
    status,
    webhook_channel,
)
from conftest import Site, git, spawn, wait_stopped
from httpfaults import Platform, Received
from test_metrics import samples

from gitpub.channels.lease import lease_ref

SLOW_RETRY = "{max_attempts: 3, backoff_base: 30, backoff_max: 30, jitter: 0}"
HOUR = 3600.0


def share_config(site: Site) -> None:
    """The channel configuration committed and pushed: every clone drives the same channels."""
    site.git("add", ".gitpub.yaml")
    site.git("commit", "-qm", "channels")
    site.git("push", "-q", "origin", "main")


def clone(site: Site, tmp_path: Path, name: str = "clone-b") -> Site:
    """Another publishing clone of the same remote (its own job store, nothing fetched of
    ``refs/pub/*`` yet)."""
    path = tmp_path / name
    git(tmp_path, "clone", "-q", str(site.remote), str(path))
    site.repos.append(path)
    return Site(path, site.remote, site.env)


def keys(requests: list[Received]) -> list[str]:
    return [next(v for k, v in r.headers.items() if k.lower() == "idempotency-key")
            for r in requests]


def remote_refs(site: Site, prefix: str = "refs/pub/") -> list[str]:
    return git(site.remote, "for-each-ref", "--format=%(refname)", prefix).split()


def without_hint(record: dict[str, Any]) -> dict[str, Any]:
    """A channel's --json object without its ``hint`` (which counts the seconds to wait)."""
    return {k: v for k, v in record.items() if k != "hint"}


def attempted(site: Site, name: str) -> float:
    r = site.call("metrics")
    assert r.code == 0, r.err
    return samples(r.out)["gitpub_channel_attempted_total", (("channel", name),)]


# -- the rate window is the account's, across clones -----------------------------------------

def test_rate_limit_counts_every_clone_and_says_when_the_next_send_goes(
        site: Site, tmp_path: Path) -> None:
    """``2/hour``: clone A sends twice, clone B's two sends wait — exactly 2 posts on the
    platform (each clone used to count only its own: 4). B's status says when the next send
    goes, in text and in --json (validated by the schema), and that time is the hour after
    the first send."""
    with Platform() as platform:
        configure(site, webhook_channel(platform.url, extra="    rate: 2/hour\n"))
        share_config(site)
        other = clone(site, tmp_path)
        mine = [prepare(site, f"a{n}", f"posts/a{n}.md") for n in (1, 2)]
        assert site.call("push").code == 0
        assert len(platform.requests) == 2
        theirs = [prepare(other, f"b{n}", f"posts/b{n}.md") for n in (1, 2)]
        r = other.call("push")
        assert r.code == 5, r.out + r.err
        for _ in range(2):
            other.call("reconcile")
            site.call("reconcile")
        assert len(platform.requests) == 2, "one window for the account, whichever clone sends"
        first = platform.requests[0].time
    assert [channel(site, j, "hook")["status"] for j in mine] == ["confirmed", "confirmed"]
    for job_id in theirs:
        hook = channel(other, job_id, "hook")
        assert hook["status"] == "pending" and hook["code"] == "rate_limited", hook
        at = hook["next_attempt_at"]
        assert first + HOUR - 10 < at <= first + HOUR + 1
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
        assert f"next send at {stamp}" in hook["detail"]
        assert hook["hint"].startswith(f"next send at {stamp}"), hook["hint"]
        text = other.call("status", job_id)
        assert text.code == 0, text.err
        assert f"rate limit 2/3600s: next send at {stamp}" in text.out
    assert "next send at" in r.out


# -- a confirmed send is confirmed for every clone -------------------------------------------

def test_a_send_confirmed_by_one_clone_is_never_posted_by_another(site: Site,
                                                                  tmp_path: Path) -> None:
    """Both clones prepared the same request before either pushed; A publishes and its
    webhook is confirmed; B's push and reconcile read A's record: the platform never sees
    the same idempotency key twice (it used to get B's re-POST)."""
    with Platform() as platform:
        configure(site, webhook_channel(platform.url))
        share_config(site)
        other = clone(site, tmp_path)
        job_id = prepare(site, "same")
        assert prepare(other, "same") == job_id
        assert site.call("push").code == 0
        assert channel(site, job_id, "hook")["status"] == "confirmed"
        r = other.call("push")
        assert r.code == 0, r.out + r.err
        assert other.call("reconcile").code == 0
        assert site.call("reconcile").code == 0
        sent = keys(platform.requests)
    assert len(sent) == 1, sent
    assert channel(other, job_id, "hook") == channel(site, job_id, "hook")


# -- status and resolve --channel from a clone that did not send ----------------------------

def test_status_and_resolve_channel_on_a_clone_that_did_not_send(site: Site,
                                                                 tmp_path: Path) -> None:
    """A's send has an unknown outcome and no probe: a person must look. B (a fresh clone
    that never ran gitpub) shows the channel as A recorded it, and resolves it; A then reads
    B's decision. Nothing is sent twice."""
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform, probe=False))
    share_config(site)
    job_id = prepare(site)
    assert site.run("push", env={"CHANNEL_TOOL_MODE": "unknown"}).code == 4
    other = clone(site, tmp_path)
    shown = status(other, job_id)
    social = next(c for c in shown["channels"] if c["channel"] == "social")
    assert social["status"] == "needs_manual" and social["needs_person"], social
    assert f"git pub resolve {job_id[:13]} --channel social" in social["hint"]
    assert "needs_manual" in other.call("status", job_id).out
    url = "https://social.example/post-1"
    r = other.call("resolve", job_id, "--channel", "social", "--confirmed", url)
    assert r.code == 0, r.out + r.err
    by_b = channel(other, job_id)
    assert by_b["status"] == "confirmed" and by_b["url"] == url and by_b["evidence"] == "person"
    assert site.call("reconcile").code == 0
    assert channel(site, job_id) == by_b
    assert len(posts(platform)) == 1


def test_unknown_outcome_hint_names_reconcile_on_every_clone(site: Site,
                                                            tmp_path: Path) -> None:
    """A webhook answered 500 after creating the post: unknown, its same-key resend not due
    yet. Both clones' status say so and name ``git pub reconcile``, in text and --json."""
    with Platform(["500"]) as platform:
        configure(site, webhook_channel(platform.url, retry=SLOW_RETRY))
        share_config(site)
        job_id = prepare(site)
        assert site.call("push").code == 5
        other = clone(site, tmp_path)
        for who in (site, other):
            hook = next(c for c in status(who, job_id)["channels"] if c["channel"] == "hook")
            assert hook["status"] == "unknown" and not hook["needs_person"], hook
            assert "`git pub reconcile`" in hook["hint"] and "next look at" in hook["hint"]
            text = who.call("status", job_id).out
            assert "hint: the outcome of hook is unknown: `git pub reconcile`" in text, text
        assert len(platform.requests) == 1


# -- counters never go down -------------------------------------------------------------------

def test_attempted_counter_never_decreases(site: Site, tmp_path: Path) -> None:
    """``gitpub_channel_attempted_total`` counts sends made, whichever clone made them: a
    person's ``--not-sent`` starts the record's attempts again, never the counter."""
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform, probe=False, extra="    rate: 1/hour\n"))
    share_config(site)
    job_id = prepare(site)
    assert site.run("push", env={"CHANNEL_TOOL_MODE": "unknown"}).code == 4
    seen = [attempted(site, "social")]
    assert seen == [1]
    # Nothing went out after all (says the person): the record starts again, the rate
    # window (1/hour, used by the first send) holds the resend back.
    r = site.call("resolve", job_id, "--channel", "social", "--not-sent")
    assert r.code == 5, r.out + r.err
    assert channel(site, job_id)["attempts"] == 0
    seen.append(attempted(site, "social"))
    assert site.call("reconcile").code == 5
    seen.append(attempted(site, "social"))
    other = clone(site, tmp_path)
    assert other.call("status", job_id).code == 0  # fetches the remote's store
    seen.append(attempted(other, "social"))
    assert seen == [1, 1, 1, 1], seen
    assert len(posts(platform)) == 1


# -- a channel removed from the configuration ----------------------------------------------

def test_removed_channel_needs_a_person_not_unknown_forever(site: Site) -> None:
    """An unknown outcome whose channel is then removed from .gitpub.yaml can never be
    reconciled from here: it turns ``needs_manual`` with a reason naming the removal and the
    way out; the person's ``--skip`` settles it."""
    with Platform(["500"]) as platform:
        configure(site, webhook_channel(platform.url, retry=SLOW_RETRY))
        job_id = prepare(site)
        assert site.call("push").code == 5
        assert channel(site, job_id, "hook")["status"] == "unknown"
        configure(site)  # the channel is gone
        r = site.call("reconcile")
        assert r.code == 4, r.out + r.err
        hook = channel(site, job_id, "hook")
        assert hook["status"] == "needs_manual" and hook["code"] == "channel_removed", hook
        assert "no longer configured" in hook["detail"] and "check the platform" in hook["detail"]
        assert f"git pub resolve {job_id[:13]} --channel hook" in hook["hint"]
        assert "channel is no longer configured" in r.out
        assert site.call("reconcile").code == 4, "it stays visible until a person decides"
        r = site.call("resolve", job_id, "--channel", "hook", "--skip")
        assert r.code == 0, r.out + r.err
        assert channel(site, job_id, "hook")["status"] == "skipped"
        assert site.call("reconcile").code == 0
        assert len(platform.requests) == 1


# -- two clones sending at once -----------------------------------------------------------

def test_two_clones_sending_at_once_stay_within_the_rate(site: Site, tmp_path: Path) -> None:
    """``2/hour``. A's first send is paused right after the platform answered
    (``GITPUB_PAUSE_AT=channels.sent``), holding the account's lease; B pushes two jobs
    meanwhile and sends nothing under A's lease; A resumes and records its outcome. Then
    both clones race on the one free slot: exactly 2 posts in all, every job recorded on
    the remote (confirmed, or pending with its next send time), nothing lost."""
    with Platform() as platform:
        configure(site, webhook_channel(platform.url, extra="    rate: 2/hour\n"))
        share_config(site)
        other = clone(site, tmp_path)
        a1 = prepare(site, "a1", "posts/a1.md")
        a = spawn(site, "push", env={"GITPUB_PAUSE_AT": "channels.sent"})
        try:
            wait_stopped(a.pid)
            assert len(platform.requests) == 1
            b = [prepare(other, f"b{n}", f"posts/b{n}.md") for n in (1, 2)]
            r = other.call("push")
            assert r.code == 5, r.out + r.err
            assert "another worker holds the hook-account lease" in r.out, r.out
            assert len(platform.requests) == 1, "A holds the account's lease"
        finally:
            os.kill(a.pid, signal.SIGCONT)
        out, err = a.communicate(timeout=120)
        assert a.returncode == 0, out + err
        a2 = prepare(site, "a2", "posts/a2.md")
        racers = [spawn(s, "push" if s is site else "reconcile") for s in (site, other)]
        for proc in racers:
            proc.communicate(timeout=120)
        for s in (site, other, site):
            s.call("reconcile")
        assert len(platform.requests) == 2
        assert len(set(keys(platform.requests))) == 2
    jobs = [a1, a2, *b]
    records = [without_hint(channel(site, j, "hook")) for j in jobs]
    assert records == [without_hint(channel(other, j, "hook")) for j in jobs], \
        "one truth for both clones"
    assert sorted(h["status"] for h in records) == ["confirmed", "confirmed", "pending",
                                                    "pending"]
    assert all(h["next_attempt_at"] is not None for h in records if h["status"] == "pending")
    assert attempted(site, "hook") == 2


def pending_in_two_clones(site: Site, tmp_path: Path, url: str) -> tuple[Site, list[str]]:
    """A ``1/hour`` webhook shared by ``site`` and a clone of it, each with a published job
    whose channel is pending (the push killed right after the channels were recorded)."""
    configure(site, webhook_channel(url, extra="    rate: 1/hour\n"))
    share_config(site)
    other = clone(site, tmp_path)
    jobs = []
    for s, key in ((site, "a1"), (other, "b1")):
        jobs.append(prepare(s, key, f"posts/{key}.md"))
        r = s.run("push", env={"GITPUB_CRASH_AT": "channels.initialized"})
        assert r.code == -signal.SIGKILL, r.err
    return other, jobs


def test_four_workers_of_two_clones_racing_send_once_under_1_per_hour(
        site: Site, tmp_path: Path) -> None:
    """``1/hour``; each clone has a published job whose channel is pending; two workers of
    each clone reconcile at once against a slow platform: one post in all; the other job is
    held back by the shared window (pending, rate_limited), on both clones alike."""
    with Platform(default="delay:0.4") as platform:
        other, jobs = pending_in_two_clones(site, tmp_path, platform.url)
        racers = [spawn(s, "reconcile") for s in (site, other, site, other)]
        for proc in racers:
            proc.communicate(timeout=120)
        for s in (site, other):
            s.call("reconcile")
        # What each job went through, to read when this fails (it did twice under load).
        seen: list[object] = [(keys([r]), r.time) for r in platform.requests]
        for j in jobs:
            seen += [(j, channel(site, j, "hook")),
                     [(e["to"], e["reason"]) for e in events(site, j)]]
        assert len(platform.requests) == 1, seen
    records = {j: without_hint(channel(site, j, "hook")) for j in jobs}
    assert records == {j: without_hint(channel(other, j, "hook")) for j in jobs}
    assert sorted((r["status"], r["code"]) for r in records.values()) == [
        ("confirmed", None), ("pending", "rate_limited")]
    assert attempted(site, "hook") == 1


def test_a_decision_made_on_an_older_ledger_is_made_again(site: Site, tmp_path: Path) -> None:
    """``1/hour``. A worker of clone A decides to send on the ledger it fetched (empty) and is
    frozen; clone B sends meanwhile; another process of clone A fetches the store (its
    tracking refs now hold B's ledger). The frozen worker resumes: its write would be a
    compare-and-swap against the *newer* ledger, so it must decide again on it — held back by
    the window — not add its send to B's (two posts in the hour)."""
    with Platform(default="ok") as platform:
        other, jobs = pending_in_two_clones(site, tmp_path, platform.url)
        frozen = spawn(site, "reconcile", env={"GITPUB_PAUSE_AT": "channels.decided"})
        try:
            wait_stopped(frozen.pid)
            b = other.run("reconcile")
            assert len(platform.requests) == 1, b.out + b.err
            # Another gitpub process of clone A fetches the store (as any command does).
            git(site.path, "fetch", "-q", "origin",
                "+refs/pub/channel-leases/*:refs/pub/remote/origin/channel-leases/*")
        finally:
            os.kill(frozen.pid, signal.SIGCONT)
        _, err = frozen.communicate(timeout=120)
        assert len(platform.requests) == 1, (keys(platform.requests), err)
        site.call("reconcile")
        records = {j: without_hint(channel(site, j, "hook")) for j in jobs}
    assert sorted((r["status"], r["code"]) for r in records.values()) == [
        ("confirmed", None), ("pending", "rate_limited")], records


# -- nothing secret on the remote ------------------------------------------------------------

def test_no_webhook_secret_in_any_remote_object_or_ref(site: Site, tmp_path: Path) -> None:
    """The webhooks' secrets (header values from the environment) are used for the sends, and
    appear nowhere on the remote — not in the shared channel records, the ledgers, the
    claims, nor any ref's name — though both clones' channel state lives there."""
    token = "ghp_" + "c3D4" * 9
    secret = "s3cr3t-" + "q" * 24
    env = {"HOOK_TOKEN": token, "HOOK_SECRET": secret}
    with Platform(["400"], default="ok") as platform:
        spec = webhook_channel(platform.url, retry=FAST_RETRY,
                               extra="    headers: {Authorization: \"Bearer ${HOOK_TOKEN}\"}\n")
        configure(site, spec, webhook_channel(platform.url, name="hook2", required=False,
                                              extra="    headers: {X-Sig: "
                                                    "\"${HOOK_SECRET}\"}\n"))
        share_config(site)
        job_id = prepare(site)
        r = site.run("push", env=env)
        assert r.code == 4, r.out + r.err
        other = clone(site, tmp_path)
        assert prepare(other, "k1") == job_id
        b = other.run("reconcile", env=env)
        assert len(platform.requests) == 2
        by_name = {q.headers.get("Authorization"): q for q in platform.requests}
        assert f"Bearer {token}" in by_name
        assert any(q.headers.get("X-Sig") == secret for q in platform.requests)
    assert channel(site, job_id, "hook")["status"] == "not_sent"
    assert channel(other, job_id, "hook2")["status"] == "confirmed"
    # The shared state is there (so the search means something) ...
    assert any(ref.startswith("refs/pub/channel-leases/") for ref in remote_refs(site))
    shown = git(site.remote, "show", f"refs/pub/jobs/{job_id}:channels/hook2.json")
    assert '"confirmed"' in shown
    # ... and holds no secret, in any object or ref name of the bare remote.
    objects = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch",
                              "--unordered"], cwd=site.remote, capture_output=True,
                             check=True).stdout
    refs = git(site.remote, "for-each-ref", "--format=%(refname) %(objectname)").encode()
    packed = (site.remote / "packed-refs").read_bytes() \
        if (site.remote / "packed-refs").exists() else b""
    for leaked in (token, secret, "c3D4c3D4"):
        for where in (objects, refs, packed, (r.out + r.err + b.out + b.err).encode()):
            assert leaked.encode() not in where


# -- claim refs do not pile up ---------------------------------------------------------------

def claim_refs(site: Site) -> tuple[int, int]:
    """Claim refs on the remote, and in the clone (its own copies and its tracking refs)."""
    local = git(site.path, "for-each-ref", "--format=%(refname)", "refs/pub/").split()
    return (len(remote_refs(site, "refs/pub/channel-claims/")),
            sum("channel-claims/" in ref for ref in local))


def test_claim_refs_are_folded_once_the_send_settles(site: Site, tmp_path: Path) -> None:
    """Every send claims its intent on the remote; the write that settles it folds the claim
    into the account's ledger in the same push. Batch after batch of sends, no claim ref is
    left anywhere; one waiting for a person keeps its claim exactly until the person decides.
    A settled intent is still never sent again (the ledger lists it)."""
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    share_config(site)
    jobs, counts = [], []
    for batch in range(3):
        jobs += [prepare(site, f"k{batch}-{n}", f"posts/p{batch}-{n}.md") for n in range(4)]
        assert site.call("push").code == 0
        counts.append(claim_refs(site))
    assert counts == [(0, 0)] * 3
    assert len(posts(platform)) == 12
    intents = sorted(channel(site, j)["intent_key"] for j in jobs)
    ref = lease_ref("social", "news")
    ledger = json.loads(git(site.remote, "show", f"{ref}:ledger.json"))
    assert ledger["settled"] == 12 and ledger["attempted"] == 12
    assert settled_intents(site, ref) == intents
    # Unknown, no probe: the claim stays while a person must look, and goes with the decision.
    configure(site, command_channel(platform, probe=False))
    stuck = prepare(site, "stuck", "posts/stuck.md")
    assert site.run("push", env={"CHANNEL_TOOL_MODE": "unknown"}).code == 4
    assert claim_refs(site) == (1, 2)  # ours, and the tracking ref of the remote's
    assert site.call("reconcile").code == 4
    assert claim_refs(site) == (1, 2), "not settled: reconcile leaves its claim"
    r = site.call("resolve", stuck, "--channel", "social", "--skip")
    assert r.code == 0, r.out + r.err
    assert claim_refs(site) == (0, 0)
    # The job's shared record lost (deleted by hand), a clone that never saw it tries again:
    # the ledger still says the intent settled: its probe finds the post, nothing is posted.
    first = jobs[0]
    git(site.remote, "update-ref", "-d", f"refs/pub/jobs/{first}")
    other = clone(site, tmp_path)
    assert prepare(other, "k0-0", "posts/p0-0.md") == first
    r = other.call("push")
    assert r.code == 0, r.out + r.err
    assert "another clone settled this intent on the remote" in r.out
    again = channel(other, first)
    assert again["status"] == "confirmed" and again["evidence"] == "probe"
    assert len(posts(platform)) == 13
    assert claim_refs(other) == (0, 0)


def test_reconcile_folds_the_claims_settled_sends_left(site: Site, tmp_path: Path) -> None:
    """A remote an older gitpub used keeps one claim ref per send ever made, and its ledger
    lists none of them as settled. ``reconcile`` folds every claim whose record settled on the
    remote into its account's ledger; a claim it cannot match to a settled record stays."""
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    jobs = [prepare(site, f"k{n}", f"posts/p{n}.md") for n in range(3)]
    assert site.call("push").code == 0
    intents = sorted(channel(site, j)["intent_key"] for j in jobs)
    ledger = lease_ref("social", "news")
    git(site.remote, "update-ref", "-d", ledger)  # as an older gitpub left it: no ledger
    empty = git(site.path, "hash-object", "-t", "tree", "-w", "--stdin", input=b"").strip()
    stray = "0" * 8 + "-0000-5000-8000-" + "0" * 12
    for job_id, key in [*((j, channel(site, j)["intent_key"]) for j in jobs),
                        (jobs[0], stray)]:
        message = (f"gitpub: channel claim {key}\n\njob {job_id}\nchannel social\n"
                   "account news\noperation create\nclaimed by old:1:1\nnonce 0\n")
        claim = git(site.path, "commit-tree", empty, "-m", message).strip()
        git(site.path, "push", "-q", str(site.remote), f"{claim}:refs/pub/channel-claims/{key}")
    assert len(remote_refs(site, "refs/pub/channel-claims/")) == 4
    assert site.call("reconcile").code == 0
    assert remote_refs(site, "refs/pub/channel-claims/") == [f"refs/pub/channel-claims/{stray}"]
    assert settled_intents(site, ledger) == intents
    assert json.loads(git(site.remote, "show", f"{ledger}:ledger.json"))["settled"] == 3
    assert site.call("reconcile").code == 0  # nothing more to fold; the stray claim stays
    assert len(remote_refs(site, "refs/pub/channel-claims/")) == 1
    assert len(posts(platform)) == 3
