"""Shared plumbing: paths, the hermetic environment, running git and gitpub, timing.

Everything runs real processes: C git for the baseline and fixtures, and gitpub through its CLI
(``<venv python> -m gitpub -C <repo> …``) in a subprocess, exactly as a user or agent runs it.
The environment is hermetic: its own ``HOME`` (so no user ``~/.gitconfig``), no system git
configuration, fixed author and committer identities, a C locale for git's messages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work"
CACHE = WORK / "cache"
RUN = WORK / "run"
PROFILES = WORK / "profiles"

IDENTITY = {
    "GIT_AUTHOR_NAME": "Bench Writer",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "Bench Writer",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


class BenchError(RuntimeError):
    """A fixture or a run did not do what it must: the figures would be meaningless."""


def python() -> str:
    """The interpreter gitpub is installed in: the project's venv, else this one."""
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def corpus_bundle() -> Path:
    """The weekly corpus bundle: $GITPUB_CORPUS, the shared directory, or next to the project."""
    candidates = [os.environ.get("GITPUB_CORPUS", ""), "/work/shared/corpus/weekly.bundle",
                  str(ROOT.parent / "shared" / "corpus" / "weekly.bundle")]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    raise BenchError("corpus bundle not found: set GITPUB_CORPUS to weekly.bundle")


def hermetic_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Bench Writer\n\temail = bench@example.com\n"
        "[advice]\n\tdetachedHead = false\n"
        "[init]\n\tdefaultBranch = main\n", encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "LC_ALL": "C.UTF-8",
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "TMPDIR": str(home),
        **IDENTITY,
    }
    return env


@dataclass
class Proc:
    code: int
    out: str
    err: str


def run(argv: Sequence[str], cwd: Path, env: dict[str, str], *, input: bytes | None = None,
        check: bool = True, timeout: float = 600) -> Proc:
    proc = subprocess.run(list(argv), cwd=cwd, env=env, input=input, capture_output=True,
                          timeout=timeout, check=False)
    result = Proc(proc.returncode, proc.stdout.decode("utf-8", "replace"),
                  proc.stderr.decode("utf-8", "replace"))
    if check and proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)} (in {cwd}) exited {proc.returncode}:\n"
                         f"{result.err[-2000:]}{result.out[-1000:]}")
    return result


@dataclass
class Harness:
    """The run's shared state: environment, sizes, and the profiler switch."""

    env: dict[str, str]
    quick: bool
    profile_dir: Path | None = None  # when set, gitpub runs under a profiler, one file per call
    sites: Path = RUN  # where sites, remotes and worktrees go: tmpfs if there is one
    sites_on_tmpfs: bool = False
    _seq: int = 0
    log: Callable[[str], None] = field(default=lambda m: print(m, file=sys.stderr, flush=True))

    @contextmanager
    def profiling(self, directory: Path) -> Iterator[None]:
        """Run the gitpub calls inside under cProfile, one ``.prof`` file each."""
        old, self.profile_dir = self.profile_dir, directory
        try:
            yield
        finally:
            self.profile_dir = old

    def git(self, cwd: Path, *args: str, input: bytes | None = None, check: bool = True,
            env: dict[str, str] | None = None) -> str:
        return run(["git", *args], cwd, env or self.env, input=input, check=check).out

    def pub(self, repo: Path, *args: str, check: bool = True,
            extra_env: dict[str, str] | None = None, cwd: Path | None = None) -> Proc:
        """``git pub ARGS`` as a user runs it: a new process, ``-C repo``."""
        argv = [python()]
        if self.profile_dir is not None:
            self._seq += 1
            self.profile_dir.mkdir(parents=True, exist_ok=True)
            stem = self.profile_dir / f"{self._seq:03d}-{args[0] if args else 'cli'}"
            if has_pyinstrument():
                argv += ["-m", "pyinstrument", "-r", "text", "--no-color", "-i", "0.0005",
                         "-p", "processor_options.filter_threshold=0.02",
                         "-o", f"{stem}.txt"]
            else:
                argv += ["-m", "cProfile", "-o", f"{stem}.prof"]
        argv += ["-m", "gitpub", "-C", str(repo), *args]
        env = self.env if extra_env is None else {**self.env, **extra_env}
        return run(argv, cwd or repo, env, check=check)


_PYINSTRUMENT: list[bool] = []


def has_pyinstrument() -> bool:
    """Whether gitpub's interpreter has pyinstrument (a sampling profiler with readable call
    trees); cProfile otherwise."""
    if not _PYINSTRUMENT:
        proc = subprocess.run([python(), "-c", "import pyinstrument"], capture_output=True,
                              check=False)
        _PYINSTRUMENT.append(proc.returncode == 0)
    return _PYINSTRUMENT[0]


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def fs_canary(parent: Path, files: int = 2000) -> float:
    """Seconds to create ``files`` empty files in a new directory under ``parent``.

    On these VMs (ext4 without a journal) file creation slows down 10x or more for a minute or
    more after a mass deletion anywhere nearby on the filesystem (see
    ``scenarios.settled_pairs``) — by this run or by anyone else on the machine. The baseline
    pipeline creates hundreds of files per run and gitpub a few dozen, so such a period inflates
    the baseline and flatters gitpub. The canary, taken at the start and the end of a run and
    written to the results, says whether the run was measured on a quiet filesystem.
    """
    d = parent / f"canary-{time.monotonic_ns()}"
    d.mkdir(parents=True)
    t0 = time.perf_counter()
    for i in range(files):
        with open(d / f"f{i}", "wb"):
            pass
    return time.perf_counter() - t0


def fresh_dir(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
