"""The live check against a real HTTP site on 127.0.0.1: one that starts serving the page only
after a delay, and one that never does."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from channelkit import channel, command_channel, configure, posts, prepare, status
from conftest import Clock, Site
from httpfaults import LiveSite

PAGE = "<html><head><title>Post k1</title></head><body><h1>Post k1</h1></body></html>"


@pytest.mark.slow
def test_not_live_yet_then_live_then_the_channel_goes(site: Site, tmp_path: Path,
                                                       clock: Clock) -> None:
    platform = tmp_path / "platform.jsonl"
    with LiveSite(delay=None) as web:  # the build is still running: starts serving below
        web.pages["/hello/"] = PAGE
        configure(site, command_channel(platform, extra="    after: live\n"),
                  site_url=web.url, live="{timeout: 0.5, interval: 0.1}")
        job_id = prepare(site)
        r = site.call("push")
        assert r.code == 5, r.err
        assert "not live yet" in r.out
        data = status(site, job_id)
        assert data["live"]["status"] == "not_live_yet" and data["live"]["detail"] == "HTTP 404"
        assert data["live"]["url"] == f"{web.url}/hello/"
        assert channel(site, job_id)["status"] == "pending", "after: live waits"
        assert posts(platform) == []
        web.ready_at = time.time() + 3.0  # the site's build finishes in a few seconds
        assert site.call("reconcile").code == 5, "not yet"
        clock.advance(3.0)  # (the site's clock is this process's: it serves the page now)
        r = site.call("reconcile")
        assert r.code == 0, r.out
        data = status(site, job_id)
        assert data["live"]["status"] == "live" and data["live"]["live_at"]
        assert channel(site, job_id)["status"] == "confirmed"
        assert len(posts(platform)) == 1


@pytest.mark.slow
def test_a_page_that_never_comes_ends_the_bounded_wait_visibly(site: Site, clock: Clock) -> None:
    with LiveSite(delay=None) as web:
        configure(site, site_url=web.url, live="{timeout: 1, interval: 0.2, give_up: 3}")
        job_id = prepare(site)
        started = time.monotonic()
        r = site.call("push")
        took = time.monotonic() - started
        assert r.code == 5, r.err
        live = status(site, job_id)["live"]
        assert live["status"] == "not_live_yet" and live["checks"] >= 3
        assert took < 15, "the wait is bounded"
        clock.advance(2.5)  # past give_up
        r = site.call("reconcile")
        assert r.code == 4, "past give_up a person has to look"
        assert "gave up waiting for" in r.out
        assert status(site, job_id)["live"]["status"] == "gave_up"
        gets = web.gets
        assert site.call("reconcile").code == 0, "reported once; nothing waits for it"
        assert web.gets == gets, "given up: no more requests"
        assert site.call("status", job_id).out.count("live      gave_up") == 1


@pytest.mark.slow
def test_match_by_embedded_hash(site: Site) -> None:
    with LiveSite(delay=0) as web:
        configure(site, site_url=web.url, live="{match: hash, timeout: 1, interval: 0.2}")
        job_id = prepare(site)
        web.pages["/hello/"] = PAGE  # the title, but not the hash
        assert site.call("push").code == 5
        assert status(site, job_id)["live"]["detail"] == "HTTP 200 without the article"
        manifest = status(site, job_id)["manifest_sha256"]
        web.pages["/hello/"] = f"<html><!-- build {manifest} --></html>"
        assert site.call("reconcile").code == 0
        assert status(site, job_id)["live"]["status"] == "live"
