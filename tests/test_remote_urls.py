"""A remote's URLs as gitpub reads them: from the configuration the command has read already,
where git's own answer cannot differ, else from ``git remote -v`` — either way what
``git remote get-url [--push]`` says."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gitpub.git.remote import Remote
from gitpub.git.repo import Repository


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


def _says(repo: Path, name: str) -> tuple[str, ...]:
    """The first fetch URL and the first push URL, as git says them."""
    return tuple(dict.fromkeys(_git(repo, "remote", "get-url", *extra, name).strip()
                               for extra in ((), ("--push",))))


@pytest.fixture
def repo(tmp_path: Path, hermetic: dict[str, str]) -> Path:
    path = tmp_path / "repo"
    _git(tmp_path, "init", "-q", str(path))
    return path


#: (configuration commands, whether the configuration alone answers)
CASES = {
    "plain": ([("remote", "add", "origin", "/srv/site.git")], True),
    "a push URL": ([("remote", "add", "origin", "/srv/site.git"),
                    ("config", "remote.origin.pushurl", "ssh://push.example/site.git")], True),
    "two URLs": ([("remote", "add", "origin", "/srv/a.git"),
                  ("config", "--add", "remote.origin.url", "/srv/b.git"),
                  ("config", "--add", "remote.origin.pushurl", "/srv/c.git"),
                  ("config", "--add", "remote.origin.pushurl", "/srv/d.git")], True),
    "a dotted name": ([("remote", "add", "my.up", "https://example.com/site.git")], True),
    "spaces": ([("config", "remote.origin.url", " /srv/with space.git ")], True),
    "insteadOf": ([("remote", "add", "origin", "gh:site.git"),
                   ("config", "url.https://example.com/.insteadOf", "gh:")], False),
    "pushInsteadOf": ([("remote", "add", "origin", "https://example.com/site.git"),
                       ("config", "url.ssh://example.com/.pushInsteadOf",
                        "https://example.com/")], False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_urls_are_what_git_says(repo: Path, case: str) -> None:
    commands, alone = CASES[case]
    for command in commands:
        _git(repo, *command)
    name = "my.up" if case == "a dotted name" else "origin"
    with Repository.discover(repo) as r:
        remote = Remote(r, name, "main")
        assert (remote._configured() is not None) == alone
        assert remote.urls() == _says(repo, name)


def test_what_the_configuration_cannot_answer_is_asked_of_git(repo: Path) -> None:
    _git(repo, "remote", "add", "origin", "/srv/site.git")
    _git(repo, "config", "remote.origin.partialclonefilter", "blob:none")
    with Repository.discover(repo) as r:
        assert Remote(r, "origin", "main")._configured() is None  # git prints the filter
    _git(repo, "config", "--unset", "remote.origin.partialclonefilter")
    (repo / ".git" / "remotes").mkdir(exist_ok=True)
    (repo / ".git" / "remotes" / "old").write_text("URL: /srv/old.git\n")
    with Repository.discover(repo) as r:
        assert Remote(r, "old", "main")._configured() is None  # git reads the file
        assert Remote(r, "origin", "main")._configured() == ("/srv/site.git",)
        assert Remote(r, "nosuch", "main").urls() is None
        assert Remote(r, "/srv/x.git", "main").urls() == ("/srv/x.git",)
