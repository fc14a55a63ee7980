"""``gitpub.forge``: each forge's shapes against the local stand-in, how a call's failures are
classified, and the token kept out of every text (``forge.http``)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from forgekit import REPOSITORY, ForgeServer
from httpfaults import serve

from gitpub.forge.apis import forge_for
from gitpub.forge.http import TOKEN_MARK, Http, scrub
from gitpub.forge.model import ForgeError, RequestState, Settings

TOKEN = "tok/with+odd=chars-31337"


@pytest.fixture
def bare(tmp_path: Path, hermetic: dict[str, str]) -> Path:
    work, remote = tmp_path / "w", tmp_path / "r.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "a.md").write_text("a\n")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "a")
    git(work, "push", "-q", str(remote), "main", "main:gitpub/job")
    return remote


def settings(server: ForgeServer, token: str = TOKEN, timeout: float = 5) -> Settings:
    return Settings(server.kind, server.api, REPOSITORY, token, timeout)


@pytest.mark.parametrize("kind", ["github", "gitlab", "gitea"])
def test_find_create_get_in_each_forges_shape(bare: Path, kind: str) -> None:
    with ForgeServer(kind, bare, TOKEN) as server:
        forge = forge_for(settings(server))
        head = git(bare, "rev-parse", "gitpub/job").strip()
        assert forge.find("gitpub/job", "main", head) is None
        made = forge.create("gitpub/job", "main", "Title", "Body")
        assert (made.number, made.state, made.head_sha) == (1, RequestState.OPEN, head)
        with pytest.raises(ForgeError) as e:
            forge.create("gitpub/job", "main", "Title", "Body")
        assert e.value.kind == "exists"
        assert forge.find("gitpub/job", "main", head) == made
        server.close(1)
        assert forge.get(1).state == RequestState.CLOSED
        assert server.created() == 2


@pytest.mark.parametrize(("status", "kind"), [("401", "denied"), ("404", "denied"),
                                              ("409", "exists"), ("422", "refused"),
                                              ("429", "later"), ("503", "later"),
                                              ("500", "unknown"), ("502", "unknown")])
def test_a_calls_failure_is_classified(bare: Path, status: str, kind: str) -> None:
    with ForgeServer("github", bare, TOKEN) as server:
        server.script = [f"GET:{status}"]
        with pytest.raises(ForgeError) as e:
            forge_for(settings(server)).get(1)
        assert e.value.kind == kind
        assert TOKEN not in e.value.detail and TOKEN_MARK in e.value.detail  # it was quoted


def test_a_wrong_token_is_denied_and_never_shown(bare: Path) -> None:
    with ForgeServer("gitlab", bare, TOKEN) as server:
        with pytest.raises(ForgeError) as e:
            forge_for(settings(server, token="tok-wrong-0000")).find("gitpub/job", "main", None)
        assert e.value.kind == "denied" and "tok-wrong-0000" not in str(e.value)
        assert "tok-wrong-0000" not in repr(settings(server, token="tok-wrong-0000"))


def test_scrub_removes_the_token_as_given_and_url_encoded() -> None:
    text = f"a {TOKEN} b tok%2Fwith%2Bodd%3Dchars-31337 c tok/with%2Bodd%3Dchars-31337"
    assert scrub(text, TOKEN) == f"a {TOKEN_MARK} b {TOKEN_MARK} c {TOKEN_MARK}"


class _Slow(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.endswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1:9/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"number": 1')
        self.wfile.flush()
        threading.Event().wait(3)  # never finishes in time


@pytest.fixture
def slow() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    server.daemon_threads = True
    thread = serve(server)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_trickling_answer_and_a_redirect_are_unknown_not_followed(slow: str) -> None:
    http = Http(Settings("github", slow, REPOSITORY, TOKEN, 0.5))
    with pytest.raises(ForgeError) as e:
        http.call("GET", "/repos/example/blog/pulls/1")
    assert e.value.kind == "unknown"
    with pytest.raises(ForgeError) as e:
        http.call("GET", "/redirect")
    assert e.value.kind == "unknown" and e.value.status == 302


def test_nothing_listening_is_later(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    http = Http(Settings("gitea", f"http://127.0.0.1:{port}/api/v1", REPOSITORY, TOKEN, 2))
    with pytest.raises(ForgeError) as e:
        http.call("GET", "/repos/example/blog/pulls/1")
    assert e.value.kind == "later"
