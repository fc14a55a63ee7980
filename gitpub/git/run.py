"""The one way gitpub runs C git.

C git does what dulwich lacks or does slowly (the network segment, ``merge-base``,
``read-tree``, ``pack-refs``, ``rev-list``); every such call goes through ``run_git`` so that
all of them share one environment:

- **No prompts.** ``GIT_TERMINAL_PROMPT=0`` and ssh in batch mode: gitpub runs unattended, and a
  password prompt nobody answers would hang it until its timeout.
- **Stable messages.** ``LC_ALL=C``: the few git messages gitpub classifies are read in one
  language.
- **Exactly the repository gitpub chose.** The variables by which git finds a repository
  (``GIT_DIR``, ``GIT_WORK_TREE``, ``GIT_COMMON_DIR``, ``GIT_INDEX_FILE``, object directories) are
  never inherited: a caller that names a repository gets ``GIT_DIR`` (and ``GIT_WORK_TREE``) set
  to it explicitly, so a ``GIT_DIR`` left in the environment can never send a write to another
  repository than the one gitpub opened.
- **No optional locks.** ``GIT_OPTIONAL_LOCKS=0``: ``git status`` would otherwise refresh the
  user's index opportunistically — take ``.git/index.lock`` and rewrite the index — so a
  read-only command (``doctor``, ``--dry-run``) could make the user's own ``git commit`` fail
  on the lock. Locks git needs for a write it was asked for are unaffected.
- **Objects as stored.** ``GIT_NO_REPLACE_OBJECTS=1``: C git would otherwise read
  ``refs/replace/*`` (``git replace``) in place of the commits they name, and anyone who can
  push a replace ref could show confirm's walk a harmless commit where a tampered one is; what
  gitpub reads through ``git cat-file`` never follows them either. ``GIT_GRAFT_FILE`` names a
  file that cannot exist: ``info/grafts`` (or a ``GIT_GRAFT_FILE`` of the user's) would give
  commits other parents in every walk and ``merge-base`` (``GIT_NO_REPLACE_OBJECTS`` leaves
  grafts alone).
- **None of gitpub's own secrets** (``PRIVATE_ENV``: CI's confirm key) reach git.
- **No stale mark.** ``GITPUB_VERIFIED_PUSH`` (``core.pushmark``) is never inherited either: it
  reaches only the one ``git push`` a caller gives it to.
- **No stdin, output captured, never raises on git's failure** (the caller reads the exit
  status); a timeout raises ``TimeoutExpired`` for the caller to classify.
- **git found once.** Its absolute path is looked up on the ``PATH`` once (again when the
  ``PATH`` changes), not by every start walking the ``PATH`` entry by entry.

Every process gitpub starts is started here (C git) or in ``runtime.steps`` (the pipeline's and
the channels' commands); an import contract keeps it so. ``CompletedProcess``, ``Popen`` and
``TimeoutExpired`` are re-exported for the callers' types and handlers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from subprocess import CompletedProcess, Popen, TimeoutExpired
from typing import IO

from gitpub.core import pushmark

__all__ = ["CompletedProcess", "Popen", "TimeoutExpired", "git_env", "git_program", "popen_git",
           "run_git", "spawn_git"]

DEFAULT_TIMEOUT = 300.0

#: Variables by which git locates a repository, its index or its objects: never inherited.
LOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE",
            "GIT_PREFIX", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM")


#: A graft file that cannot exist (``/dev/null`` is no directory): git reads no grafts, and
#: says nothing (an existing file, even empty, earns every command a deprecation hint).
NO_GRAFTS = os.path.join(os.devnull, "no-grafts")


#: Variables that hold a secret of gitpub's own: never passed to a child process (git, a
#: pipeline step, a channel command). ``GITPUB_CONFIRM_KEY``: CI's key (``verify.confirm``).
PRIVATE_ENV = ("GITPUB_CONFIRM_KEY",)


_found: tuple[str | None, str] | None = None  # (the PATH, git's absolute path on it)


def git_program() -> str:
    """git's absolute path on this process's ``PATH`` (looked up once per ``PATH``); plain
    ``git`` when it is not there, which then fails to start as it would have."""
    global _found
    path = os.environ.get("PATH")
    if _found is None or _found[0] != path:
        _found = (path, shutil.which("git", path=path) or "git")
    return _found[1]


def git_env(git_dir: Path | None = None, work_tree: Path | None = None,
            extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git gitpub runs (see the module docstring)."""
    env = {k: v for k, v in os.environ.items()
           if k not in LOCATING and k not in PRIVATE_ENV and k != pushmark.ENV}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    env["LC_ALL"] = "C"
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    env["GIT_GRAFT_FILE"] = NO_GRAFTS
    if git_dir is not None:
        env["GIT_DIR"] = str(git_dir)
        if work_tree is not None:
            env["GIT_WORK_TREE"] = str(work_tree)
    env.update(extra or {})
    return env


def run_git(args: Sequence[str], *, cwd: Path, git_dir: Path | None = None,
            work_tree: Path | None = None, timeout: float = DEFAULT_TIMEOUT,
            input: bytes | None = None,
            env: Mapping[str, str] | None = None) -> CompletedProcess[bytes]:
    """Run ``git ARGS`` in ``cwd`` (for ``git_dir``, when given); output captured, exit status
    unchecked. Raises ``NotADirectoryError``/``FileNotFoundError`` when ``cwd`` is not a
    directory or git is not installed, ``subprocess.TimeoutExpired`` after ``timeout``."""
    full_env = git_env(git_dir, work_tree, env)
    if input is None:
        return subprocess.run([git_program(), *args], cwd=cwd, env=full_env, capture_output=True,
                              check=False, timeout=timeout, stdin=subprocess.DEVNULL)
    return subprocess.run([git_program(), *args], cwd=cwd, env=full_env, capture_output=True,
                          check=False, timeout=timeout, input=input)


def spawn_git(args: Sequence[str], *, cwd: Path, git_dir: Path | None = None,
              work_tree: Path | None = None, stdin: IO[bytes] | None = None,
              stdout: IO[bytes] | None = None) -> Popen[bytes]:
    """Start ``git ARGS`` as ``run_git`` would run it, without waiting: for a walk that runs
    while the caller does other work. stdin and stdout are the files given (none when not:
    a file, not a pipe — read at once, after, which costs less than a pipe read 32 KiB at a
    time), stderr piped: ``communicate()`` collects it and waits."""
    return subprocess.Popen([git_program(), *args], cwd=cwd, env=git_env(git_dir, work_tree),
                            stdin=subprocess.DEVNULL if stdin is None else stdin,
                            stdout=subprocess.DEVNULL if stdout is None else stdout,
                            stderr=subprocess.PIPE)


def popen_git(args: Sequence[str], *, git_dir: Path, cwd: Path,
              stderr: IO[bytes] | None = None) -> Popen[bytes]:
    """Start ``git ARGS`` for ``git_dir`` (as ``run_git`` would run it) with its stdin and
    stdout piped to us: a conversation (``cat-file --batch-command``, a ref transaction). Its
    stderr goes to the file given (a pipe nobody reads while waiting for an answer would fill:
    an inherited ``GIT_TRACE_PACK_ACCESS`` writes a line per object), else it is piped."""
    return subprocess.Popen([git_program(), *args], cwd=cwd, env=git_env(git_dir),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE if stderr is None else stderr)
