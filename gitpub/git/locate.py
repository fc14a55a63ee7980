"""Finding the repository as git finds it.

gitpub must work on exactly the repository git would work on in its place: the one named by
``GIT_DIR`` (which ``git --git-dir=X pub …`` exports to ``git-pub``), ``GIT_WORK_TREE`` and
``GIT_COMMON_DIR``; otherwise the one found from the working directory upwards — a
subdirectory, a linked worktree, a bare repository — within ``GIT_CEILING_DIRECTORIES`` and
``safe.directory``. Rather than re-implement git's rules, we ask git: one ``git rev-parse`` with
the locating variables passed to it explicitly. This is the only place gitpub reads them; every
git gitpub runs afterwards gets ``GIT_DIR`` (and ``GIT_WORK_TREE``) set to what was found here,
never inherited (``git.run``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from gitpub.core.errors import NotARepositoryError
from gitpub.core.paths import quoted
from gitpub.git.run import run_git

#: What git reads from the environment to find the repository; passed to ``git rev-parse``.
DISCOVERY_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
                       "GIT_DISCOVERY_ACROSS_FILESYSTEM")
_QUESTIONS = ("--path-format=absolute", "--git-dir", "--git-common-dir", "--is-bare-repository",
              "--show-prefix", "--show-object-format", "--show-toplevel")


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
    object_format: str = "sha1"  # the repository's hash (``extensions.objectFormat``)


def locate(start: Path) -> Location:
    """The repository git would use when started in ``start`` with this process's environment
    (``git rev-parse``, given the locating variables of this environment);
    ``NotARepositoryError`` (exit 2, with git's reason) when there is none."""
    env = {k: os.environ[k] for k in DISCOVERY_VARIABLES if k in os.environ}
    try:
        proc = run_git(["rev-parse", *_QUESTIONS], cwd=start, env=env, timeout=60)
    except (FileNotFoundError, NotADirectoryError) as e:
        raise NotARepositoryError(f"cannot look for a repository in {start}: {e.strerror}",
                                  hint="is git installed, and does the directory exist?"
                                  ) from None
    lines = proc.stdout.decode("utf-8", "surrogateescape").split("\n")
    if len(lines) < 6:
        raise _not_a_repository(start, proc.stderr.decode("utf-8", "replace"), env)
    if len(lines) != (7 if proc.returncode == 0 else 6):  # 6 answers (the top: none, bare)
        from gitpub.core.sanitize import sanitize

        raise NotARepositoryError(
            sanitize(f"the path of the repository or of {quoted(str(start))} holds a line "
                     "break: git's "
                     "answers (one per line) would be read as other directories"),
            hint="move or rename the directory")
    git_dir, common_dir, bare, prefix = lines[0], lines[1], lines[2] == "true", lines[3]
    if "GIT_COMMON_DIR" in env:
        _check_common_dir(start, Path(git_dir), Path(common_dir))
    top = lines[5] if proc.returncode == 0 else ""
    return Location(Path(git_dir), Path(common_dir),
                    None if bare or not top else Path(top), "" if bare else prefix,
                    implied_work_tree="GIT_DIR" in env and "GIT_WORK_TREE" not in env,
                    object_format=lines[4] or "sha1")


def _check_common_dir(start: Path, git_dir: Path, common_dir: Path) -> None:
    """Every git gitpub runs gets ``GIT_DIR`` alone (``git.run``): a ``GIT_COMMON_DIR`` from
    the environment that names another common directory than the git directory's own would
    have objects written to one repository and refs moved in another. Refused, clearly."""
    proc = run_git(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=start,
                   git_dir=git_dir, timeout=60)
    own = proc.stdout.decode("utf-8", "surrogateescape").strip()
    if proc.returncode == 0 and os.path.realpath(own) == os.path.realpath(common_dir):
        return
    from gitpub.core.sanitize import sanitize

    raise NotARepositoryError(
        sanitize(f"GIT_COMMON_DIR={os.environ['GIT_COMMON_DIR']} names another common "
                 f"directory than {git_dir}'s own ({own or 'none'}): gitpub works on one "
                 "repository, as its git directory describes it"),
        hint="unset GIT_COMMON_DIR (git sets it for itself), or pass -C PATH")


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
