"""A tree's fsck answer is remembered for the command (``Repository.fsck_problems``, keyed by
the tree's id and ``padded_ok``; ``git.treecheck`` remembers each entry name's answer): the key
is complete. The same tree reached at another path, under the other rule for zero-padded
modes, asked again; the same name under another mode or id: each problem is still reported,
exactly as a command that never saw it before reports it."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest
from conftest import Site
from test_delivery import article, prepare
from test_treecheck import BLOB, CASES, TREE, raw

from gitpub.git import treecheck
from gitpub.git.diff import first_parent_changes
from gitpub.git.repo import Repository
from gitpub.git.treecheck import tree_problems


def cold(data: bytes, padded_ok: bool = False) -> list[str]:
    """``tree_problems`` by a process that has seen no name before."""
    treecheck._name_problem.cache_clear()
    treecheck._link_problem.cache_clear()
    return tree_problems(data, padded_ok=padded_ok)


@pytest.mark.parametrize("padded_ok", [False, True])
def test_every_case_is_judged_alike_after_any_other(padded_ok: bool) -> None:
    expected = {name: cold(data, padded_ok) for name, data in CASES.items()}
    for first, second in itertools.permutations(CASES, 2):
        cold(CASES[first], not padded_ok)
        tree_problems(CASES[first], padded_ok=padded_ok)
        assert tree_problems(CASES[second], padded_ok=padded_ok) == expected[second], \
            (first, second)


def test_a_name_fine_as_a_file_is_still_refused_as_a_link_or_with_the_null_id() -> None:
    cold(raw(("100644", b".gitmodules", BLOB), ("100644", b"a", BLOB)))
    assert tree_problems(raw(("100644", b".gitmodules", BLOB))) == []
    assert tree_problems(raw(("120000", b".gitmodules", BLOB))) == \
        ["entry '.gitmodules': a symbolic link may not be .gitmodules"]
    assert tree_problems(raw(("100644", b"a", "0" * 40))) == ["entry 'a': the null object id"]
    assert tree_problems(raw(("040000", b"a", TREE))) == ["entry 'a': zero-padded mode 040000"]
    assert tree_problems(raw(("100664", b"a", BLOB))) == \
        ["entry 'a': mode 100664 is not a git file mode"]


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True,
                          check=True).stdout.decode().strip()


def tree(repo: Path, data: bytes) -> str:
    return git(repo, "hash-object", "-w", "--literally", "-t", "tree", "--stdin", input=data)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", str(tmp_path))
    assert git(tmp_path, "hash-object", "-w", "--stdin", input=b"") == BLOB
    assert tree(tmp_path, b"") == TREE
    return tmp_path


def test_a_bad_tree_is_reported_at_every_path_it_is_reached_by(scratch: Path) -> None:
    bad = tree(scratch, raw(("100644", b"x.md", BLOB), ("100644", b"x.md", BLOB)))
    root = tree(scratch, raw(("40000", b"a", bad), ("40000", b"b", bad)))
    problem = "entry 'x.md' appears twice"
    with Repository.discover(scratch) as repo:
        for _ in range(2):  # asked again: the same answer, not "seen already"
            assert repo.unsound_trees(root, ["a/y.md"]) == [f"tree a/ {bad[:12]}: {problem}"]
            assert repo.unsound_trees(root, ["b/y.md"]) == [f"tree b/ {bad[:12]}: {problem}"]
            assert repo.fsck_problems(bad) == [problem]


@pytest.mark.parametrize("first", ["padded ok", "padded refused"])
def test_a_zero_padded_tree_is_judged_under_each_rule_as_asked(scratch: Path,
                                                                first: str) -> None:
    """``unsound_trees`` builds on a zero-padded mode (the rebuilt tree writes it unpadded);
    the verifier refuses it in a published commit: the same tree, two answers."""
    padded = tree(scratch, raw(("040000", b"d", TREE)))
    problem = "entry 'd': zero-padded mode 040000"
    with Repository.discover(scratch) as repo:
        asks = [lambda: repo.fsck_problems(padded, padded_ok=True) == [],
                lambda: repo.fsck_problems(padded) == [problem],
                lambda: repo.unsound_trees(padded, ["d/x.md"]) == []]
        for ask in (asks if first == "padded ok" else asks[::-1]) * 2:
            assert ask()


def test_a_commits_changes_are_its_own_and_not_its_trees(scratch: Path) -> None:
    """``first_parent_changes`` remembered by commit id: two commits of one tree on other
    parents each get their own diff."""
    one = tree(scratch, raw(("100644", b"a", BLOB)))
    two = tree(scratch, raw(("100644", b"a", BLOB), ("100644", b"b", BLOB)))
    env = ["-c", "user.name=T", "-c", "user.email=t@e"]
    base = git(scratch, *env, "commit-tree", one, "-m", "one")
    on_base = git(scratch, *env, "commit-tree", two, "-p", base, "-m", "two")
    on_root = git(scratch, *env, "commit-tree", two, "-m", "two")
    with Repository.discover(scratch) as repo:
        for _ in range(2):
            found = first_parent_changes(repo, [on_base, on_root])
            assert [c.path for c in found[on_base]] == ["b"]
            assert [c.path for c in found[on_root]] == ["a", "b"]
            assert [c.path for c in first_parent_changes(repo, [on_root])[on_root]] == \
                ["a", "b"]


# -- at push and at prepare: one bad tree at two paths, judged in one process ------------------

PLANTED = {  # what another tool writes into a directory the jobs write into
    "twice": [("100644", b"x.md", "BLOB"), ("100644", b"x.md", "BLOB")],
    "unsorted": [("100644", b"y.md", "BLOB"), ("100644", b"x.md", "BLOB")],
    "dotgit": [("40000", b".GIT", "TREE"), ("100644", b"x.md", "BLOB")],
    "dotgit-ntfs": [("40000", b"git~1", "TREE"), ("100644", b"x.md", "BLOB")],
    "bad-mode": [("100644", b"x.md", "BLOB"), ("100664", b"y.md", "BLOB")],
    "gitmodules-link": [("120000", b".gitmodules", "BLOB"), ("100644", b"x.md", "BLOB")],
}
SAID = {"twice": "'x.md' appears twice", "unsorted": "not in git's order",
        "dotgit": "entry '.GIT': .git in a spelling", "dotgit-ntfs": "entry 'git~1': .git",
        "bad-mode": "entry 'y.md': mode 100664", "gitmodules-link": "may not be .gitmodules"}


def plant(site: Site, tmp_path: Path, kind: str, dirs: tuple[str, ...]) -> str:
    """Another writer pushes (past ``transfer.fsckObjects``) a commit whose directories
    ``posts/<dir>`` are all one tree holding ``PLANTED[kind]``; fetched here. The tree's id."""
    other = tmp_path / f"planter-{kind}"
    git(tmp_path, "clone", "-q", str(site.remote), str(other))
    ids = {"BLOB": git(other, "hash-object", "-w", "--stdin", input=b"x\n"),
           "TREE": git(other, "hash-object", "-w", "-t", "tree", "--stdin", input=b"")}
    bad = tree(other, raw(*[(m, n, ids[s]) for m, n, s in PLANTED[kind]]))

    def replaced(at: str, names: dict[str, str]) -> str:
        listed = [line for line in git(other, "ls-tree", at).splitlines()
                  if line.split("\t")[1] not in names]
        return git(other, "mktree", input="".join(
            f"{line}\n" for line in [*listed, *(f"040000 tree {t}\t{n}"
                                               for n, t in names.items())]).encode())

    posts = replaced("HEAD:posts", dict.fromkeys(dirs, bad))
    commit = git(other, "commit-tree", replaced("HEAD", {"posts": posts}), "-p", "HEAD",
                 "-m", f"planted {kind}")
    git(other, "-c", "transfer.fsckObjects=false", "push", "-q", "origin",
        f"{commit}:refs/heads/main")
    site.git("fetch", "-q", "origin")
    return bad


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_one_bad_tree_at_two_paths_stops_each_job_at_push(site: Site, tmp_path: Path,
                                                          kind: str) -> None:
    """Two jobs, one push: each stops in CONFLICT naming the tree on its own path and the
    problem (the second is not taken for judged by the first's answer)."""
    jobs = [prepare(site, f"{kind}-{d}", f"posts/{d}/new.md", article(d)) for d in ("a", "b")]
    site.repos.remove(site.remote)
    site.repos.remove(site.path)
    bad = plant(site, tmp_path, kind, ("a", "b"))
    r = site.call("push", "--json")
    assert r.code == 4, r.out + r.err
    shown = {j["job_id"]: j for j in r.json()["jobs"]}
    for job, d in zip(jobs, ("a", "b"), strict=True):
        found = shown[job["job_id"]]
        assert found["state"] == "CONFLICT" and found["failure_code"] == "tree_unsound", found
        assert f"tree posts/{d}/ {bad[:12]}" in found["failure_detail"], found["failure_detail"]
        assert SAID[kind] in found["failure_detail"], found["failure_detail"]


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_a_bad_tree_stops_prepare_at_the_snapshot(site: Site, tmp_path: Path,
                                                  kind: str) -> None:
    site.repos.remove(site.remote)
    site.repos.remove(site.path)
    bad = plant(site, tmp_path, kind, ("a", "b"))
    for d in ("a", "b"):
        r = site.call("prepare", "--json", "--key", f"{kind}-{d}", "--to", f"posts/{d}/new.md", "-",
                      input=article(d))
        assert r.code == 4, r.out + r.err
        shown = r.json()
        assert shown["state"] == "CONFLICT" and shown["failure_code"] == "tree_unsound", shown
        assert f"tree posts/{d}/ {bad[:12]}" in shown["failure_detail"], shown["failure_detail"]
        assert SAID[kind] in shown["failure_detail"], shown["failure_detail"]
