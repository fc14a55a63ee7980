"""A remote URL whose HTTP server answers 404 is a misconfiguration, not a transient failure:
retrying would fail the same way, so no delivery attempt is used (exit 2)."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from conftest import Site
from httpfaults import serving

from gitpub.git.remote import misconfiguration


class _NotFound(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET


@pytest.fixture
def not_found() -> Iterator[str]:
    with serving(_NotFound, "/blog.git") as url:
        yield url


def test_http_404_uses_no_delivery_attempt(site: Site, not_found: str) -> None:
    r = site.call("prepare", "--json", "--key", "k1", "--to", "posts/a.md", "-",
                  input="# A\n\nText.\n")
    assert r.code == 0, r.err
    job_id = r.json()["job_id"]
    site.git("remote", "set-url", "origin", not_found)
    for _ in range(3):
        r = site.call("push", job_id)
        assert r.code == 2, r.out + r.err
        assert "has no repository at its URL" in r.err
    job = site.call("status", "--json", job_id).json()
    assert job["state"] == "LOCAL_COMMITTED" and job["attempt"] == 0


def test_http_not_found_message_is_a_misconfiguration() -> None:
    err = "fatal: repository 'http://127.0.0.1:8/blog.git/' not found\n"
    assert misconfiguration("origin", err) is not None
