"""Hermetic git fixtures: real git, real repositories, nothing from the user's configuration.

Every test gets its own HOME, no system git config, fixed identities, and a *site*: a working
repository with a bare remote, one commit pushed, and the remote-tracking branch fetched. Every
repository a test leaves behind is checked with ``git fsck --strict`` at teardown.

Randomized tests (Hypothesis, seeded chaos) run a few rounds per run, from a seed that changes
every run: ``GITPUB_TEST_SEED=N`` repeats a run's rounds (the seed is printed at the end of the
run), ``GITPUB_TEST_LONG=1`` runs the long version (many rounds, as before CI had a time budget).
Tests marked ``slow`` (kills, races, many rounds) are scheduled first so they never make the tail.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import forkrun
import pytest
from netfaults import GitDaemon

ROOT = Path(__file__).resolve().parent.parent

#: One seed per run for every randomized test (set in the environment so that the xdist workers,
#: started after this module is imported, draw from the same one).
SEED = int(os.environ.setdefault("GITPUB_TEST_SEED", str(random.randrange(2**32))))
#: The interpreters the suite starts (xdist's workers, ``python -m gitpub``, the hooks git runs)
#: keep gitpub's compiled modules in ``__pycache__``, as Python does by default: a machine whose
#: environment says ``PYTHONDONTWRITEBYTECODE`` would have each of them compile every module
#: again (a few hundred ms a start). Removed before the workers start, as SEED is set.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def _temporary_files_in_memory() -> None:
    """Tests make and delete thousands of small repositories. On a disk file creation can slow
    down many times over, for a minute or more, after deletions nearby (these VMs' ext4 without
    a journal: see bench/README.md), and a run's time with it; so their temporary directories
    (``tmp_path``, and the ``TMPDIR`` of every process the tests start) are on ``/dev/shm``
    when it is a writable tmpfs with room to spare, unless ``TMPDIR`` says where they go. A
    passed test's directory is removed when it ends (``tmp_path_retention_policy``)."""
    if "TMPDIR" in os.environ:
        return
    try:
        room = os.statvfs("/dev/shm")
    except OSError:
        return
    if room.f_bavail * room.f_frsize >= 2 << 30 and os.access("/dev/shm", os.W_OK):
        os.environ["TMPDIR"] = "/dev/shm"  # set before the workers start, as SEED
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again


_temporary_files_in_memory()
#: The long version of the randomized tests: ``GITPUB_TEST_LONG=1``.
LONG = os.environ.get("GITPUB_TEST_LONG", "") not in ("", "0")


def rounds(ci: int, long: int) -> int:
    """How many rounds a randomized test runs: ``ci`` per run, ``long`` with GITPUB_TEST_LONG."""
    return long if LONG else ci


def seeds(name: str, ci: int, long: int) -> list[Any]:
    """Parameters for a seeded test: ``ci`` seeds drawn from this run's seed, or ``long`` with
    GITPUB_TEST_LONG, named ``round0``... (stable test ids). ``name`` keeps two tests apart."""
    rng = random.Random(f"{SEED}-{name}")
    return [pytest.param(rng.randrange(2**32), id=f"round{i}") for i in range(rounds(ci, long))]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow tests first: with ``--dist worksteal`` the tail of the run is then short tests."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.write_line(
        f"randomized tests: GITPUB_TEST_SEED={SEED}"
        + (" GITPUB_TEST_LONG=1" if LONG else " (GITPUB_TEST_LONG=1 for the long version)"))

BASE_CONFIG = """\
remote: origin
branch: main
articles: ["posts/**/*.md"]
node: test-node
"""


def git(cwd: Path, *args: str, input: bytes | None = None, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True,
                          check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode("utf-8", "replace")


@dataclass
class Result:
    code: int
    out: str
    err: str
    args: tuple[str, ...] = ()

    def json(self) -> Any:
        """The command's JSON output, validated against its shipped schema."""
        from schemas import schema_for, validate

        data = json.loads(self.out)
        name = schema_for(self.args, data)
        assert name is not None, f"no schema for the output of {self.args}"
        validate(name, data)
        return data


@dataclass
class Site:
    """A working repository ``path`` with a bare ``remote``, as a writer node sees them."""

    path: Path
    remote: Path
    env: dict[str, str]
    repos: list[Path] = field(default_factory=list)
    #: Repositories copied from a template that passed ``git fsck --strict``, with what their
    #: objects, refs and configuration were right after the copy (``fingerprint``): one left
    #: as it was is not checked again at teardown.
    copied: dict[Path, tuple[tuple[str, int, int], ...]] = field(default_factory=dict)

    def git(self, *args: str, input: bytes | None = None, check: bool = True) -> str:
        return git(self.path, *args, input=input, check=check)

    def write_config(self, extra: str = "") -> None:
        (self.path / ".gitpub.yaml").write_text(BASE_CONFIG + extra, encoding="utf-8")

    def run(self, *args: str, input: bytes | str | None = None,
            env: dict[str, str] | None = None, timeout: float = 60) -> Result:
        """``git pub ARGS`` in a process of its own (needed when the process may be killed):
        forked from this one, gitpub imported (``forkrun``; a sitecustomize on ``PYTHONPATH``,
        another host or a clock, run in it), unless the interpreter must start anew:
        ``python -m gitpub``."""
        data = input.encode() if isinstance(input, str) else input
        merged = {**self.env, **(env or {})}
        argv = ["-C", str(self.path), *args]
        paths = forkrun.plan(merged)
        if paths is not None:
            code, out, err = forkrun.run(argv, merged, data, timeout, paths)
        else:
            proc = subprocess.run([sys.executable, "-m", "gitpub", *argv], input=data,
                                  capture_output=True, env=merged, timeout=timeout)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        return Result(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), args)

    def call(self, *args: str, input: bytes | str = b"") -> Result:
        """``git pub ARGS`` in this process: same code path, no interpreter start-up."""
        from gitpub.cli.main import main

        data = input.encode() if isinstance(input, str) else input
        old = sys.stdin, sys.stdout, sys.stderr
        out, err = io.StringIO(), io.StringIO()
        sys.stdin = io.TextIOWrapper(io.BytesIO(data))
        sys.stdout, sys.stderr = out, err
        try:
            code = main(["-C", str(self.path), *args])
        finally:
            sys.stdin, sys.stdout, sys.stderr = old
        return Result(code, out.getvalue(), err.getvalue(), args)

    def run_here(self, *args: str, input: bytes | str | None = None,
                 env: dict[str, str] | None = None) -> Result:
        """As ``run`` (exactly the environment ``run`` gives, the injected-fault counts and
        remembered secrets of a fresh process), in this process: no interpreter start-up. For a
        command that is not killed or paused (``GITPUB_CRASH_AT``, ``GITPUB_PAUSE_AT``: ``run``)."""
        merged = {**self.env, **(env or {})}
        assert not {"GITPUB_CRASH_AT", "GITPUB_PAUSE_AT"} & merged.keys(), "killed: use run"
        assert merged.get("PYTHONPATH") == self.env.get("PYTHONPATH"), \
            "a sitecustomize (another host, a clock) acts in a process of its own: use run"
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(merged)
        forkrun.fresh_state()
        try:  # Site's call: a subclass's call may set its own environment
            return Site.call(self, *args, input=b"" if input is None else input)
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def job_refs(self) -> dict[str, str]:
        out = self.git("for-each-ref", "--format=%(refname) %(objectname)", "refs/pub/jobs/")
        return dict(line.split() for line in out.splitlines())

    def all_objects_text(self) -> bytes:
        """Every object in the repository, as raw bytes (to look for leaked secrets)."""
        return subprocess.run(
            ["git", "cat-file", "--batch-all-objects", "--batch", "--unordered"],
            cwd=self.path, capture_output=True, check=True).stdout


T = TypeVar("T")

HERMETIC = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test Writer",
    "GIT_AUTHOR_EMAIL": "writer@example.com",
    "GIT_COMMITTER_NAME": "Test Writer",
    "GIT_COMMITTER_EMAIL": "writer@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "LC_ALL": "C.UTF-8",
}


@pytest.fixture
def monkeypatch() -> Iterator[pytest.MonkeyPatch]:
    """pytest's, known to ``forkrun``: a forked ``git pub`` starts without the test's patches."""
    patch = pytest.MonkeyPatch()
    forkrun.ACTIVE_PATCHES.append(patch)
    try:
        yield patch
    finally:
        forkrun.ACTIVE_PATCHES.remove(patch)
        patch.undo()


@pytest.fixture
def hermetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    env = dict(HERMETIC, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    for k in list(os.environ):
        if k.startswith(("GIT_", "GITPUB_")):
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return {**os.environ, **env, "PYTHONPATH": str(ROOT)}


#: Per test process: the sites ``make_site`` copies, by the git environment they were made in.
_TEMPLATES: dict[tuple[tuple[str, str], ...], Path] = {}


def make_site(tmp_path: Path, env: dict[str, str], name: str = "site") -> Site:
    """A site at ``tmp_path/name`` (remote ``tmp_path/name-remote.git``): a copy of one made
    once per test process in the same git environment (the dates are fixed, so the copy is the
    same repositories), its remote URL and FETCH_HEAD naming its own remote."""
    remote = tmp_path / f"{name}-remote.git"
    path = tmp_path / name
    home = Path(os.environ.get("HOME", "/nonexistent"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME", home / ".config"))
    if (home / ".gitconfig").exists() or (xdg / "git/config").exists():
        return new_site(tmp_path, env, name)  # the user's configuration may shape the site
    key = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("GIT_")))
    if key not in _TEMPLATES:
        where = Path(tempfile.mkdtemp(prefix="gitpub-site-template-"))
        atexit.register(shutil.rmtree, where, True)
        fsck(*new_site(where, env).repos)
        _TEMPLATES[key] = where
    template = _TEMPLATES[key]
    site = Site(path, remote, env, [path, remote])
    _copy_repos(template / "site", template / "site-remote.git", site)
    return site


def _copy_repos(path: Path, remote: Path, site: Site, url: str | None = None) -> None:
    """Copies of ``path`` and its ``remote`` (both passed ``git fsck --strict``) as ``site``'s:
    its remote URL (``url``, else its own remote) and FETCH_HEAD naming its own remote, the
    index refreshed."""
    for src, dst in ((path, site.path), (remote, site.remote)):
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, symlinks=True)
    fetch_head = site.path / ".git/FETCH_HEAD"
    if fetch_head.exists():
        fetch_head.write_bytes(fetch_head.read_bytes().replace(
            str(remote).encode(), str(site.remote).encode()))
    url = url or str(site.remote)
    config = site.path / ".git/config"
    text = config.read_bytes()
    line = f"\turl = {remote}\n".encode()
    if _PLAIN_PATH.fullmatch(str(remote)) and _PLAIN_PATH.fullmatch(url) and \
            text.count(line) == 1:  # written as git writes it (no quoting needed): edited here
        config.write_bytes(text.replace(line, f"\turl = {url}\n".encode()))
    else:
        site.git("remote", "set-url", "origin", url)
    site.git("update-index", "-q", "--refresh")  # the copies' inodes are new
    site.copied.update((repo, fingerprint(repo)) for repo in (site.path, site.remote))


#: A path or URL git writes into its configuration as it is, unquoted.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9/._:@+-]+")


def fingerprint(repo: Path) -> tuple[tuple[str, int, int], ...]:
    """What ``git fsck`` reads of ``repo`` — its objects, refs, index and configuration — as each
    file's (path, size, modification time): equal fingerprints, equal verdicts."""
    top = repo / ".git" if (repo / ".git").is_dir() else repo
    found = []
    for part in ("objects", "refs", "packed-refs", "config", "shallow", "info", "index"):
        where = top / part
        walk = os.walk(where) if where.is_dir() else [(str(top), [], [part])]
        for dirpath, _dirs, files in walk:
            for name in files:
                with contextlib.suppress(FileNotFoundError):
                    st = os.lstat(os.path.join(dirpath, name))
                    found.append((os.path.join(dirpath, name), st.st_size, st.st_mtime_ns))
    return tuple(sorted(found))


def fsck(*repos: Path) -> None:
    for repo in repos:
        proc = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=repo,
                              capture_output=True)
        assert proc.returncode == 0, f"git fsck --strict failed in {repo}: {proc.stderr!r}"


#: Per test process: set-ups made once and copied, by (name, git environment): the template
#: site they were made in and what the set-up returned.
_SET_UPS: dict[tuple[object, ...], tuple[Site, Any]] = {}


def set_up_once(site: Site, name: str, build: Callable[[Site, Path], T]) -> T:
    """``build(template, directory)`` made once per test process in a template site of its own
    (dates are fixed: the same first commit, the same commits after it), whose repositories are
    then copied over ``site``'s; returns what ``build`` returned. For a kill matrix: the set-up
    before the kill is not the point, the kill (in a process of its own) is. Other repositories
    ``build`` makes in ``directory`` (``other_writer``) stay there, not copied; ``site``'s
    remote URL stays (the template's is a path: a daemon's site publishes its set-up there)."""
    home = Path(os.environ.get("HOME", "/nonexistent"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME", home / ".config"))
    if (home / ".gitconfig").exists() or (xdg / "git/config").exists():
        return build(site, site.path.parent)  # the user's configuration may shape it
    key = (name, *sorted((k, v) for k, v in os.environ.items() if k.startswith("GIT_")))
    if key not in _SET_UPS:
        where = Path(tempfile.mkdtemp(prefix="gitpub-set-up-"))
        atexit.register(shutil.rmtree, where, True)
        template = make_site(where, site.env)
        made = build(template, where)
        fsck(template.path, template.remote)
        _SET_UPS[key] = template, made
    template, made = _SET_UPS[key]
    url = site.git("remote", "get-url", "origin").strip()  # a daemon's, say: kept
    _copy_repos(template.path, template.remote, site, url)
    return made


def new_site(tmp_path: Path, env: dict[str, str], name: str = "site") -> Site:
    """A site made from scratch: ``git init``, a first commit pushed and fetched."""
    remote = tmp_path / f"{name}-remote.git"
    path = tmp_path / name
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(tmp_path, "init", "-q", "-b", "main", str(path))
    site = Site(path, remote, env, [path, remote])
    (path / "posts").mkdir()
    (path / "posts" / "welcome.md").write_text("# Welcome\n\nThe first post.\n")
    site.write_config()
    site.git("add", ".")
    site.git("commit", "-q", "-m", "Start the site")
    site.git("remote", "add", "origin", str(remote))
    site.git("push", "-q", "origin", "main")
    site.git("fetch", "-q", "origin")
    return site


@pytest.fixture
def site(tmp_path: Path, hermetic: dict[str, str]) -> Iterator[Site]:
    s = make_site(tmp_path, hermetic)
    yield s
    fsck(*(repo for repo in s.repos if s.copied.get(repo) != fingerprint(repo)))


def spawn(site: Site, *args: str, env: dict[str, str] | None = None,
          input: bytes | None = None) -> subprocess.Popen[bytes] | forkrun.Child:
    """``git pub -C site ARGS`` started in its own process (to pause, stop or race it) as
    ``Site.run`` starts it, ``input`` on its stdin; ``communicate()`` gives its output."""
    merged = {**site.env, **(env or {})}
    argv = ["-C", str(site.path), *args]
    paths = forkrun.plan(merged)
    if paths is not None:
        return forkrun.Child(argv, merged, input, paths)
    with tempfile.TemporaryFile() as given:
        given.write(input or b"")
        given.seek(0)
        return subprocess.Popen([sys.executable, "-m", "gitpub", *argv], env=merged,
                                stdin=None if input is None else given,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_stopped(pid: int, timeout: float = 60) -> None:
    """Until process ``pid`` is stopped (SIGSTOP, or paused by ``GITPUB_PAUSE_AT``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[1].split()[0] == b"T":
                return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} did not stop")


class Clock:
    """Python's ``time.time`` moved on by ``advance`` instead of waiting (a lease running out,
    a retry falling due), for this process's calls and for the gitpub processes started with
    ``env`` (a ``sitecustomize`` reading the offset from a file at every call, so a process
    stopped now sees the new time when resumed). git keeps the hermetic dates; ``monotonic``
    (timeouts, bounded waits) is real time."""

    def __init__(self, where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        where.mkdir()
        self.where, self.file, self.offset = where, where / "offset", 0.0
        self.file.write_text("0")
        (where / "sitecustomize.py").write_text(
            "import time\n_real = time.time\n\n\ndef _now():\n    try:\n"
            f"        with open({str(self.file)!r}) as f:\n"
            "            return _real() + float(f.read())\n"
            "    except (OSError, ValueError):\n        return _real()\n\n\n"
            "time.time = _now\n")
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + self.offset)

    def env(self, site: Site) -> dict[str, str]:
        """The environment of a gitpub process on this clock (for ``run`` and ``spawn``)."""
        return {"PYTHONPATH": f"{self.where}{os.pathsep}{site.env.get('PYTHONPATH', '')}"}

    def advance(self, seconds: float) -> None:
        self.offset += seconds
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(repr(self.offset))
        tmp.replace(self.file)  # a reader never sees it half written


@pytest.fixture
def clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(tmp_path / "clock", monkeypatch)


@pytest.fixture
def daemon(site: Site, tmp_path: Path) -> Iterator[GitDaemon]:
    """The site's origin served by ``git daemon`` on 127.0.0.1 (a module may define its own)."""
    with GitDaemon(tmp_path) as d:
        site.git("remote", "set-url", "origin", d.url(site.remote.name))
        yield d
