"""Object reads through one long-lived ``git cat-file --batch-command``.

Every object gitpub reads comes from C git, so whatever git can read, gitpub reads the same
way: loose objects and packs, a multi-pack-index, alternates, SHA-256 repositories. One process
serves a whole command (a request costs a pipe round trip, not a process), started on the first
read and ended with the repository.

How C git answers for damage, and what we make of it:

- an object that is not there: ``<id> missing``; so is one whose loose file is garbage, but
  then git has already written ``unable to unpack <id>`` on stderr (unbuffered, before the
  answer), which tells the two apart: ``Unreadable``;
- an object whose content git cannot inflate after its header: the header, then git dies
  (``unable to stream``): ``Unreadable``, and the next read starts a new process.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import IO

from gitpub.git.run import Popen, TimeoutExpired, popen_git


class Unreadable(Exception):
    """git has the object but cannot read it (the text says what git said)."""


class CatFile:
    """Answers ``info`` and ``contents`` requests for one repository, in order."""

    def __init__(self, git_dir: Path, cwd: Path) -> None:
        self._git_dir, self._cwd = git_dir, cwd
        self._proc: Popen[bytes] | None = None
        self._lock = threading.Lock()  # one request and its answer at a time

    def info(self, name: str) -> tuple[str, str, int] | None:
        """(object id, type, size) of object ``name``, None when the repository lacks it."""
        with self._lock:
            header = self._ask("info", name)
            return None if header is None else header

    def contents(self, oid: str) -> tuple[str, bytes] | None:
        """(type, content) of object ``oid``, None when the repository lacks it."""
        with self._lock:
            header = self._ask("contents", oid)
            if header is None:
                return None
            _, kind, size = header
            stdout = self._stdout()
            data = stdout.read(size + 1)
            if len(data) != size + 1:
                raise self._died(oid)
            return kind, data[:size]

    @property
    def pid(self) -> int | None:
        """The running ``git cat-file``'s process id (None: not started, or ended)."""
        proc = self._proc
        return None if proc is None or proc.poll() is not None else proc.pid

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        try:
            proc.wait(timeout=5)
        except TimeoutExpired:
            proc.kill()
            proc.wait()

    # -- the protocol ----------------------------------------------------------------------

    def _start(self) -> Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self.close()
            self._proc = popen_git(["cat-file", "--batch-command"], git_dir=self._git_dir,
                                   cwd=self._cwd)
            assert self._proc.stderr is not None
            os.set_blocking(self._proc.stderr.fileno(), False)
        return self._proc

    def _stdout(self) -> IO[bytes]:
        assert self._proc is not None and self._proc.stdout is not None
        return self._proc.stdout

    def _ask(self, command: str, name: str) -> tuple[str, str, int] | None:
        if "\n" in name or not name:
            raise ValueError(f"not an object name: {name!r}")
        proc = self._start()
        assert proc.stdin is not None
        try:
            proc.stdin.write(f"{command} {name}\n".encode("utf-8", "surrogateescape"))
            proc.stdin.flush()
        except BrokenPipeError:
            raise self._died(name) from None
        line = self._stdout().readline()
        if not line.endswith(b"\n"):
            raise self._died(name)
        fields = line.decode("utf-8", "surrogateescape").rstrip("\n").rsplit(" ", 2)
        if fields[-1] in ("missing", "ambiguous") and len(fields) >= 2:
            said = self._stderr()
            if "unable to unpack" in said or "inflate" in said or "corrupt" in said:
                raise Unreadable(_last_lines(said))
            return None
        if len(fields) != 3 or not fields[2].isdigit():
            raise self._died(name)
        return fields[0], fields[1], int(fields[2])

    def _stderr(self) -> str:
        """What git has written on stderr so far (without waiting)."""
        assert self._proc is not None and self._proc.stderr is not None
        try:
            data = self._proc.stderr.read()
        except BlockingIOError:
            data = None
        return (data or b"").decode("utf-8", "replace")

    def _died(self, name: str) -> Unreadable:
        """git stopped answering (it dies on an object it cannot stream): what it said."""
        proc = self._proc
        said = ""
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except TimeoutExpired:
                proc.kill()
            said = self._stderr()
        self.close()
        return Unreadable(_last_lines(said) or f"git cat-file stopped at {name}")


def _last_lines(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(lines[-2:])[:300]
