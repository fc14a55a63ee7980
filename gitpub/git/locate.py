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

Asking git costs one short-lived git process: ~2 ms on a quiet machine, ~12 ms on a busy one.
So the common case — none of those variables set, a ``.git`` directory or a linked worktree's
``.git`` file found upwards, owned by this user, a plain configuration (no ``core.worktree``,
see ``gitconfig``), not started inside the git directory — is answered here, by the walk
dulwich's ``Repo.discover`` makes (without importing dulwich: ~40 ms), whose answer is git's
there (``tests/test_discovery.py`` compares the two on every layout); a layout this walk is not
sure of is left to dulwich's own discovery (``locate_dulwich``), and everything else asks git.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from gitpub.core.errors import NotARepositoryError
from gitpub.git.gitconfig import config_path, is_plain
from gitpub.git.run import run_git

#: What git reads from the environment to find the repository; passed to ``git rev-parse``.
DISCOVERY_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
                       "GIT_DISCOVERY_ACROSS_FILESYSTEM")
_QUESTIONS = ("--path-format=absolute", "--git-dir", "--git-common-dir", "--is-bare-repository",
              "--show-prefix", "--show-toplevel")


class Location(NamedTuple):
    """Where git says the repository is, for a command started in some directory (a frozen
    value)."""

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
    """The common case, answered without a subprocess (see the module); else None."""
    found = _walk(os.path.realpath(start))
    if found is _UNSURE:
        return locate_dulwich(start)
    if found is None:
        return None
    git_dir, top = found
    return _checked(start, git_dir, top)


#: ``_walk``'s answer for a layout it does not read as dulwich would: dulwich decides.
_UNSURE = ("", "")


def _walk(path: str) -> tuple[str, str] | None:
    """(git directory, top of the working tree) of the first directory upwards that has a
    ``.git`` (a directory with ``objects``, or a ``gitdir:`` file), as dulwich's
    ``Repo.discover`` finds it; None when the first repository found is bare or there is none
    (git decides); ``_UNSURE`` for a ``.git`` file of another shape."""
    while True:
        dotgit = os.path.join(path, ".git")
        if os.path.isfile(dotgit):
            try:
                with open(dotgit, "rb") as f:
                    content = f.read()
            except OSError:
                return _UNSURE
            target = content[len(b"gitdir: "):].rstrip(b"\r\n")
            if not content.startswith(b"gitdir: ") or not target or b"\n" in target \
                    or b"\r" in target:
                return _UNSURE
            try:
                return os.path.join(path, target.decode("utf-8")), path
            except UnicodeDecodeError:
                return _UNSURE
        if os.path.isdir(os.path.join(dotgit, "objects")):
            return dotgit, path
        if os.path.isdir(os.path.join(path, "objects")) and os.path.isdir(
                os.path.join(path, "refs")):
            return None  # a bare repository: started inside its git directory, git decides
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _common_dir(git_dir: str) -> str | None:
    """The common directory a git directory's ``commondir`` file names (else itself); None
    when that file cannot be read plainly."""
    try:
        with open(os.path.join(git_dir, "commondir"), "rb") as f:
            named = f.read().rstrip(b"\r\n")
    except FileNotFoundError:
        return git_dir
    except OSError:
        return None
    try:
        return os.path.join(git_dir, named.decode("utf-8"))
    except UnicodeDecodeError:
        return None


def _checked(start: Path, control: str, top: str) -> Location | None:
    """The location of a repository found by ``_walk``, if its configuration is plain and
    git would answer the same (owned by this user, not started inside the git directory)."""
    common = _common_dir(control)
    if common is None or not is_plain(config_path(common)):
        return locate_dulwich(start)
    return _location(start, os.path.realpath(control), os.path.realpath(common),
                     os.path.realpath(top))


def _location(start: Path, git_dir: str, common_dir: str, top: str | None) -> Location | None:
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


def locate_dulwich(start: Path) -> Location | None:
    """dulwich's discovery, when its answer is certainly git's (see the module); else None.
    For the layouts ``locate_simple`` does not read itself."""
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
    return _location(start, git_dir, common_dir, top)


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
    from gitpub.core.sanitize import sanitize

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
