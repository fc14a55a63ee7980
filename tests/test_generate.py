"""The man page and the completions are generated from the click definitions: the shipped files
match the generator, the man page names every command and option, and `git pub --help` (git's
`git help pub` → `man git-pub`) opens it from an installed gitpub — the editable install too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import click
import pytest
from conftest import Site

from gitpub.cli.generate import PACKAGE, SHIPPED, main, stale


def test_the_shipped_files_are_what_the_click_definitions_generate() -> None:
    assert stale() == [], "run: python -m gitpub.cli.generate --write"
    assert main(["--check"]) == 0


def _walk(command: click.Command, path: tuple[str, ...]) -> Iterator[
        tuple[tuple[str, ...], click.Command]]:
    if command.hidden:
        return
    yield path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            sub = command.get_command(click.Context(command), name)
            if sub is not None:
                yield from _walk(sub, (*path, name))


def roff(text: str) -> str:
    return text.replace("-", "\\-")


def test_the_man_page_names_every_command_and_option() -> None:
    from gitpub.cli.main import cli

    page = (PACKAGE / "man" / "git-pub.1").read_text(encoding="utf-8")
    seen = 0
    for path, command in _walk(cli, ()):
        if path and not isinstance(command, click.Group):
            assert f'.SS "{roff("git pub " + " ".join(path))}"' in page, path
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                for name in (*param.opts, *param.secondary_opts):
                    assert f"\\fB{roff(name)}\\fR" in page, (path, name)
                    seen += 1
    assert seen > 20  # the walk saw the options: the test can fail


def test_a_stale_file_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SHIPPED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PACKAGE / name, tmp_path / name)
    monkeypatch.setattr("gitpub.cli.generate.PACKAGE", tmp_path)
    assert stale() == []
    page = tmp_path / "man" / "git-pub.1"
    page.write_text(page.read_text().replace("create\\-branch", "make\\-branch"))
    assert stale() == ["man/git-pub.1"]
    assert main(["--write"]) == 0 and stale() == []


def installed(name: str) -> Path:
    """Where the installed gitpub distribution put one of its data files."""
    found = [f.locate() for dist in metadata.distributions(name="gitpub")
             for f in dist.files or [] if str(f).endswith(name)]  # not a stray egg-info
    assert found, f"{name} is not installed with gitpub (reinstall: pip install -e .)"
    return Path(found[0]).resolve()


def test_the_installed_man_page_is_the_shipped_one() -> None:
    page = installed("share/man/man1/git-pub.1")
    assert page.read_text() == (PACKAGE / "man" / "git-pub.1").read_text(), \
        "the installed copy is stale: reinstall (pip install -e .)"


@pytest.mark.skipif(shutil.which("man") is None, reason="needs man (Debian: man-db)")
def test_git_pub_help_opens_the_man_page(site: Site) -> None:
    """With the installation's bin/ on PATH (as docs/install.md says), and no MANPATH at all."""
    page = installed("share/man/man1/git-pub.1")
    bin_dir = page.parents[3] / "bin"
    assert (bin_dir / "git-pub").exists()
    env = {k: v for k, v in site.env.items() if k != "MANPATH"} | {
        "PATH": f"{bin_dir}:{os.environ['PATH']}", "MANPAGER": "cat", "PAGER": "cat",
        "MANWIDTH": "100"}
    proc = subprocess.run(["git", "pub", "--help"], cwd=site.path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "git-pub - crash-safe publishing" in proc.stdout
    assert "--create-branch" in proc.stdout


def test_help_of_the_executable_is_usage() -> None:
    proc = subprocess.run([sys.executable, "-m", "gitpub", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "Usage: git-pub" in proc.stdout
