"""Shell completion for `git pub`, in real shells: bash with git's own completion (git calls
`_git_pub`), bash-completion's on-demand loader, and zsh's compsys through zsh's `_git`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import Site
from test_generate import installed

from gitpub.cli.generate import PACKAGE

GIT_COMPLETION = Path("/usr/share/bash-completion/completions/git")
BASH_COMPLETION = Path("/usr/share/bash-completion/bash_completion")
BASH = PACKAGE / "completion" / "git-pub"
ZSH = PACKAGE / "completion" / "_git-pub"

# Sets up what bash does on <TAB> for the line in $1, calls git's entry point, prints COMPREPLY.
COMPLETE = r"""
complete_line () {
  COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
  read -ra COMP_WORDS <<< "$COMP_LINE"
  [[ "$COMP_LINE" == *" " ]] && COMP_WORDS+=("")
  COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
  COMPREPLY=()
  __git_wrap__git_main
  printf '%s\n' "${COMPREPLY[@]}"
}
complete_line "$LINE"
"""


def bash(site: Site, setup: str, line: str, env: dict[str, str] | None = None) -> list[str]:
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", setup + COMPLETE],
                          cwd=site.path, env=site.env | {"LINE": line} | (env or {}),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [w.strip() for w in proc.stdout.splitlines() if w.strip()]


needs_git_completion = pytest.mark.skipif(not GIT_COMPLETION.exists(),
                                          reason="needs git's bash completion")
WITH_GIT = f"source {GIT_COMPLETION}\nsource {BASH}\n"


@needs_git_completion
def test_bash_completes_commands_options_and_jobs(site: Site) -> None:
    assert bash(site, WITH_GIT, "git pub pr") == ["prepare"]
    assert {"--key=", "--to=", "--push", "--json"} <= set(bash(site, WITH_GIT,
                                                               "git pub prepare --"))
    assert bash(site, WITH_GIT, "git pub push --cr") == ["--create-branch"]
    assert bash(site, WITH_GIT, "git pub hooks ") == ["install", "uninstall"]
    assert bash(site, WITH_GIT, "git pub hooks install --") == [
        "--hooks-path-ok", "--json", "--debug", "--help"]
    job = site.call("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-",
                    input="# A\n").json()["job_id"]
    assert bash(site, WITH_GIT, "git pub status ") == [job]
    assert bash(site, WITH_GIT, f"git pub log {job[:4]}") == [job]


@needs_git_completion
def test_without_our_file_git_offers_nothing(site: Site) -> None:
    """The control: the completions above come from the shipped file."""
    assert bash(site, f"source {GIT_COMPLETION}\n", "git pub pr") == []


@needs_git_completion
@pytest.mark.skipif(not BASH_COMPLETION.exists(), reason="needs bash-completion")
def test_bash_completion_loads_the_installed_file_on_demand(site: Site) -> None:
    share = installed("share/bash-completion/completions/git-pub").parents[2]
    setup = f"source {BASH_COMPLETION}\nsource {GIT_COMPLETION}\n"
    assert bash(site, setup, "git pub pr", {"XDG_DATA_DIRS": str(share)}) == ["prepare"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
@pytest.mark.parametrize(("line", "completed"), [
    ("git pub pr", "git pub prepare "),
    ("git pub prepare --pu", "git pub prepare --push "),
    ("git pub push --cr", "git pub push --create-branch "),
    ("git pub hooks ins", "git pub hooks install "),
    ("git pub hooks install --ho", "git pub hooks install --hooks-path-ok "),
    ("git-pub conf", "git-pub confirm "),
])
def test_zsh_completes_through_zshs_git(site: Site, tmp_path: Path, line: str,
                                        completed: str) -> None:
    def complete(fpath: Path) -> str:
        out = tmp_path / "buffer"
        for stale in (out, out.with_name("buffer.compinit"), out.with_name("buffer.bound")):
            stale.unlink(missing_ok=True)
        subprocess.run(["zsh", "-f", str(Path(__file__).with_name("zsh_complete.zsh")),
                        str(fpath), str(out), line], cwd=site.path, env=site.env,
                       timeout=60, check=True)
        return out.read_text().rstrip("\n")

    assert complete(ZSH.parent) == completed
    # the control: nothing completed without our file (zsh may show the line more than once)
    assert set(complete(tmp_path / "empty").splitlines()) == {line}
