"""Misconfiguration is not a transient: no such remote, a path that is no repository, credentials
refused (a real HTTP server on loopback answering 401) → exit 2 with a hint, no attempt used,
the job unchanged. And an attempt is used only by a delivery that was due."""

from __future__ import annotations

import http.server
from collections.abc import Iterator

import pytest
from conftest import Site, git
from httpfaults import serving
from netfaults import free_port


def prepare(site: Site, key: str = "k", path: str = "posts/a.md") -> str:
    r = site.call("prepare", "--json", "--key", key, "--to", path, "-", input=f"# {key}\n")
    assert r.code == 0, r.out + r.err
    return str(r.json()["job_id"])


def job(site: Site, job_id: str) -> dict[str, object]:
    data: dict[str, object] = site.call("status", "--json", job_id).json()
    return data


def assert_usage_error_and_unchanged(site: Site, args: list[str], job_id: str,
                                     words: str) -> None:
    before = site.job_refs()
    r = site.call(*args, "--json")
    assert r.code == 2, r.out + r.err
    assert words in r.json()["error"] and "no delivery attempt" in r.json()["hint"]
    assert r.json()["exit"] == 2
    assert r.err.count("\n") == 2 and r.err.startswith("git-pub: error: "), r.err
    assert site.job_refs() == before, "the job is unchanged"
    assert job(site, job_id)["attempt"] == 0


@pytest.mark.parametrize("command", ["push", "sync", "reconcile"])
def test_no_such_remote(site: Site, command: str) -> None:
    job_id = prepare(site)
    site.git("remote", "rename", "origin", "upstream")  # .gitpub.yaml still says origin
    assert_usage_error_and_unchanged(site, [command], job_id, "no remote named 'origin'")


@pytest.mark.parametrize("command", ["push", "sync"])
def test_path_that_is_not_a_repository(site: Site, command: str) -> None:
    job_id = prepare(site)
    empty = site.path.parent / "empty-dir"
    empty.mkdir()
    for url in (str(empty), str(site.path.parent / "missing.git"), empty.as_uri()):
        site.git("remote", "set-url", "origin", url)
        assert_usage_error_and_unchanged(site, [command], job_id, "not a git repository")


def test_named_push_and_resolve_too(site: Site) -> None:
    job_id = prepare(site)
    site.git("remote", "set-url", "origin", str(site.path.parent / "missing.git"))
    assert_usage_error_and_unchanged(site, ["push", job_id], job_id, "not a git repository")


class _Refuse401(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[str]:
    with serving(_Refuse401, "/site.git") as url:
        yield url


def test_authentication_refused(site: Site, refusing_server: str) -> None:
    job_id = prepare(site)
    site.git("remote", "set-url", "origin", refusing_server)
    assert_usage_error_and_unchanged(site, ["push"], job_id, "refused the credentials")
    assert_usage_error_and_unchanged(site, ["push", job_id], job_id, "refused the credentials")


def test_an_attempt_is_used_only_when_due(site: Site) -> None:
    """Connection refused is a transient: one attempt, then un-named runs wait for the
    backoff (five quick runs do not reach FAILED); naming the job tries now."""
    job_id = prepare(site)
    good = site.git("remote", "get-url", "origin").strip()
    site.git("remote", "set-url", "origin", f"git://127.0.0.1:{free_port()}/site.git")
    r = site.call("push", "--json")
    assert r.code == 5
    first = r.json()["jobs"][0]
    assert first["state"] == "RETRY_WAIT" and first["attempt"] == 1
    assert "next try at" in first["hint"] and f"git pub push {job_id[:13]}" in first["hint"]
    refs = site.job_refs()
    for command in ("push", "sync", "push", "sync", "push"):
        r = site.call(command, "--json")
        assert r.code == 5, (command, r.out, r.err)
        assert site.job_refs() == refs, f"{command} when no retry is due changed the job"
    text = site.call("push")
    assert "hint: next try at" in text.out
    assert job(site, job_id)["attempt"] == 1
    r = site.call("push", "--json", job_id)
    assert r.json()["jobs"][0]["attempt"] == 2, "a named job is due now"
    # The URL is fixed: the next un-named push does not wait out the backoff.
    site.git("remote", "set-url", "origin", good)
    r = site.call("push", "--json")
    assert r.code == 0, r.out + r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    assert git(site.remote, "show", "main:posts/a.md") == "# k\n"


def test_sync_and_push_agree_on_exit_codes(site: Site) -> None:
    prepare(site)
    site.git("remote", "set-url", "origin", f"git://127.0.0.1:{free_port()}/site.git")
    assert site.call("push").code == 5
    r = site.call("sync", "--json")
    assert r.code == 5, r.out + r.err
    assert r.json()["errors"] == []
    (site.path / "posts" / "hand.md").write_text("# Hand\n")
    r = site.call("sync")
    assert r.code == 5 and "not confirmed" in r.out and "hint:" in r.out
