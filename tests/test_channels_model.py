"""Channel records, decisions, the payload and the webhook classification, one rule at a time
(the webhook against a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import replace

import pytest
from httpfaults import Platform
from hypothesis import given, settings
from hypothesis import strategies as st
from netfaults import free_port

from gitpub.channels import decide
from gitpub.channels.adapters import Intent, send_outcome
from gitpub.channels.decide import Action
from gitpub.channels.model import (
    ChannelRecord,
    ChannelRecordError,
    Holder,
    IllegalChannelMove,
    NotSent,
    Sent,
    Status,
    Unknown,
    parse_channel,
)
from gitpub.channels.payload import build_payload, canonical_url, parse_payload
from gitpub.channels.webhook import WebhookAdapter, classify, retry_after
from gitpub.config.load import parse_config
from gitpub.config.model import ChannelSpec, Rate, RetryPolicy, SiteSpec
from gitpub.core.errors import ConfigError
from gitpub.core.record import JobRecord
from gitpub.core.states import State
from gitpub.runtime.steps import StepResult

NOW = 1_800_000_000.0
RECORD = ChannelRecord(channel="social", account="news", kind="command", required=True,
                       after="publish", operation="create", intent_key="k", payload_sha256="0"
                       * 64, status=Status.PENDING, created_at=NOW, updated_at=NOW)
OURS = Holder("ours", "host:1:1", NOW + 60)
SPEC = ChannelSpec(name="social", kind="command", account="news", send=("true",),
                   probe=("true",), retry=RetryPolicy(3, 1.0, 4.0, 0.0))


# -- records ---------------------------------------------------------------------------------

def test_record_round_trips() -> None:
    sending = decide.sending(RECORD, OURS, NOW)
    for record in (RECORD, sending, decide.after_send(sending, Unknown("x"), SPEC, NOW)):
        assert parse_channel(record.to_json()) == record


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_damage_is_refused_or_parses_to_a_valid_record(data: st.DataObject) -> None:
    raw = json.loads(decide.sending(RECORD, OURS, NOW).to_json())
    key = data.draw(st.sampled_from(sorted(raw)))
    value = data.draw(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(),
                                st.text(max_size=5), st.lists(st.integers(), max_size=2)))
    damaged = dict(raw, **{key: value}) if data.draw(st.booleans()) else {
        k: v for k, v in raw.items() if k != key}
    try:
        record = parse_channel(json.dumps(damaged).encode())
    except ChannelRecordError:
        return
    assert isinstance(record.status, Status) and isinstance(record.attempts, int)
    assert (record.holder is not None) == (record.status in (Status.SENDING,
                                                             Status.RECONCILING))


@pytest.mark.parametrize("raw", [b"", b"[]", b'{"format": 2}', b"\xff",
                                 b'{"format": 1, "status": "sent"}'])
def test_garbage_is_refused(raw: bytes) -> None:
    with pytest.raises(ChannelRecordError):
        parse_channel(raw)


def test_illegal_moves_are_refused() -> None:
    confirmed = RECORD.evolve(status=Status.SENDING, holder=OURS).evolve(
        status=Status.CONFIRMED, holder=None)
    for target in (Status.PENDING, Status.SENDING, Status.UNKNOWN):
        with pytest.raises(IllegalChannelMove):
            confirmed.evolve(status=target)
    with pytest.raises(IllegalChannelMove):
        RECORD.evolve(status=Status.CONFIRMED)  # never confirmed without a send or a person
    sending = RECORD.evolve(status=Status.SENDING, holder=OURS)
    with pytest.raises(IllegalChannelMove):
        sending.evolve(status=Status.PENDING)  # an expired send is unknown, never pending


# -- decisions -------------------------------------------------------------------------------

def test_next_action() -> None:
    assert decide.next_action(RECORD, OURS, NOW, live=True) == Action.SEND
    waits = replace(RECORD, after="live")
    assert decide.next_action(waits, OURS, NOW, live=False) is None
    theirs = decide.sending(RECORD, Holder("theirs", "h:2:2", NOW - 1), NOW)
    assert decide.next_action(theirs, OURS, NOW, live=True) == Action.EXPIRE
    assert decide.next_action(decide.sending(RECORD, OURS, NOW), OURS, NOW, True) is None
    unknown = decide.expired(theirs, NOW)
    assert unknown.status == Status.UNKNOWN and unknown.code == "lease_lost"
    assert decide.next_action(unknown, OURS, NOW, live=True) == Action.RECONCILE
    later = replace(unknown, next_attempt_at=NOW + 10)
    assert decide.next_action(later, OURS, NOW, live=True) is None


def test_outcomes_of_a_send() -> None:
    sending = decide.sending(RECORD, OURS, NOW)
    sent = decide.after_send(sending, Sent("1", "https://x/1", "send"), SPEC, NOW)
    assert sent.status == Status.CONFIRMED and sent.holder is None and sent.remote_id == "1"
    retry = decide.after_send(sending, NotSent(True, "busy", retry_after=30), SPEC, NOW)
    assert retry.status == Status.NOT_SENT and retry.next_attempt_at == NOW + 30
    spent = decide.after_send(replace(sending, attempts=3), NotSent(True, "busy"), SPEC, NOW)
    assert spent.next_attempt_at is None and spent.waits_for_person
    refused = decide.after_send(sending, NotSent(False, "http_400"), SPEC, NOW)
    assert refused.waits_for_person
    unknown = decide.after_send(sending, Unknown("timeout"), SPEC, NOW)
    assert unknown.status == Status.UNKNOWN and unknown.unknown_since == NOW
    assert unknown.next_attempt_at == NOW + 1.0


def test_reconciliation_is_bounded() -> None:
    record = decide.after_send(decide.sending(RECORD, OURS, NOW), Unknown("t"), SPEC, NOW)
    for n in range(1, 4):
        looking = decide.reconciling(record, OURS, NOW, "probe")
        assert looking.reconciles == n
        record = decide.after_reconcile(looking, Unknown("probe_not_found"), SPEC, NOW)
    assert record.status == Status.NEEDS_MANUAL
    no_probe = decide.after_reconcile(decide.reconciling(RECORD.evolve(
        status=Status.SENDING, holder=OURS).evolve(status=Status.UNKNOWN, holder=None),
        OURS, NOW, "x"), None, SPEC, NOW)
    assert no_probe.status == Status.NEEDS_MANUAL


def test_intent_keys_are_stable_and_distinct() -> None:
    key = decide.intent_key("job", "social", "news", "create")
    assert key == decide.intent_key("job", "social", "news", "create")
    assert len({key, decide.intent_key("job", "social", "other", "create"),
                decide.intent_key("job", "social", "news", "update"),
                decide.intent_key("job2", "social", "news", "create")}) == 4


def test_backoff_is_bounded_and_jittered() -> None:
    policy = RetryPolicy(10, 2.0, 30.0, 0.5)
    waits = [decide.backoff(n, policy) for n in range(1, 12) for _ in range(20)]
    assert all(0 <= w <= 45 for w in waits) and len(set(waits)) > 100


# -- the command protocol --------------------------------------------------------------------

@pytest.mark.parametrize(("stdout", "code", "expected"), [
    (b'{"outcome":"sent","remote_id":"7","url":"https://x/7"}', 0, Sent("7", "https://x/7",
                                                                       "send")),
    (b'{"outcome":"sent","remote_id":42}', 0, Sent("42", None, "send")),
    (b'{"outcome":"sent"}', 0, Unknown("sent_without_evidence")),
    (b'{"outcome":"not_sent","retryable":true,"code":"busy"}', 0, NotSent(True, "busy")),
    (b'{"outcome":"not_sent","code":"no"}', 0, NotSent(False, "no")),
    (b'{"outcome":"unknown","code":"lost"}', 0, Unknown("lost")),
    (b'{"outcome":"sent","remote_id":"7"}', 1, Unknown("exit_status_1")),
    (b"sent", 0, Unknown("unreadable_output")),
    (b'{"outcome":"maybe"}', 0, Unknown("unreadable_output")),
])
def test_command_outcomes(stdout: bytes, code: int, expected: object) -> None:
    assert send_outcome(StepResult(code, stdout, b"")) == expected


def test_command_that_cannot_start_or_times_out() -> None:
    assert send_outcome(StepResult(None, b"", b"", start_error="x")) == NotSent(False,
                                                                               "cannot_run")
    assert send_outcome(StepResult(None, b"", b"", timed_out=True)) == Unknown("timeout")


# -- the webhook classification --------------------------------------------------------------

@pytest.mark.parametrize(("status", "expected"), [
    (200, Sent("9", "https://x/9", "HTTP 200")), (201, Sent("9", "https://x/9", "HTTP 201")),
    (400, NotSent(False, "http_400")), (404, NotSent(False, "http_404")),
    (408, Unknown("http_408")), (409, Unknown("http_409")),
    (429, NotSent(True, "http_429", 7.0)), (503, NotSent(True, "http_503", 7.0)),
    (500, Unknown("http_500")), (502, Unknown("http_502")), (302, Unknown("http_302")),
])
def test_http_status_classification(status: int, expected: object) -> None:
    body = b'{"id": 9, "url": "https://x/9"}'
    assert classify(status, {"retry-after": "7"}, body) == expected


def test_retry_after_forms() -> None:
    assert retry_after("120", NOW) == 120.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480.0 - 30) == 30.0
    assert retry_after("soon", NOW) is None and retry_after(None, NOW) is None


def _intent() -> Intent:
    return Intent("key-1", "job", "hook", "acct", "create", "0" * 64)


def _spec(url: str, timeout: float = 1.0) -> ChannelSpec:
    return ChannelSpec(name="hook", kind="webhook", account="acct", url=url, timeout=timeout,
                       headers=(("Authorization", "Bearer ${HOOK_TOKEN}"),))


@pytest.mark.slow
def test_webhook_against_a_real_server() -> None:
    with Platform(["ok", "drop", "delay:2", "429:3"]) as platform:
        adapter = WebhookAdapter(_spec(platform.url), env={"HOOK_TOKEN": "t0k"})
        sent = adapter.send(b'{"a":1}', _intent())
        assert isinstance(sent, Sent) and sent.remote_id == "1000"
        assert adapter.send(b'{"a":1}', _intent()) == Unknown("connection_lost")
        assert adapter.send(b'{"a":1}', _intent()) == Unknown("timeout")
        limited = adapter.send(b'{"a":1}', _intent())
        assert limited == NotSent(True, "http_429", 3.0)
        first = platform.requests[0]
    assert first.headers["Idempotency-Key"] == "key-1"
    assert first.headers["Authorization"] == "Bearer t0k" and first.body == b'{"a":1}'


def test_webhook_connect_refused_is_not_sent_and_missing_env_too() -> None:
    port = free_port()
    with socket.socket() as s:  # nothing listens on it
        s.bind(("127.0.0.1", 0))
    adapter = WebhookAdapter(_spec(f"http://127.0.0.1:{port}/x"), env={"HOOK_TOKEN": "t"})
    assert adapter.send(b"{}", _intent()) == NotSent(True, "connect_failed")
    missing = WebhookAdapter(_spec(f"http://127.0.0.1:{port}/x"), env={})
    outcome = missing.send(b"{}", _intent())
    assert isinstance(outcome, NotSent) and not outcome.retryable
    assert "HOOK_TOKEN" in outcome.code


# -- the payload -----------------------------------------------------------------------------

def _published(path: str) -> JobRecord:
    return JobRecord(job_id="j", idempotency_key="k", request_hash="h",
                     state=State.PUBLISHED, node="n", created_at=NOW, updated_at=NOW,
                     manifest_sha256="m" * 64, remote_commit="c" * 40)


def test_payload_is_canonical_and_complete() -> None:
    config = parse_config("site: {url: 'https://blog.example/', path: '/{dir}/{slug}/'}\n"
                          "articles: ['posts/**/*.md']\n")
    text = ("---\ntitle: 你好, world\nslug: hello-world\ncover: /img/cover.png\n---\n\n"
            "# 你好, world\n\nFirst   paragraph\nwraps.\n\n![x](a.png)\n"
            "password = hunter22hunter22\n").encode()
    raw = build_payload(config, _published("posts/hello.md"), "posts/hello.md", text)
    data = parse_payload(raw)
    assert data["url"] == "https://blog.example/posts/hello-world/"
    assert data["title"] == "你好, world" and data["summary"] == "First paragraph wraps."
    assert data["media"] == ["https://blog.example/img/cover.png",
                             "https://blog.example/posts/hello-world/a.png"]
    assert raw == json.dumps(data, sort_keys=True, separators=(",", ":"),
                             ensure_ascii=False).encode()
    assert data["remote_commit"] == "c" * 40 and data["manifest_sha256"] == "m" * 64


def test_canonical_url_quotes_what_a_url_cannot_hold() -> None:
    site = SiteSpec(url="https://blog.example", path="/{stem}/")
    assert canonical_url(site, "posts/你好 世界.md", {}) == \
        "https://blog.example/%E4%BD%A0%E5%A5%BD%20%E4%B8%96%E7%95%8C/"


# -- configuration ---------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "key"), [
    ("channels: [{name: x, kind: command, account: a, send: s}]", "site.url"),
    ("site: {url: 'https://b'}\nchannels: [{name: X, kind: command, account: a, send: s}]",
     "channels[0].name"),
    ("site: {url: 'https://b'}\nchannels: [{name: x, kind: fax, account: a}]",
     "channels[0].kind"),
    ("site: {url: 'https://b'}\nchannels: [{name: x, kind: webhook, account: a}]",
     "channels[0].url"),
    ("site: {url: 'https://b'}\nchannels: [{name: x, kind: command, account: a, send: s, "
     "url: 'https://c'}]", "channels[0].url"),
    ("site: {url: 'https://b'}\nchannels: [{name: x, kind: command, account: a, send: s, "
     "rate: 'often'}]", "channels[0].rate"),
    ("site: {url: 'https://b'}\nchannels: [{name: x, kind: command, account: a, send: s, "
     "timeout: 10, lease: 5}]", "channels[0].lease"),
    ("site: {url: 'https://b'}\nchannels: [{name: x, kind: command, account: a, send: s, "
     "after: live}]", "channels[0].after"),
    ("site: {url: 'https://b'}\nchannels: [{name: x, kind: command, account: a, send: s},"
     " {name: x, kind: command, account: b, send: s}]", "channels[1].name"),
    ("site: {url: 'ftp://b'}", "site.url"),
    ("site: {url: 'https://b', path: '/{year}/'}", "site.path"),
    ("site: {url: 'https://b', live: {match: body}}", "site.live.match"),
    ("site: {url: 'https://b'}\nchannels: [{name: x, kind: webhook, account: a, "
     "url: 'https://c', headers: {Idempotency-Key: k}}]", "channels[0].headers.Idempotency-Key"),
])
def test_channel_config_errors_name_the_key(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    assert info.value.key == key, info.value.message


@pytest.mark.parametrize(("text", "rate"), [("10/hour", Rate(10, 3600.0)),
                                            ("1/min", Rate(1, 60.0)),
                                            ("5/30s", Rate(5, 30.0)),
                                            ("2 / day", Rate(2, 86400.0)),
                                            ("3/hours", Rate(3, 3600.0))])
def test_rates(text: str, rate: Rate) -> None:
    config = parse_config("site: {url: 'https://b'}\nchannels: [{name: x, kind: command, "
                          f"account: a, send: s, rate: '{text}'}}]")
    assert config.channels[0].rate == rate


def test_clock_is_not_needed_for_classification() -> None:
    before = time.time()
    outcome = classify(503, {"retry-after": "1"}, b"")
    assert isinstance(outcome, NotSent) and outcome.retry_after == 1.0
    assert time.time() - before < 1
