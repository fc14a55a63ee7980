"""The live check: pushed is not yet public.

After publication the site still has to build and deploy. With ``site.live`` configured, each
run fetches the article's canonical URL (from the frozen payload) until it answers 200 with the
article in it — its title (as text or HTML-escaped), or, with ``match: hash``, the article's or
the manifest's SHA-256 that the build embeds — asking every ``interval`` seconds for at most
``timeout`` seconds. The result is recorded in ``live.json``: ``live``, or ``not_live_yet``
(exit 5: run again later); ``give_up`` seconds after publication it becomes ``gave_up`` (exit
4: a person looks at the site's build). Channels with ``after: live`` wait for ``live``.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gitpub.channels.model import LiveRecord, LiveStatus
from gitpub.channels.state import ChannelState, Distribution
from gitpub.config.model import LiveCheck
from gitpub.core.sanitize import sanitize
from gitpub.runtime.context import Context
from gitpub.store.jobs import Job

if TYPE_CHECKING:
    import httpx

#: The longest single request of the live check.
REQUEST_TIMEOUT = 10.0


def new_live_record(payload: bytes, now: float) -> LiveRecord:
    url = json.loads(payload)["url"]
    return LiveRecord(url=url, status=LiveStatus.PENDING, created_at=now, updated_at=now)


def needles(payload: bytes, match: str) -> list[str]:
    """What the page must contain to be the article."""
    data = json.loads(payload)
    if match == "hash":
        return [h for h in (data.get("article_sha256"), data.get("manifest_sha256")) if h]
    title = data["title"]
    return list(dict.fromkeys([title, html.escape(title, quote=False), html.escape(title)]))


def fetch(client: httpx.Client, url: str, wanted: list[str],
          timeout: float) -> tuple[bool, str]:
    """One GET of ``url``: whether it shows the article, and what it answered."""
    import httpx  # ~100 ms: only where a request is made, never for `status`

    try:
        response = client.get(url, timeout=timeout)
    except httpx.HTTPError as e:
        return False, sanitize(f"{type(e).__name__}")
    if response.status_code != 200:
        return False, f"HTTP {response.status_code}"
    text = response.text
    if not any(w in text for w in wanted):
        return False, "HTTP 200 without the article"
    return True, "HTTP 200 with the article"


def wait_live(url: str, wanted: list[str], spec: LiveCheck,
              sleep: Callable[[float], None] = time.sleep) -> tuple[bool, str, int]:
    """Ask until the page shows the article or ``spec.timeout`` passed: (live, last answer,
    number of requests)."""
    import httpx  # ~100 ms: only where a request is made, never for `status`

    deadline = time.monotonic() + spec.timeout
    checks = 0
    with httpx.Client(follow_redirects=True) as client:  # one client (one CA load) a run
        while True:
            remaining = deadline - time.monotonic()
            ok, detail = fetch(client, url, wanted, max(0.1, min(REQUEST_TIMEOUT, remaining)))
            checks += 1
            remaining = deadline - time.monotonic()
            if ok or remaining <= 0:
                return ok, detail, checks
            sleep(min(spec.interval, remaining))


def check_live(ctx: Context, state: ChannelState, job: Job,
               dist: Distribution) -> tuple[Job, str | None]:
    """Run the live check if it is still open; the job and a note for the person."""
    record, spec = dist.live, ctx.config.site.live
    if record is None or spec is None or record.status in (LiveStatus.LIVE,
                                                            LiveStatus.GAVE_UP):
        return job, None
    ctx.progress(f"live check: {record.url}")
    ok, detail, checks = wait_live(record.url, needles(dist.payload, spec.match), spec)
    now = time.time()
    if ok:
        status = LiveStatus.LIVE
    elif now - record.created_at >= spec.give_up:
        status = LiveStatus.GAVE_UP
    else:
        status = LiveStatus.NOT_LIVE_YET
    new = record.evolve(status=status, checks=record.checks + checks, detail=detail,
                        updated_at=now, live_at=now if ok else None)
    written = state.update_live(job, record, new, f"{status.value}: {record.url}: {detail} "
                                                  f"({checks} request(s))")
    note = None if ok else (
        f"not live yet: {record.url}: {detail}" if status == LiveStatus.NOT_LIVE_YET
        else f"gave up waiting for {record.url} ({detail}): check the site's build")
    return (job if written is None else written), note
