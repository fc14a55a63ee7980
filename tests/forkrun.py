"""``git pub ARGS`` in a process of its own, forked from the test process instead of started.

``python -m gitpub`` pays an interpreter start-up and gitpub's imports at every call (a few
hundred ms on a loaded 2-core machine, hundreds of calls per run). A forked copy of the test
process, gitpub already imported, is a process of its own at a few ms: ``GITPUB_CRASH_AT``'s
SIGKILL kills it alone, it has its own environment, cwd, standard streams (files, read back
after it ends), exit code (a signal's death is ``-N``, as ``subprocess`` reports it), and its
own copy of every module's state.

What the child starts from is what a fresh ``python -m gitpub`` starts from: gitpub's
per-process state emptied (``fresh_state``: also what ``Site.run_here`` resets), the test's
monkeypatches undone (a ``Clock``'s ``time.time`` included), pytest's hooks on logging,
warnings, exceptions and signals put back to an interpreter's defaults, new ``sys.std*``
objects over fds 0/1/2 (none of the parent's, whose locks another thread may hold), the
garbage collector's view frozen (no finalizer of the test process's objects runs in the child).
It ends with ``os._exit`` whatever happens: no atexit handler of the test process runs twice.

A ``sitecustomize`` on the command's ``PYTHONPATH`` (another host, a clock) is run in the
child (``plan``). What needs a real new interpreter stays on ``subprocess``: other ``PYTHON*``
variables or locale, a ``PYTHONPATH`` directory with modules in it. A child stopped at
``GITPUB_PAUSE_AT`` is resumed from outside as a started one.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import importlib
import importlib.util
import io
import locale
import logging
import os
import pkgutil
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

#: The test process's active ``monkeypatch`` fixtures (conftest registers them): undone in a
#: child, as a new interpreter never saw them.
ACTIVE_PATCHES: list[Any] = []

#: Python's warning filters in a fresh interpreter (no -W, no -X dev), first match wins.
_DEFAULT_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, None),
    ("ignore", PendingDeprecationWarning, None),
    ("ignore", ImportWarning, None),
    ("ignore", ResourceWarning, None),
)
#: The warnings module's own printer (pytest's ``catch_warnings`` swaps in a recorder).
_SHOW_WARNING = warnings._showwarnmsg_impl  # type: ignore[attr-defined]
_MAIN = os.path.join(os.path.dirname(os.path.abspath(
    importlib.util.find_spec("gitpub").origin or "")), "__main__.py")  # type: ignore[union-attr]
#: The environment this process started with (its interpreter's settings).
_STARTED = dict(os.environ)
#: The directory holding ``gitpub/`` (on the tests' ``PYTHONPATH``: imported from here too).
_ROOT = os.path.realpath(os.path.dirname(os.path.dirname(_MAIN)))
_imported = False
#: ``GITPUB_TEST_FORK=0``: every command through ``python -m gitpub`` (to compare, or to rule
#: the fork out).
ENABLED = os.environ.get("GITPUB_TEST_FORK", "1") != "0"


def fresh_state() -> None:
    """gitpub's per-process state as a new process has it, for the environment now in
    ``os.environ``: injected-fault counts, remembered secrets, font memos, git's path (looked
    up again on the ``PATH``), and the crash point inside dulwich's object writes (installed
    at import when the environment asks for it: here, if it asks now and no import did)."""
    from dulwich.file import _GitFile

    from gitpub.core import crashpoints, sanitize
    from gitpub.fonts import subset
    from gitpub.git import run as git_run
    from gitpub.git import writing

    if _GitFile.close.__module__ != writing.__name__:
        writing._object_crash_points()
    crashpoints._counts.clear()
    crashpoints._fail_counts.clear()
    sanitize._KNOWN.clear()
    subset._INDEX_MEMO.clear()
    subset._STORE_MEMO.clear()
    git_run._found = None


def plan(env: Mapping[str, str]) -> list[str] | None:
    """How a command run in ``env`` can be a forked child of this process: the directories a
    new interpreter would add to ``sys.path`` whose ``sitecustomize`` it would run (another
    host, a clock: the first one's, run in the child), or None when the interpreter must start
    anew (``subprocess``): other ``PYTHON*`` variables or locale than this process started
    with, or a ``PYTHONPATH`` directory with more in it than a ``sitecustomize``."""
    if not ENABLED or env.get("LC_ALL") != "C.UTF-8":
        return None
    # PYTHONDONTWRITEBYTECODE says only whether a new interpreter writes the .pyc of what it
    # imports (conftest removes it for the processes it starts, after this process started
    # with it: a run without xdist would otherwise start every command anew)
    python = {k for k in (*env, *_STARTED) if k.startswith("PYTHON")} - {
        "PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE"}
    if any(env.get(k) != _STARTED.get(k) for k in python):
        return None
    extra = []
    for entry in env.get("PYTHONPATH", "").split(os.pathsep):
        where = os.path.realpath(entry or os.getcwd())
        if where == _ROOT or where in extra:
            continue
        try:
            names = set(os.listdir(where)) - {"__pycache__"}
        except OSError:
            continue  # not a directory: nothing to import from it
        if "sitecustomize.py" not in names or any(
                n.endswith((".py", ".pyc", ".so", ".pth")) or os.path.isdir(os.path.join(where, n))
                for n in names - {"sitecustomize.py"}):
            return None
        extra.append(where)
    return extra


def _import_gitpub() -> None:
    """Every gitpub module, once, in the test process: children do not import them each."""
    global _imported
    if _imported:
        return
    import gitpub

    for module in pkgutil.walk_packages(gitpub.__path__, "gitpub."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    _imported = True


class Child:
    """``gitpub.cli.main.main(argv)`` in a forked child with environment ``env`` and standard
    input ``data`` (None: this process's), ``paths`` (``plan``) on its ``sys.path`` and the
    first one's ``sitecustomize`` run, its stdout and stderr kept in files: as much of
    ``subprocess.Popen(..., stdout=PIPE, stderr=PIPE)`` as the tests use (``pid``, ``poll``,
    ``wait``, ``communicate``, ``send_signal``, ``kill``, ``returncode``)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], data: bytes | None,
                 paths: Sequence[str] = ()) -> None:
        _import_gitpub()
        self.args = ["python", "-m", "gitpub", *argv]
        self.returncode: int | None = None
        # The child's stdout and stderr, read once it has ended (closed with this object).
        self._out = tempfile.TemporaryFile()  # noqa: SIM115
        self._err = tempfile.TemporaryFile()  # noqa: SIM115
        with tempfile.TemporaryFile() as given:
            given.write(data or b"")
            given.flush()
            given.seek(0)
            self.pid = os.fork()
            if self.pid == 0:  # the child: never returns
                _child(list(argv), dict(env), list(paths),
                       given.fileno() if data is not None else None,
                       self._out.fileno(), self._err.fileno())
        self._done = os.pidfd_open(self.pid)  # readable once the child has ended

    def poll(self) -> int | None:
        return self.wait(0) if select.select([self._done], [], [], 0)[0] else None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._done], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            os.close(self._done)
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[bytes, bytes]:
        self.wait(timeout)
        found = []
        for stream in (self._out, self._err):
            stream.seek(0)
            found.append(stream.read())
        return found[0], found[1]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __del__(self) -> None:
        if self.returncode is None:
            os.close(self._done)
        self._out.close()
        self._err.close()


def run(argv: Sequence[str], env: Mapping[str, str], data: bytes | None, timeout: float,
        paths: Sequence[str] = ()) -> tuple[int, bytes, bytes]:
    """As ``subprocess.run(..., capture_output=True, timeout=timeout)``: (exit code, stdout,
    stderr); ``subprocess.TimeoutExpired`` after ``timeout`` s, the child killed."""
    child = Child(argv, env, data, paths)
    try:
        out, err = child.communicate(timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        raise
    assert child.returncode is not None
    return child.returncode, out, err


def _child(argv: list[str], env: dict[str, str], paths: list[str], stdin: int | None,
           out: int, err: int) -> None:
    code = 70
    try:
        gc.freeze()  # the parent's objects: not collected (nor finalized) here
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                    signal.SIGUSR2, signal.SIGALRM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        faulthandler.disable()
        if stdin is not None:
            os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        _drop_inherited()
        cwd = os.getcwd()
        for patch in reversed(ACTIVE_PATCHES):
            patch.undo()
        os.chdir(cwd)  # a process started now starts where the test process is
        os.environ.clear()
        os.environ.update(env)
        time.tzset()
        with contextlib.suppress(locale.Error):
            locale.setlocale(locale.LC_CTYPE, "")
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(
            io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
        sys.stderr = sys.__stderr__ = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
            errors="backslashreplace", line_buffering=True)
        sys.excepthook = sys.__excepthook__
        sys.unraisablehook = sys.__unraisablehook__
        threading.excepthook = threading.__excepthook__
        warnings.resetwarnings()
        for action, category, module in reversed(_DEFAULT_FILTERS):
            if module is None:
                warnings.simplefilter(action, category)  # type: ignore[arg-type]
            else:
                warnings.filterwarnings(action, category=category, module=module)  # type: ignore[arg-type]
        warnings._showwarnmsg_impl = _SHOW_WARNING  # type: ignore[attr-defined]
        warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
        root = logging.getLogger()
        for handler in list(root.handlers):
            root.removeHandler(handler)
        root.setLevel(logging.WARNING)
        logging.disable(logging.NOTSET)
        sys.path[1:1] = paths
        if paths:
            _sitecustomize(os.path.join(paths[0], "sitecustomize.py"))
        fresh_state()
        sys.argv = [_MAIN, *argv]
        from gitpub.cli.entry import main  # as ``python -m gitpub`` and ``git-pub`` start

        try:
            code = main(argv)
        except SystemExit as e:
            code = _exit_code(e.code)
        except KeyboardInterrupt:
            traceback.print_exc()
            code = -signal.SIGINT
        except BaseException:  # as the interpreter: the traceback, status 1
            traceback.print_exc()
            code = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                code = 120  # as the interpreter, when the streams cannot be flushed at exit
    except BaseException:  # the harness itself failed: say so, and never go back to pytest
        try:
            os.write(2, traceback.format_exc().encode("utf-8", "replace"))
        finally:
            os._exit(70)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


def _drop_inherited() -> None:
    """Let go of every file the test process had open, but the standard streams: a process
    started anew has none of them. Kept, they would hold what the test process's own
    commands hold — a lock's ``flock`` (shared with every copy of its descriptor), the write
    end of a pipe to a git that waits for end of input, execnet's channel — for as long as
    this child lives, or is paused. Each is pointed at ``/dev/null`` rather than closed: its
    number stays taken, so no finalizer of an inherited object closes a file of the child's."""
    null = os.open(os.devnull, os.O_RDWR)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != null:
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
                os.dup2(null, fd, inheritable=False)
    os.close(null)


def _sitecustomize(path: str) -> None:
    """Run the ``sitecustomize`` at ``path`` as a new interpreter runs it, before gitpub is
    imported: what it replaces in ``time``, ``os`` or ``socket`` (a clock, a host name) is
    replaced too where gitpub's modules took the original at import (a default argument, a
    module global)."""
    import socket

    watched = (time, os, socket)
    before = [dict(vars(m)) for m in watched]
    spec = importlib.util.spec_from_file_location("sitecustomize", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)
    swapped = {id(old): vars(m)[name] for m, was in zip(watched, before, strict=True)
               for name, old in was.items() if vars(m).get(name, old) is not old}
    if not swapped:
        return
    for name, mod in list(sys.modules.items()):
        if not name.startswith("gitpub"):
            continue
        space = vars(mod)
        for key, value in list(space.items()):
            if id(value) in swapped:
                space[key] = swapped[id(value)]
            for function in _functions(value, name):
                if function.__defaults__:
                    function.__defaults__ = tuple(swapped.get(id(d), d)
                                                  for d in function.__defaults__)
                if function.__kwdefaults__:
                    function.__kwdefaults__ = {k: swapped.get(id(d), d)
                                               for k, d in function.__kwdefaults__.items()}


def _functions(value: object, module: str) -> list[Any]:
    """The functions defined in ``module`` that ``value`` is or holds (a class's methods)."""
    if isinstance(value, type) and value.__module__ == module:
        return [f for f in vars(value).values() if isinstance(f, types.FunctionType)]
    if isinstance(value, types.FunctionType) and value.__module__ == module:
        return [value]
    return []


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1
