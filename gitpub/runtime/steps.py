"""Running pipeline commands (draft, judge, gates) in a private scratch directory.

A step gets a fresh directory under ``<git-dir>/pub/scratch/`` as its working directory and
``TMPDIR``; it never sees the user's working tree as its cwd. After it exits, the *temp-file
guard* walks the scratch directory: anything there that is not a declared output, and any input
that was modified, is reported by name — a step that leaves files behind or writes where it
should not sends the job to REVIEW instead of being trusted.

A step runs in its own process group so that a timeout kills the whole tree it started, not
only the shell (docs/design.md, section 8: orphaned children keep pipes open and hang us), and
while it runs gitpub is the subreaper of its descendants, so that a process that left the group
(``setsid``) is killed too (``run``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gitpub.config.model import Command
from gitpub.core.sanitize import sanitize, sanitize_bytes
from gitpub.git.run import PRIVATE_ENV

OUTPUT_LIMIT = 64 * 1024

Outputs = dict[str, tuple[int, bytes]]  # repository path -> (git mode, content)


@dataclass(frozen=True)
class StepResult:
    returncode: int | None  # None: it did not finish (timeout) or could not start
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    start_error: str | None = None
    stray: tuple[str, ...] = ()  # guard findings: paths written outside the declared outputs,
    # and inputs modified or deleted (also listed in ``changed_inputs``)
    changed_inputs: tuple[str, ...] = ()  # inputs the step modified, deleted or replaced
    outputs: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # path -> (mode, data)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.stray

    def describe(self) -> str:
        """A short, sanitized account of what went wrong, for the job's history."""
        if self.start_error:
            return sanitize(self.start_error)
        if self.timed_out:
            return "timed out"
        if self.stray:
            return "wrote outside its declared outputs: " + ", ".join(self.stray[:20])
        text = (self.stdout + b"\n" + self.stderr).decode("utf-8", "replace").strip()
        tail = text[-2000:]
        return sanitize(f"exit status {self.returncode}" + (f": {tail}" if tail else ""))


class Scratch:
    """A private directory for one step; removed on exit whatever happens."""

    def __init__(self, root: Path, label: str) -> None:
        self.path = root / f"{label}-{uuid.uuid4().hex[:12]}"
        self.inputs: dict[str, bytes] = {}

    def __enter__(self) -> Scratch:
        (self.path / "tmp").mkdir(parents=True)
        (self.path / "out").mkdir()
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def put(self, rel: str, data: bytes, mode: int = 0o644) -> Path:
        """An input file for the step; the guard checks it comes back unchanged."""
        path = self.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
        self.inputs[rel] = data
        return path

    def guard(self, declared: frozenset[str]) -> tuple[tuple[str, ...], Outputs]:
        """(stray paths, declared outputs found) after a step ran. The stray paths include
        the changed inputs, labelled ``(modified)`` or ``(deleted or replaced)``."""
        stray: list[str] = []
        outputs: dict[str, tuple[int, bytes]] = {}
        for dirpath, dirs, files in os.walk(self.path):
            # os.walk lists a symlink to a directory among the directories and does not enter
            # it: report it here, or `ln -s / tmp/x` would pass unseen.
            stray.extend((Path(dirpath) / d).relative_to(self.path).as_posix()
                         for d in dirs if (Path(dirpath) / d).is_symlink())
            for name in files:
                full = Path(dirpath) / name
                rel = full.relative_to(self.path).as_posix()
                if full.is_symlink() or not full.is_file():
                    stray.append(rel)
                elif rel in self.inputs:
                    if full.read_bytes() != self.inputs[rel]:
                        stray.append(f"{rel} (modified)")
                elif rel.startswith("out/") and rel[4:] in declared:
                    mode = 0o100755 if os.access(full, os.X_OK) else 0o100644
                    outputs[rel[4:]] = (mode, full.read_bytes())
                else:
                    stray.append(rel)
        for rel in self.inputs:
            full = self.path / rel
            if full.is_symlink() or not full.is_file():
                stray.append(f"{rel} (deleted or replaced)")
        return tuple(sorted(stray)), outputs

    def changed_inputs(self) -> tuple[str, ...]:
        """The inputs a step modified, deleted or replaced."""
        changed = []
        for rel, data in self.inputs.items():
            full = self.path / rel
            if full.is_symlink() or not full.is_file() or full.read_bytes() != data:
                changed.append(rel)
        return tuple(sorted(changed))


def run(
    command: Command,
    scratch: Scratch,
    *,
    stdin: bytes = b"",
    env: Mapping[str, str] | None = None,
    declared: frozenset[str] = frozenset(),
) -> StepResult:
    """Run ``command`` in ``scratch``; never raises for anything the command does.

    Its timeout is a limit for everything it started: its process group is killed, and so is
    every process that left the group (``setsid``) and was orphaned — gitpub is their
    *subreaper* while the step runs (Linux), so they become its children and are killed too.
    A step that exits while something it left behind still holds its output pipes is finished:
    the leftovers are killed, not waited for.
    """
    full_env = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}
    full_env.update(env or {})
    full_env["TMPDIR"] = str(scratch.path / "tmp")
    full_env["GITPUB_OUTPUT"] = str(scratch.path / "out")
    with _reaping() as known:
        try:
            proc = subprocess.Popen(
                list(command.argv),
                cwd=scratch.path,
                env=full_env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            return StepResult(None, b"", b"", start_error=f"{command.name}: cannot run: {e}")
        try:
            out, err, timed_out = _communicate(proc, stdin, command.timeout, known)
        finally:
            _kill_all(proc, known)
    if timed_out:
        return StepResult(None, _clip(out), _clip(err), timed_out=True)
    stray, outputs = scratch.guard(declared)
    return StepResult(proc.returncode, _clip(out), _clip(err), stray=stray,
                      changed_inputs=scratch.changed_inputs(), outputs=outputs)


def _communicate(proc: subprocess.Popen[bytes], stdin: bytes, timeout: float,
                 known: frozenset[int]) -> tuple[bytes, bytes, bool]:
    """(stdout, stderr, timed out): the step's output until it and everything holding its
    pipes is done, or until ``timeout``."""
    deadline = time.monotonic() + timeout
    data: bytes | None = stdin
    while True:
        left = deadline - time.monotonic()
        try:
            out, err = proc.communicate(data, timeout=max(0.0, min(_POLL, left)))
            return out, err, False
        except subprocess.TimeoutExpired:
            data = None  # sent already; communicate goes on where it was
            if left <= _POLL:
                _kill_all(proc, known)
                out, err = proc.communicate()
                return out, err, True
            if proc.poll() is not None:  # it is done; what it left behind holds the pipes
                _kill_all(proc, known)


_POLL = 0.1
_PR_SET_CHILD_SUBREAPER = 36


def _set_subreaper(on: bool) -> bool:
    """Make this process the subreaper of its descendants (Linux); whether that worked."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # only when a step runs: a prepare without commands loads none of it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


@contextlib.contextmanager
def _reaping() -> Iterator[frozenset[int]]:
    """Subreaper while a step runs; yields the children this process had before it."""
    known = frozenset(_children())
    was = _set_subreaper(True)
    try:
        yield known
    finally:
        if was:
            _set_subreaper(False)


def _processes() -> list[tuple[int, int, int, bool]]:
    """(pid, parent pid, process group, zombie) of every process (from ``/proc``)."""
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 2:
            found.append((int(entry), int(fields[1]), int(fields[2]), fields[0] == b"Z"))
    return found


def _children() -> list[int]:
    """The pids whose parent is this process."""
    me = os.getpid()
    return [pid for pid, parent, _group, _zombie in _processes() if parent == me]


def _wait_group_gone(pgid: int, within: float = 2.0) -> None:
    """Until no live process is left in group ``pgid`` (killed: its members are dying, and
    the children they leave are handed to us only once they are dead)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(group == pgid and not zombie for _p, _pp, group, zombie in _processes()):
            return
        time.sleep(0.01)


def _kill_all(proc: subprocess.Popen[bytes], known: frozenset[int]) -> None:
    """Kill the step's process group, then every orphan it left that became our child (and
    their groups), until none is left (bounded: a fork bomb does not keep us here)."""
    _kill_group(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=2)  # dead: its children are ours now (we are their subreaper)
    _wait_group_gone(proc.pid)
    own_group = os.getpgrp()
    for _ in range(50):
        orphans = [pid for pid in _children() if pid not in known and pid != proc.pid]
        if not orphans:
            return
        for pid in orphans:
            group = 0
            with contextlib.suppress(ProcessLookupError, PermissionError):
                group = os.getpgid(pid)
                if group not in (own_group, 0):
                    os.killpg(group, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
            if group not in (own_group, 0):
                _wait_group_gone(group)


def _clip(output: bytes) -> bytes:
    """A step's output as we keep it: sanitized *first*, then cut (a secret cut in half would
    no longer be recognised), keeping the end, where errors are."""
    clean = sanitize_bytes(output)
    return clean[-OUTPUT_LIMIT:] if len(clean) > OUTPUT_LIMIT else clean


def _kill_group(pgid: int) -> None:
    """Kill what the step left running in its own process group."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_program(argv: list[str], *, cwd: Path, stdin: bytes | None = None,
                capture: bool = False) -> subprocess.CompletedProcess[bytes]:
    """Run a program that is no pipeline step, as a person would at a prompt (the demo runs
    ``git pub`` so): in ``cwd``, its output captured only when asked (``capture``: stdout;
    stderr is then dropped), its exit status returned, never raised."""
    out = subprocess.PIPE if capture else None
    err = subprocess.DEVNULL if capture else None
    return subprocess.run(argv, cwd=cwd, input=stdin, stdout=out, stderr=err, check=False)
