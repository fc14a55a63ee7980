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
- **Pathspecs as gitpub means them.** The person's ``GIT_*_PATHSPECS`` defaults
  (``PATHSPEC_DEFAULTS``) are never inherited.
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
  status); a git killed by a signal from outside is no failure of git's: ``GitKilled`` (a
  ``GitTimeout``), never a status to read. A git that does not finish in time
  (``DEFAULT_TIMEOUT`` unless the caller gives another: a hung hook, file system or server)
  is killed and ``GitTimeout`` raised: a ``TryLaterError`` (exit 5, "run the same command
  again later") that the network segment classifies as an unknown outcome, and that leaves a
  job in the state it was recorded in (``runtime.contain``) — never an internal error, never
  a job sent to a person.
- **git found once.** Its absolute path is looked up on the ``PATH`` once (again when the
  ``PATH`` changes, or when the git found is gone), not by every start walking the ``PATH``
  entry by entry; a ``PATH`` with a relative entry is walked by each start, from where git
  runs, as it always was.

Every process gitpub starts is started here (C git), in ``runtime.steps`` (the pipeline's and
the channels' commands) or in the hooks' stdlib-only fast path (``hooks.fast``, which cannot
afford this module's imports on every commit); an import contract and
``tests/test_imports.py`` keep it so. ``CompletedProcess``, ``Popen`` and
``TimeoutExpired`` are re-exported for the callers' types and handlers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from subprocess import CompletedProcess, Popen, TimeoutExpired
from typing import IO, Any

from gitpub.core import pushmark
from gitpub.core.errors import TryLaterError

__all__ = ["CompletedProcess", "GitKilled", "GitTimeout", "Popen", "TimeoutExpired", "git_env",
           "git_program", "popen_git", "run_git", "run_plain", "spawn_git"]

#: Seconds a git gitpub runs may take unless the caller says otherwise (read at each call).
DEFAULT_TIMEOUT = 300.0


class GitTimeout(TryLaterError):
    """A git gitpub ran did not finish in time and was killed: nothing is known of what it
    would have answered, and the same command, run later, may succeed."""

    def __init__(self, args: Sequence[str], seconds: float) -> None:
        command = _command_name(args)
        super().__init__(
            f"git {command} did not finish in {seconds:g} seconds (killed)",
            hint="git, one of its hooks or the file system holding the repository hangs; "
                 "nothing was lost: run the same command again when git answers")
        self.command = command
        self.seconds = seconds


class GitKilled(GitTimeout):
    """A git gitpub ran was killed by a signal from outside (the OOM killer, a person), not by
    gitpub's watchdog: its exit status and output are no answer of git's (a ``merge-base
    --is-ancestor`` killed is no "not an ancestor"), and nothing is known of what it would have
    answered. A ``GitTimeout``: every caller that takes a git that did not finish for an
    unknown outcome takes this one so too."""

    def __init__(self, args: Sequence[str], signal: int) -> None:
        command = _command_name(args)
        TryLaterError.__init__(
            self, f"git {command} was killed (signal {signal}) before it answered",
            hint="something on this machine kills git (memory?); nothing was taken for its "
                 "answer: run the same command again")
        self.command = command
        self.seconds = 0.0


def _command_name(args: Sequence[str]) -> str:
    return next((a for a in args if not a.startswith("-") and "=" not in a), "")


#: Variables by which git locates a repository, its index or its objects: never inherited.
LOCATING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE",
            "GIT_PREFIX", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM")


#: Variables that change how git reads every pathspec (``GIT_LITERAL_PATHSPECS``, …): never
#: inherited. gitpub says how each of its pathspecs is meant (``--literal-pathspecs``, a glob
#: of ``init``); the person's default would change what it names, or make git refuse a
#: ``--literal-pathspecs`` ("incompatible with all other global pathspec settings").
PATHSPEC_DEFAULTS = ("GIT_LITERAL_PATHSPECS", "GIT_GLOB_PATHSPECS", "GIT_NOGLOB_PATHSPECS",
                     "GIT_ICASE_PATHSPECS")


#: A graft file that cannot exist (``/dev/null`` is no directory): git reads no grafts, and
#: says nothing (an existing file, even empty, earns every command a deprecation hint).
NO_GRAFTS = os.path.join(os.devnull, "no-grafts")


#: Variables that hold a secret of gitpub's own: never passed to a child process (git, a
#: pipeline step, a channel command). ``GITPUB_CONFIRM_KEY``: CI's key (``verify.confirm``).
PRIVATE_ENV = ("GITPUB_CONFIRM_KEY",)


_found: tuple[str | None, str] | None = None  # (the PATH, git's absolute path on it)


def git_program() -> str:
    """git's absolute path on this process's ``PATH`` (looked up once per ``PATH``); plain
    ``git`` when it is not there, which then fails to start as it would have, and when the
    ``PATH`` has a relative entry (``bin``, ``.``, an empty one): that names a directory
    relative to where git is started (the repository), so only a start there can look."""
    global _found
    path = os.environ.get("PATH")
    if _found is None or _found[0] != path:
        entries = (os.defpath if path is None else path).split(os.pathsep)
        relative = any(not os.path.isabs(entry) for entry in entries)
        _found = (path, "git" if relative else shutil.which("git", path=path) or "git")
    return _found[1]


def _popen(args: Sequence[str], **kwargs: Any) -> Popen[bytes]:
    """``subprocess.Popen`` of git (``git_program``) with ``args``. A git found earlier that
    is gone (uninstalled, moved by an upgrade) is looked up again on the ``PATH`` once."""
    global _found
    program = git_program()
    try:
        return subprocess.Popen([program, *args], **kwargs)
    except FileNotFoundError:
        if program == "git" or os.path.exists(program):
            raise  # not git that is missing (the directory to run it in), or no git at all
        _found = None
        return subprocess.Popen([git_program(), *args], **kwargs)


def git_env(git_dir: Path | None = None, work_tree: Path | None = None,
            extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git gitpub runs (see the module docstring)."""
    env = {k: v for k, v in os.environ.items()
           if k not in LOCATING and k not in PRIVATE_ENV and k not in PATHSPEC_DEFAULTS
           and k != pushmark.ENV}
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
            work_tree: Path | None = None, timeout: float | None = None,
            input: bytes | None = None,
            env: Mapping[str, str] | None = None) -> CompletedProcess[bytes]:
    """Run ``git ARGS`` in ``cwd`` (for ``git_dir``, when given); output captured, exit status
    unchecked. Raises ``NotADirectoryError``/``FileNotFoundError`` when ``cwd`` is not a
    directory or git is not installed, ``GitTimeout`` after ``timeout`` seconds
    (``DEFAULT_TIMEOUT`` when not given)."""
    seconds = DEFAULT_TIMEOUT if timeout is None else timeout
    proc = _popen(args, cwd=cwd, env=git_env(git_dir, work_tree, env),
                  stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The timeout is a watchdog that kills git, not ``communicate(timeout=…)``: that one
    # waits for the exit by polling with sleeps (0.5 ms, 1 ms, 2 ms, …), which costs a
    # millisecond or more on every git run; here git's exit is waited for, not polled.
    fired = threading.Event()

    def give_up() -> None:
        fired.set()
        proc.kill()

    watchdog = threading.Timer(seconds, give_up)
    watchdog.start()
    try:
        out, err = proc.communicate(input)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        watchdog.cancel()
    if fired.is_set():
        raise GitTimeout(args, seconds)
    if proc.returncode < 0:
        raise GitKilled(args, -proc.returncode)
    return CompletedProcess(proc.args, proc.returncode, out, err)


#: A repository that cannot exist: ``run_plain`` runs git outside any repository.
NO_REPOSITORY = os.path.join(os.devnull, "no-repository")
#: git with no configuration at all: neither the system's, the person's (``~/.gitconfig``,
#: ``$XDG_CONFIG_HOME/git/config``), a repository's, nor any given on the command line or in the
#: environment (``git -c``, ``GIT_CONFIG_PARAMETERS``, ``GIT_CONFIG_COUNT``).
PLAIN = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_SYSTEM": os.devnull,
         "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_PARAMETERS": "", "GIT_CONFIG_COUNT": "0",
         "GIT_DIR": NO_REPOSITORY}


def run_plain(args: Sequence[str], *, input: bytes, timeout: float | None = None
              ) -> CompletedProcess[bytes]:
    """``git ARGS`` as git itself behaves, whatever anyone configured: for a question whose
    answer gitpub must share with every git (how ``interpret-trailers --parse`` reads a
    message: a person's ``core.commentChar``, ``trailer.separators`` or ``trailer.<token>.key``
    would change it). Only for commands that need no repository. Raises as ``run_git``."""
    return run_git(args, cwd=Path(os.devnull).parent, timeout=timeout, input=input, env=PLAIN)


def spawn_git(args: Sequence[str], *, cwd: Path, git_dir: Path | None = None,
              work_tree: Path | None = None, stdin: IO[bytes] | None = None,
              stdout: IO[bytes] | None = None) -> Popen[bytes]:
    """Start ``git ARGS`` as ``run_git`` would run it, without waiting: for a walk that runs
    while the caller does other work. stdin and stdout are the files given (none when not:
    a file, not a pipe — read at once, after, which costs less than a pipe read 32 KiB at a
    time), stderr piped: ``communicate()`` collects it and waits."""
    return _popen(args, cwd=cwd, env=git_env(git_dir, work_tree),
                  stdin=subprocess.DEVNULL if stdin is None else stdin,
                  stdout=subprocess.DEVNULL if stdout is None else stdout,
                  stderr=subprocess.PIPE)


def popen_git(args: Sequence[str], *, git_dir: Path, cwd: Path,
              stderr: IO[bytes] | None = None) -> Popen[bytes]:
    """Start ``git ARGS`` for ``git_dir`` (as ``run_git`` would run it) with its stdin and
    stdout piped to us: a conversation (``cat-file --batch-command``, a ref transaction). Its
    stderr goes to the file given (a pipe nobody reads while waiting for an answer would fill:
    an inherited ``GIT_TRACE_PACK_ACCESS`` writes a line per object), else it is piped."""
    return _popen(args, cwd=cwd, env=git_env(git_dir), stdin=subprocess.PIPE,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE if stderr is None else stderr)
