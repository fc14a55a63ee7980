"""Finding the repository as git finds it.

gitpub must work on exactly the repository git would work on in its place: the one named by
``GIT_DIR`` (which ``git --git-dir=X pub …`` exports to ``git-pub``), ``GIT_WORK_TREE`` and
``GIT_COMMON_DIR``; otherwise the one found from the working directory upwards — a
subdirectory, a linked worktree, a bare repository — within ``GIT_CEILING_DIRECTORIES`` and
``safe.directory``. Rather than re-implement git's rules (dulwich's discovery ignores the
variables, so a job was once stored in one repository and pushed to another's remote), we ask
git: one ``git rev-parse`` with the locating variables passed to it explicitly. This is the only
place gitpub reads them; every git gitpub runs afterwards gets ``GIT_DIR`` and ``GIT_WORK_TREE``
set to what was found here, never inherited (``git.run``).

Asking git costs one short-lived git process: ~2 ms on a quiet machine, ~12 ms on a busy one,
next to ~0.4-1.3 ms for dulwich's own discovery (and ~140 ms for a whole ``git pub status``). So
the common case — none of those variables set, a ``.git`` directory or a linked worktree's
``.git`` file found upwards, owned by this user, no ``core.worktree``, not started inside the git
directory — is answered by dulwich, whose answer is git's there (``tests/test_discovery.py``
compares the two on every layout); everything else asks git.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gitpub.core.errors import NotARepositoryError
from gitpub.core.sanitize import sanitize
from gitpub.git.run import run_git

#: What git reads from the environment to find the repository; passed to ``git rev-parse``.
DISCOVERY_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
                       "GIT_DISCOVERY_ACROSS_FILESYSTEM")
_QUESTIONS = ("--path-format=absolute", "--git-dir", "--git-common-dir", "--is-bare-repository",
              "--show-prefix", "--show-toplevel")


@dataclass(frozen=True)
class Location:
    """Where git says the repository is, for a command started in some directory."""

    git_dir: Path  # this worktree's git directory (``.git``, or ``.git/worktrees/<name>``)
    common_dir: Path  # the repository's shared directory (objects, refs, config)
    work_tree: Path | None  # None: a bare repository, or started inside the git directory
    prefix: str  # the start directory below the top of the working tree ("posts/"), or ""
    #: ``GIT_DIR`` was set without ``GIT_WORK_TREE``: git then takes the start directory as
    #: the top of the working tree (unless ``core.worktree`` says otherwise), whatever the
    #: repository's own checkout is; from a subdirectory, every file looks deleted.
    implied_work_tree: bool = False


def locate(start: Path) -> Location:
    """The repository git would use when started in ``start`` with this process's environment;
    ``NotARepositoryError`` (exit 2, with git's reason) when there is none."""
    if not any(k in os.environ for k in DISCOVERY_VARIABLES):
        found = locate_simple(start)
        if found is not None:
            return found
    return locate_with_git(start)


def locate_simple(start: Path) -> Location | None:
    """dulwich's discovery, when its answer is certainly git's (see the module); else None."""
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    try:
        repo = Repo.discover(str(start))
    except (NotGitRepository, OSError):
        return None
    try:
        git_dir = os.path.realpath(repo.controldir())
        common_dir = os.path.realpath(repo.commondir())
        top = None if repo.bare else os.path.realpath(repo.path)
        try:
            repo.get_config().get((b"core",), b"worktree")
            return None  # git's rules for core.worktree are its own
        except KeyError:
            pass
    finally:
        repo.close()
    here = os.path.realpath(start)
    inside = os.path.commonpath([here, git_dir]) == git_dir
    owned = all(os.stat(p).st_uid == os.geteuid() for p in (git_dir, top or git_dir))
    if inside or not owned:
        return None
    if top is None:
        return Location(Path(git_dir), Path(common_dir), None, "")
    rel = os.path.relpath(here, top)
    return Location(Path(git_dir), Path(common_dir), Path(top),
                    "" if rel == "." else rel.replace(os.sep, "/") + "/")


def locate_with_git(start: Path) -> Location:
    """Ask ``git rev-parse``, passing it the locating variables of this environment."""
    env = {k: os.environ[k] for k in DISCOVERY_VARIABLES if k in os.environ}
    try:
        proc = run_git(["rev-parse", *_QUESTIONS], cwd=start, env=env, timeout=60)
    except (FileNotFoundError, NotADirectoryError) as e:
        raise NotARepositoryError(f"cannot look for a repository in {start}: {e.strerror}",
                                  hint="is git installed, and does the directory exist?"
                                  ) from None
    lines = proc.stdout.decode("utf-8", "surrogateescape").split("\n")
    if len(lines) < 5:
        raise _not_a_repository(start, proc.stderr.decode("utf-8", "replace"), env)
    git_dir, common_dir, bare, prefix = lines[0], lines[1], lines[2] == "true", lines[3]
    top = lines[4] if proc.returncode == 0 and len(lines) > 5 else ""
    return Location(Path(git_dir), Path(common_dir),
                    None if bare or not top else Path(top), "" if bare else prefix,
                    implied_work_tree="GIT_DIR" in env and "GIT_WORK_TREE" not in env)


def _not_a_repository(start: Path, stderr: str, env: dict[str, str]) -> NotARepositoryError:
    fatal = next((line.removeprefix("fatal: ") for line in stderr.splitlines()
                  if line.startswith("fatal: ")), stderr.strip() or "git rev-parse failed")
    named = ", ".join(f"{k}={env[k]}" for k in ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR")
                      if k in env)
    if "dubious ownership" in fatal:
        hint = "the repository belongs to another user: see `git config --help` (safe.directory)"
    elif named:
        hint = f"{named} is set in the environment: check it, or unset it and pass -C PATH"
    else:
        hint = "run inside a git repository, or pass -C PATH"
    return NotARepositoryError(sanitize(f"not a git repository: {start} (git: {fatal})"), hint)
