"""``cli.fast``: a confirm command line read without click reads as click reads it.

The fast path takes only command lines click would read the same way and leaves every other to
click; these tests hold its tables equal to click's definitions and its readings equal to
click's, and run one confirm both ways.
"""

from __future__ import annotations

import io
import os
import sys

import click
import pytest
from conftest import Site

from gitpub.cli import fast
from gitpub.cli.main import cli, main

CONFIRM = cli.commands["confirm"]


def test_the_tables_are_clicks() -> None:
    assert tuple(sorted(cli.commands)) == fast.COMMANDS
    options = [p for p in CONFIRM.params if isinstance(p, click.Option)]
    valued = {o.opts[0]: o.name for o in options if not o.is_flag}
    flags = {o.opts[0]: o.name for o in options if o.is_flag and o.expose_value}
    assert all(len(o.opts) == 1 and not o.secondary_opts for o in options)
    assert valued == fast.VALUED
    assert flags == fast.FLAGS
    assert {o.opts[0] for o in options if not o.expose_value} == set(fast.COMMON)
    assert not [p for p in CONFIRM.params if not isinstance(p, click.Option)]


def _click_reads(args: list[str]) -> tuple[list[str], dict[str, object]] | None:
    """The ``-C`` paths and confirm's parameters as click reads ``args`` (None: an error)."""
    try:
        with cli.make_context("git-pub", list(args), obj=None) as ctx:
            paths = list(ctx.params["paths"])
            # the command and its words (click 8.5 keeps the command apart, 9 will not)
            rest = [*getattr(ctx, "_protected_args", ()), *ctx.args]
            if not rest or rest[0] != "confirm":
                return None
            with CONFIRM.make_context("confirm", rest[1:], parent=ctx) as sub:
                return paths, dict(sub.params)
    except (click.ClickException, click.exceptions.Exit):
        return None


READ = [
    ["confirm"],
    ["confirm", "--json"],
    ["--json", "confirm"],
    ["-C", "repo", "confirm", "--no-push-notes"],
    ["-C", "a", "-C", "b", "--debug", "confirm", "--json", "--debug"],
    ["confirm", "--remote", "up", "--branch", "main", "--anchor", "/ci/anchor.json"],
    ["confirm", "--remote=up", "--branch=release/1.x", "--no-anchor", "--first-run"],
    ["confirm", "--range", "v1..v2", "--no-push-notes", "--json"],
    ["confirm", "--accept", "abc123", "--reason", "looked at it: fine"],
    ["confirm", "--reason=a=b", "--accept=abc"],
    ["confirm", "--anchor", ""],
    ["-C", "", "confirm"],
]
LEFT_TO_CLICK = [
    [], ["status"], ["confirm", "-h"], ["confirm", "--help"], ["-h", "confirm"],
    ["--version", "confirm"], ["confirm", "--bogus"], ["confirm", "extra"],
    ["confirm", "--remote"], ["confirm", "--remote", "--json"], ["confirm", "--remote=-x"],
    ["confirm", "--remote="], ["confirm", "--remote", "a", "--remote", "b"],
    ["confirm", "--no-anchor", "--no-anchor"], ["confirm", "--json=1"],
    ["confirm", "--no-anchor=yes"], ["-C"], ["-C", "-x", "confirm"], ["-Crepo", "confirm"],
    ["confirm", "-C", "repo"], ["confirm", "--"], ["--", "confirm"], ["confirm", "--rem", "x"],
    ["--json"], ["confirm", "--reason", "-"],
]


@pytest.mark.parametrize("args", READ)
def test_fast_reads_as_click_reads(args: list[str]) -> None:
    read = fast.parse_confirm(args, {})
    assert read is not None
    expected = _click_reads(args)
    assert expected is not None
    paths, params = expected
    assert read.paths == paths
    ours = {name: read.options.get(name, False if name in fast.FLAGS.values() else None)
            for name in params}
    assert ours == params
    assert set(read.options) <= set(params)


@pytest.mark.parametrize("args", LEFT_TO_CLICK)
def test_anything_else_is_left_to_click(args: list[str]) -> None:
    assert fast.parse_confirm(args, {}) is None


def test_a_completion_request_is_left_to_click() -> None:
    assert fast.parse_confirm(["confirm"], {fast.COMPLETE_VAR: "bash_complete"}) is None


def _call(args: list[str], *, use_fast: bool) -> tuple[int, str, str]:
    old = sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    sys.stdout, sys.stderr = out, err
    try:
        code = main(args, fast=use_fast)
    finally:
        sys.stdout, sys.stderr = old
    return code, out.getvalue(), err.getvalue()


def test_one_confirm_both_ways(site: Site) -> None:
    """The same run, the same report, the same exit, the same working directory after."""
    site.git("push", "-q", "origin", "HEAD:main")
    cwd = os.getcwd()
    for extra in ([], ["--json"]):
        args = ["-C", str(site.path), "confirm", "--no-push-notes", "--no-anchor", *extra]
        by_click = _call(args, use_fast=False)
        by_fast = _call(args, use_fast=True)
        assert by_fast == by_click
        assert by_fast[0] == 0, by_fast
        assert os.getcwd() == cwd
    bad = ["-C", str(site.path / "nonexistent"), "confirm", "--json"]
    assert _call(bad, use_fast=True) == _call(bad, use_fast=False)
    wrong = ["-C", str(site.path), "confirm", "--remote", "no..such"]
    assert _call(wrong, use_fast=True) == _call(wrong, use_fast=False)
    assert _call(wrong, use_fast=True)[0] == 2


def test_the_executable_reads_confirm_without_click(site: Site) -> None:
    """``python -m gitpub … confirm`` never imports click (what the fast path is for)."""
    import subprocess

    code = ("import sys\nfrom gitpub.cli.entry import main\nrc = main()\n"
            "assert 'click' not in sys.modules, 'click was imported'\nraise SystemExit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", code, "-C", str(site.path), "confirm",
                           "--no-push-notes", "--no-anchor", "--json"],
                          capture_output=True, text=True, env=site.env)
    assert proc.returncode == 0, proc.stderr
    assert '"checked"' in proc.stdout
