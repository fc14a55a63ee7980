"""What ``prepare`` reads (``app.sources``): regular files only, never waiting, never outside
a directory SOURCE; and no secret in a target path or a key.

Hostile sources are real: FIFOs (``os.mkfifo``), a listening Unix socket, ``/dev/zero``,
symbolic links out of a directory. Commands that could hang run as separate processes under a
timeout, so a regression fails the test instead of stopping the suite.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, Result, Site

TOKEN = "ghp_" + "Zq7Xw2Pk" * 4 + "R9t3"  # built at run time: no secret in this file
ARTICLE = "# Hello\n\nA first article.\n"
OUTSIDE = "# Outside\n\nThe secret plans: not for publication.\n"


def objects(site: Site) -> set[str]:
    out = site.git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return set(out.split())


def refused(site: Site, *args: str, timeout: float = 20, stdin: object = None) -> Result:
    """``git pub prepare ARGS`` in its own process (a source that hangs it is killed at the
    ``timeout``), standard input empty or ``stdin`` (a file: a new interpreter's): exit 2,
    nothing stored."""
    refs, before = site.git("for-each-ref", "refs/pub"), objects(site)
    if stdin is None:  # forked (Site.run): no interpreter start-up
        r = site.run("prepare", "--key", "src", *args, input=b"", timeout=timeout)
    else:
        proc = subprocess.run(
            [sys.executable, "-m", "gitpub", "-C", str(site.path), "prepare", "--key", "src",
             *args], stdin=stdin, capture_output=True, env=site.env, timeout=timeout)
        r = Result(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert r.code == 2, (args, r.code, r.out, r.err)
    assert site.git("for-each-ref", "refs/pub") == refs
    assert objects(site) == before
    return r


@pytest.fixture
def bundle(tmp_path: Path, site: Site) -> Path:
    """A directory SOURCE with an article, and a configuration that lets its files publish."""
    site.write_config('content: ["posts/**"]\n')
    path = tmp_path / "bundle"
    path.mkdir()
    (path / "index.md").write_text(ARTICLE)
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "private" / "plans.md"
    path.parent.mkdir()
    path.write_text(OUTSIDE)
    return path


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = Path("/tmp") / f"gitpub-test-{os.getpid()}-{tmp_path.name}.sock"  # short: sun_path
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    yield path
    server.close()
    path.unlink()


# -- not regular files -------------------------------------------------------------------------

def test_a_fifo_as_source_is_refused_at_once(site: Site, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    r = refused(site, "--to", "posts/a.md", str(fifo))
    assert "named pipe" in r.err and "pipe.md" in r.err


def test_dev_zero_as_source_is_refused_at_once(site: Site) -> None:
    r = refused(site, "--to", "posts/a.md", "/dev/zero")
    assert "character device" in r.err


def test_a_socket_as_source_is_refused(site: Site, unix_socket: Path) -> None:
    r = refused(site, "--to", "posts/a.md", str(unix_socket))
    assert "is a socket: only regular files" in r.err  # (the socket's path says "socket")


def test_a_symlink_to_a_fifo_as_source_is_refused(site: Site, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link.md").symlink_to(tmp_path / "pipe")
    assert "named pipe" in refused(site, "--to", "posts/a.md", str(tmp_path / "link.md")).err


def test_dev_zero_on_stdin_is_refused(site: Site) -> None:
    with open("/dev/zero", "rb") as zero:
        r = refused(site, "--to", "posts/a.md", "-", stdin=zero)
    assert "stdin" in r.err and "character device" in r.err


def test_a_pipe_on_stdin_still_works(site: Site) -> None:
    r = site.run("prepare", "--json", "--key", "pipe", "--to", "posts/a.md", "-", input=ARTICLE)
    assert r.code == 0, r.err


def test_a_fifo_inside_a_directory_source_is_refused(site: Site, bundle: Path) -> None:
    os.mkfifo(bundle / "stream.md")
    r = refused(site, "--to", "posts/b/", str(bundle))
    assert "named pipe" in r.err and "stream.md" in r.err


def test_a_socket_inside_a_directory_source_is_refused(site: Site, bundle: Path,
                                                       unix_socket: Path) -> None:
    (bundle / "sub").mkdir()
    (bundle / "sub" / "s.sock").symlink_to(unix_socket)
    r = refused(site, "--to", "posts/b/", str(bundle))
    assert "s.sock" in r.err


def test_a_file_swapped_for_a_fifo_after_the_check_is_not_waited_on(tmp_path: Path) -> None:
    """The open itself must not block: ``_read_regular`` on a FIFO (as if it had been swapped in
    after ``stat``) refuses it on the open descriptor."""
    fifo = tmp_path / "swapped"
    os.mkfifo(fifo)
    code = ("import sys\nfrom gitpub.pipeline.sources import _read_regular\n"
            "from gitpub.core.errors import UsageError\n"
            "try:\n    _read_regular(sys.argv[1], 'swapped')\n"
            "except UsageError as e:\n    print(e.message)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True,
                          timeout=20, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "named pipe" in proc.stdout.decode(), proc.stderr


# -- directories stay inside ------------------------------------------------------------------

def test_a_symlink_out_of_a_directory_source_is_refused(site: Site, bundle: Path,
                                                        outside: Path) -> None:
    (bundle / "notes.md").symlink_to(outside)
    r = refused(site, "--to", "posts/b/", str(bundle))
    assert "notes.md" in r.err and "leads out of" in r.err
    assert b"secret plans" not in site.all_objects_text()


def test_a_relative_symlink_climbing_out_is_refused(site: Site, bundle: Path,
                                                    outside: Path) -> None:
    (bundle / "deep").mkdir()
    (bundle / "deep" / "x.md").symlink_to(Path("../../private/plans.md"))
    assert "leads out of" in refused(site, "--to", "posts/b/", str(bundle)).err


def test_a_symlinked_directory_is_not_followed(site: Site, bundle: Path, outside: Path) -> None:
    (bundle / "private").symlink_to(outside.parent, target_is_directory=True)
    assert "leads out of" in refused(site, "--to", "posts/b/", str(bundle)).err
    (bundle / "private").unlink()
    (bundle / "img").mkdir()
    (bundle / "alias").symlink_to(bundle / "img", target_is_directory=True)
    assert "symbolic link to a directory" in refused(site, "--to", "posts/b/", str(bundle)).err


def test_a_broken_symlink_is_refused(site: Site, bundle: Path) -> None:
    (bundle / "gone.md").symlink_to(bundle / "nowhere.md")
    assert "broken symbolic link" in refused(site, "--to", "posts/b/", str(bundle)).err


def test_a_symlink_to_a_file_inside_publishes_its_content(site: Site, bundle: Path) -> None:
    (bundle / "img").mkdir()
    (bundle / "img" / "cover.png").write_bytes(b"PNG cover")
    (bundle / "cover.png").symlink_to(Path("img/cover.png"))
    r = site.call("prepare", "--json", "--key", "inside", "--to", "posts/b/", str(bundle))
    assert r.code == 0, r.err
    commit = r.json()["local_commit"]
    assert site.git("show", f"{commit}:posts/b/cover.png") == "PNG cover"
    assert site.git("ls-tree", commit, "posts/b/cover.png").split()[0] == "100644"


def test_a_directory_source_given_as_a_symlink_is_walked(site: Site, bundle: Path,
                                                          tmp_path: Path) -> None:
    (tmp_path / "via").symlink_to(bundle, target_is_directory=True)
    r = site.call("prepare", "--json", "--key", "via", "--to", "posts/b/", str(tmp_path / "via"))
    assert r.code == 0, r.err
    assert r.json()["target_paths"] == ["posts/b/index.md"]


def test_a_non_utf8_file_name_in_a_directory_is_refused(site: Site, bundle: Path) -> None:
    os.close(os.open(os.fsencode(bundle) + b"/caf\xe9.md", os.O_CREAT | os.O_WRONLY, 0o644))
    assert "UTF-8" in refused(site, "--to", "posts/b/", str(bundle)).err


# -- secrets in names -------------------------------------------------------------------------

def test_a_secret_in_the_target_path_is_refused(site: Site) -> None:
    r = refused(site, "--to", f"posts/{TOKEN}.md", "-", stdin=subprocess.PIPE)
    assert TOKEN not in r.err and "secret" in r.err
    assert TOKEN.encode() not in site.all_objects_text()


def test_a_secret_in_a_file_name_inside_a_directory_is_refused(site: Site, bundle: Path) -> None:
    (bundle / f"{TOKEN}.md").write_text(ARTICLE)
    r = refused(site, "--to", "posts/b/", str(bundle))
    assert TOKEN not in r.err and "secret" in r.err


def test_a_secret_in_the_key_is_refused(site: Site) -> None:
    r = site.call("prepare", "--json", "--key", f"weekly-{TOKEN}", "--to", "posts/a.md", "-",
                  input=ARTICLE)
    assert r.code == 2 and TOKEN not in r.out + r.err
    assert site.git("for-each-ref", "refs/pub") == ""
    assert TOKEN.encode() not in site.all_objects_text()


@pytest.mark.slow
def test_a_directory_swapped_for_a_link_out_while_a_link_is_read_is_never_followed(
        tmp_path: Path) -> None:
    """t9, the race: ``bundle/l`` links to ``sub/f.md`` inside; another process keeps swapping
    ``bundle/sub`` between the real directory and a link to a directory outside that holds an
    ``f.md`` of its own. However the swaps fall between the check and the read, the read is
    either the inside file or refused — never the outside one."""
    import threading
    import time

    from gitpub.core.errors import UsageError
    from gitpub.pipeline.sources import read_directory

    bundle, away = tmp_path / "bundle", tmp_path / "away"
    (bundle / "sub").mkdir(parents=True)
    away.mkdir()
    (bundle / "sub" / "f.md").write_text(ARTICLE)
    (away / "f.md").write_text(OUTSIDE)
    (bundle / "l.md").symlink_to(Path("sub/f.md"))
    link, held = tmp_path / "link-out", tmp_path / "held"
    link.symlink_to(away, target_is_directory=True)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(bundle / "sub", held)
            os.rename(link, bundle / "sub")
            os.rename(bundle / "sub", link)
            os.rename(held, bundle / "sub")

    swapper = threading.Thread(target=swap)
    swapper.start()
    read, refusals = 0, 0
    try:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            try:
                found = dict(read_directory(str(bundle)))
            except UsageError:
                refusals += 1
                continue
            read += 1
            assert all(b"secret plans" not in s.data for s in found.values()), found
    finally:
        stop.set()
        swapper.join()
    assert read + refusals > 100
