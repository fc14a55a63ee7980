"""Attacks on the two speed merges (confirm22 593a4f4, pubspeed 1e5d245) that broke them:
small trees walked through cat-file, remote URLs from the configuration, the update-ref
session. Each test failed on 1e5d245."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import git

from gitpub.core.errors import CorruptStateError
from gitpub.git.repo import Repository


def new_repo(tmp_path: Path) -> Path:
    path = tmp_path / "r"
    git(tmp_path, "init", "-q", str(path))
    return path


def literal_tree(path: Path, body: bytes) -> str:
    """A tree object of exactly ``body`` (git hash-object --literally: no check)."""
    return git(path, "hash-object", "-t", "tree", "-w", "--literally", "--stdin",
               input=body).strip()


@pytest.mark.parametrize("mode", [b"+100644", b"100_644", b"100644\t"])
def test_a_small_tree_with_a_mode_git_calls_malformed_is_refused_as_ls_tree_refuses_it(
        tmp_path: Path, hermetic: dict[str, str], mode: bytes) -> None:
    """A mode git's tree parser refuses (only the digits 0-7) made ``git ls-tree -r`` fail,
    and so ``walk_files``; 1e5d245's cat-file walk read it with Python's ``int(…, 8)``, which
    takes a sign, underscores and whitespace: a tree git calls damaged was listed."""
    path = new_repo(tmp_path)
    blob = git(path, "hash-object", "-w", "--stdin", input=b"hi\n").strip()
    tree = literal_tree(path, mode + b" a.txt\0" + bytes.fromhex(blob))
    assert git(path, "ls-tree", "-r", "-z", tree, check=False) == ""
    with Repository.discover(path) as repo, pytest.raises(CorruptStateError):
        repo.walk_files(tree)


def test_a_remote_url_that_is_not_utf8_is_the_one_git_says(
        tmp_path: Path, hermetic: dict[str, str]) -> None:
    """A local remote whose path is not UTF-8 (a Latin-1 name): ``git remote -v`` was read
    with its bytes kept (surrogateescape), the configuration is decoded with U+FFFD for each
    byte it cannot read: 1e5d245's URL from the configuration named another path."""
    from gitpub.git.remote import Remote

    path = new_repo(tmp_path)
    url = b"/srv/caf\xe9.git"
    with (path / ".git" / "config").open("ab") as config:
        config.write(b'[remote "origin"]\n\turl = ' + url + b"\n")
    says = subprocess.run(["git", "remote", "get-url", "origin"], cwd=path,
                          capture_output=True, check=True).stdout.rstrip(b"\n")
    assert says == url
    with Repository.discover(path) as repo:
        assert Remote(repo, "origin", "main").urls() == (os.fsdecode(url),)


@pytest.mark.parametrize("logged", [False, True])
def test_a_transaction_cut_short_after_prepare_leaves_the_session_usable(
        tmp_path: Path, hermetic: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        logged: bool) -> None:
    """An exception between git's ``prepare: ok`` and ``commit`` (``GITPUB_FAIL_AT`` at
    ``git.ref-locked``, a bug contained to one job): the transaction is not applied, its lock
    is gone, and the command's next transactions go through. 1e5d245 kept the session with
    its transaction prepared: every later one in the command was refused ("prepared
    transactions can only be closed"), a CorruptStateError for a healthy job. A transaction
    that writes a reflog (its own ``git update-ref``) kept its locks while the exception's
    traceback kept the process: the next transaction on the ref waited, then LockedError."""
    from gitpub.core import crashpoints
    from gitpub.git.refs import RefUpdate

    path = new_repo(tmp_path)
    git(path, "commit", "-q", "--allow-empty", "-m", "a")
    head = git(path, "rev-parse", "HEAD").strip()
    if logged:
        git(path, "config", "core.logAllRefUpdates", "always")
    monkeypatch.setattr(crashpoints, "_fail_counts", {})
    monkeypatch.setenv("GITPUB_FAIL_AT", "git.ref-locked:1")
    with Repository.discover(path) as repo:
        repo.lock_wait = 0.5
        with pytest.raises(crashpoints.InjectedFault):
            repo.update_refs([RefUpdate("refs/pub/one", head, None)])
        assert not (path / ".git" / "refs" / "pub" / "one.lock").exists()
        assert repo.update_refs([RefUpdate("refs/pub/two", head, None)])
        assert repo.update_refs([RefUpdate("refs/pub/one", head, None)])
    assert git(path, "for-each-ref", "--format=%(refname)", "refs/pub/").split() == \
        ["refs/pub/one", "refs/pub/two"]
