"""The ``webhook`` kind: an HTTP POST of the frozen payload, with an ``Idempotency-Key`` header.

The classification is the point (reference §1 and §6: a timeout does not mean "not sent", and a
500 does not mean "no side effect"):

=================================================  ===========================================
2xx                                                sent (``id``/``remote_id`` and ``url`` from a
                                                   JSON body, if it has them)
429, 503                                           not sent, retryable, after ``Retry-After``
408, 409                                           unknown (the server may be processing it)
any other 4xx                                      not sent, not retryable
5xx (but 503), 1xx, 3xx                            unknown (it may have committed first)
no connection (refused, connect timeout, no pool)  not sent, retryable: no byte left
timeout, reset or close after the request left     unknown
=================================================  ===========================================

Because the key travels with the request, an unknown outcome is reconciled by sending the same
bytes with the same key again: an idempotent endpoint answers with the original result and
creates nothing new. ``headers`` values may name environment variables (``${NAME}``), expanded
here, at send time, and never stored. Redirects are not followed (a POST is not replayed
elsewhere). httpx is imported only when a webhook is actually sent.
"""

from __future__ import annotations

import email.utils
import json
import os
import re
import time
from collections.abc import Mapping

from gitpub import __version__
from gitpub.channels.adapters import Intent, code
from gitpub.channels.model import NotSent, Outcome, Sent, Unknown
from gitpub.config.model import ChannelSpec
from gitpub.core.sanitize import sanitize

_ENV_REF_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: The longest connect phase we wait for, whatever the channel's timeout.
CONNECT_TIMEOUT = 10.0


def retry_after(value: str | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now)


def classify(status: int, headers: Mapping[str, str], body: bytes) -> Outcome:
    """The outcome an HTTP answer means (the table above)."""
    if 200 <= status < 300:
        remote_id = url = None
        try:
            data = json.loads(body.decode("utf-8")) if body.strip() else {}
        except (UnicodeDecodeError, json.JSONDecodeError):
            data = {}
        if isinstance(data, dict):
            found = data.get("remote_id", data.get("id"))
            remote_id = None if found is None or isinstance(found, bool | dict | list) \
                else sanitize(str(found))
            url = sanitize(data["url"]) if isinstance(data.get("url"), str) else None
        return Sent(remote_id, url, f"HTTP {status}")
    if status in (429, 503):
        return NotSent(True, f"http_{status}", retry_after(headers.get("retry-after"),
                                                           time.time()))
    if 400 <= status < 500 and status not in (408, 409):
        return NotSent(False, f"http_{status}")
    return Unknown(f"http_{status}")


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
        headers.update({"Content-Type": "application/json", "Idempotency-Key": intent.key,
                        "User-Agent": f"gitpub/{__version__}"})
        return headers

    def send(self, payload: bytes, intent: Intent) -> Outcome:
        import httpx

        headers = self._headers(intent)
        if isinstance(headers, NotSent):
            return headers
        assert self.spec.url is not None
        timeout = httpx.Timeout(self.spec.timeout,
                                connect=min(self.spec.timeout, CONNECT_TIMEOUT))
        try:
            # No TLS for a plain-http URL: do not pay for loading the CA bundle.
            verify = self.spec.url.startswith("https:")
            with httpx.Client(timeout=timeout, follow_redirects=False, verify=verify) as client:
                response = client.post(self.spec.url, content=payload, headers=headers)
        except Exception as e:  # every failure is classified: none escapes
            return _failure(e)
        return classify(response.status_code, response.headers, response.content)

    def reconcile(self, payload: bytes, intent: Intent) -> Outcome | None:
        """The same bytes, the same key: the endpoint answers with the original result."""
        return self.send(payload, intent)


def _failure(error: Exception) -> Outcome:
    import httpx

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
