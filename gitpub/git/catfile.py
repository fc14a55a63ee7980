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

And for the process itself:

- git's stderr goes to an unnamed temporary file, never a pipe: a ``GIT_TRACE_PACK_ACCESS``
  inherited from the user writes a line per object read, and a pipe nobody drains would fill
  and stop git (and us, waiting for its answer) for good;
- a process killed from outside (the OOM killer, a person; a signal, not git's own exit) is
  no verdict on the object it was reading: the request is asked again of a new process, once;
- an answer that does not come (a hung file system, a git that hangs) is waited for at most
  ``TIMEOUT`` seconds without a byte: then the process is killed and ``CatFileTimeout`` says
  so, for this request and every later one (a command waits for a hung git once, not once per
  object); nothing is taken for a missing or damaged object.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TypeVar

from gitpub.core.errors import GitpubError, TryLaterError
from gitpub.git.run import DEFAULT_TIMEOUT, Popen, TimeoutExpired, popen_git

#: Seconds an answer may take without a byte arriving before the process is given up.
TIMEOUT = DEFAULT_TIMEOUT
_CHUNK = 1 << 16
#: How many requests ``infos`` writes at once: their lines and git's answers stay well inside
#: a pipe's buffer (64 KiB), so neither side waits on the other while the other writes.
_MANY = 256
T = TypeVar("T")


class Unreadable(Exception):
    """git has the object but cannot read it (the text says what git said)."""


class GitTooOld(GitpubError):
    """This git has no ``cat-file --batch-command`` (git 2.36, 2022), which every read needs."""

    def __init__(self) -> None:
        super().__init__("this git is too old for gitpub: it needs git 2.36 or newer "
                         "(`git cat-file --batch-command`)",
                         "install a newer git (`git --version` says which one runs)")


class CatFileTimeout(TryLaterError):
    """``git cat-file`` did not answer in time (a hung git or file system), or kept dying:
    nothing is known of the object, and the same command, run later, may succeed (exit 5)."""


class _Killed(Exception):
    """The process was killed from outside while it answered (a signal, not git's exit)."""


class CatFile:
    """Answers ``info`` and ``contents`` requests for one repository, in order."""

    def __init__(self, git_dir: Path, cwd: Path) -> None:
        self._git_dir, self._cwd = git_dir, cwd
        self._proc: Popen[bytes] | None = None
        self._err: IO[bytes] | None = None  # the process's stderr (a temporary file)
        self._err_read = 0  # how much of it was looked at
        self._buf = bytearray()  # read from stdout, not yet consumed
        self._lock = threading.Lock()  # one request and its answer at a time
        self._hung: CatFileTimeout | None = None  # git did not answer: given up for good

    def info(self, name: str) -> tuple[str, str, int] | None:
        """(object id, type, size) of object ``name``, None when the repository lacks it."""
        with self._lock:
            return self._again(lambda: self._ask("info", name), name)

    def infos(self, names: Sequence[str]) -> list[tuple[str, str, int] | None]:
        """``info`` of each of ``names``, in order: the requests written together, the answers
        read in turn (one round trip for them all, not one each). A name git answers
        ``missing`` is asked again alone (``info``): only then is what git writes on stderr
        that object's, which tells a missing object from a damaged one (``Unreadable``)."""
        out: list[tuple[str, str, int] | None] = []
        for start in range(0, len(names), _MANY):
            chunk = names[start:start + _MANY]
            with self._lock:
                found = self._again(functools.partial(self._ask_many, chunk), chunk[0])
            out += [f if f is not None else self.info(n)
                    for n, f in zip(chunk, found, strict=True)]
        return out

    def contents(self, oid: str) -> tuple[str, bytes] | None:
        """(type, content) of object ``oid``, None when the repository lacks it."""
        def ask() -> tuple[str, bytes] | None:
            header = self._ask("contents", oid)
            if header is None:
                return None
            _, kind, size = header
            data = self._read_exactly(size, oid)
            if self._read_exactly(1, oid) != b"\n":
                raise self._died(oid)
            return kind, data

        with self._lock:
            return self._again(ask, oid)

    @property
    def pid(self) -> int | None:
        """The running ``git cat-file``'s process id (None: not started, or ended)."""
        proc = self._proc
        return None if proc is None or proc.poll() is not None else proc.pid

    def close(self) -> None:
        proc, self._proc = self._proc, None
        self._buf.clear()
        if self._err is not None:
            self._err.close()
            self._err, self._err_read = None, 0
        if proc is None:
            return
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # what a dead git left unread is dropped
                    stream.close()
        try:
            proc.wait(timeout=5)
        except TimeoutExpired:
            proc.kill()
            proc.wait()

    # -- the protocol ----------------------------------------------------------------------

    def _again(self, request: Callable[[], T], name: str) -> T:
        """``request()``, asked once more of a new process if this one was killed meanwhile."""
        if self._hung is not None:
            raise CatFileTimeout(self._hung.message, self._hung.hint)
        try:
            return request()
        except _Killed:
            pass
        try:
            return request()
        except _Killed:
            raise CatFileTimeout(f"git cat-file was killed twice while reading {name}",
                                 hint="something on this machine kills git (memory?); run "
                                      "the command again") from None

    def _start(self) -> Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self.close()
            self._err = tempfile.TemporaryFile(prefix="gitpub-cat-file-")  # noqa: SIM115 (closed by close())
            self._proc = popen_git(["cat-file", "--batch-command"], git_dir=self._git_dir,
                                   cwd=self._cwd, stderr=self._err)
        return self._proc

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
        line = self._read_line(name)
        fields = line.decode("utf-8", "surrogateescape").rstrip("\n").rsplit(" ", 2)
        if fields[-1] in ("missing", "ambiguous") and len(fields) >= 2:
            said = self._stderr()
            if "unable to unpack" in said or "inflate" in said or "corrupt" in said:
                raise Unreadable(_last_lines(said))
            return None
        if len(fields) != 3 or not fields[2].isdigit():
            raise self._died(name)
        return fields[0], fields[1], int(fields[2])

    def _ask_many(self, names: Sequence[str]) -> list[tuple[str, str, int] | None]:
        """``info`` of each name, asked together; None for each git answers missing or
        ambiguous (``infos`` asks those again alone)."""
        for name in names:
            if "\n" in name or not name:
                raise ValueError(f"not an object name: {name!r}")
        proc = self._start()
        assert proc.stdin is not None
        try:
            proc.stdin.write("".join(f"info {n}\n" for n in names).encode("utf-8",
                                                                       "surrogateescape"))
            proc.stdin.flush()
        except BrokenPipeError:
            raise self._died(names[0]) from None
        out: list[tuple[str, str, int] | None] = []
        for name in names:
            fields = self._read_line(name).decode("utf-8", "surrogateescape").rstrip(
                "\n").rsplit(" ", 2)
            if fields[-1] in ("missing", "ambiguous") and len(fields) >= 2:
                out.append(None)
            elif len(fields) != 3 or not fields[2].isdigit():
                raise self._died(name)
            else:
                out.append((fields[0], fields[1], int(fields[2])))
        if None in out:
            self._stderr()  # what git said of them all: each is asked again alone
        return out

    def _read_line(self, name: str) -> bytes:
        start = 0
        while True:
            end = self._buf.find(b"\n", start)
            if end >= 0:
                line = bytes(self._buf[:end + 1])
                del self._buf[:end + 1]
                return line
            start = len(self._buf)
            self._fill(name)

    def _read_exactly(self, n: int, name: str) -> bytes:
        if len(self._buf) < n:  # a big object: read straight into its own buffer
            out = bytearray(n)
            view = memoryview(out)
            have = len(self._buf)
            view[:have] = self._buf
            self._buf.clear()
            fd = self._wait(name)
            while have < n:
                got = os.readv(fd, [view[have:]])
                if not got:
                    raise self._died(name)
                have += got
                if have < n:
                    self._wait(name)
            return bytes(out)
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def _fill(self, name: str) -> None:
        """Add what git has written to the buffer."""
        chunk = os.read(self._wait(name), _CHUNK)
        if not chunk:
            raise self._died(name)
        self._buf += chunk

    def _wait(self, name: str) -> int:
        """Wait until git has written something (at most ``TIMEOUT`` seconds); its stdout."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + TIMEOUT
        while not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            if time.monotonic() >= deadline:
                self._proc.kill()
                self.close()
                self._hung = CatFileTimeout(
                    f"git cat-file did not answer in {TIMEOUT:g} seconds (reading {name})",
                    hint="git or the file system holding the repository hangs; run the "
                         "command again when it answers")
                raise self._hung
        return fd

    def _stderr(self) -> str:
        """What git has written on stderr since we last looked."""
        if self._err is None:
            return ""
        self._err.seek(self._err_read)
        data = self._err.read()
        self._err_read += len(data)
        return data.decode("utf-8", "replace")

    def _died(self, name: str) -> Exception:
        """git stopped answering: it dies on an object it cannot stream (``Unreadable``, with
        what it said), or it was killed from outside (``_Killed``: ask again)."""
        proc = self._proc
        said, code = "", None
        if proc is not None:
            try:
                code = proc.wait(timeout=10)
            except TimeoutExpired:
                proc.kill()
            said = self._stderr()
        self.close()
        if code is not None and code < 0:
            return _Killed()
        if code == 129 and "batch-command" in said:  # git before 2.36 does not know it
            return GitTooOld()
        return Unreadable(_last_lines(said) or f"git cat-file stopped at {name}")


def _last_lines(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return "; ".join(lines[-2:])[:300]
