"""Attacks on the tree checks merged at f7556ff (``git.treecheck`` remembered per name,
``core.paths.is_dotgit``'s shortcut): C git's ``fsck --strict`` is the oracle."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitpub.core.paths import is_dotgit
from gitpub.git.treecheck import tree_problems


def git(repo: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                          check=False)


def fsck_refuses_dotgit(tmp_path: Path, name: bytes) -> tuple[bool, bytes]:
    """(whether ``git fsck --strict`` says hasDotgit of a tree with one entry ``name``, the
    tree's raw bytes), in a repository holding only that tree and its blob."""
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"x").stdout.strip()
    made = git(repo, "mktree", input=b"100644 blob " + blob + b"\t" + name + b"\n")
    assert made.returncode == 0, made.stderr
    tree = made.stdout.strip().decode()
    raw = git(repo, "cat-file", "tree", tree).stdout
    checked = git(repo, "fsck", "--strict", "--no-dangling", "--full")
    return b"hasDotgit" in checked.stdout + checked.stderr, raw


@pytest.mark.parametrize("name", ["git~1\\x", "GIT~1\\", ".git\\x", ".Git. \\hooks",
                                  "git~1. \\", "x\\.git", "a\\b\\GIT~1 "])
def test_a_backslash_ends_an_ntfs_dotgit_as_git_fsck_says(tmp_path: Path, name: str) -> None:
    """C git's ``is_ntfs_dotgit`` ends the component at a backslash (a directory separator on
    Windows) as at ':': ``git~1\\x`` is ``.git/x`` there, and ``git fsck --strict`` refuses
    it (hasDotgit). The tree check said nothing of it."""
    refused, raw = fsck_refuses_dotgit(tmp_path, name.encode())
    assert refused
    assert is_dotgit(name)
    assert tree_problems(raw) == [f"entry {name!r}: .git in a spelling NTFS or HFS+ resolve to it"]


@pytest.mark.parametrize("name", ["git~1x\\", "git~10\\", ".gitx\\", "git~\\1", "x\\.gitx"])
def test_a_backslash_after_another_name_is_no_dotgit(tmp_path: Path, name: str) -> None:
    refused, raw = fsck_refuses_dotgit(tmp_path, name.encode())
    assert not refused
    assert not is_dotgit(name)
    assert tree_problems(raw) == []


def fsck_says(tmp_path: Path, mode: bytes, name: bytes) -> tuple[str, bytes]:
    """(what ``git fsck --strict`` writes of a tree with one entry ``name`` of ``mode``, the
    tree's raw bytes)."""
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"target").stdout.strip()
    made = git(repo, "mktree", input=mode + b" blob " + blob + b"\t" + name + b"\n")
    assert made.returncode == 0, made.stderr
    raw = git(repo, "cat-file", "tree", made.stdout.strip().decode()).stdout
    checked = git(repo, "fsck", "--strict", "--no-dangling", "--full")
    return (checked.stdout + checked.stderr).decode(), raw


def test_a_link_named_gitmodules_after_a_backslash_is_refused_as_git_fsck_does(
        tmp_path: Path) -> None:
    said, raw = fsck_says(tmp_path, b"120000", b"x\\.gitmodules")
    assert "gitmodulesSymlink" in said
    assert tree_problems(raw) == ["entry 'x\\\\.gitmodules': a symbolic link may not be "
                                  ".gitmodules"]


@pytest.mark.parametrize("mode,name", [(b"120000", b"x\\.gitignore"),
                                       (b"100644", b"x\\.gitmodules"),
                                       (b"120000", b".gitmodules\\x")])
def test_what_git_fsck_accepts_after_a_backslash_is_accepted(
        tmp_path: Path, mode: bytes, name: bytes) -> None:
    said, raw = fsck_says(tmp_path, mode, name)
    assert "error" not in said and "warning" not in said, said
    assert tree_problems(raw) == []
