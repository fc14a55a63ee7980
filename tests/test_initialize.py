"""``git pub init`` on real repositories: the remote's default branch, no guessing, next steps;
and the other half of "real sites out of the box": a push never creates a missing branch unasked.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import Site, git

from gitpub.app.initialize import config_text
from gitpub.config.load import parse_config
from gitpub.config.model import DEFAULT_ARTICLES


def fsck(*repos: Path) -> None:
    for repo in repos:
        proc = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=repo,
                              capture_output=True)
        assert proc.returncode == 0, proc.stderr


@pytest.fixture
def hugo(tmp_path: Path, hermetic: dict[str, str]) -> Iterator[Site]:
    """A clone of a site whose remote's default branch is ``master`` (as Hugo's is), with
    articles under ``content/`` and no ``.gitpub.yaml`` yet."""
    remote = tmp_path / "hugo.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "master", str(remote))
    seed = tmp_path / "seed"
    git(tmp_path, "init", "-q", "-b", "master", str(seed))
    (seed / "content" / "en").mkdir(parents=True)
    (seed / "content" / "en" / "about.md").write_text("+++\ntitle = 'About'\n+++\n\nHugo.\n")
    git(seed, "add", ".")
    git(seed, "commit", "-q", "-m", "Start")
    git(seed, "push", "-q", str(remote), "master")
    path = tmp_path / "hugo"
    git(tmp_path, "clone", "-q", str(remote), str(path))
    site = Site(path, remote, hermetic, [path, remote])
    yield site
    fsck(*(r for r in site.repos if r.exists()))


def test_init_writes_the_remotes_default_branch(hugo: Site) -> None:
    r = hugo.call("init", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert (data["remote"], data["branch"], data["created"]) == ("origin", "master", True)
    config = yaml.safe_load((hugo.path / ".gitpub.yaml").read_text())
    assert config["branch"] == "master" and config["remote"] == "origin"
    assert tuple(config["articles"]) == DEFAULT_ARTICLES  # content/en/about.md is covered
    assert any("git push origin master" in step for step in data["next_steps"])


def test_init_asks_the_remote_not_the_clone(hugo: Site) -> None:
    """The remote's HEAD moved after the clone: ls-remote sees it, refs/remotes/origin/HEAD
    (what the clone recorded) does not."""
    git(hugo.remote, "branch", "trunk", "master")
    git(hugo.remote, "symbolic-ref", "HEAD", "refs/heads/trunk")
    r = hugo.call("init", "--json")
    assert r.code == 0 and r.json()["branch"] == "trunk"


def test_init_falls_back_to_the_recorded_remote_head_when_offline(hugo: Site) -> None:
    shutil.move(hugo.remote, hugo.remote.with_suffix(".away"))
    hugo.repos.remove(hugo.remote)
    r = hugo.call("init", "--json")
    assert r.code == 0, r.err
    assert r.json()["branch"] == "master"


def test_init_prints_next_steps(hugo: Site) -> None:
    r = hugo.call("init")
    assert r.code == 0
    assert "branch master" in r.out and "next steps:" in r.out
    for step in ("git add .gitpub.yaml", "git pub prepare --to content/hello.md",
                 "git pub push", "git pub confirm"):
        assert step in r.out, r.out
    again = hugo.call("init")
    assert "kept existing" in again.out and "next steps" not in again.out


def test_init_refuses_to_guess_without_a_remote(tmp_path: Path, hermetic: dict[str, str]) -> None:
    path = tmp_path / "lonely"
    git(tmp_path, "init", "-q", "-b", "main", str(path))
    site = Site(path, path, hermetic)
    r = site.call("init")
    assert r.code == 2
    assert "no remote" in r.err and "hint: add the repository you publish to" in r.err
    assert not (path / ".gitpub.yaml").exists()
    fsck(path)


def test_init_on_an_empty_remote_needs_the_branch_named(
        tmp_path: Path, hermetic: dict[str, str]) -> None:
    remote = tmp_path / "empty.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "trunk", str(remote))
    path = tmp_path / "new-site"
    git(tmp_path, "clone", "-q", str(remote), str(path))
    site = Site(path, remote, hermetic)
    r = site.call("init")
    assert r.code == 2 and "--branch NAME" in r.err
    assert not (path / ".gitpub.yaml").exists()
    r = site.call("init", "--json", "--branch", "trunk")
    assert r.code == 0 and r.json()["branch"] == "trunk"
    fsck(path, remote)


def test_init_with_several_remotes_names_one(hugo: Site) -> None:
    git(hugo.path, "remote", "rename", "origin", "upstream")
    git(hugo.path, "remote", "add", "fork", str(hugo.remote))
    r = hugo.call("init")
    assert r.code == 2 and "--remote NAME" in r.err
    r = hugo.call("init", "--remote", "nosuch")
    assert r.code == 2 and "no remote 'nosuch'" in r.err
    r = hugo.call("init", "--json", "--remote", "fork")
    assert r.code == 0 and (r.json()["remote"], r.json()["branch"]) == ("fork", "master")


def test_init_finds_where_the_articles_are(tmp_path: Path, hermetic: dict[str, str]) -> None:
    """A weekly written under docs/ (like the corpus): none of the default globs match."""
    remote = tmp_path / "weekly.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    path = tmp_path / "weekly"
    git(tmp_path, "init", "-q", "-b", "main", str(path))
    (path / "docs").mkdir()
    (path / "docs" / "issue-1.md").write_text("# 第 1 期\n")
    (path / ".github").mkdir()
    (path / ".github" / "notes.md").write_text("# not an article\n")
    (path / "README.md").write_text("# Weekly\n")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "Start")
    git(path, "remote", "add", "origin", str(remote))
    git(path, "push", "-q", "origin", "main")
    site = Site(path, remote, hermetic)
    r = site.call("init", "--json")
    assert r.code == 0 and r.json()["articles"] == ["docs/**/*.md"]
    assert parse_config((path / ".gitpub.yaml").read_text()).is_article("docs/issue-1.md")
    fsck(path, remote)


@pytest.mark.parametrize("branch", ["main", "release/2.0", "1.0", "yes", "on", "0x1f"])
def test_the_written_config_reads_back_as_written(branch: str) -> None:
    config = parse_config(config_text("origin", branch, ("docs/**/*.md",)))
    assert config.branch == branch and config.articles == ("docs/**/*.md",)


# -- a push never creates the configured branch unasked -------------------------------------

def remote_refs(site: Site) -> str:
    return git(site.remote, "for-each-ref", "--format=%(refname) %(objectname)")


def test_push_to_a_branch_the_remote_lacks_stops_with_exit_2(hugo: Site) -> None:
    """The Hugo case: a config that says main, a remote whose branch is master."""
    (hugo.path / ".gitpub.yaml").write_text("branch: main\narticles: ['content/**/*.md']\n")
    r = hugo.call("prepare", "--json", "--key", "k", "--to", "content/en/new.md", "-",
                  input="# New\n")
    job = r.json()
    assert r.code == 0 and job["state"] == "LOCAL_COMMITTED" and job["base_commit"] is None
    assert "creates no branch unless given --create-branch" in job["note"]
    before = remote_refs(hugo)
    for command in (["push"], ["push", job["job_id"]], ["sync"], ["reconcile"]):
        r = hugo.call(*command)
        assert r.code == 2, (command, r.out, r.err)
        assert "has no branch 'main'" in r.err
        assert "the remote's default branch is 'master'" in r.err
        assert "--create-branch" in r.err
        assert remote_refs(hugo) == before
    status = hugo.call("status", "--json", job["job_id"]).json()
    assert status["state"] == "LOCAL_COMMITTED" and status["attempt"] == 0


def test_create_branch_builds_on_the_jobs_base(site: Site) -> None:
    """The remote branch vanished after the job was prepared: the new branch starts from the
    job's base, never as a root commit holding only the job's files."""
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-", input="# A\n")
    base = r.json()["base_commit"]
    git(site.remote, "branch", "-m", "main", "trunk")
    git(site.remote, "symbolic-ref", "HEAD", "refs/heads/trunk")
    before = remote_refs(site)
    r = site.call("push")
    assert r.code == 2 and "default branch is 'trunk'" in r.err
    assert remote_refs(site) == before
    r = site.call("push", "--json", "--create-branch")
    assert r.code == 0, r.err
    assert r.json()["jobs"][0]["state"] == "PUBLISHED"
    published = git(site.remote, "rev-parse", "refs/heads/main").strip()
    assert git(site.remote, "rev-parse", f"{published}^").strip() == base
    assert "posts/welcome.md" in git(site.remote, "ls-tree", "-r", "--name-only", published)


def test_a_repository_without_gitpub_yaml_is_refused_naming_init(site: Site,
                                                                  tmp_path: Path) -> None:
    """Issue 24 point 4: no ``.gitpub.yaml`` is an error naming ``git pub init`` — never a
    silent guess of ``origin``/``main`` — for every command that works on jobs, in a working
    tree and in a bare repository; ``doctor`` says the same; ``init`` then sets it up."""
    site.git("rm", "-q", ".gitpub.yaml")
    site.git("commit", "-qm", "no gitpub")
    for args in (["status"], ["push"], ["reconcile"], ["metrics"], ["sync"],
                 ["prepare", "--key", "k", "--to", "posts/k.md", "-"]):
        r = site.call(*args, input="# K\n")
        assert r.code == 2, (args, r.out, r.err)
        assert "no .gitpub.yaml" in r.err and "git pub init" in r.err, (args, r.err)
    assert site.job_refs() == {}
    doctor = site.call("doctor", "--json").json()
    check = next(c for c in doctor["checks"] if c["name"] == "configuration")
    assert check["status"] == "fail" and "git pub init" in check["fix"], check
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(site.path), str(bare)], check=True)
    r = subprocess.run([sys.executable, "-m", "gitpub", "-C", str(bare), "status"],
                       capture_output=True, text=True, env=site.env)
    assert r.returncode == 2 and "git pub init" in r.stderr, r.stderr
    assert site.call("init").code == 0
    assert site.call("status").code == 0


def test_create_branch_never_makes_a_parentless_branch(hugo: Site) -> None:
    """Issue 24 point 4: a job prepared on no base (neither the remote's branch nor a local
    one existed) is a commit without a parent; ``--create-branch`` refuses to start the branch
    from it (exit 2, nothing pushed, the job as it was) and says how to go on."""
    (hugo.path / ".gitpub.yaml").write_text("branch: main\narticles: ['content/**/*.md']\n")
    r = hugo.call("prepare", "--json", "--key", "k", "--to", "content/en/new.md", "-",
                  input="# New\n")
    job = r.json()
    assert job["base_commit"] is None
    before = remote_refs(hugo)
    r = hugo.call("push", "--create-branch", job["job_id"])
    assert r.code == 2, r.out + r.err
    assert "without a parent" in r.err and "git push" in r.err
    assert remote_refs(hugo) == before
    status = hugo.call("status", "--json", job["job_id"]).json()
    assert status["state"] == "LOCAL_COMMITTED" and status["attempt"] == 0
