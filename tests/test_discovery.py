"""Finding the repository as git does: the discovery matrix.

Each case runs ``git-pub`` in a separate process, as a person would — directly, or through a
real ``git`` (``git --git-dir=… pub …``, ``git -C … pub …``) with the virtualenv's ``bin`` on
``PATH`` — and checks that it works on exactly the repository git would use, or fails with
exit 2 and a hint; and that every *other* repository around is left byte for byte as it was
(its refs and its object count).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Result, Site, git, make_site
from test_delivery import article, remote_job_ids

BIN = str(Path(sys.executable).parent)


def pub(cwd: Path, *args: str, env: dict[str, str], extra: dict[str, str] | None = None,
        through_git: tuple[str, ...] | None = None, input: str | None = None) -> Result:
    """``git-pub ARGS`` in ``cwd``; with ``through_git``, ``git <those options> pub ARGS``."""
    full = {**env, "PATH": BIN + ":" + env.get("PATH", ""), **(extra or {})}
    argv = (["git", *through_git, "pub", *args] if through_git is not None
            else [sys.executable, "-m", "gitpub", *args])
    proc = subprocess.run(argv, cwd=cwd, env=full, capture_output=True, timeout=120,
                          input=None if input is None else input.encode())
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                  proc.stderr.decode("utf-8", "replace"), args)


def fingerprint(repo: Path) -> tuple[str, str]:
    """A repository's refs and object count: what any write would change."""
    return (git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
            git(repo, "count-objects", "-v"))


@pytest.fixture
def two(site: Site, tmp_path: Path) -> tuple[Site, Site]:
    """The site, and a bystander site (its own remote) whose directory we stand in."""
    other = make_site(tmp_path, site.env, "bystander")
    site.repos += other.repos
    return site, other


def untouched(bystander: Site, before: tuple[tuple[str, str], tuple[str, str]]) -> bool:
    return (fingerprint(bystander.path), fingerprint(bystander.remote)) == before


def around(bystander: Site) -> tuple[tuple[str, str], tuple[str, str]]:
    return fingerprint(bystander.path), fingerprint(bystander.remote)


def test_git_dir_and_work_tree_from_another_repository(two: tuple[Site, Site]) -> None:
    site, bystander = two
    before = around(bystander)
    (bystander.path / "src.md").write_text(article("env"))
    r = pub(bystander.path, "prepare", "--json", "--push", "--key", "k", "--to",
            "posts/env.md", "src.md", env=site.env,
            extra={"GIT_DIR": str(site.path / ".git"), "GIT_WORK_TREE": str(site.path)})
    assert r.code == 0, r.out + r.err
    assert r.json()["state"] == "PUBLISHED"
    assert git(site.remote, "show", "main:posts/env.md") == article("env")
    assert remote_job_ids(site) == [r.json()["job_id"]]
    (bystander.path / "src.md").unlink()
    assert untouched(bystander, before), "nothing is written to the repository we stood in"


def test_git_dir_through_git(two: tuple[Site, Site]) -> None:
    site, bystander = two
    before = around(bystander)
    (bystander.path / "src.md").write_text(article("via git"))
    r = pub(bystander.path, "prepare", "--json", "--push", "--key", "k", "--to",
            "posts/via.md", "src.md", env=site.env,
            through_git=(f"--git-dir={site.path / '.git'}", f"--work-tree={site.path}"))
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "show", "main:posts/via.md") == article("via git")
    (bystander.path / "src.md").unlink()
    assert untouched(bystander, before)
    # git --git-dir alone, started at the top of the working tree: git's own rule (the
    # working directory is the top of the working tree)
    r = pub(site.path, "status", "--json", env=site.env,
            through_git=(f"--git-dir={site.path / '.git'}",))
    assert r.code == 0, r.out + r.err


def test_dash_c_resolves_source_in_that_directory(two: tuple[Site, Site]) -> None:
    site, bystander = two
    before = around(bystander)
    (site.path / "drafts").mkdir()
    (site.path / "drafts/src.md").write_text(article("dash C"))
    for how, cwd, options in (("git-pub -C", bystander.path, None),
                              ("git -C", bystander.path, ("-C", str(site.path)))):
        key = how.replace(" ", "")
        args = ("prepare", "--json", "--key", key, "--to", f"posts/{key}.md", "drafts/src.md")
        r = (pub(cwd, "-C", str(site.path), *args, env=site.env) if options is None
             else pub(cwd, *args, env=site.env, through_git=options))
        assert r.code == 0, (how, r.out + r.err)
        assert r.json()["state"] == "LOCAL_COMMITTED"
    assert untouched(bystander, before)


@pytest.mark.slow
def test_from_a_subdirectory_to_is_from_the_root(site: Site) -> None:
    site.write_config("content: ['images/**']\n")
    posts = site.path / "posts"
    (posts / "src.md").write_text(article("sub"))
    (site.path / "images").mkdir()
    (site.path / "images/logo.txt").write_text("logo\n")
    # a root path: fine (SOURCE relative to the working directory, as always)
    r = pub(posts, "prepare", "--json", "--key", "a", "--to", "posts/sub.md", "src.md",
            env=site.env)
    assert r.code == 0, r.out + r.err
    assert r.json()["target_paths"] == ["posts/sub.md"]
    # another root directory named from here: fine
    r = pub(posts, "prepare", "--json", "--key", "b", "--to", "images/a.md", "src.md",
            env=site.env)
    assert r.code == 0, r.out + r.err
    # what looks relative to here: refused with the path it probably meant, nothing stored
    jobs = site.job_refs()
    for to, hint in (("hello.md", "did you mean --to posts/hello.md?"),
                     ("./hello.md", "from here that is --to posts/hello.md"),
                     ("../posts/x.md", "from here that is --to posts/x.md"),
                     ("new/x.md", "did you mean --to posts/new/x.md?")):
        r = pub(posts, "prepare", "--key", to, "--to", to, "src.md", env=site.env)
        assert r.code == 2, (to, r.out + r.err)
        assert hint in r.err, (to, r.err)
    (posts / "images").mkdir()
    r = pub(posts, "prepare", "--key", "c", "--to", "images/b.md", "src.md", env=site.env)
    assert r.code == 2 and "ambiguous" in r.err, r.err
    assert site.job_refs() == jobs


def test_in_a_linked_worktree(site: Site, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    site.git("worktree", "add", "-q", "-b", "side", str(wt))
    (wt / "src.md").write_text(article("wt"))
    r = pub(wt, "prepare", "--json", "--push", "--key", "wt", "--to", "posts/wt.md", "src.md",
            env=site.env)
    assert r.code == 0, r.out + r.err
    assert r.json()["state"] == "PUBLISHED"
    assert git(site.remote, "show", "main:posts/wt.md") == article("wt")
    # the job lives in the one repository both worktrees share
    assert f"refs/pub/jobs/{r.json()['job_id']}" in site.job_refs()
    # main is checked out in the main worktree, and moved together with it
    assert (site.path / "posts/wt.md").read_text() == article("wt")
    assert site.git("status", "--porcelain") == ""
    # the same worktree named by GIT_DIR, GIT_COMMON_DIR and GIT_WORK_TREE from elsewhere
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere/src.md").write_text(article("named"))
    r = pub(tmp_path / "elsewhere", "prepare", "--json", "--key", "named", "--to",
            "posts/named.md", "src.md", env=site.env,
            extra={"GIT_DIR": str(site.path / ".git/worktrees/wt"),
                   "GIT_COMMON_DIR": str(site.path / ".git"), "GIT_WORK_TREE": str(wt)})
    assert r.code == 0, r.out + r.err
    assert f"refs/pub/jobs/{r.json()['job_id']}" in site.job_refs()


def test_a_bare_repository_reads_the_committed_configuration(site: Site,
                                                             tmp_path: Path) -> None:
    site.write_config("trailer_prefix: Site\n")
    site.git("commit", "-q", "-am", "prefix Site")
    site.git("push", "-q", "origin", "main")
    bare = tmp_path / "publisher.git"
    git(tmp_path, "clone", "-q", "--bare", str(site.remote), str(bare))
    site.repos.append(bare)
    (bare / ".gitpub.yaml").write_text("trailer_prefix: Wrong\nremote: nowhere\n")
    src = tmp_path / "src.md"
    src.write_text(article("bare"))
    r = pub(bare, "prepare", "--json", "--push", "--key", "bare", "--to", "posts/bare.md",
            str(src), env=site.env)
    assert r.code == 0, r.out + r.err
    assert r.json()["state"] == "PUBLISHED"
    ids = git(site.remote, "log", "-1", "--format=%(trailers:key=Site-Job-Id,valueonly)",
              "main").strip()
    assert ids == r.json()["job_id"]
    # the same through GIT_DIR from anywhere
    r = pub(tmp_path, "status", "--json", env=site.env, extra={"GIT_DIR": str(bare)})
    assert r.code == 0, r.out + r.err


def test_not_a_repository_is_exit_2_with_a_hint(site: Site, tmp_path: Path) -> None:
    nowhere = tmp_path / "plain"
    nowhere.mkdir()
    r = pub(nowhere, "status", env=site.env, extra={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert r.code == 2 and "not a git repository" in r.err and "hint:" in r.err, r.err
    r = pub(site.path, "status", env=site.env, extra={"GIT_DIR": str(tmp_path / "missing")})
    assert r.code == 2 and "GIT_DIR" in r.err and "hint:" in r.err, r.err


def test_git_subprocesses_never_inherit_an_index_or_object_directory(site: Site,
                                                                     tmp_path: Path) -> None:
    """A stray GIT_INDEX_FILE or GIT_OBJECT_DIRECTORY in the environment (a hook's, say) never
    reaches the git gitpub runs: sync stages in the real index and writes the real objects."""
    (site.path / "posts/new.md").write_text(article("new"))
    stray = tmp_path / "stray-index"
    r = pub(site.path, "sync", "--json", env=site.env,
            extra={"GIT_INDEX_FILE": str(stray), "GIT_OBJECT_DIRECTORY": str(tmp_path / "objs")})
    assert r.code == 0, r.out + r.err
    assert not stray.exists() and not (tmp_path / "objs").exists()
    assert git(site.remote, "show", "main:posts/new.md") == article("new")
    assert site.git("status", "--porcelain") == ""


@pytest.mark.slow
def test_git_dir_from_a_subdirectory_never_publishes_every_file_as_deleted(site: Site) -> None:
    """``GIT_DIR`` without ``GIT_WORK_TREE``: git takes the current directory for the top of
    the working tree, so from ``posts/`` every file looks deleted (``git status`` says so).
    Committing that is what git would do; sync refuses it (exit 4), changes nothing, and a
    correct environment then syncs as usual."""
    (site.path / "posts/welcome.md").write_text(article("edited"))
    env = {"GIT_DIR": str(site.path / ".git")}
    before = site.git("rev-parse", "main"), site.git("status", "--porcelain=v2")
    dry = pub(site.path / "posts", "sync", "--dry-run", "--json", env=site.env, extra=env)
    r = pub(site.path / "posts", "sync", "--json", env=site.env, extra=env)
    assert r.code == 4, r.out + r.err
    assert dry.code == 0 and "GIT_DIR is set without GIT_WORK_TREE" in dry.out, dry.out
    (line,) = r.json()["commits"]
    assert line["status"] == "refused" and line["uncommitted"] is True
    assert "GIT_DIR is set without GIT_WORK_TREE" in line["reason"]
    assert (site.git("rev-parse", "main"), site.git("status", "--porcelain=v2")) == before
    assert git(site.remote, "ls-tree", "-r", "--name-only", "main") == (
        ".gitpub.yaml\nposts/welcome.md\n")
    r = pub(site.path / "posts", "sync", env=site.env,
            extra={**env, "GIT_WORK_TREE": str(site.path)})
    assert r.code == 0, r.out + r.err
    assert git(site.remote, "show", "main:posts/welcome.md") == article("edited")
