"""Attacks on the procs merge (2ca950e): mirror refs kept per command, configuration read
once, git found once, trailers' readings kept per process, the active index moved with the
job ref. Each test failed on 2ca950e."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import Site, git
from netfaults import GitDaemon
from test_delivery import article, prepare
from test_shared import assert_store_agrees, node


def person_fetches_before(tmp_path: Path, site: Site, trigger: str) -> dict[str, str]:
    """An environment whose ``git`` (first on the PATH, running the real one) makes a person's
    ``git fetch origin`` land in ``site`` just before gitpub's first git whose arguments
    contain ``trigger`` (once)."""
    real = shutil.which("git")
    assert real is not None
    bindir, marker = tmp_path / "racing-bin", tmp_path / "person-fetched"
    bindir.mkdir(exist_ok=True)
    wrapper = bindir / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *"{trigger}"*)\n'
        f'  if [ ! -e "{marker}" ]; then touch "{marker}"; '
        f'(unset GIT_DIR GIT_WORK_TREE; "{real}" -C "{site.path}" fetch -q origin); fi;;\n'
        "esac\n"
        f'exec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return {"PATH": f"{bindir}:{os.environ['PATH']}"}



def branch_has(site: Site, commit: str) -> bool:
    """Whether the remote's branch holds ``commit``."""
    return subprocess.run(["git", "merge-base", "--is-ancestor", commit, "main"],
                          cwd=site.remote, capture_output=True).returncode == 0


def test_a_fetch_that_moves_no_tracking_ref_leaves_no_older_value_kept(
        site: Site, daemon: GitDaemon, tmp_path: Path) -> None:
    """A person's ``git fetch`` lands in A's clone after A's push read the tracking ref and
    before A's own fetch, which then finds the tracking ref already where the remote is and
    moves nothing: A must not go on with the value it read before its fetch. Here the remote
    branch was rewound (B's publication of A's job removed): A must not prove the remote's
    PUBLISHED record on the tracking ref as it was before the rewind (2ca950e did: PUBLISHED,
    for a commit the remote does not hold)."""
    data = prepare(site, "k1", "posts/a.md", article("a"))
    job_id = str(data["job_id"])
    r = site.run("push", env={"GITPUB_CRASH_AT": "delivery.claimed"})
    assert r.code == -signal.SIGKILL, r.out + r.err
    before = git(site.remote, "rev-parse", "main").strip()
    b = node(site, tmp_path, "node-b")
    r = b.run_here("reconcile")
    assert r.code == 0, r.out + r.err
    assert_store_agrees(site, [job_id])
    site.git("fetch", "-q", "origin")  # A's clone sees B's publication
    git(site.remote, "update-ref", "refs/heads/main", before)  # the remote branch rewound
    env = person_fetches_before(tmp_path, site, "refs/pub/remote/")
    r = site.run("push", "--json", env=env)
    assert (tmp_path / "person-fetched").exists()
    state = site.call("status", "--json", job_id).json()
    if state["state"] == "PUBLISHED":
        assert branch_has(site, str(state["remote_commit"])), (r.out, r.err)


def test_a_partial_clones_remote_keeps_its_fetch_url(site: Site, tmp_path: Path) -> None:
    """``git remote -v`` says a promisor remote's fetch URL as ``URL (fetch) [FILTER]``: the
    URLs read in one git are still the ones ``git remote get-url [--push]`` say (2ca950e lost
    the fetch URL: a remote whose fetch URL is no repository passed ``check``)."""
    from gitpub.git.remote import Remote, RemoteConfigError
    from gitpub.git.repo import Repository

    push_url = str(site.remote)
    missing = str(tmp_path / "no-such-repository")
    site.git("remote", "set-url", "origin", missing)
    site.git("remote", "set-url", "--push", "origin", push_url)
    site.git("config", "remote.origin.promisor", "true")
    site.git("config", "remote.origin.partialclonefilter", "blob:none")
    with Repository.discover(site.path) as repo:
        remote = Remote(repo, "origin", "main")
        assert remote.urls() == (site.git("remote", "get-url", "origin").strip(),
                                 site.git("remote", "get-url", "--push", "origin").strip())
        with pytest.raises(RemoteConfigError):
            remote.check()


def _logging_git(where: Path, log: Path) -> Path:
    """A ``git`` in ``where`` that notes that it ran, then runs the real one."""
    real = shutil.which("git")
    assert real is not None
    where.mkdir(parents=True, exist_ok=True)
    wrapper = where / "git"
    wrapper.write_text(f'#!/bin/sh\necho "{where}" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_git_moved_on_an_unchanged_path_is_found_again(
        site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git found once per PATH: when the git found is gone (uninstalled, moved by an
    upgrade) and another is on the same PATH, the next start finds that one, as a start
    that walks the PATH would (2ca950e kept starting the one that is gone: every git failed
    for the rest of the process)."""
    from gitpub.git.run import git_program, run_git

    log = tmp_path / "ran.log"
    first = _logging_git(tmp_path / "first-bin", log)
    _logging_git(tmp_path / "second-bin", log)
    monkeypatch.setenv("PATH", f"{first.parent}:{tmp_path / 'second-bin'}:{os.environ['PATH']}")
    assert git_program() == str(first)
    first.unlink()
    proc = run_git(["rev-parse", "--git-dir"], cwd=site.path)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().split() == [str(tmp_path / "second-bin")]


def test_a_relative_path_entry_is_looked_up_where_git_runs(
        site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative ``PATH`` entry (``bin``, ``.``) names a directory relative to where git is
    started (the repository), as every start that walked the PATH found it: git is not looked
    up relative to the directory gitpub was started in and then started from another one
    (2ca950e: ``bin/git`` found in the caller's directory, then missing from the
    repository's: git "not installed")."""
    from gitpub.git.repo import Repository

    log = tmp_path / "ran.log"
    monkeypatch.chdir(tmp_path)
    _logging_git(tmp_path / "bin", log)
    monkeypatch.setenv("PATH", f"bin:{os.environ['PATH']}")
    with Repository.discover(site.path) as repo:
        assert repo.read_ref("refs/heads/main") is not None
    assert not log.exists()  # no bin/git in the repository: the real git, as a PATH walk finds



@pytest.mark.parametrize("moves", [
    ("remote", "prune", "origin"),
    ("remote", "set-head", "origin", "main"),
    ("symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main"),
])
def test_a_git_that_moves_mirror_refs_forgets_them(site: Site, moves: tuple[str, ...]) -> None:
    """``Repository.git`` keeps the mirror refs known only across gits that move no ref:
    ``git remote`` prunes and sets heads, ``git symbolic-ref`` with a target writes one
    (2ca950e kept them across all three, as read-only commands: the listing after them was
    the one before)."""
    from gitpub.git.repo import Repository
    from gitpub.store.mirror import MIRROR_PREFIXES

    site.git("push", "-q", "origin", "HEAD:refs/heads/extra")
    site.git("fetch", "-q", "origin")
    git(site.remote, "update-ref", "-d", "refs/heads/extra")
    with Repository.discover(site.path) as repo:
        repo.mirror_prefixes = MIRROR_PREFIXES
        before = repo.list_refs("refs/remotes/origin/")
        assert "extra" in before and "HEAD" not in before
        assert repo.git(*moves).returncode == 0
        now = {name: sha for name, sha in (line.split() for line in site.git(
            "for-each-ref", "--format=%(refname:lstrip=3) %(objectname)",
            "refs/remotes/origin/").splitlines())}
        assert now != before
        assert repo.list_refs("refs/remotes/origin/") == now


def test_a_damaged_published_job_at_the_tip_does_not_stop_the_push(site: Site) -> None:
    """Not from the procs merge (found by test_damage_property while attacking it; main since
    b1a7ab8): ``push`` first brings the local branch along to a publication at the remote tip
    (``Deliverer.bring_along``), loading the job it names; when that job's state is damaged,
    the load raised and the whole push stopped: the healthy job was not delivered."""
    from test_damage import check_matrix_case

    check_matrix_case(site, ["committed", "pushing-dead"], 1, "garbage-tree", "push")


def test_a_step_that_sets_the_identity_is_seen_by_the_commit(site: Site) -> None:
    """The configuration is read once per command; a pipeline step is a program of the
    person's that may run ``git config`` (a draft agent setting its identity): what it wrote
    is what git reads after it, and what the job's commit is authored with, as when each
    value was read where it was used (2ca950e kept the identity from before the draft)."""
    from test_pipeline import use_draft

    use_draft(site, 'git config user.name "Draft Agent" && '
                    'git config user.email agent@example.com && '
                    'mkdir -p "$GITPUB_OUTPUT/posts" && cat "$GITPUB_SOURCE" '
                    '> "$GITPUB_OUTPUT/posts/a.md"')
    site.git("config", "user.name", "Before Draft")
    site.git("config", "user.email", "before@example.com")
    env = {k: v for k, v in site.env.items()
           if k not in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL")}
    writer = Site(site.path, site.remote, env)
    r = writer.run("prepare", "--json", "--key", "k1", "--to", "posts/a.md", "-",
                   input=article("a"))
    assert r.code == 0, r.out + r.err
    commit = json.loads(r.out)["local_commit"]
    assert site.git("log", "-1", "--format=%an <%ae>", commit).strip() == \
        "Draft Agent <agent@example.com>"
