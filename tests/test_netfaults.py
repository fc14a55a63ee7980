"""The network fault tools in ``netfaults`` do what they say, shown with the plain git CLI.

A real ``git daemon`` serves the site's bare remote; a ``DropReplyProxy`` sits in front of it.
The key fault: in ``drop_push_reply`` mode ``git push`` fails although the remote applied the
update -- the situation a publisher must recover from without publishing twice.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Site
from netfaults import DropReplyProxy, Finished, GitDaemon, can_connect, run_bounded


def git(cwd: Path, env: dict[str, str], *args: str, timeout: float = 5.0) -> Finished:
    return run_bounded(["git", *args], cwd=cwd, env=env, timeout=timeout)


def ok(cwd: Path, env: dict[str, str], *args: str) -> str:
    r = git(cwd, env, *args)
    assert r.code == 0, r.describe()
    return r.out.strip()


def commit(site: Site, text: str) -> str:
    (site.path / "posts" / "net.md").write_text(text, encoding="utf-8")
    ok(site.path, site.env, "add", "posts/net.md")
    ok(site.path, site.env, "commit", "-q", "-m", f"Net: {text}")
    return ok(site.path, site.env, "rev-parse", "HEAD")


def remote_main(site: Site) -> str:
    return ok(site.remote, site.env, "rev-parse", "refs/heads/main")


@pytest.fixture
def daemon(site: Site) -> Iterator[GitDaemon]:
    with GitDaemon(site.remote.parent, env=site.env) as d:
        yield d


@pytest.fixture
def proxy(daemon: GitDaemon) -> Iterator[DropReplyProxy]:
    with DropReplyProxy(daemon.port) as p:
        yield p


def test_daemon_serves_clone_fetch_and_push(site: Site, daemon: GitDaemon,
                                            tmp_path: Path) -> None:
    url = daemon.url(site.remote.name)
    assert url == f"git://127.0.0.1:{daemon.port}/{site.remote.name}"
    start = remote_main(site)
    ok(tmp_path, site.env, "clone", "-q", url, "clone")
    clone = tmp_path / "clone"
    assert ok(clone, site.env, "rev-parse", "HEAD") == start

    new = commit(site, "direct")
    r = git(site.path, site.env, "push", url, "main")
    assert r.code == 0, r.describe() + "\n" + daemon.log()
    assert remote_main(site) == new

    ok(clone, site.env, "fetch", "-q", "origin")
    assert ok(clone, site.env, "rev-parse", "origin/main") == new


def test_proxy_pass_mode_is_transparent(site: Site, proxy: DropReplyProxy,
                                        tmp_path: Path) -> None:
    url = proxy.url(site.remote.name)
    ok(tmp_path, site.env, "clone", "-q", url, "clone")
    clone = tmp_path / "clone"
    new = commit(site, "through the proxy")
    r = git(site.path, site.env, "push", url, "main")
    assert r.code == 0, r.describe()
    assert remote_main(site) == new
    ok(clone, site.env, "fetch", "-q", "origin")
    assert ok(clone, site.env, "rev-parse", "origin/main") == new
    assert (proxy.pushes_seen, proxy.fetches_seen, proxy.replies_dropped) == (1, 2, 0)


def test_drop_push_reply_applies_the_update_but_the_push_fails(site: Site,
                                                               proxy: DropReplyProxy) -> None:
    ok(site.path, site.env, "remote", "add", "flaky", proxy.url(site.remote.name))
    ok(site.path, site.env, "fetch", "-q", "flaky")
    before = ok(site.path, site.env, "rev-parse", "refs/remotes/flaky/main")
    proxy.mode = "drop_push_reply"
    new = commit(site, "reply lost")

    r = git(site.path, site.env, "push", "flaky", "main")
    assert not r.timed_out and r.code not in (0, None), r.describe()
    assert r.elapsed < 3, r.describe()
    # The client heard nothing back, so it did not move its remote-tracking ref...
    assert ok(site.path, site.env, "rev-parse", "refs/remotes/flaky/main") == before, \
        r.describe()
    # ...but the remote took the push before the connection was cut.
    assert remote_main(site) == new, r.describe()
    assert (proxy.pushes_seen, proxy.replies_dropped) == (1, 1)
    assert proxy.bytes_dropped > 0

    # Fetches pass untouched in this mode: the client can find out what happened.
    ok(site.path, site.env, "fetch", "-q", "flaky")
    assert ok(site.path, site.env, "rev-parse", "refs/remotes/flaky/main") == new
    assert proxy.replies_dropped == 1


def test_drop_push_reply_also_cuts_a_push_without_a_pack(site: Site, daemon: GitDaemon,
                                                         proxy: DropReplyProxy) -> None:
    """A delete sends commands and a flush but no pack: the reply is dropped all the same."""
    ok(site.path, site.env, "push", "-q", daemon.url(site.remote.name), "main:refs/heads/gone")
    proxy.mode = "drop_push_reply"
    r = git(site.path, site.env, "push", proxy.url(site.remote.name), ":refs/heads/gone")
    assert not r.timed_out and r.code not in (0, None), r.describe()
    gone = git(site.remote, site.env, "rev-parse", "--verify", "-q", "refs/heads/gone")
    assert gone.code != 0, r.describe()
    assert proxy.replies_dropped == 1

    # Nothing to push: git sends a lone flush and hangs up happily; no reply to drop.
    r = git(site.path, site.env, "push", proxy.url(site.remote.name), "main")
    assert r.code == 0 and "up-to-date" in r.err, r.describe()
    assert (proxy.pushes_seen, proxy.replies_dropped) == (2, 1)


def test_refuse_fails_fast_and_changes_nothing(site: Site, proxy: DropReplyProxy) -> None:
    proxy.mode = "refuse"
    start = remote_main(site)
    commit(site, "refused")
    r = git(site.path, site.env, "push", proxy.url(site.remote.name), "main")
    assert not r.timed_out and r.code not in (0, None), r.describe()
    assert r.elapsed < 2, r.describe()
    assert remote_main(site) == start
    assert proxy.connections >= 1 and proxy.pushes_seen == 0

    r = git(site.path, site.env, "fetch", proxy.url(site.remote.name))
    assert r.code not in (0, None), r.describe()


@pytest.mark.slow
def test_blackhole_push_never_completes_and_changes_nothing(site: Site,
                                                           proxy: DropReplyProxy) -> None:
    proxy.mode = "blackhole"
    start = remote_main(site)
    new = commit(site, "into the void")
    url = proxy.url(site.remote.name)
    r = git(site.path, site.env, "push", url, "main", timeout=1.5)
    assert r.timed_out, r.describe()
    assert remote_main(site) == start
    assert proxy.pushes_seen == 1  # the request got as far as the proxy

    # The mode is read per connection: switching back makes the next push go through.
    proxy.mode = "pass"
    r = git(site.path, site.env, "push", url, "main")
    assert r.code == 0, r.describe()
    assert remote_main(site) == new


def test_proxy_close_ends_open_connections(site: Site, daemon: GitDaemon) -> None:
    proxy = DropReplyProxy(daemon.port, mode="blackhole").start()
    with socket.create_connection((proxy.host, proxy.port), timeout=2) as conn:
        request = b"git-receive-pack /x.git\0host=127.0.0.1\0"
        conn.sendall(b"%04x" % (len(request) + 4) + request)
        deadline = time.monotonic() + 2
        while proxy.pushes_seen == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proxy.pushes_seen == 1
        start = time.monotonic()
        proxy.close()
        assert time.monotonic() - start < 5  # close never waits for the blackholed peer
        assert conn.recv(16) == b""  # closed, never answered
    assert not can_connect(proxy.host, proxy.port)
    with pytest.raises(ValueError):
        proxy.mode = "sometimes"  # type: ignore[assignment]


def test_daemons_get_their_own_ports_and_stop_cleanly(site: Site) -> None:
    base = site.remote.parent
    with GitDaemon(base, env=site.env) as a, GitDaemon(base, env=site.env) as b:
        assert a.port != b.port
        assert a.running and b.running
        proc = a.proc
        for d in (a, b):
            r = git(site.path, site.env, "ls-remote", d.url(site.remote.name), "main")
            assert r.code == 0 and remote_main(site) in r.out, r.describe()
    assert proc is not None and proc.returncode is not None
    assert not a.running and not b.running
    assert not can_connect("127.0.0.1", a.port) and not can_connect("127.0.0.1", b.port)
