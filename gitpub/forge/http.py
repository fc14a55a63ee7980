"""One HTTP exchange with a forge's API, bounded, its token kept out of every text.

The token travels in one request header (each forge's own: ``Authorization: Bearer``,
``PRIVATE-TOKEN``, ``Authorization: token``) and nowhere else: never in a URL, never in a body
gitpub sends. Whatever comes back — an error body that quotes the request, an exception's
message — is *scrubbed* (the token's exact text, and its URL-encoded form, replaced) and then
sanitized (``core.sanitize``) before anyone sees it, so that neither a job record, an event,
a log line nor an error message can carry it.

The classification (``ForgeError`` kinds, see ``model``):

=====================================  ============================================
2xx with a JSON body                   the answer
401, 403, 404                          denied (``Http.call(missing_ok=True)``: 404 is None)
409; 422 saying "already exists"       exists
429, 503; no connection                later (nothing was done)
408, 5xx, 1xx, 3xx; a timeout or a     unknown (it may have been done)
lost reply after the request left;
a 2xx whose body is not JSON
any other 4xx                          refused
=====================================  ============================================

Redirects are not followed. One call is bounded: connecting takes at most ``CONNECT_TIMEOUT``,
each read at most the call's ``timeout``, and the answer is read only until the call's
deadline (a forge trickling its answer is cut off: unknown) and up to ``BODY_LIMIT`` bytes.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

from gitpub import __version__
from gitpub.core.sanitize import sanitize
from gitpub.forge.model import ForgeError, Settings

CONNECT_TIMEOUT = 10.0
BODY_LIMIT = 1024 * 1024
TOKEN_MARK = "[REDACTED:forge-token]"


def scrub(text: str, token: str) -> str:
    """``text`` without ``token`` (as given, or URL-encoded), then sanitized."""
    if token:
        for form in dict.fromkeys((token, quote(token, safe=""), quote(token))):
            text = text.replace(form, TOKEN_MARK)
    return sanitize(text)


def auth_headers(settings: Settings) -> dict[str, str]:
    token = settings.token
    if settings.kind == "gitlab":
        return {"PRIVATE-TOKEN": token}
    if settings.kind == "gitea":
        return {"Authorization": f"token {token}"}
    return {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28"}


class Http:
    """Calls to one forge's API (``settings``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def scrub(self, text: str) -> str:
        return scrub(text, self.settings.token)

    def call(self, method: str, path: str, *, params: dict[str, str] | None = None,
             body: dict[str, Any] | None = None, missing_ok: bool = False) -> Any:
        """The JSON answer of ``method path`` (None for a 404 when ``missing_ok``); raises
        ``ForgeError``."""
        import httpx  # only where a call is made: `status` never loads it

        settings = self.settings
        url = settings.api.rstrip("/") + path
        headers = {"User-Agent": f"gitpub/{__version__}", **auth_headers(settings)}
        if body is not None:
            headers["Content-Type"] = "application/json"
        content = None if body is None else json.dumps(body).encode()
        deadline = time.monotonic() + settings.timeout
        timeout = httpx.Timeout(settings.timeout,
                                connect=min(settings.timeout, CONNECT_TIMEOUT))
        try:
            with httpx.Client(timeout=timeout, follow_redirects=False,
                              verify=url.startswith("https:")) as client, \
                    client.stream(method, url, params=params, content=content,
                                  headers=headers) as response:
                data = bytearray()
                for chunk in response.iter_bytes():
                    if time.monotonic() > deadline:
                        raise ForgeError("unknown", f"{method} {path}: no full answer within "
                                         f"{settings.timeout:g}s")
                    data += chunk
                    if len(data) > BODY_LIMIT:
                        raise ForgeError("unknown", f"{method} {path}: an answer over "
                                         f"{BODY_LIMIT} bytes")
                status = response.status_code
        except ForgeError:
            raise
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
            raise ForgeError("later", self.scrub(f"{method} {path}: cannot connect to "
                                                 f"{settings.api}: {e}")) from None
        except httpx.TimeoutException:
            raise ForgeError("unknown", f"{method} {path}: timed out") from None
        except httpx.HTTPError as e:  # reset, closed without an answer, a bad URL
            raise ForgeError("unknown", self.scrub(f"{method} {path}: {type(e).__name__}: "
                                                   f"{e}")) from None
        return self._answer(method, path, status, bytes(data), missing_ok)

    def _answer(self, method: str, path: str, status: int, data: bytes,
                missing_ok: bool) -> Any:
        said = self.scrub(_message(data))[:300]
        where = f"{method} {path}: HTTP {status}" + (f": {said}" if said else "")
        if 200 <= status < 300:
            try:
                return json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                raise ForgeError("unknown", f"{method} {path}: HTTP {status} with an answer "
                                 "that is not JSON", status) from None
        if status == 404 and missing_ok:
            return None
        if status in (401, 403, 404):
            raise ForgeError("denied", where, status)
        if status == 409 or (status == 422 and "already exist" in said.lower()):
            raise ForgeError("exists", where, status)
        if status in (429, 503):
            raise ForgeError("later", where, status)
        if 400 <= status < 500 and status != 408:
            raise ForgeError("refused", where, status)
        raise ForgeError("unknown", where, status)


def _message(data: bytes) -> str:
    """What an error answer says: its JSON ``message``/``error`` (and GitHub's ``errors``),
    else its start; one line."""
    text = data.decode("utf-8", "replace")
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict):
        parts = [str(parsed[k]) for k in ("message", "error") if parsed.get(k)]
        errors = parsed.get("errors")
        if isinstance(errors, list):
            parts += [str(e.get("message", e)) if isinstance(e, dict) else str(e)
                      for e in errors[:3]]
        text = "; ".join(parts) or text
    return " ".join(text.split())[:500]
