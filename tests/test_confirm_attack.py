"""``git pub confirm`` attacked in its writes: killed while it (or the git it runs) holds a lock,
raced by C git, its loose objects checked by ``git fsck --strict``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import Site, git
from test_confirm import ci_clone, publish


def leftover_locks(repo: Path) -> list[str]:
    return sorted(str(p.relative_to(repo)) for p in (repo / ".git").rglob("*.lock")
                  if "pub/live" not in str(p))


@pytest.mark.slow
@pytest.mark.parametrize("point", ["git.object-locked", "git.ref-locked"])
def test_confirm_killed_holding_a_lock_then_run_again(site: Site, tmp_path: Path,
                                                     point: str) -> None:
    """SIGKILL (of gitpub and the git holding its ref transaction) while a lock is held in a
    full CI clone,
    at every position; each next run in that clone must finish, and the clone stay sound."""
    publish(site, 2)
    ci = ci_clone(site, tmp_path, "ci", depth=None)
    killed = 0
    for n in range(1, 6):
        r = ci.run("confirm", "--no-push-notes", env={"GITPUB_CRASH_AT": f"{point}:{n}"})
        if r.code != -9:
            assert r.code == 0, r.out + r.err
            break
        killed += 1
        again = ci.run_here("confirm", "--no-push-notes")
        assert again.code == 0, again.out + again.err
        assert "Traceback" not in again.err and "FileLocked" not in again.err
    assert killed > 0
    subprocess.run(["git", "-C", str(ci.path), "fsck", "--strict", "--no-dangling"],
                   check=True, capture_output=True)


def test_confirm_objects_pass_fsck_strict(site: Site, tmp_path: Path) -> None:
    publish(site, 3)
    ci = ci_clone(site, tmp_path, "ci", depth=None)
    r = ci.run_here("confirm")
    assert r.code == 0, r.out + r.err
    out = subprocess.run(["git", "-C", str(ci.path), "fsck", "--strict", "--no-dangling",
                          "--unreachable"], capture_output=True, text=True)
    assert out.returncode == 0 and "error" not in out.stderr, out.stdout + out.stderr
    git(ci.path, "reflog", "show", "refs/notes/pub")


# -- a ref where refs live below its name (git's directory/file conflict) --------------------

def one_commit(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    git(repo, "commit", "-q", "--allow-empty", "-m", "x")
    return repo, git(repo, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("packed", [False, True])
def test_a_ref_is_not_created_over_refs_below_it(tmp_path: Path, packed: bool) -> None:
    """C git refuses to create ``refs/pub/x`` while ``refs/pub/x/y`` exists ("'refs/pub/x/y'
    exists; cannot create 'refs/pub/x'"): a clear error, nothing created, no lock left."""
    from gitpub.core.errors import CorruptStateError
    from gitpub.git.repo import Repository

    repo, sha = one_commit(tmp_path)
    git(repo, "update-ref", "refs/pub/x/y", sha)
    if packed:
        git(repo, "pack-refs", "--all", "--prune")
    with Repository.discover(repo) as r, pytest.raises(CorruptStateError, match="refs/pub/x/y"):
        r.cas_ref("refs/pub/x", None, sha)
    assert git(repo, "rev-parse", "refs/pub/x/y").strip() == sha
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/pub/").split() == \
        ["refs/pub/x/y"]
    assert leftover_locks(repo) == []


def test_no_reflog_where_git_writes_none(tmp_path: Path) -> None:
    """C git writes no reflog for ``refs/pub/*`` with ``core.logAllRefUpdates=false`` (nor in
    a bare repository, nor, with ``true``, outside refs/heads, refs/remotes, refs/notes)."""
    from gitpub.git.repo import Repository

    repo, sha = one_commit(tmp_path)
    git(repo, "config", "core.logAllRefUpdates", "false")
    git(repo, "update-ref", "refs/pub/by-git", sha)
    with Repository.discover(repo) as r:
        assert r.cas_ref("refs/pub/jobs/j", None, sha)
    assert not (repo / ".git" / "logs" / "refs" / "pub").exists()
