"""``git.walk.split_scan``: a whole history walked as two halves at once gives the one walk's
answer — the same commits counted, the same candidates, the same ``has`` — whatever commit it
is split at: every commit of an awkward history (merges, claims on a side branch, odd
encodings), a commit on another line of history, one the history only reaches through a merge,
a commit git's negative walk cannot paint in time on a history with clock skew (so both halves
show it), and ids git refuses (then the one walk decides). And the split point is chosen only
where it pays: enough objects in the packs, two cores."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import git
from test_logscan import TREE, history, oracle, raw_commit  # noqa: F401  (a fixture)

from gitpub.core.errors import CorruptStateError
from gitpub.git import walk
from gitpub.git.repo import Repository

History = tuple[Path, dict[str, str]]


def single(r: Repository, tip: str) -> walk.LogScan:
    return walk._single_scan(r, [tip], walk.JOB_ID_NEEDLE, None)


def same_answer(r: Repository, repo: Path, tip: str, split: walk.LogScan) -> None:
    count, expected = oracle(repo, [tip])
    one = single(r, tip)
    assert split.count == one.count == count
    assert {sha for sha, _ in split.candidates} == expected
    assert sorted(split.candidates) == sorted(one.candidates)  # each once, message as git's
    assert len(split.candidates) == len(expected)
    every = git(repo, "rev-list", "--all").split()
    walked = set(git(repo, "rev-list", tip).split())
    assert all(split.has(sha) == (sha in walked) for sha in every)


def test_split_anywhere_in_an_awkward_history(history: History) -> None:  # noqa: F811
    repo, c = history
    with Repository.discover(repo) as r:
        for point in git(repo, "rev-list", c["tip"]).split():
            if point != c["tip"]:
                same_answer(r, repo, c["tip"], walk.split_scan(r, c["tip"], point))


def test_split_at_a_commit_off_the_history(history: History) -> None:  # noqa: F811
    """A point the tip does not reach: on another root, and on a branch off the history."""
    repo, c = history
    lone = raw_commit(repo, [], b"Another root\n\nBlog-Job-Id: lone\n", when=20)
    fork = raw_commit(repo, [c["merge"]], b"A fork\n\nBlog-Job-Id: fork\n", when=21)
    fork2 = raw_commit(repo, [fork], b"On the fork\n", when=22)
    with Repository.discover(repo) as r:
        for point in (lone, fork, fork2):
            same_answer(r, repo, c["tip"], walk.split_scan(r, c["tip"], point))
        # and a tip the other way round: the point is above it
        same_answer(r, repo, c["merge"], walk.split_scan(r, c["merge"], c["tip"]))


def test_a_commit_both_halves_show_is_counted_once(tmp_path: Path) -> None:
    """Clock skew: X is below the point, but dated after everything near it, and reached from
    the tip's side first. git's ``tip ^point`` stops painting a few commits below the point
    (its slop), so it shows X and X's parent too — as the point's own walk does."""
    repo = tmp_path / "skew"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "hash-object", "-w", "-t", "tree", "--stdin"], cwd=repo, input=b"",
                   check=True, capture_output=True)
    root = raw_commit(repo, [], b"Root\n", when=100)
    x = raw_commit(repo, [root], b"X\n\nBlog-Job-Id: x\n", when=1000)
    below = x
    for i in range(8):
        below = raw_commit(repo, [below], b"Old %d\n" % i, when=10 + i)
    point = raw_commit(repo, [below], b"Point\n", when=50)
    side = raw_commit(repo, [x], b"Side\n", when=1500)
    tip = raw_commit(repo, [side, point], b"Tip\n", when=2000)
    shown = set(git(repo, "rev-list", tip, f"^{point}").split())
    assert x in shown  # the set-up: git's walk shows a commit the point reaches
    with Repository.discover(repo) as r:
        split = walk.split_scan(r, tip, point)
        same_answer(r, repo, tip, split)
        assert [sha for sha, _ in split.candidates] == [x]


@pytest.mark.parametrize("point", ["0" * 40, "tree", "blob"])
def test_a_point_git_refuses_leaves_the_answer_to_the_one_walk(
        history: History, point: str) -> None:  # noqa: F811
    repo, c = history
    if point == "tree":
        point = TREE
    elif point == "blob":
        point = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=b"x\n",
                               capture_output=True, check=True).stdout.decode().strip()
    with Repository.discover(repo) as r:
        same_answer(r, repo, c["tip"], walk.split_scan(r, c["tip"], point))


def test_a_damaged_history_fails_as_the_one_walk_does(tmp_path: Path) -> None:
    repo = tmp_path / "damaged"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "hash-object", "-w", "-t", "tree", "--stdin"], cwd=repo, input=b"",
                   check=True, capture_output=True)
    a = raw_commit(repo, [], b"A\n")
    b = raw_commit(repo, [a], b"B\n", when=1)
    tip = raw_commit(repo, [b], b"C\n", when=2)
    (repo / ".git/objects" / a[:2] / a[2:]).unlink()  # gone
    with Repository.discover(repo) as r:
        with pytest.raises(CorruptStateError) as one:
            single(r, tip)
        with pytest.raises(CorruptStateError) as split:
            walk.split_scan(r, tip, b)
    assert str(split.value) == str(one.value)


def children() -> set[int]:
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            found |= {int(p) for p in f.read().split()}
    return found


def test_work_done_meanwhile_once_and_a_failure_ends_the_walks(history: History) -> None:  # noqa: F811
    repo, c = history
    calls: list[int] = []
    with Repository.discover(repo) as r:
        before = children()
        same_answer(r, repo, c["tip"], walk.split_scan(r, c["tip"], c["merge"],
                                                        meanwhile=lambda: calls.append(1)))
        assert calls == [1]
        for listed in (True, False):
            scan = walk.log_scan(r, [c["tip"]], [c["root"]], listed=listed,
                                 meanwhile=lambda: calls.append(2))
            assert scan.count == oracle(repo, [c["tip"], f"^{c['root']}"])[0]
        assert calls == [1, 2, 2]

        def fail() -> None:
            raise RuntimeError("meanwhile failed")

        with pytest.raises(RuntimeError):
            walk.split_scan(r, c["tip"], c["merge"], meanwhile=fail)
        with pytest.raises(RuntimeError):
            walk.log_scan(r, [c["tip"]], [], listed=True, meanwhile=fail)
        assert children() == before  # every git started was ended and waited for
        assert not list(r.pub_dir.glob("log-*"))  # and its output file removed


def test_the_point_is_chosen_only_where_a_split_pays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "packed"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "hash-object", "-w", "-t", "tree", "--stdin"], cwd=repo, input=b"",
                   check=True, capture_output=True)
    tip = raw_commit(repo, [], b"c0\n")
    for i in range(1, 60):
        tip = raw_commit(repo, [tip], b"c%d\n" % i, when=i)
    git(repo, "update-ref", "refs/heads/main", tip)
    with Repository.discover(repo) as r:
        monkeypatch.setattr(walk, "SPLIT_OBJECTS", 0)
        assert walk.split_point(r, tip) is None  # loose objects only: no index to read
    git(repo, "repack", "-q", "-a", "-d")
    commits = set(git(repo, "rev-list", "HEAD").split())
    with Repository.discover(repo) as r:
        point = walk.split_point(r, tip)
        assert point in commits and point != tip
        monkeypatch.setattr(walk, "SAMPLE", 1000)  # every object: the median commit exactly
        dated = sorted(commits - {tip}, key=lambda s: int(git(repo, "log", "-1", "--format=%ct",
                                                               s)))
        assert walk.split_point(r, tip) == dated[len(dated) // 2]
        used: list[str] = []
        real = walk.split_scan

        def spy(*args: object, **kwargs: object) -> walk.LogScan:
            used.append(str(args[2]))
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(walk, "split_scan", spy)
        scan = walk.log_scan(r, [tip], [], listed=True)
        assert used and scan.count == 60
        walk.log_scan(r, [tip], [c for c in list(commits)[:1] if c != tip], listed=True)
        assert len(used) == 1  # a range with an excluded end is not split
        monkeypatch.setattr(walk, "SPLIT_OBJECTS", 10**9)
        assert walk.split_point(r, tip) is None  # too few objects
        monkeypatch.setattr(walk, "SPLIT_OBJECTS", 0)
        monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0}, raising=False)
        assert walk.split_point(r, tip) is None  # one core
