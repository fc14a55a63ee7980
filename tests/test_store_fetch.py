"""The private fetch repository (``store.fetchdir``): it goes where the repository goes.

Issue 23 point 7: its configuration named the repository's configuration by an absolute path,
so a repository moved elsewhere failed every push ("remote 'origin' has no repository at its
URL") and a copy fetched from the original's remote.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import Site, git
from test_delivery import article, prepare

from gitpub.store.fetchdir import FETCH_CONFIG


def publish(site: Site, name: str) -> str:
    job = prepare(site, name, f"posts/{name}.md", article(name))
    r = site.call("push", str(job["job_id"]))
    assert r.code == 0, r.out + r.err
    return str(job["job_id"])


def fetch_config(site: Site) -> bytes:
    return (site.path / ".git/pub/fetch.git/config").read_bytes()


def test_a_moved_repository_still_pushes(site: Site, tmp_path: Path) -> None:
    publish(site, "before")
    assert str(tmp_path).encode() not in fetch_config(site)
    moved = Site(tmp_path / "moved", site.remote, site.env, [tmp_path / "moved", site.remote])
    shutil.move(site.path, moved.path)
    site.repos.remove(site.path)
    publish(moved, "after")
    assert git(site.remote, "show", "main:posts/after.md") == article("after")


def test_a_copy_fetches_from_its_own_remote(site: Site, tmp_path: Path) -> None:
    publish(site, "first")
    other_remote = tmp_path / "other-remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(site.remote), str(other_remote))
    copy = Site(tmp_path / "copy", other_remote, site.env, [tmp_path / "copy", other_remote])
    shutil.copytree(site.path, copy.path, symlinks=True)
    copy.git("remote", "set-url", "origin", str(other_remote))
    (site.path / "decoy.md").write_text("only the original's remote has this\n")
    site.git("add", "decoy.md")
    site.git("commit", "-q", "-m", "decoy")
    site.git("push", "-q", "origin", "main")
    publish(copy, "copied")
    assert git(other_remote, "show", "main:posts/copied.md") == article("copied")
    assert git(other_remote, "ls-tree", "--name-only", "main", "decoy.md") == ""
    assert git(site.remote, "ls-tree", "--name-only", "main", "posts/copied.md") == ""
    site.repos.append(copy.path)


def test_an_older_configuration_is_written_again(site: Site) -> None:
    publish(site, "one")
    config = site.path / ".git/pub/fetch.git/config"
    config.write_text(f'[include]\n\tpath = "{site.path}/.git/config"\n[core]\n\tbare = true\n')
    publish(site, "two")
    assert fetch_config(site) == FETCH_CONFIG
