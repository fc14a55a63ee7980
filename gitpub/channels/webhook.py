"""The ``webhook`` kind: an HTTP POST of the frozen payload, with an ``Idempotency-Key`` header.

The classification is the point (reference §1 and §6: a timeout does not mean "not sent", and a
500 does not mean "no side effect"):

=================================================  ===========================================
2xx                                                sent (``id``/``remote_id`` and ``url`` from a
                                                   JSON body, if it has them) — unless the body
                                                   says otherwise (below)
429, 503                                           not sent, retryable, after ``Retry-After``
408, 409                                           unknown (the server may be processing it)
any other 4xx                                      not sent, not retryable
5xx (but 503), 1xx, 3xx                            unknown (it may have committed first)
no connection (refused, connect timeout, no pool)  not sent, retryable: no byte left
timeout, reset or close after the request left     unknown
=================================================  ===========================================

A 2xx answer is ``sent`` unless its JSON object body says otherwise, in one of two documented
ways: an ``"outcome"`` field speaks the command protocol (``"sent"``, ``"not_sent"`` with
``retryable`` and ``code``, or ``"unknown"``; any other value is unknown), and ``"ok": false``
(Slack-style, no ``outcome``) is unknown — the platform says it failed but not that nothing
happened. ``Retry-After`` is ASCII delta-seconds or an HTTP date, capped at
``MAX_RETRY_AFTER``; anything else is ignored (the backoff applies).

The channel's ``timeout`` is a deadline for the whole exchange (connect, send, every byte of the
answer), not per read: a server that trickles its answer is cut off at the deadline (unknown).

Because the key travels with the request, an unknown outcome is reconciled by sending the same
bytes with the same key again: an idempotent endpoint answers with the original result and
creates nothing new. ``headers`` values may name environment variables (``${NAME}``), expanded
here, at send time, and never stored. Redirects are not followed (a POST is not replayed
elsewhere). httpx is imported only when a webhook is actually sent.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

from gitpub import __version__
from gitpub.channels.adapters import Intent, code
from gitpub.channels.model import NotSent, Outcome, Sent, Unknown
from gitpub.config.model import ChannelSpec
from gitpub.core.sanitize import remember_secret, sanitize

_ENV_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: The longest connect phase we wait for, whatever the channel's timeout.
CONNECT_TIMEOUT = 10.0
#: The longest ``Retry-After`` honoured (a day): a platform cannot park a channel forever.
MAX_RETRY_AFTER = 86400.0
#: The largest answer body read (evidence is an id and a URL): more is cut off, unknown.
BODY_LIMIT = 1024 * 1024
#: Seconds we wait past the deadline for the exchange's own timeout to report first.
JOIN_SLACK = 0.5
_DIGITS_RE = re.compile(r"[0-9]{1,12}")


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if value is None:
        return None
    value = value.strip(" \t")
    if value.isascii() and value.isdigit():  # not "²" or "٣": str.isdigit is Unicode's
        return MAX_RETRY_AFTER if not _DIGITS_RE.fullmatch(value) else min(
            MAX_RETRY_AFTER, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
        wait = when.timestamp() - now
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return min(MAX_RETRY_AFTER, max(0.0, wait)) if math.isfinite(wait) else None


def classify(status: int, headers: Mapping[str, str], body: bytes) -> Outcome:
    """The outcome an HTTP answer means (the table above)."""
    if 200 <= status < 300:
        return _success(status, _json_object(body))
    if status in (429, 503):
        return NotSent(True, f"http_{status}", retry_after(headers.get("retry-after"),
                                                           time.time()))
    if 400 <= status < 500 and status not in (408, 409):
        return NotSent(False, f"http_{status}")
    return Unknown(f"http_{status}")


def _json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or ``{}`` (no body, not JSON, not an object)."""
    try:
        data = json.loads(body.decode("utf-8"), parse_constant=_no_constant) \
            if body.strip() else {}
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _success(status: int, data: dict[str, Any]) -> Outcome:
    """A 2xx: sent, unless the body says otherwise (see the module docstring)."""
    said = data.get("outcome")
    if said is None and data.get("ok") is False:
        return Unknown(code(f"http_{status}_ok_false {_text(data.get('error'))}".strip(),
                            f"http_{status}_ok_false"))
    if said == "not_sent" and isinstance(data.get("retryable", False), bool):
        return NotSent(bool(data.get("retryable", False)),
                       code(_text(data.get("code")), f"http_{status}_not_sent"))
    if said is not None and said != "sent":
        return Unknown(code(f"http_{status}_{_text(said) or 'outcome'}",
                            f"http_{status}_unknown"))
    found = data.get("remote_id", data.get("id"))
    remote_id = None if found is None or isinstance(found, bool | dict | list) \
        else sanitize(str(found))
    url = sanitize(data["url"]) if isinstance(data.get("url"), str) else None
    return Sent(remote_id, url, f"HTTP {status}")


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def expand(text: str, env: Mapping[str, str]) -> str:
    """``${NAME}`` replaced by the environment variable NAME (KeyError if unset)."""
    return _ENV_REF_RE.sub(lambda m: env[m.group(1)], text)


class WebhookAdapter:
    def __init__(self, spec: ChannelSpec, env: Mapping[str, str] | None = None) -> None:
        assert spec.url is not None
        self.spec = spec
        self.env = os.environ if env is None else env

    def _headers(self, intent: Intent) -> dict[str, str] | NotSent:
        headers: dict[str, str] = {}
        for name, value in self.spec.headers:
            try:
                headers[name] = expand(value, self.env)
            except KeyError as e:
                return NotSent(False, f"environment variable {e.args[0]} is not set")
            # A platform may quote them back (an error text, an id): never stored, shown —
            # also when no rule recognises them (a rule that does names their kind).
            for ref in _ENV_REF_RE.findall(value):
                if sanitize(self.env[ref]) == self.env[ref]:
                    remember_secret(self.env[ref], "webhook-header")
        headers.update({"Content-Type": "application/json", "Idempotency-Key": intent.key,
                        "User-Agent": f"gitpub/{__version__}"})
        return headers

    def send(self, payload: bytes, intent: Intent) -> Outcome:
        import httpx  # noqa: F401 (imported here, before the deadline starts: it takes time)

        headers = self._headers(intent)
        if isinstance(headers, NotSent):
            return headers
        # httpx's timeouts are per phase and per read: a server trickling its answer a byte
        # at a time would hold us (and our lease) forever. The exchange runs in a thread that
        # checks the deadline between reads; we wait for it until the deadline, not longer.
        deadline = time.monotonic() + self.spec.timeout
        box: list[Outcome] = []
        worker = threading.Thread(target=lambda: box.append(self._exchange(payload, headers,
                                                                           deadline)),
                                  name=f"gitpub-webhook-{self.spec.name}", daemon=True)
        worker.start()
        worker.join(max(0.0, deadline - time.monotonic()) + JOIN_SLACK)
        return box[0] if box else Unknown("timeout")

    def _exchange(self, payload: bytes, headers: dict[str, str], deadline: float) -> Outcome:
        """One POST and its answer, read until ``deadline``; never raises."""
        import httpx  # ~100 ms: only where a request is made, never for `status`

        assert self.spec.url is not None
        timeout = httpx.Timeout(self.spec.timeout,
                                connect=min(self.spec.timeout, CONNECT_TIMEOUT))
        try:
            # No TLS for a plain-http URL: do not pay for loading the CA bundle.
            verify = self.spec.url.startswith("https:")
            with httpx.Client(timeout=timeout, follow_redirects=False, verify=verify) as client, \
                    client.stream("POST", self.spec.url, content=payload,
                                  headers=headers) as response:
                body = bytearray()
                for chunk in response.iter_bytes():
                    if time.monotonic() > deadline:
                        return Unknown("timeout")  # the request left: we do not know
                    body += chunk
                    if len(body) >= BODY_LIMIT:
                        break  # the evidence is at the start; the rest is not read
                return classify(response.status_code, response.headers, bytes(body))
        except Exception as e:  # every failure is classified: none escapes
            return _failure(e)

    def reconcile(self, payload: bytes, intent: Intent) -> Outcome | None:
        """The same bytes, the same key: the endpoint answers with the original result."""
        return self.send(payload, intent)


def _failure(error: Exception) -> Outcome:
    import httpx  # ~100 ms: only where a request is made, never for `status`

    if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return NotSent(True, "connect_failed")  # no connection: the request never left
    if isinstance(error, httpx.UnsupportedProtocol | httpx.InvalidURL
                  | httpx.LocalProtocolError):
        return NotSent(False, code(type(error).__name__, "bad_request"))
    if isinstance(error, httpx.TimeoutException):
        return Unknown("timeout")  # read or write timeout: the request (partly) left
    if isinstance(error, httpx.TransportError):
        return Unknown("connection_lost")  # reset, closed without an answer
    return Unknown(code(type(error).__name__, "unclassified_send_error"))
