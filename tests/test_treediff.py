"""``git.treediff`` gives ``git diff-tree -r -t --no-renames`` its own answer on sound trees
and no answer on the others (C git is the oracle): random pairs of trees written by
``git mktree``, the shapes where git's order is subtle (a file and a directory of one name,
names around ``/`` in byte order, kind changes), and trees ``git fsck`` refuses (written with
``hash-object --literally``), for which the verifier must fall back to C git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitpub.git.diff import _parse, first_parent_changes, git_first_parent_changes
from gitpub.git.repo import Repository
from gitpub.git.treediff import Change, tree_changes

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
#: Names whose byte order around ``/`` (0x2f) and ``.`` is where git's tree order is subtle.
NAMES = ["a", "a.b", "a-b", "a0", "a_", "b", "ab"]
BLOBS = [b"one\n", b"two\n", b""]

Spec = dict[str, object]  # name -> (mode, blob index) for a file, or a Spec for a directory


def _run(repo: Path, *args: str, data: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True,
                          check=True).stdout.decode().strip()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("treediff")
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for blob in BLOBS:
        _run(path, "hash-object", "-w", "--stdin", data=blob)
    _run(path, "hash-object", "-w", "-t", "tree", "--stdin", data=b"")
    return path


def blob_id(repo: Path, index: int) -> str:
    return _run(repo, "hash-object", "--stdin", data=BLOBS[index])


def write_tree(repo: Path, spec: Spec) -> str:
    """The tree ``spec`` describes, written by ``git mktree`` (which sorts it as git does)."""
    lines = []
    for name, value in spec.items():
        if isinstance(value, dict):
            lines.append(f"040000 tree {write_tree(repo, value)}\t{name}")
        else:
            mode, index = value  # type: ignore[misc]
            if mode == "160000":
                lines.append(f"160000 commit {'1' * 39}{index}\t{name}")
            else:
                lines.append(f"{mode} blob {blob_id(repo, index)}\t{name}")
    return _run(repo, "mktree", "--missing", data=("\n".join(lines) + "\n").encode()
                if lines else b"")


def git_diff(repo: Path, old: str | None, new: str) -> list[Change]:
    out = subprocess.run(["git", "diff-tree", "-r", "-t", "--no-renames", "-z",
                          old or EMPTY_TREE, new], cwd=repo, capture_output=True,
                         check=True).stdout
    return _parse(b"x\0" + out).get("x", [])


leaf = st.tuples(st.sampled_from(["100644", "100755", "120000", "160000"]),
                 st.integers(0, len(BLOBS) - 1))
specs = st.recursive(st.dictionaries(st.sampled_from(NAMES), leaf, max_size=4),
                     lambda inner: st.dictionaries(st.sampled_from(NAMES), inner | leaf,
                                                   max_size=4), max_leaves=12)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(old=specs, new=specs)
def test_sound_trees_diff_as_git_diffs_them(scratch: Path, old: Spec, new: Spec) -> None:
    a, b = write_tree(scratch, old), write_tree(scratch, new)
    with Repository.discover(scratch) as repo:
        assert tree_changes(repo, a, b) == git_diff(scratch, a, b)
        assert tree_changes(repo, None, b) == git_diff(scratch, None, b)


HAND = {
    "file-becomes-dir": ({"a": ("100644", 0), "a.b": ("100644", 1)},
                         {"a": {"x": ("100644", 0)}, "a.b": ("100644", 1)}),
    "dir-becomes-file": ({"a": {"x": ("100644", 0)}, "a-b": ("100644", 1)},
                         {"a": ("100644", 0), "a-b": ("100644", 1)}),
    "file-becomes-link": ({"a": ("100644", 0)}, {"a": ("120000", 0)}),
    "file-becomes-submodule": ({"a": ("100644", 0)}, {"a": ("160000", 0)}),
    "mode-only": ({"a": ("100644", 0)}, {"a": ("100755", 0)}),
    "deep-change": ({"d": {"e": {"f": ("100644", 0)}}}, {"d": {"e": {"f": ("100644", 1)}}}),
    "same": ({"a": ("100644", 0)}, {"a": ("100644", 0)}),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_made_shapes(scratch: Path, name: str) -> None:
    old, new = HAND[name]
    a, b = write_tree(scratch, old), write_tree(scratch, new)
    with Repository.discover(scratch) as repo:
        assert tree_changes(repo, a, b) == git_diff(scratch, a, b)


def literal_tree(repo: Path, entries: list[tuple[str, bytes, str]]) -> str:
    data = b"".join(m.encode() + b" " + n + b"\0" + bytes.fromhex(s) for m, n, s in entries)
    return _run(repo, "hash-object", "-w", "--literally", "-t", "tree", "--stdin", data=data)


def test_a_tree_git_fsck_refuses_gets_no_answer_here(scratch: Path) -> None:
    """Duplicate entries (dulwich keeps one, git both), entries out of order, a zero-padded
    mode: on either side, the answer is None, and the verifier asks C git."""
    blob = blob_id(scratch, 0)
    sound = literal_tree(scratch, [("100644", b"a", blob)])
    hostile = [literal_tree(scratch, [("100644", b"a", blob), ("100644", b"a", blob)]),
               literal_tree(scratch, [("100644", b"b", blob), ("100644", b"a", blob)]),
               literal_tree(scratch, [("040000", b"d", EMPTY_TREE)])]
    inner = literal_tree(scratch, [("100644", b"x", blob), ("100644", b"x", blob)])
    hostile.append(literal_tree(scratch, [("40000", b"d", inner)]))  # deeper down
    with Repository.discover(scratch) as repo:
        for tree in hostile:
            assert tree_changes(repo, sound, tree) is None
            assert tree_changes(repo, tree, sound) is None


def test_first_parent_changes_agree_with_git_on_commits(scratch: Path,
                                                        tmp_path: Path) -> None:
    """Root commits, merges (against the first parent only), and a commit whose tree has a
    duplicate entry: the in-process answer for the first ones, C git's for the last."""
    blob = blob_id(scratch, 0)
    base = write_tree(scratch, {"a": ("100644", 0), "d": {"x": ("100644", 1)}})
    side = write_tree(scratch, {"a": ("100644", 1), "d": {"x": ("100644", 1)}})
    main = write_tree(scratch, {"a": ("100644", 0), "d": {"y": ("100755", 2)}})
    dup = literal_tree(scratch, [("100644", b"a", blob), ("100644", b"a", blob)])

    def commit(tree: str, *parents: str) -> str:
        args = [a for p in parents for a in ("-p", p)]
        return _run(scratch, "commit-tree", tree, *args, data=b"m\n")

    root = commit(base)
    s, m = commit(side, root), commit(main, root)
    merge, bad = commit(side, m, s), commit(dup, m)
    commits = [root, s, m, merge, bad]
    with Repository.discover(scratch) as repo:
        here = first_parent_changes(repo, commits)
        assert here == git_first_parent_changes(repo, commits)
        for sha in commits:
            assert first_parent_changes(repo, [sha]) == git_first_parent_changes(repo, [sha])
        assert tree_changes(repo, main, dup) is None  # so it came from C git
