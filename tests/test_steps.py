"""Unit tests of ``gitpub.steps``: commands in scratch directories, timeouts, the temp-file guard.

Every test runs real subprocesses (``sh``), in a scratch root under ``tmp_path``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gitpub.config.model import Command
from gitpub.runtime.steps import OUTPUT_LIMIT, Scratch, StepResult, run

# A GitHub-shaped token built at run time, so the literal never sits in this file.
TOKEN = "ghp_" + "A1b2C3d4" * 4 + "E5f6"


def sh(script: str, timeout: float = 10.0) -> Command:
    return Command(name="step", argv=("sh", "-c", script), timeout=timeout)


@pytest.fixture
def scratch(tmp_path: Path) -> Scratch:
    return Scratch(tmp_path / "scratch-root", "job-step")


def run_in(scratch: Scratch, script: str, *, inputs: dict[str, bytes] | None = None,
           declared: frozenset[str] = frozenset(), timeout: float = 10.0,
           stdin: bytes = b"", env: dict[str, str] | None = None) -> StepResult:
    with scratch:
        for rel, data in (inputs or {}).items():
            scratch.put(rel, data)
        return run(sh(script, timeout), scratch, stdin=stdin, env=env, declared=declared)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_gone(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return not alive(pid)


def read_pid(path: Path) -> int:
    return int(path.read_text().strip())


# -- running -------------------------------------------------------------------------------

def test_success_gets_stdin_env_and_a_private_cwd(scratch: Scratch, tmp_path: Path) -> None:
    report = tmp_path / "report"
    script = f'cat > "{report}"; pwd >> "{report}"; echo "$TMPDIR" >> "{report}"; ' \
             f'echo "$GITPUB_OUTPUT" >> "{report}"; echo "$EXTRA" >> "{report}"; echo hello'
    result = run_in(scratch, script, stdin=b"input line\n", env={"EXTRA": "extra-value"})
    assert result.ok and result.returncode == 0
    assert result.stdout == b"hello\n"
    assert not result.timed_out and result.start_error is None and result.stray == ()
    lines = report.read_text().splitlines()
    assert lines[0] == "input line"
    assert Path(lines[1]).resolve() == scratch.path.resolve()
    assert Path(lines[2]).resolve() == (scratch.path / "tmp").resolve()
    assert Path(lines[3]).resolve() == (scratch.path / "out").resolve()
    assert lines[4] == "extra-value"


def test_scratch_is_removed_on_exit_even_after_an_error(tmp_path: Path) -> None:
    s = Scratch(tmp_path / "root", "lbl")
    with pytest.raises(RuntimeError), s:
        s.put("files/a.md", b"x")
        (s.path / "tmp" / "junk").write_text("junk")
        raise RuntimeError("boom")
    assert not s.path.exists()
    assert list((tmp_path / "root").iterdir()) == []


def test_nonzero_exit_is_not_ok_and_describes_its_output(scratch: Scratch) -> None:
    result = run_in(scratch, "echo out-text; echo err-text >&2; exit 3")
    assert not result.ok
    assert result.returncode == 3
    text = result.describe()
    assert "exit status 3" in text and "out-text" in text and "err-text" in text


def test_describe_never_repeats_a_secret(scratch: Scratch) -> None:
    result = run_in(scratch, f"echo 'auth failed for {TOKEN}' >&2; exit 1")
    assert TOKEN.encode() not in result.stderr  # sanitized as soon as it is captured
    assert TOKEN not in result.describe()
    assert "auth failed" in result.describe()


def test_describe_does_not_leak_a_secret_cut_by_truncation(scratch: Scratch) -> None:
    """The output tail is cut to 2000 characters: the cut must not leave part of a secret
    behind that the sanitizer no longer recognises (sanitize first, then truncate)."""
    filler = "x" * (2000 - 1 - 24)  # the last 2000 characters hold the token's last 24
    result = run_in(scratch, f"printf '%s %s' '{TOKEN}' '{filler}' >&2; exit 1")
    text = result.describe()
    leaked = TOKEN[-24:] in text
    assert not leaked, f"part of the token survives: {text[:60]!r}..."


def test_command_that_cannot_start(scratch: Scratch) -> None:
    with scratch:
        result = run(Command("draft", ("/nonexistent/gitpub-no-such-program",), 5.0), scratch)
    assert result.start_error is not None
    assert "cannot run" in result.start_error
    assert result.returncode is None and not result.ok
    assert result.describe() == result.start_error


def test_output_is_truncated_to_the_limit(scratch: Scratch) -> None:
    n = OUTPUT_LIMIT + 5000
    result = run_in(scratch, f"head -c {n} /dev/zero | tr '\\0' o; "
                             f"head -c {n} /dev/zero | tr '\\0' e >&2")
    assert result.ok
    assert result.stdout == b"o" * OUTPUT_LIMIT
    assert result.stderr == b"e" * OUTPUT_LIMIT


# -- timeouts and process groups -----------------------------------------------------------

def test_timeout_kills_the_whole_process_group(scratch: Scratch, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    result = run_in(scratch, f'sleep 30 >/dev/null 2>&1 & echo $! > "{pidfile}"; sleep 30',
                    timeout=0.5)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.returncode is None and not result.ok
    assert result.describe() == "timed out"
    assert elapsed < 10
    assert wait_gone(read_pid(pidfile)), "the background child survived the timeout"


def test_timeout_with_a_child_holding_the_pipes(scratch: Scratch, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    result = run_in(scratch, f'sleep 30 & echo $! > "{pidfile}"; echo partial; sleep 30',
                    timeout=0.5)
    assert time.monotonic() - started < 10
    assert result.timed_out
    assert result.stdout == b"partial\n"
    assert wait_gone(read_pid(pidfile))


def test_children_left_behind_after_a_normal_exit_are_killed(
        scratch: Scratch, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    result = run_in(scratch, f'sleep 30 >/dev/null 2>&1 & echo $! > "{pidfile}"; exit 0')
    assert result.ok
    assert wait_gone(read_pid(pidfile)), "a daemon the step left behind is still running"


def test_timeout_kills_a_process_that_left_the_group(scratch: Scratch, tmp_path: Path) -> None:
    """`setsid` puts the child in a session of its own: the process group kill misses it."""
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    result = run_in(scratch, f'setsid sleep 60 & echo $! > "{pidfile}"; sleep 60', timeout=1)
    assert result.timed_out
    assert time.monotonic() - started < 30, "the timeout waited for the setsid child"
    assert wait_gone(read_pid(pidfile)), "the setsid child survived the timeout"


def test_a_step_done_while_a_setsid_leftover_holds_its_pipes(scratch: Scratch,
                                                            tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    result = run_in(scratch, f'setsid sleep 60 & echo $! > "{pidfile}"; echo done', timeout=50)
    assert result.ok and result.stdout == b"done\n"
    assert time.monotonic() - started < 30, "waited for a leftover instead of the step"
    assert wait_gone(read_pid(pidfile))


def test_a_double_forked_daemon_in_its_own_session_is_killed(scratch: Scratch,
                                                            tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = (f"setsid sh -c 'sleep 60 & echo $! > \"{pidfile}\"; wait' "
              ">/dev/null 2>&1 </dev/null & sleep 0.3; exit 0")
    result = run_in(scratch, script)
    assert result.ok
    assert wait_gone(read_pid(pidfile)), "the daemon's own child survived"


# -- the temp-file guard -------------------------------------------------------------------

def test_declared_outputs_are_collected_with_their_modes(scratch: Scratch) -> None:
    result = run_in(
        scratch,
        'mkdir -p out/posts out/bin && printf "# A\\n" > out/posts/a.md && '
        'printf "#!/bin/sh\\n" > out/bin/run.sh && chmod 755 out/bin/run.sh',
        declared=frozenset({"posts/a.md", "bin/run.sh"}))
    assert result.ok, result.describe()
    assert result.outputs == {"posts/a.md": (0o100644, b"# A\n"),
                              "bin/run.sh": (0o100755, b"#!/bin/sh\n")}


def test_unchanged_inputs_pass(scratch: Scratch) -> None:
    result = run_in(scratch, "cat files/posts/a.md > /dev/null",
                    inputs={"files/posts/a.md": b"# A\n"})
    assert result.ok and result.stray == ()


def test_guard_reports_a_modified_input(scratch: Scratch) -> None:
    result = run_in(scratch, "echo more >> files/posts/a.md",
                    inputs={"files/posts/a.md": b"# A\n"})
    assert result.returncode == 0 and not result.ok
    assert result.stray == ("files/posts/a.md (modified)",)
    assert "files/posts/a.md (modified)" in result.describe()


def test_guard_reports_a_deleted_input(scratch: Scratch) -> None:
    result = run_in(scratch, "rm files/posts/a.md", inputs={"files/posts/a.md": b"# A\n"})
    assert not result.ok
    assert result.stray == ("files/posts/a.md (deleted or replaced)",)


def test_guard_reports_an_input_replaced_by_a_directory(scratch: Scratch) -> None:
    result = run_in(scratch, "rm source && mkdir source", inputs={"source": b"text\n"})
    assert not result.ok, "an input replaced by a directory went unnoticed"
    assert any(s.startswith("source") for s in result.stray)


def test_guard_reports_stray_files_in_tmp_and_cwd(scratch: Scratch) -> None:
    result = run_in(scratch, 'echo x > "$TMPDIR/cache.bin"; mkdir -p tmp/a/b; '
                             'echo y > tmp/a/b/deep.txt; echo z > leftover.log')
    assert not result.ok
    assert result.stray == ("leftover.log", "tmp/a/b/deep.txt", "tmp/cache.bin")
    assert "tmp/cache.bin" in result.describe()


def test_guard_reports_undeclared_outputs(scratch: Scratch) -> None:
    result = run_in(scratch, "mkdir -p out/posts && echo a > out/posts/a.md && "
                             "echo b > out/posts/extra.md",
                    declared=frozenset({"posts/a.md"}))
    assert not result.ok
    assert result.stray == ("out/posts/extra.md",)
    assert set(result.outputs) == {"posts/a.md"}


def test_guard_reports_a_symlink_to_a_file(scratch: Scratch) -> None:
    result = run_in(scratch, "ln -s /etc/hostname tmp/link")
    assert not result.ok
    assert result.stray == ("tmp/link",)


def test_guard_refuses_a_symlink_as_a_declared_output(scratch: Scratch) -> None:
    result = run_in(scratch, "mkdir -p out/posts && ln -s /etc/hostname out/posts/a.md",
                    declared=frozenset({"posts/a.md"}))
    assert not result.ok
    assert result.stray == ("out/posts/a.md",)
    assert result.outputs == {}


def test_guard_reports_a_dangling_symlink(scratch: Scratch) -> None:
    result = run_in(scratch, "ln -s /nonexistent/target tmp/dangling")
    assert result.stray == ("tmp/dangling",)


def test_guard_reports_a_symlink_to_a_directory(scratch: Scratch) -> None:
    result = run_in(scratch, "ln -s / tmp/rootlink")
    assert not result.ok, "a symlink to a directory left in the scratch dir went unnoticed"
    assert result.stray == ("tmp/rootlink",)


def test_guard_reports_special_files(scratch: Scratch) -> None:
    result = run_in(scratch, "mkfifo tmp/pipe")
    assert result.stray == ("tmp/pipe",)


def test_timed_out_step_is_not_ok_even_without_stray_files(scratch: Scratch) -> None:
    result = run_in(scratch, "sleep 5", timeout=0.2)
    assert not result.ok and result.timed_out


def test_inputs_keep_their_mode(scratch: Scratch) -> None:
    with scratch:
        path = scratch.put("files/x.sh", b"#!/bin/sh\n", mode=0o755)
        assert os.stat(path).st_mode & 0o777 == 0o755
        assert scratch.guard(frozenset()) == ((), {})
