"""A real HTTP "platform" on 127.0.0.1 that records every request it accepted and misbehaves
on purpose; and a site server that starts serving a page only after a delay.

``Platform`` answers POSTs as a social network's API would: it creates a *post* for each new
request (``posts``), and, when ``idempotent``, answers a repeated ``Idempotency-Key`` with the
original post instead of creating another. ``script`` is the behaviour of the next requests, one
entry per request (then ``default``):

- ``ok``               201 with ``{"id", "url"}``
- ``drop``             create the post, then close the connection without answering
- ``500``              create the post, then answer 500 (the error came after the commit)
- ``429:N`` / ``503:N``  create nothing, answer 429/503 with ``Retry-After: N``
- ``400``              create nothing, answer 400
- ``delay:S``          wait S seconds, then behave as ``ok``
- ``trickle:S``        create the post, answer 201 and its body one byte every S seconds
- ``ok_false``         create nothing, answer 200 with ``{"ok": false, "error": …}`` (Slack-like)

Stdlib only (``http.server`` in a thread); bound to a free port, so tests run in parallel.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self


@dataclass
class Received:
    time: float
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Post:
    id: str
    key: str | None
    body: bytes

    @property
    def url(self) -> str:
        return f"https://social.example/@news/{self.id}"


@dataclass
class _State:
    script: list[str] = field(default_factory=list)
    default: str = "ok"
    idempotent: bool = True
    requests: list[Received] = field(default_factory=list)
    posts: list[Post] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


#: How often a server's loop looks whether ``shutdown()`` was asked (socketserver's default, 0.5 s,
#: made every test that stops a server wait a quarter of a second on average, a test at a time).
POLL = 0.01


def serve(server: ThreadingHTTPServer) -> threading.Thread:
    """A daemon thread serving ``server`` (not started), whose ``shutdown()`` ends within POLL."""
    return threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL},
                            daemon=True)


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (timeout) leaves a broken pipe: expected here, not news."""


class _Server(_Quiet):
    state: _State


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _answer(self, status: int, body: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _drop(self) -> None:
        """Close without a response (RST): the client never learns what happened."""
        self.close_connection = True
        sock = self.connection
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            sock.close()

    def _trickle(self, status: int, body: dict[str, Any], pause: float) -> None:
        """Headers at once, then the body a byte at a time: no single read ever times out."""
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.close_connection = True
        with contextlib.suppress(OSError):
            for byte in data:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(pause)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        state = self.server.state
        key = self.headers.get("Idempotency-Key")
        with state.lock:
            state.requests.append(Received(time.time(), self.path, dict(self.headers), body))
            mode = state.script.pop(0) if state.script else state.default
            existing = next((p for p in state.posts if key and p.key == key), None) \
                if state.idempotent else None
        name, _, arg = mode.partition(":")
        if name == "delay":
            time.sleep(float(arg))
            name = "ok"
        if name == "ok_false":
            self._answer(200, {"ok": False, "error": "channel_not_found"})
            return
        if name in ("429", "503", "400"):
            headers = {"Retry-After": arg} if arg else {}
            self._answer(int(name), {"error": "try later" if name != "400" else "bad"},
                         headers)
            return
        post = existing
        if post is None:
            with state.lock:
                post = Post(str(1000 + len(state.posts)), key, body)
                state.posts.append(post)
        if name == "trickle":
            self._trickle(201, {"id": post.id, "url": post.url}, float(arg))
        elif name == "drop":
            self._drop()
        elif name == "500":
            self._answer(500, {"error": "internal"})
        else:
            self._answer(200 if existing else 201, {"id": post.id, "url": post.url})


class Platform:
    """The recording HTTP platform (see the module docstring)."""

    def __init__(self, script: list[str] | None = None, *, default: str = "ok",
                 idempotent: bool = True) -> None:
        self.state = _State(list(script or []), default, idempotent)
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.state = self.state
        self.thread = serve(self.server)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/api/posts"

    @property
    def requests(self) -> list[Received]:
        return list(self.state.requests)

    @property
    def posts(self) -> list[Post]:
        return list(self.state.posts)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.server.shutdown()
        self.server.server_close()


class _SiteHandler(BaseHTTPRequestHandler):
    server: _SiteServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        site = self.server.site
        site.gets += 1
        page = site.pages.get(self.path)
        live = site.ready_at is not None and time.time() >= site.ready_at
        if page is None or not live:
            data, status = b"<html><body>Not found</body></html>", 404
        else:
            data, status = page.encode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _SiteServer(_Quiet):
    site: LiveSite


class LiveSite:
    """A static site that serves its pages from ``delay`` seconds after ``start()`` on
    (``delay=None``: never)."""

    def __init__(self, delay: float | None) -> None:
        self.delay = delay
        self.pages: dict[str, str] = {}
        self.ready_at: float | None = None
        self.gets = 0
        self.server = _SiteServer(("127.0.0.1", 0), _SiteHandler)
        self.server.site = self
        self.thread = serve(self.server)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        self.ready_at = None if self.delay is None else time.time() + self.delay
        self.thread.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler], path: str) -> Iterator[str]:
    """A threaded HTTP server on 127.0.0.1 answering with ``handler``; yields its URL + ``path``."""
    server = _Quiet(("127.0.0.1", 0), handler)
    thread = serve(server)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}"
    finally:
        server.shutdown()
        server.server_close()
