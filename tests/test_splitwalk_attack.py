"""Attacks on ``git.walk.split_scan`` (and the one walk it must equal): a configuration that
re-encodes git's output (``i18n.logOutputEncoding``/``i18n.commitEncoding`` UTF-16, in the
repository or in ``GIT_CONFIG_GLOBAL``) must not blind a walk to the claims in a history; a
confirm killed while its gits walk (SIGKILL, SIGTERM) leaves no output file behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, git
from test_logscan import raw_commit

from gitpub.git import walk
from gitpub.git.repo import Repository


def chain(repo: Path, n: int) -> list[str]:
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "hash-object", "-w", "-t", "tree", "--stdin"], cwd=repo, input=b"",
                   check=True, capture_output=True)
    commits = [raw_commit(repo, [], b"Root\n")]
    for i in range(1, n):
        commits.append(raw_commit(repo, [commits[-1]], b"C%d\n\nBlog-Job-Id: j%d\n" % (i, i),
                                  when=i))
    return commits


def oracle(repo: Path, tip: str) -> tuple[int, set[str]]:
    """C git's answer, its output in UTF-8 whatever the configuration says."""
    count = int(git(repo, "rev-list", "--count", tip).strip())
    out = subprocess.run(["git", "-c", "i18n.logOutputEncoding=UTF-8", "log", "-z",
                          "--format=%H%x00%B", tip, "--"], cwd=repo, capture_output=True,
                         check=True).stdout.split(b"\0")
    return count, {out[i].decode() for i in range(0, len(out) - 1, 2)
                   if b"-job-id" in out[i + 1].lower()}


@pytest.mark.parametrize("where", ["repo", "global"])
@pytest.mark.parametrize("key", ["i18n.logOutputEncoding", "i18n.commitEncoding"])
def test_an_output_encoding_of_the_configuration_blinds_no_walk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, key: str) -> None:
    """git re-encodes its whole ``log`` output (ids and NULs too) to the configured output
    encoding: in UTF-16 the filtered walk found no claim at all (and said nothing), the
    listed ones failed. Each walk reads git's output in the one encoding it parses."""
    repo = tmp_path / "r"
    commits = chain(repo, 8)
    tip = commits[-1]
    count, expected = oracle(repo, tip)
    if where == "repo":
        git(repo, "config", key, "UTF-16")
    else:
        (tmp_path / "global").write_text(f"[{key.split('.')[0]}]\n\t{key.split('.')[1]} = "
                                         "UTF-16\n", encoding="utf-8")
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "global"))
    with Repository.discover(repo) as r:
        scans = {"filtered": walk.log_scan(r, [tip], []),
                 "single": walk._single_scan(r, [tip], walk.JOB_ID_NEEDLE, None),
                 "split": walk.split_scan(r, tip, commits[3])}
    for name, scan in scans.items():
        assert scan.count == count, name
        assert {sha for sha, _ in scan.candidates} == expected, name
        assert all(m.startswith(b"C") for _, m in scan.candidates), name  # as UTF-8 shows it


_KILLED = """
import os, signal, sys
from pathlib import Path
from gitpub.git import walk
from gitpub.git.repo import Repository
how = getattr(signal, sys.argv[4])
with Repository.discover(Path(sys.argv[1])) as r:
    if sys.argv[3] == "-":
        walk._single_scan(r, [sys.argv[2]], walk.JOB_ID_NEEDLE,
                          lambda: os.kill(os.getpid(), how))
    else:
        walk.split_scan(r, sys.argv[2], sys.argv[3], meanwhile=lambda: os.kill(os.getpid(), how))
"""


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("way", ["split", "single"])
def test_a_walk_killed_while_git_walks_leaves_no_file(tmp_path: Path, how: str,
                                                      way: str) -> None:
    """Killed while its gits walk (``meanwhile`` kills the process: the gits are started),
    a walk left its output files in ``.git/pub`` — two for a split, each as long as the
    history's listing — and nothing ever removed them."""
    repo = tmp_path / "r"
    commits = chain(repo, 6)
    point = commits[2] if way == "split" else "-"
    proc = subprocess.run([sys.executable, "-c", _KILLED, str(repo), commits[-1], point, how],
                          cwd=ROOT, capture_output=True, timeout=60)
    assert proc.returncode == -getattr(signal, how), proc.stderr
    pub = repo / ".git" / "pub"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and list(pub.glob("log-*")):
        time.sleep(0.05)  # (the orphaned gits may still be writing)
    assert not os.listdir(pub)


def test_the_configuration_changes_are_read_whatever_the_output_encoding(
        tmp_path: Path) -> None:
    """confirm's other ``git log`` (the commits changing ``.gitpub.yaml``) printed its ids in
    UTF-16 under that configuration, and confirm died on a UnicodeDecodeError; and
    ``log.follow`` made it follow renames into the file."""
    from gitpub.verify import rules

    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "other.yaml").write_text("a: 0\n", encoding="utf-8")
    git(repo, "add", "other.yaml")
    git(repo, "commit", "-qm", "c0")
    start = git(repo, "rev-parse", "HEAD").strip()
    (repo / "other.yaml").write_text("a: 1\n", encoding="utf-8")
    git(repo, "commit", "-qam", "c1")
    git(repo, "mv", "other.yaml", ".gitpub.yaml")
    git(repo, "commit", "-qm", "c2")
    for i in (3, 4):
        (repo / ".gitpub.yaml").write_text(f"a: {i}\n", encoding="utf-8")
        git(repo, "commit", "-qam", f"c{i}")
    expected = git(repo, "log", "--format=%H", "--reverse", "HEAD", f"^{start}", "--",
                   ".gitpub.yaml").split()
    assert len(expected) == 3
    git(repo, "config", "i18n.logOutputEncoding", "UTF-16")
    git(repo, "config", "log.follow", "true")

    class Facts:  # only which blob is at a commit matters here: a different one at each
        @staticmethod
        def blob_at(commit: str) -> str:
            return commit

    with Repository.discover(repo) as r:
        assert rules._config_changes(r, Facts(), start, "HEAD") == expected  # type: ignore[arg-type]


def test_messages_that_look_like_marks_and_ids_anywhere(tmp_path: Path) -> None:
    """Messages that look like the first walk's marks or like records (``-`` or ``>`` and an
    id, a lone ``-``, NULs, an empty message) on every side of every split point — the last
    commit shown above the boundary among them — and grafts and a shallow boundary git
    honours: the split's answer is the one walk's, whatever the point."""
    from test_splitwalk import same_answer

    repo = tmp_path / "r"
    commits = chain(repo, 2)
    hostile = [b"-", b"-\n", b">" + commits[0].encode(), b"-" + commits[1].encode() + b"\n",
               b"", b"x\0-" + commits[0].encode(), b"-\n\nBlog-Job-Id: m\n", b"\0\0",
               b">\n\nBlog-Job-Id: g\n"]
    for i, message in enumerate(hostile):
        parents = [commits[-1]] + ([commits[-3]] if i % 3 == 0 and len(commits) > 2 else [])
        commits.append(raw_commit(repo, parents, message, when=10 + i))
    tip = commits[-1]
    git(repo, "update-ref", "refs/heads/main", tip)  # (``same_answer`` asks ``has`` of all)
    with Repository.discover(repo) as r:
        for point in commits[:-1]:
            same_answer(r, repo, tip, walk.split_scan(r, tip, point))
        (repo / ".git" / "shallow").write_text(commits[4] + "\n", encoding="ascii")
        for point in commits[:-1]:
            same_answer(r, repo, tip, walk.split_scan(r, tip, point))
        (repo / ".git" / "shallow").unlink()
        (repo / ".git" / "info").mkdir(exist_ok=True)
        (repo / ".git" / "info" / "grafts").write_text(f"{commits[6]} {commits[1]}\n",
                                                       encoding="ascii")
        for point in commits[:-1]:
            same_answer(r, repo, tip, walk.split_scan(r, tip, point))
        (repo / ".git" / "info" / "grafts").unlink()
