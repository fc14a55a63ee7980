"""``git.gitconfig.is_plain``: which repositories are read without dulwich.

The configurations git itself writes (``init``, ``clone``, a linked worktree, a remote, a
branch, gitpub's own hooks and notes settings) are plain; every setting that changes how
dulwich opens a repository or reads its objects — or that the scan does not understand — is
not, and such a repository is opened the full way (``Repository._reader`` is None).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Site, git

from gitpub.git.gitconfig import is_plain
from gitpub.git.repo import Repository


def test_what_git_and_gitpub_write_is_plain(site: Site, tmp_path: Path) -> None:
    assert site.call("hooks", "install").code == 0  # notes refspec, merge strategy
    site.git("config", "branch.main.remote", "origin")
    site.git("config", "user.name", "Some One")
    site.git("config", "remote.origin.pushurl", "/elsewhere.git")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(site.remote), str(clone))
    site.repos.append(clone)
    for repo in (site.path, clone):
        assert is_plain(str(repo / ".git/config")), repo
    bare = str(site.remote / "config")  # bare = true: git's discovery decides, not the walk
    assert not is_plain(bare) and is_plain(bare, bare_matters=False)
    for path in (site.path, site.remote):
        with Repository.discover(path) as repo:
            assert repo._reader is not None and repo._dulwich is None, path
    assert is_plain(str(tmp_path / "no-such-config"))


NOT_PLAIN = [
    ("extensions.worktreeConfig", "true"), ("extensions.objectFormat", "sha1"),
    ("include.path", "other.cfg"), ("includeIf.gitdir:/x/.path", "other.cfg"),
    ("core.worktree", "/somewhere"), ("core.bare", "true"),
    ("core.repositoryformatversion", "2"), ("core.compression", "9"),
    ("core.bigFileThreshold", "1m"), ("core.sharedRepository", "group"),
    ("core.fsyncObjectFiles", "maybe"), ("pack.windowMemory", "1g"),
    ("repack.writeBitmaps", "true"), ("core.someFutureKey", "x"),
]


@pytest.mark.parametrize(("key", "value"), NOT_PLAIN, ids=[k for k, _ in NOT_PLAIN])
def test_settings_dulwich_reads_at_open_are_not_plain(site: Site, key: str, value: str) -> None:
    config = site.path / ".git/config"
    before = config.read_text()
    site.git("config", key, value)
    try:
        assert not is_plain(str(config))
    finally:
        config.write_text(before)
    assert is_plain(str(config))


@pytest.mark.parametrize("text", [
    "[core]\n\tbare = \\\n false\n",  # a continued line
    "[core] bare = false\n",  # a key on the header's line
    '[core]\n\tbare = "false"\n',  # quoted
    "bare = false\n",  # a key before any section
    "[core\n",  # a header that does not close
    '[remote origin"]\n',  # a subsection without its quotes
    "[core]\n\tbare\n",  # a bare key means true
])
def test_shapes_the_scan_does_not_read_are_not_plain(tmp_path: Path, text: str) -> None:
    config = tmp_path / "config"
    config.write_text(text)
    assert not is_plain(str(config))
    config.write_bytes(b"[core]\n\tfilemode = true\n# \xff not UTF-8\n")
    assert not is_plain(str(config))
