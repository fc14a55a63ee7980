"""Network fault injection against real git: a ``git daemon`` and a TCP proxy that misbehaves.

``GitDaemon`` serves a directory of bare repositories over ``git://`` on 127.0.0.1 (pushes
enabled). ``DropReplyProxy`` sits between a git client and the daemon and, depending on its
``mode``, forwards faithfully, refuses connections, swallows them without ever answering, or
-- the interesting one -- lets a push through but drops the server's reply, so that the remote
applies the ref update while the pushing client sees the connection die with no report-status.

Stdlib only, no mocks: every byte the client sees comes from a real ``git receive-pack`` /
``git upload-pack``. Everything binds 127.0.0.1 on a free port, so tests using these tools can
run in parallel (``pytest -n``).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal, Self, get_args

HOST = "127.0.0.1"

Mode = Literal["pass", "drop_push_reply", "drop_branch_push_reply", "refuse", "blackhole"]
MODES: tuple[str, ...] = get_args(Mode)

RECEIVE_PACK = "git-receive-pack"
UPLOAD_PACK = "git-upload-pack"


def free_port(host: str = HOST) -> int:
    """A port that was free a moment ago (bind port 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def can_connect(host: str, port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _abort(sock: socket.socket) -> None:
    """Close ``sock`` abruptly: SO_LINGER 0 makes the kernel send RST instead of FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()


# --------------------------------------------------------------------------------------------
# git daemon


class GitDaemonError(RuntimeError):
    pass


class GitDaemon:
    """``git daemon`` serving ``base_path`` at ``git://127.0.0.1:PORT/`` with pushes enabled.

    Use as a context manager; ``url(name)`` is the URL of ``base_path / name``. The daemon runs
    in its own session (process group); leaving the context terminates the whole group (the
    daemon and any per-connection children) and reaps it.
    """

    def __init__(self, base_path: Path | str, *, env: Mapping[str, str] | None = None,
                 start_timeout: float = 10.0, attempts: int = 5) -> None:
        self.base_path = Path(base_path).resolve()
        self.host = HOST
        self.port = 0
        self.env = dict(env) if env is not None else None
        self.start_timeout = start_timeout
        self.attempts = attempts
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None

    # -- public

    def url(self, name: str) -> str:
        return f"git://{self.host}:{self.port}/{name.lstrip('/')}"

    def log(self) -> str:
        """The daemon's ``--verbose`` log so far (for assertion messages)."""
        if self._log_path is None or not self._log_path.exists():
            return ""
        return self._log_path.read_text("utf-8", "replace")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> Self:
        if self.proc is not None:
            raise GitDaemonError("git daemon already started")
        if not self.base_path.is_dir():
            raise GitDaemonError(f"base path {self.base_path} is not a directory")
        failures: list[str] = []
        for _ in range(self.attempts):
            port = free_port(self.host)
            outcome = self._try_start(port)
            if outcome is None:
                self.port = port
                return self
            failures.append(f"port {port}: {outcome}")
            if "bind" not in outcome and "listen sockets" not in outcome:
                break
        raise GitDaemonError("git daemon did not start:\n" + "\n".join(failures))

    def stop(self) -> None:
        self._kill()
        if self._log_path is not None:
            with contextlib.suppress(OSError):
                self._log_path.unlink()
            self._log_path = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- internals

    def _try_start(self, port: int) -> str | None:
        """Start on ``port``; None when it is serving, else why it failed (daemon reaped)."""
        fd, log_name = tempfile.mkstemp(prefix="git-daemon-", suffix=".log")
        if self._log_path is not None:
            with contextlib.suppress(OSError):
                self._log_path.unlink()
        self._log_path = Path(log_name)
        argv = [
            "git", "daemon",
            f"--base-path={self.base_path}",
            "--export-all",
            "--enable=receive-pack",
            "--reuseaddr",
            "--informative-errors",
            "--verbose",
            "--log-destination=stderr",
            f"--listen={self.host}",
            f"--port={port}",
        ]
        try:
            proc = subprocess.Popen(argv, cwd=self.base_path, env=self.env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=fd, start_new_session=True)
        finally:
            os.close(fd)
        self.proc = proc
        deadline = time.monotonic() + self.start_timeout
        # "Ready to rumble" is logged once *this* daemon holds its listening socket, so a
        # connect that succeeds after it cannot have reached someone else's server on the port.
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                why = self.log().strip() or f"exited with {proc.returncode}"
                self._kill()
                return why
            if "Ready to rumble" in self.log() and can_connect(self.host, port):
                return None
            time.sleep(0.02)
        why = f"not accepting connections after {self.start_timeout} s: {self.log().strip()}"
        self._kill()
        return why

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            _terminate_group(proc)


def _terminate_group(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM the process group led by ``proc`` (started with start_new_session), then reap.

    The leader is not reaped until its group has been signalled, so its pid (the group id)
    cannot have been reused by anyone else when we signal the group.
    """
    if proc.returncode is not None:
        return
    pgid = proc.pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    exited = False
    while time.monotonic() < deadline:
        # WNOWAIT: learn that the leader exited without reaping it (the group id stays ours).
        info = os.waitid(os.P_PID, pgid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is not None:
            exited = True
            break
        time.sleep(0.01)
    # Stragglers (per-connection children that ignored SIGTERM) and a leader that hung on.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    proc.wait(timeout=None if exited else grace)


# --------------------------------------------------------------------------------------------
# The proxy


class _ClientStream:
    """Follows the client→server byte stream of one git:// connection, as far as needed.

    First the request pkt-line (``git-receive-pack /repo.git\\0host=...\\0``) names the
    service. For a push, the command pkt-lines follow, ended by a flush (``0000``), then the
    pack (``PACK...``) unless there is nothing to send. ``commands_done`` becomes true when
    the client has finished its commands: nothing the server sends after that point can be
    anything but its reply to the push. ``commands`` counts the command pkt-lines (none when
    ``git push`` found everything up to date: it then sends a lone flush and hangs up).
    """

    def __init__(self) -> None:
        self.service: str | None = None
        self.request_done = False
        self.commands_done = False
        self.commands = 0
        self.refs: list[str] = []  # the refs the push updates, from its command pkt-lines
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        if self.commands_done or (self.request_done and self.service != RECEIVE_PACK):
            return
        self._buf += data
        if not self.request_done:
            length = self._pkt_len()
            if length is None:
                return
            if length < 4:  # not a request: let it through untouched
                self._finish_request(None, 0)
                return
            if len(self._buf) < length:
                return
            payload = bytes(self._buf[4:length])
            service = payload.split(b" ", 1)[0].split(b"\0", 1)[0].decode("ascii", "replace")
            self._finish_request(service, length)
            if service != RECEIVE_PACK:
                return
        while len(self._buf) >= 4:
            head = bytes(self._buf[:4])
            if head == b"0000" or head == b"PACK":
                self._finish_commands()
                return
            length = self._pkt_len()
            if length is None or length < 4:
                # Not a pkt-line (or a v2 delimiter): whatever it is, the commands are over.
                self._finish_commands()
                return
            if len(self._buf) < length:
                return
            command = bytes(self._buf[4:length]).split(b"\0", 1)[0].split(b" ")
            if len(command) >= 3:
                self.refs.append(command[2].strip().decode("utf-8", "replace"))
            del self._buf[:length]
            self.commands += 1

    def _pkt_len(self) -> int | None:
        if len(self._buf) < 4:
            return None
        try:
            return int(bytes(self._buf[:4]), 16)
        except ValueError:
            return -1

    def _finish_request(self, service: str | None, length: int) -> None:
        self.service = service
        self.request_done = True
        del self._buf[:length]
        if service != RECEIVE_PACK:
            self._buf.clear()

    def _finish_commands(self) -> None:
        self.commands_done = True
        self._buf.clear()


class DropReplyProxy:
    """A TCP proxy on 127.0.0.1 in front of a git daemon, with switchable faults.

    ``mode`` (read when a connection is accepted; may be changed at any time):

    * ``"pass"``: forward both ways.
    * ``"drop_push_reply"``: fetches pass. For a push (``git-receive-pack`` request) forward
      the ref advertisement and everything the client sends; once the client has sent its
      commands (and so its pack follows), swallow everything the server sends, wait until the
      server closes (it has applied the update and sent its report), then reset the client
      connection. The client gets no report-status although the remote took the push.
      (A push with nothing to send -- a lone flush -- gets no reply anyway and is not counted.)
    * ``"drop_branch_push_reply"``: the same, only for pushes that update a branch
      (``refs/heads/…``): a push of gitpub's job state alone gets its reply.
    * ``"refuse"``: accept and reset at once, before anything is sent.
    * ``"blackhole"``: accept and read, never answer; connections close on ``close()``.

    Counters: ``connections``, ``pushes_seen``, ``branch_pushes_seen`` (pushes updating a
    branch), ``fetches_seen``, ``replies_dropped`` (push replies swallowed), ``bytes_dropped``.
    """

    def __init__(self, upstream_port: int, *, upstream_host: str = HOST, mode: Mode = "pass",
                 io_timeout: float = 30.0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = HOST
        self.io_timeout = io_timeout
        self.mode = mode
        self.connections = 0
        self.pushes_seen = 0
        self.branch_pushes_seen = 0  # pushes that update a branch (not only refs/pub/...)
        self.fetches_seen = 0
        self.replies_dropped = 0
        self.bytes_dropped = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._socks: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self._listener.bind((self.host, 0))
            self._listener.listen(64)
            self._listener.settimeout(0.05)
        except OSError:
            self._listener.close()
            raise
        self.port: int = self._listener.getsockname()[1]
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"netfaults-proxy-{self.port}", daemon=True)
        self._started = False

    # -- public

    @property
    def mode(self) -> Mode:
        return self._mode

    @mode.setter
    def mode(self, value: Mode) -> None:
        if value not in MODES:
            raise ValueError(f"unknown proxy mode {value!r}; one of {MODES}")
        self._mode = value

    def url(self, name: str) -> str:
        return f"git://{self.host}:{self.port}/{name.lstrip('/')}"

    def start(self) -> Self:
        if not self._started:
            self._started = True
            self._accept_thread.start()
        return self

    def close(self, join_timeout: float = 2.0) -> None:
        """Stop accepting, close every connection, join the threads (bounded)."""
        self._stop.set()
        if self._started:
            self._accept_thread.join(join_timeout)
        _close(self._listener)
        deadline = time.monotonic() + join_timeout
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            socks = list(self._socks)
            self._socks.clear()
        for s in socks:
            _close(s)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- internals

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.add(sock)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.discard(sock)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._count("connections")
            mode = self.mode
            if mode == "refuse":
                _abort(client)
                continue
            client.settimeout(self.io_timeout)
            self._track(client)
            target = self._blackhole if mode == "blackhole" else self._forward
            t = threading.Thread(target=target, args=(client, mode), daemon=True,
                                 name=f"netfaults-conn-{self.port}")
            with self._lock:
                self._threads = [x for x in self._threads if x.is_alive()]
                self._threads.append(t)
            t.start()

    def _note_service(self, stream: _ClientStream, known: bool) -> None:
        if not known and stream.request_done:
            if stream.service == RECEIVE_PACK:
                self._count("pushes_seen")
            elif stream.service == UPLOAD_PACK:
                self._count("fetches_seen")

    def _blackhole(self, client: socket.socket, mode: Mode) -> None:
        stream = _ClientStream()
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ)
        try:
            while not self._stop.is_set():
                if not sel.select(0.05):
                    continue
                data = client.recv(65536)
                if not data:
                    break
                known = stream.request_done
                stream.feed(data)
                self._note_service(stream, known)
        except OSError:
            pass
        finally:
            sel.close()
            self._untrack(client)
            _close(client)

    def _forward(self, client: socket.socket, mode: Mode) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            self._untrack(client)
            _abort(client)
            return
        upstream.settimeout(self.io_timeout)
        self._track(upstream)
        stream = _ClientStream()
        dropping = False
        counted_branch = False
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ)
        sel.register(upstream, selectors.EVENT_READ)
        client_open = upstream_open = True
        abort_client = False
        try:
            while (client_open or upstream_open) and not self._stop.is_set():
                for key, _ in sel.select(0.05):
                    if key.fileobj is client:
                        data = client.recv(65536)
                        if not data:
                            client_open = False
                            sel.unregister(client)
                            with contextlib.suppress(OSError):
                                upstream.shutdown(socket.SHUT_WR)
                            continue
                        known = stream.request_done
                        stream.feed(data)
                        self._note_service(stream, known)
                        # Decide *before* the server can see the end of the commands: all it
                        # sends from then on is its answer to the push.
                        if (mode in ("drop_push_reply", "drop_branch_push_reply")
                                and stream.service == RECEIVE_PACK
                                and stream.commands_done and stream.commands > 0
                                and (mode == "drop_push_reply" or any(
                                    r.startswith("refs/heads/") for r in stream.refs))):
                            dropping = True
                        if (stream.service == RECEIVE_PACK and stream.commands_done
                                and not counted_branch and any(
                                    r.startswith("refs/heads/") for r in stream.refs)):
                            counted_branch = True
                            self._count("branch_pushes_seen")
                        upstream.sendall(data)
                    else:
                        data = upstream.recv(65536)
                        if not data:
                            upstream_open = False
                            sel.unregister(upstream)
                            if dropping:
                                # The server is done: the update is applied. Now hang up.
                                self._count("replies_dropped")
                                abort_client = True
                                return
                            with contextlib.suppress(OSError):
                                client.shutdown(socket.SHUT_WR)
                            continue
                        if dropping:
                            self._count("bytes_dropped", len(data))
                            continue
                        client.sendall(data)
        except OSError:
            abort_client = True
        finally:
            sel.close()
            self._untrack(client)
            self._untrack(upstream)
            _close(upstream)
            if abort_client:
                _abort(client)
            else:
                _close(client)


# --------------------------------------------------------------------------------------------
# Running git with a hard time limit


@dataclass
class Finished:
    argv: list[str]
    code: int | None  # None when killed on timeout
    out: str
    err: str
    elapsed: float
    timed_out: bool

    def describe(self) -> str:
        what = "timed out" if self.timed_out else f"exited {self.code}"
        return (f"{' '.join(self.argv)} {what} after {self.elapsed:.2f} s\n"
                f"stdout: {self.out!r}\nstderr: {self.err!r}")


def run_bounded(argv: Sequence[str], *, cwd: Path | str | None = None,
                env: Mapping[str, str] | None = None, timeout: float = 10.0) -> Finished:
    """Run ``argv`` in its own process group; on timeout kill the whole group.

    (``subprocess.run(timeout=...)`` kills only the direct child and can then wait forever
    for grandchildren that hold its pipes.)
    """
    start = time.monotonic()
    proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env) if env is not None else None,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return Finished(list(argv), None if timed_out else proc.returncode,
                    out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                    time.monotonic() - start, timed_out)
