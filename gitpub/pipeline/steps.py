"""Running pipeline commands (draft, judge, gates) in a private scratch directory.

A step gets a fresh directory under ``<git-dir>/pub/scratch/`` as its working directory and
``TMPDIR``; it never sees the user's working tree as its cwd. After it exits, the *temp-file
guard* walks the scratch directory: anything there that is not a declared output, and any input
that was modified, is reported by name — a step that leaves files behind or writes where it
should not sends the job to REVIEW instead of being trusted.

A step runs in its own process group so that a timeout kills the whole tree it started, not
only the shell (docs/design.md, section 8: orphaned children keep pipes open and hang us).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Mapping
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
    """Run ``command`` in ``scratch``; never raises for anything the command does."""
    full_env = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}
    full_env.update(env or {})
    full_env["TMPDIR"] = str(scratch.path / "tmp")
    full_env["GITPUB_OUTPUT"] = str(scratch.path / "out")
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
        out, err = proc.communicate(stdin, timeout=command.timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return StepResult(None, _clip(out), _clip(err), timed_out=True)
    finally:
        _kill_group(proc)
    stray, outputs = scratch.guard(declared)
    return StepResult(proc.returncode, _clip(out), _clip(err), stray=stray,
                      changed_inputs=scratch.changed_inputs(), outputs=outputs)


def _clip(output: bytes) -> bytes:
    """A step's output as we keep it: sanitized *first*, then cut (a secret cut in half would
    no longer be recognised), keeping the end, where errors are."""
    clean = sanitize_bytes(output)
    return clean[-OUTPUT_LIMIT:] if len(clean) > OUTPUT_LIMIT else clean


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill what the step left running (its whole process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
