"""``git.treecheck`` refuses exactly the trees ``git fsck --strict`` refuses (C git is the
oracle): every hand-made tree below is written with ``hash-object --literally`` into a scratch
repository and judged by both."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitpub.git.treecheck import tree_problems

BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # the empty blob
TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # the empty tree


def raw(*entries: tuple[str, bytes, str]) -> bytes:
    return b"".join(mode.encode() + b" " + name + b"\0" + bytes.fromhex(sha)
                    for mode, name, sha in entries)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fsck")
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=path, input=b"", check=True,
                   capture_output=True)
    subprocess.run(["git", "hash-object", "-w", "-t", "tree", "--stdin"], cwd=path, input=b"",
                   check=True, capture_output=True)
    return path


def fsck_refuses(repo: Path, data: bytes) -> bool:
    """Whether ``git fsck --strict`` reports an error in the tree ``data``."""
    sha = subprocess.run(["git", "hash-object", "-w", "--literally", "-t", "tree", "--stdin"],
                         cwd=repo, input=data, capture_output=True, check=True
                         ).stdout.decode().strip()
    proc = subprocess.run(["git", "fsck", "--strict", "--no-dangling", "--no-progress"],
                          cwd=repo, capture_output=True)
    found = f"tree {sha}" in proc.stderr.decode("utf-8", "replace")
    obj = repo / ".git" / "objects" / sha[:2] / sha[2:]
    obj.unlink()  # the next case starts from a clean repository again
    return found


CASES = {
    "ok": raw(("100644", b"a", BLOB), ("40000", b"b", TREE), ("100755", b"c", BLOB)),
    "ok-link": raw(("120000", b"l", BLOB)),
    "ok-gitlink": raw(("160000", b"sub", BLOB)),
    "ok-file-before-dir-order": raw(("100644", b"a.b", BLOB), ("40000", b"a", TREE)),
    "duplicate": raw(("100644", b"a", BLOB), ("100644", b"a", BLOB)),
    "duplicate-trees": raw(("40000", b"posts", TREE), ("40000", b"posts", TREE)),
    "duplicate-file-and-dir": raw(("100644", b"a", BLOB), ("100644", b"a.b", BLOB),
                                  ("40000", b"a", TREE)),
    "unsorted": raw(("100644", b"b", BLOB), ("100644", b"a", BLOB)),
    "zero-padded": raw(("040000", b"d", TREE)),
    "bad-mode": raw(("100600", b"a", BLOB)),
    "group-writable": raw(("100664", b"a", BLOB)),
    "dot": raw(("100644", b".", BLOB)),
    "dotdot": raw(("40000", b"..", TREE)),
    "dotgit": raw(("40000", b".git", TREE)),
    "dotgit-case": raw(("40000", b".GIT", TREE)),
    "dotgit-ntfs": raw(("40000", b"git~1", TREE)),
    "dotgit-hfs": raw(("40000", ".g\u200cit".encode(), TREE)),
    "slash": raw(("100644", b"a/b", BLOB)),
    "empty-name": raw(("100644", b"", BLOB)),
    "null-sha": raw(("100644", b"a", "0" * 40)),
    "gitmodules-link": raw(("120000", b".gitmodules", BLOB)),
    "truncated": raw(("100644", b"a", BLOB))[:-3],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_agrees_with_git_fsck(scratch: Path, name: str) -> None:
    data = CASES[name]
    assert bool(tree_problems(data)) == fsck_refuses(scratch, data), tree_problems(data)
    assert bool(tree_problems(data)) == (not name.startswith("ok"))


_NAMES = st.sampled_from([b"a", b"b", b"a.b", b"a-b", b".git", b"posts", b"A", b"z"])
_MODES = st.sampled_from(["100644", "100755", "40000", "120000"])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_MODES, _NAMES), min_size=1, max_size=5))
def test_order_and_duplicates_agree_with_git_fsck(scratch: Path,
                                                  entries: list[tuple[str, bytes]]) -> None:
    data = raw(*((m, n, TREE if m == "40000" else BLOB) for m, n in entries))
    assert bool(tree_problems(data)) == fsck_refuses(scratch, data), (entries,
                                                                      tree_problems(data))
