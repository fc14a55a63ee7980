"""``git pub confirm`` without click, without dulwich: CI's start-up (``cli.quick``).

Every plain form of ``confirm`` (errors included) is run both ways — the quick way
(``cli.entry``/``cli.quick``, what the ``git-pub`` executable takes) and the option parser
(``run_click``) — and must give the same exit code, stdout and stderr. A real process of the
plain form is checked to import neither click, nor dulwich (in a plain repository), nor
PyYAML nor the configuration's validator once the authentic ledger vouches for the file.
"""

from __future__ import annotations

import io
import shutil
from contextlib import chdir, redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from conftest import Site, git
from test_confirm import KEY, publish

from gitpub.cli import quick
from gitpub.cli.main import main as click_main
from gitpub.cli.main import run_click


def full_clone(site: Site, tmp_path: Path, name: str, remote: Path | None = None) -> Path:
    path = tmp_path / name
    git(tmp_path, "clone", "-q", (remote or site.remote).as_uri(), str(path))
    site.repos.append(path)
    return path


def both_ways(args: list[str], where: Path) -> list[tuple[int, str, str]]:
    runs = []
    for way in (click_main, run_click):  # main takes the quick way for the plain forms
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err), chdir(where):
            code = way(list(args))
        runs.append((code, out.getvalue(), err.getvalue()))
    return runs


PLAIN = [["confirm", "--no-push-notes"], ["--json", "confirm", "--no-push-notes"],
         ["confirm", "--json", "--range", "ROOT..main", "--no-push-notes"],
         ["--debug", "confirm", "--no-push-notes", "--range", "ROOT..", "--json"],
         ["-C", "CLONE", "confirm", "--no-push-notes", "--json"],
         ["confirm", "--range", "nosuch..main", "--no-push-notes"],
         ["confirm", "--json", "--range", "main", "--no-push-notes"],
         ["-C", "/no/such/dir", "--json", "confirm"]]


@pytest.mark.parametrize("args", PLAIN, ids=" ".join)
def test_the_quick_way_prints_what_click_prints(site: Site, tmp_path: Path, args: list[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    publish(site, 2)
    clone = full_clone(site, tmp_path, "ci")
    root = git(clone, "rev-list", "--max-parents=0", "HEAD").strip()
    args = [a.replace("ROOT", root).replace("CLONE", str(clone)) for a in args]
    assert quick.parse(args) is not None
    monkeypatch.setenv("GITPUB_CONFIRM_KEY", KEY)
    quick_run, click_run = both_ways(args, clone)
    assert quick_run == click_run
    assert quick_run[0] in (0, 1, 2), quick_run


def test_the_pushing_form_prints_what_click_prints(site: Site, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The default form pushes the notes: each way runs against its own copy of the remote,
    twice (the second run starts from the notes the first pushed, finds nothing new and pushes
    nothing)."""
    publish(site, 2)
    copy = tmp_path / "copy.git"
    shutil.copytree(site.remote, copy)
    monkeypatch.setenv("GITPUB_CONFIRM_KEY", KEY)
    for n in range(2):
        runs = []
        for way, remote in ((click_main, site.remote), (run_click, copy)):
            clone = full_clone(site, tmp_path, f"ci-{len(site.repos)}", remote)
            out, err = io.StringIO(), io.StringIO()
            with redirect_stdout(out), redirect_stderr(err), chdir(clone):
                code = way(["confirm", "--json"])
            runs.append((code, out.getvalue(), err.getvalue()))
        assert runs[0] == runs[1] and runs[0][0] == 0, runs
        assert ('"notes_pushed": true' in runs[0][1]) == (n == 0), runs[0]


@pytest.mark.parametrize("args", [
    ["confirm", "-h"], ["confirm", "--range"], ["confirm", "--range", "-x"],
    ["confirm", "--range=a..b"], ["confirm", "--range", "a..", "--range", "b.."],
    ["confirm", "x"], ["confirm", "--accept", "abc", "--reason", "r"], ["confirm", "--bogus"],
    ["confirm", "--"], ["--no-push-notes", "confirm"]])
def test_every_other_confirm_form_goes_to_click(args: list[str]) -> None:
    assert quick.parse(args) is None
