"""How many git processes each command starts: a regression guard.

Every git gitpub starts costs a process start (2-5 ms, more under load); a command pays it
for each. The number a command starts in a fixed scenario is deterministic, unlike its time,
so it is counted here — by a ``git`` first on the ``PATH`` that notes its arguments and runs
the real one (git's own children find git in its exec path, not through the ``PATH``: only
gitpub's starts are counted) — and held under a ceiling. A ceiling that fails says which
git runs came in; raise it only for a reason (and say it in the commit).
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import Site
from test_delivery import article

from gitpub.git.repo import Repository
from gitpub.git.run import git_program
from gitpub.store.mirror import MIRROR_PREFIXES

#: The most git processes each command of ``test_git_processes_per_command`` may start
#: (measured: 714036d started 23, 51, 5, 115, 32, 3 and 27; the procs branch 14, 31, 5, 71, 21,
#: 3, 15; merged into a712356, which brought the shared channel ledgers, the take-over re-gate
#: and the fold: push 35, sync 72, reconcile 25; the pubspeed branch: the fetched store's
#: listing kept for the command, the private fetch repository's refs read as files, a push
#: noted by one compare-and-swap: push 29, sync 67, reconcile 21, confirm 11; a terminal
#: state and its index entry in one transaction without a read, the main worktree found
#: without git when it is the only one, the published job read only to adopt: push 25, sync
#: 63, reconcile 20; prepare reads the archive and the base together: prepare 13; the
#: transactions on refs/pub/* through one update-ref session: prepare 8, push 21, sync 52;
#: a small tree walked through cat-file: prepare 7, push 20, sync 51; with the fold of
#: 8612472: reconcile 19; with confirm22 (no `git remote -v`, objects kept per command):
#: confirm 10; the pushpath branch: a publishing command lists the refs it keeps once, at its
#: start (git.refs, local_prefixes), the job's ref read afresh after the fetch, a push forgets
#: only the remote-tracking refs it may move: push 13; prepare reads the job's ref with the
#: base and the archive, sync and prepare --push list like push, a hand commit's unpushed
#: commits one rev-list per pair in a command: prepare 6, sync 34, reconcile 17; the job's
#: ref confirmed by a verify in the update-ref session instead of read again: push 12,
#: sync 33; prepare --push, counted from then on: 20 on c40bc4a, 14; the remote-tracking
#: branch's reflog read by git, not from its file, which reftable does not have: sync 34).
CEILINGS = {"prepare": 6, "push": 12, "status": 5, "sync": 34, "reconcile": 17,
            "status-idle": 3, "confirm": 10, "prepare-push": 14}


@pytest.fixture
def counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``git`` on the ``PATH`` that appends its arguments to the returned log file."""
    real = shutil.which("git")
    assert real is not None
    bindir, log = tmp_path / "counting-bin", tmp_path / "git-starts.log"
    bindir.mkdir()
    wrapper = bindir / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    log.touch()
    return log


def starts(log: Path) -> list[str]:
    lines = log.read_text().splitlines()
    log.write_text("")
    return lines


def test_git_processes_per_command(site: Site, counted: Path) -> None:
    assert git_program() == str(counted.parent / "counting-bin" / "git")
    seen: dict[str, list[str]] = {}

    def run(name: str, *args: str, input: str = "") -> None:
        starts(counted)
        r = site.call(*args, input=input)
        assert r.code == 0, r.out + r.err
        seen[name] = starts(counted)

    run("prepare", "prepare", "--key", "k1", "--to", "posts/one.md", "-", input=article(1))
    run("status", "status")
    run("push", "push")
    (site.path / "posts" / "two.md").write_text(article(2))
    site.git("add", "posts/two.md")
    site.git("commit", "-q", "-m", "hand edit")
    run("sync", "sync")
    run("status-idle", "status")
    run("reconcile", "reconcile")
    site.git("fetch", "-q", "origin")
    run("confirm", "confirm")
    run("prepare-push", "prepare", "--push", "--key", "k3", "--to", "posts/three.md", "-",
        input=article(3))
    over = {name: len(lines) for name, lines in seen.items() if len(lines) > CEILINGS[name]}
    assert not over, "\n".join(
        f"{name}: {n} git processes (at most {CEILINGS[name]}): " + "; ".join(
            f"{count}x {line[:90]}" for line, count in Counter(seen[name]).most_common(8))
        for name, n in over.items())
    assert all(seen.values()), seen  # the counting git was used


def test_a_tracking_ref_is_read_once_per_command_and_again_after_a_failed_swap(
        site: Site) -> None:
    """Mirror refs (``git.refs``): a value read is kept for the command, a value written
    under compare-and-swap too; a swap that fails forgets them, and so does a fetch. Refs
    that are no mirror are read afresh every time."""
    tracking = "refs/remotes/origin/main"
    first = site.git("rev-parse", tracking).strip()
    site.git("commit", "-q", "--allow-empty", "-m", "another")
    second = site.git("rev-parse", "HEAD").strip()
    with Repository.discover(site.path) as repo:
        repo.mirror_prefixes = ("refs/remotes/",)
        assert repo.read_ref(tracking) == first
        site.git("update-ref", tracking, second, first)  # another process moves it
        assert repo.read_ref(tracking) == first  # kept: what the command read
        assert repo.read_ref("refs/heads/main") == second  # no mirror: read afresh
        assert not repo.cas_ref(tracking, first, second)  # the swap decides, and fails
        assert repo.read_ref(tracking) == second  # forgotten: read again
        assert repo.cas_ref(tracking, second, first)
        site.git("update-ref", tracking, second, first)
        assert repo.read_ref(tracking) == first  # what we wrote, kept
        repo.git("pack-refs", "--all")  # a git that may move refs: forgotten
        assert repo.read_ref(tracking) == second
        site.git("update-ref", tracking, first, second)
        assert repo.list_refs("refs/remotes/origin/") == {"main": first}  # a first listing
        site.git("update-ref", tracking, second, first)
        assert repo.list_refs("refs/remotes/origin/") == {"main": first}  # kept
        assert repo.read_ref(tracking) == first


def test_kept_job_refs_never_make_a_swap_pass_and_a_fresh_read_asks_git(site: Site) -> None:
    """gitpub's own listings kept for a publishing command (``local_prefixes``): a value read
    (or written) is kept, and a swap from a kept value another process has moved since fails
    (then everything is forgotten); ``read_refs`` always asks git, ``read_ref_now`` has git
    confirm the kept value (or reads afresh); a push forgets only the remote-tracking refs it
    may move, the local ones stay."""
    job = "refs/pub/jobs/j1"
    first = site.git("rev-parse", "HEAD").strip()
    site.git("commit", "-q", "--allow-empty", "-m", "another")
    second = site.git("rev-parse", "HEAD").strip()
    site.git("update-ref", job, first)
    with Repository.discover(site.path) as repo:
        repo.mirror_prefixes = MIRROR_PREFIXES
        repo.local_prefixes = ("refs/pub/jobs/",)
        seen = repo.read_refs(["refs/heads/main"], also=["refs/pub/jobs/", "refs/remotes/"])
        assert seen == {"refs/heads/main": second}
        assert repo.list_refs("refs/pub/jobs/") == {"j1": first}
        site.git("update-ref", job, second, first)  # another process moves it
        assert repo.read_ref(job) == first  # kept: what the command read
        assert repo.read_together([job, "refs/pub/jobs/"]) == {job: first}  # no git either
        assert repo.read_refs([job]) == {job: second}  # a read that decides a race: git
        assert repo.read_ref_now(job) == second  # confirmed by git (verify), kept
        site.git("update-ref", job, first, second)
        assert repo.read_ref(job) == second  # what the fresh read saw, kept
        assert repo.read_ref_now(job) == first  # moved: git says so, read afresh
        site.git("update-ref", job, second, first)
        assert repo.read_ref(job) == first  # what that read saw, kept
        assert not repo.cas_ref(job, first, second)  # the kept value never makes it pass
        assert repo.read_ref(job) == second  # forgotten: read again
        assert repo.cas_ref(job, second, first)
        site.git("update-ref", job, second, first)
        assert repo.read_ref(job) == first  # what it wrote, kept
        other = "refs/pub/jobs/j2"
        assert repo.read_refs([job], also=["refs/pub/jobs/"]) == {job: second}
        assert repo.read_ref_now(other) is None  # listed, absent: confirmed absent
        site.git("update-ref", other, first)  # another process creates it
        assert repo.read_ref(other) is None  # kept
        assert repo.read_ref_now(other) == first
        assert repo.list_refs("refs/remotes/origin/") == {"main": first}
        assert repo.read_ref(job) == second
        repo.git("push", "-q", "origin", f"{second}:refs/heads/other")  # moves tracking refs
        site.git("update-ref", job, first, second)
        assert repo.read_ref(job) == second  # a push leaves the local refs kept
        site.git("update-ref", "refs/remotes/origin/main", second, first)
        assert repo.list_refs("refs/remotes/origin/") == {"main": second, "other": second}
        repo.git("pack-refs", "--all")  # any other git that may move refs: all forgotten
        assert repo.read_ref(job) == first
