"""Channels against the attacks of a hostile session: a second clone, hostile adapter output,
hostile HTTP headers and answers, a renamed channel, a sanitized account, a lost index.

Each test counts what the platform (a file written by ``channel_tool.py``, or the recording
HTTP server of ``httpfaults``) actually received.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from channelkit import (
    channel,
    command_channel,
    configure,
    posts,
    prepare,
    settled_intents,
    webhook_channel,
)
from conftest import Clock, Site, git
from httpfaults import Platform

from gitpub.channels.adapters import send_outcome
from gitpub.channels.claim import Claimed, Claims, claim_ref
from gitpub.channels.lease import lease_ref
from gitpub.channels.model import ChannelRecord, Status, Unknown
from gitpub.channels.webhook import MAX_RETRY_AFTER, WebhookAdapter, retry_after
from gitpub.git import writing
from gitpub.git.remote import Remote
from gitpub.git.repo import Repository
from gitpub.runtime.steps import StepResult

SLOW_RETRY = "{max_attempts: 3, backoff_base: 30, backoff_max: 30, jitter: 0}"


def second_clone(site: Site, tmp_path: Path, name: str = "clone2") -> Site:
    """Another publishing clone of the same remote, with its own job store."""
    path = tmp_path / name
    git(tmp_path, "clone", "-q", str(site.remote), str(path))
    site.repos.append(path)
    return Site(path, site.remote, site.env)


def remote_claims(site: Site) -> list[str]:
    out = git(site.remote, "for-each-ref", "--format=%(refname)", "refs/pub/channel-claims/")
    return out.split()


def strict_json(text: str) -> object:
    def refuse(name: str) -> object:
        raise AssertionError(f"not RFC 8259 JSON: {name}")

    return json.loads(text, parse_constant=refuse)


# -- r02, r02b: a second clone never posts again -------------------------------------------

def test_second_clone_publishing_the_same_job_never_posts_again(site: Site,
                                                               tmp_path: Path) -> None:
    """The channel records are shared through the remote: the second clone reads the first
    one's confirmation (its evidence is the first clone's send) and neither sends nor
    probes."""
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    site.git("add", ".gitpub.yaml")
    site.git("commit", "-qm", "channels")
    site.git("push", "-q", "origin", "main")
    job_id = prepare(site, "same")
    assert site.call("push").code == 0
    first = channel(site, job_id)
    assert first["status"] == "confirmed"
    other = second_clone(site, tmp_path)
    assert prepare(other, "same") == job_id
    r = other.call("push")  # the job is found published, its channels confirmed already
    assert r.code == 0, r.out + r.err
    assert "sending" not in r.err and "reconciling" not in r.err
    social = channel(other, job_id)
    assert social == first, "the second clone reads the first one's record"
    assert social["evidence"] == "send" and social["remote_id"] == "post-1"
    assert len(posts(platform)) == 1, "one intent, one post, whichever clone drives it"
    # The intent settled: its claim is folded into the account's ledger (no ref left).
    assert remote_claims(site) == []
    ref = lease_ref("social", "news")
    assert json.loads(git(site.remote, "show", f"{ref}:ledger.json"))["settled"] == 1
    assert settled_intents(site, ref) == [social["intent_key"]]


def test_two_clones_one_commit_one_post(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    site.git("add", ".gitpub.yaml")
    site.git("commit", "-qm", "channels")
    site.git("push", "-q", "origin", "main")
    other = second_clone(site, tmp_path)
    job_id = prepare(site, "same")
    assert prepare(other, "same") == job_id  # both before either pushed
    assert site.call("push").code == 0
    other.call("push")
    other.call("reconcile")
    log = git(site.remote, "log", "--format=%B", "main")
    assert log.count(f"Blog-Job-Id: {job_id}") == 1
    keys = [p["key"] for p in posts(platform)]
    assert len(keys) == 1, keys


def test_two_clones_of_one_owner_in_one_second_do_not_share_a_claim(
        site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One process (or two with the same host name and pid, in containers) drives two clones
    within one second: without a nonce both made the very same claim commit, the second push
    read "up to date" and the second clone took the claim for its own — and posted again."""
    site.git("push", "-q", "origin", "main")
    other = second_clone(site, tmp_path)
    monkeypatch.setattr(writing, "time", SimpleNamespace(time=lambda: 1_800_000_000.0))
    record = ChannelRecord(channel="social", account="news", kind="command", required=True,
                           after="publish", operation="create", intent_key="k-same",
                           payload_sha256="0" * 64, status=Status.PENDING,
                           created_at=1_800_000_000.0, updated_at=1_800_000_000.0)
    verdicts = []
    for clone in (site, other):
        with Repository.discover(clone.path) as repo:
            claims = Claims(repo, Remote(repo, "origin", "main"), "host:1:1")
            verdicts.append(claims.claim("job", record).claimed)
    assert verdicts == [Claimed.OURS, Claimed.THEIRS]
    assert remote_claims(site) == [claim_ref("k-same")]


def test_second_clone_without_the_shared_record_still_meets_the_claim(
        site: Site, tmp_path: Path) -> None:
    """The claim outlives the shared record: with the remote's job ref gone (deleted by hand,
    or written by an older gitpub that kept channels per clone), the second clone records its
    own pending channel — and its send meets the first clone's claim: without a probe, a
    person decides; never a second post."""
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform, probe=False))
    site.git("add", ".gitpub.yaml")
    site.git("commit", "-qm", "channels")
    site.git("push", "-q", "origin", "main")
    job_id = prepare(site, "same")
    assert site.call("push").code == 0
    git(site.remote, "update-ref", "-d", f"refs/pub/jobs/{job_id}")
    other = second_clone(site, tmp_path)
    prepare(other, "same")
    r = other.call("push")
    assert r.code == 4, r.out + r.err
    social = channel(other, job_id)
    assert social["status"] == "needs_manual" and social["code"] == "claimed_elsewhere"
    assert len(posts(platform)) == 1


def test_no_send_without_a_claim_the_remote_holds(site: Site, tmp_path: Path) -> None:
    """The remote refuses the claim (a hook): nothing is sent, a person decides; once the
    remote takes claims, the person's ``--not-sent`` sends it, once."""
    platform = tmp_path / "platform.jsonl"
    configure(site, command_channel(platform))
    hook = site.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nif grep -q refs/pub/channel-claims/; then\n"
                    "  echo 'claims refused here' >&2; exit 1\nfi\nexit 0\n")
    hook.chmod(0o755)
    job_id = prepare(site)
    r = site.call("push")
    assert r.code == 4, r.out + r.err
    social = channel(site, job_id)
    assert social["status"] == "not_sent" and social["code"] == "claim_refused"
    assert social["needs_person"] and posts(platform) == []
    assert remote_claims(site) == []
    hook.unlink()
    assert site.call("resolve", job_id, "--channel", "social", "--not-sent").code == 0
    assert site.call("reconcile").code == 0
    assert channel(site, job_id)["status"] == "confirmed"
    assert len(posts(platform)) == 1


# -- r05: a command's output that is not exactly one outcome ---------------------------------

@pytest.mark.slow
def test_clipped_output_with_two_answers_is_unknown(site: Site, tmp_path: Path,
                                                    clock: Clock) -> None:
    platform = tmp_path / "plat"
    send = tmp_path / "send.sh"
    send.write_text("#!/bin/sh\ncat >/dev/null; echo \"{\\\"key\\\":\\\"$GITPUB_INTENT_KEY\\\"}\""
                    " >> \"$1\"\necho '{\"outcome\":\"sent\",\"remote_id\":\"p1\"}'\n"
                    "python3 -c 'print(\"\\n\" * 70000)'\n"
                    "echo '{\"outcome\":\"not_sent\",\"retryable\":true,\"code\":\"x\"}'\n")
    send.chmod(0o755)
    configure(site, command_channel(platform, probe=False, send=[str(send), str(platform)]))
    job_id = prepare(site)
    for _ in range(3):
        site.call("push")
        clock.advance(0.3)  # the next attempt falls due
    social = channel(site, job_id)
    assert social["status"] == "needs_manual" and social["code"] == "output_too_long"
    assert len(platform.read_text().splitlines()) == 1


@pytest.mark.parametrize("stdout", [
    b'{"outcome":"sent","remote_id":"p1"}\n{"outcome":"not_sent","retryable":true}\n',
    b'{"outcome":"not_sent","retryable":true,"outcome":"not_sent"}',
    b'{"outcome":"not_sent","retryable":true,"code":NaN}',
    b'\xff{"outcome":"not_sent","retryable":true}',
])
def test_output_not_exactly_one_object_is_unknown(stdout: bytes) -> None:
    assert isinstance(send_outcome(StepResult(0, stdout, b"")), Unknown)


# -- r07: a channel renamed while a send was in flight ---------------------------------------

def test_channel_renamed_while_sending_can_be_resolved(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "plat"
    configure(site, command_channel(platform))
    job_id = prepare(site)
    assert site.run("push", env={"GITPUB_CRASH_AT": "channels.sent"}).code == -signal.SIGKILL
    config = site.path / ".gitpub.yaml"
    config.write_text(config.read_text().replace("name: social", "name: mastodon"))
    assert site.call("reconcile").code == 4
    social = channel(site, job_id)
    assert social["status"] == "needs_manual" and social["needs_person"]
    r = site.call("resolve", job_id, "--channel", "social", "--confirmed",
                  "https://social.example/post-1")
    assert r.code == 0, r.err
    assert channel(site, job_id)["status"] == "confirmed"
    assert len(posts(platform)) == 1


def test_resolve_a_sending_record_whose_worker_is_gone(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "plat"
    configure(site, command_channel(platform))
    job_id = prepare(site)
    assert site.run("push", env={"GITPUB_CRASH_AT": "channels.sent"}).code == -signal.SIGKILL
    assert channel(site, job_id)["status"] == "sending"
    r = site.call("resolve", job_id, "--channel", "social", "--skip")
    assert r.code == 0, r.err
    assert channel(site, job_id)["status"] == "skipped"


# -- r08: an account that the sanitizer redacts ------------------------------------------------

def test_account_with_a_secret_is_still_the_same_channel(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "plat"
    account = "https://bot:s3cretpass@social.example"
    configure(site, command_channel(platform).replace("account: news",
                                                      f"account: {json.dumps(account)}"))
    job_id = prepare(site)
    r = site.call("push")
    assert r.code == 0, r.out + r.err
    social = channel(site, job_id)
    assert social["status"] == "confirmed" and "s3cretpass" not in social["account"]
    (post,) = posts(platform)
    assert post["account"] == account, "the command gets the account as configured"
    assert b"s3cretpass" not in site.all_objects_text()
    assert b"s3cretpass" not in git(site.remote, "log", "--all", "--format=%B").encode()


# -- r09, r10: hostile Retry-After -----------------------------------------------------------

@pytest.mark.parametrize("header", ["\u00b2", "9" * 400])
def test_hostile_retry_after_is_contained_and_bounded(site: Site, header: str) -> None:
    with Platform([f"429:{header}"]) as platform:
        configure(site, webhook_channel(platform.url, retry=SLOW_RETRY))
        job_id = prepare(site)
        start = time.time()
        r = site.call("push", "--json")
        assert r.code == 5, r.err
        strict_json(r.out)
        status = site.call("status", "--json", job_id)
        strict_json(status.out)
        hook = channel(site, job_id, "hook")
        assert hook["status"] == "not_sent" and hook["code"] == "http_429"
        assert start < hook["next_attempt_at"] <= time.time() + MAX_RETRY_AFTER
        stored = git(site.path, "show", f"refs/pub/jobs/{job_id}:channels/hook.json")
        strict_json(stored)
        assert len(platform.requests) == 1


def test_retry_after_forms_hostile() -> None:
    assert retry_after("\u00b2", 0.0) is None
    assert retry_after("\u0663", 0.0) is None  # an Arabic-Indic three
    assert retry_after("9" * 400, 0.0) == MAX_RETRY_AFTER
    assert retry_after("Fri, 31 Dec 9999 23:59:59 GMT", 0.0) == MAX_RETRY_AFTER


# -- r18: the channel's timeout is a deadline ------------------------------------------------

@pytest.mark.slow
def test_webhook_timeout_is_a_total_deadline(site: Site) -> None:
    with Platform(["trickle:0.5"]) as platform:
        configure(site, webhook_channel(platform.url, timeout=1, retry=SLOW_RETRY))
        job_id = prepare(site)
        start = time.monotonic()
        r = site.call("push")
        took = time.monotonic() - start
        assert r.code == 5, r.err
        hook = channel(site, job_id, "hook")
        assert hook["status"] == "unknown" and hook["code"] == "timeout"
        assert took < 15, f"a 1 s deadline, the answer trickling for 30 s: took {took:.1f}s"
        assert len(platform.requests) == 1


# -- a 2xx that says it failed ---------------------------------------------------------------

def test_2xx_with_ok_false_is_not_confirmed(site: Site) -> None:
    with Platform(default="ok_false") as platform:
        configure(site, webhook_channel(platform.url))
        job_id = prepare(site)
        site.call("push")
        hook = channel(site, job_id, "hook")
        assert hook["status"] in ("unknown", "needs_manual")
        assert hook["code"].startswith("http_200_ok_false"), hook["code"]
        assert platform.posts == []


def test_adapter_exception_is_unknown_not_a_crash(site: Site,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: WebhookAdapter, payload: bytes, intent: object) -> None:
        raise RuntimeError("adapter bug")

    with Platform() as platform:
        configure(site, webhook_channel(platform.url, retry=SLOW_RETRY))
        job_id = prepare(site)
        monkeypatch.setattr(WebhookAdapter, "send", broken)
        r = site.call("push")
        assert r.code == 5, r.err
        hook = channel(site, job_id, "hook")
        assert hook["status"] == "unknown" and hook["code"] == "adapter_error RuntimeError"


# -- r20: the index of unsettled distributions lost ------------------------------------------

def test_lost_distribution_index_is_rebuilt_by_reconcile(site: Site, tmp_path: Path) -> None:
    platform = tmp_path / "plat"
    configure(site, command_channel(platform))
    job_id = prepare(site)
    r = site.run("push", env={"GITPUB_CRASH_AT": "channels.initialized"})
    assert r.code == -signal.SIGKILL, r.err
    site.git("update-ref", "-d", f"refs/pub/distributing/{job_id}")
    r = site.call("reconcile")
    assert r.code == 0, r.out + r.err
    assert "missing from the distribution index" in r.out + r.err
    assert channel(site, job_id)["status"] == "confirmed"
    assert len(posts(platform)) == 1
