"""``git.walk.log_scan``'s two ways — filtered by C git (``--grep``, counted by a parallel
``rev-list --count``) and listed (every commit printed, filtered here) — give one answer, and
it is the oracle's: every commit of ``git rev-list`` counted, and exactly those whose message
as ``git log`` shows it contains ``-job-id`` in any ASCII case, on a history built to be
awkward: merges with claims on the side branch, claims in odd cases, messages in ISO-8859-1
(git re-encodes it) and UTF-16 (git reads it only to its first NUL), a message that opens
with a blank line, an empty message, a message that is a commit id, the needle only in a
subject."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import git

from gitpub.git.repo import Repository
from gitpub.git.walk import log_scan

TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
WHO = "author A <a@example.com> 1700000000 +0000\ncommitter A <a@example.com> 1700000000 +0000\n"


def raw_commit(repo: Path, parents: list[str], message: bytes, encoding: str | None = None,
               when: int = 0) -> str:
    head = f"tree {TREE}\n" + "".join(f"parent {p}\n" for p in parents)
    head += WHO.replace("1700000000", str(1700000000 + when))
    if encoding:
        head += f"encoding {encoding}\n"
    data = head.encode() + b"\n" + message
    return subprocess.run(["git", "hash-object", "-w", "--literally", "-t", "commit",
                           "--stdin"], cwd=repo, input=data, capture_output=True,
                          check=True).stdout.decode().strip()


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("scan")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "hash-object", "-w", "-t", "tree", "--stdin"], cwd=repo,
                   input=b"", check=True, capture_output=True)
    c: dict[str, str] = {}
    c["root"] = raw_commit(repo, [], b"Initial\n")
    c["plain"] = raw_commit(repo, [c["root"]], b"Nothing here\n", when=1)
    c["upper"] = raw_commit(repo, [c["plain"]], b"T\n\nBLOG-JOB-ID: x\n", when=2)
    c["side"] = raw_commit(repo, [c["root"]], b"S\n\nEvil-Job-Id: y\n", when=3)
    c["merge"] = raw_commit(repo, [c["upper"], c["side"]], b"Merge\n", when=4)
    c["latin1"] = raw_commit(repo, [c["merge"]], "Café\n\nBlog-Job-Id: z\n".encode("latin-1"),
                             "ISO-8859-1", when=5)
    c["utf16"] = raw_commit(repo, [c["latin1"]], "U\n\nBlog-Job-Id: w\n".encode("utf-16"),
                            "UTF-16", when=6)
    c["blank"] = raw_commit(repo, [c["utf16"]], b"\nblog-job-id: v\n", when=7)
    c["empty"] = raw_commit(repo, [c["blank"]], b"", when=8)
    c["sha"] = raw_commit(repo, [c["empty"]], c["root"].encode(), when=9)
    c["subject"] = raw_commit(repo, [c["sha"]], b"About the -Job-Id trailer\n", when=10)
    c["tip"] = raw_commit(repo, [c["subject"]], b"Done\n", when=11)
    return repo, c


def oracle(repo: Path, revs: list[str]) -> tuple[int, set[str]]:
    count = int(git(repo, "rev-list", "--count", *revs, "--").strip())
    out = subprocess.run(["git", "log", "-z", "--format=%H%x00%B", *revs, "--"], cwd=repo,
                         capture_output=True, check=True).stdout.split(b"\0")
    found = {out[i].decode() for i in range(0, len(out) - 1, 2)
             if b"-job-id" in out[i + 1].lower()}
    return count, found


@pytest.mark.parametrize("case", ["whole", "since-merge", "two-tips"])
def test_filtered_and_listed_walks_agree_with_git(history: tuple[Path, dict[str, str]],
                                                  case: str) -> None:
    repo, c = history
    tips, excludes = {"whole": ([c["tip"]], []),
                      "since-merge": ([c["tip"]], [c["merge"]]),
                      "two-tips": ([c["tip"], c["side"]], [c["plain"]])}[case]
    count, expected = oracle(repo, [*tips, *[f"^{x}" for x in excludes]])
    with Repository.discover(repo) as r:
        filtered = log_scan(r, tips, excludes)
        listed = log_scan(r, tips, excludes, listed=True)
    assert filtered.count == listed.count == count
    assert {sha for sha, _ in filtered.candidates} == expected
    assert filtered.candidates == listed.candidates
    walked = set(git(repo, "rev-list", *tips, *[f"^{x}" for x in excludes]).split())
    assert all(listed.has(sha) == (sha in walked) for sha in c.values())
    if case == "whole":  # every shape above that mentions a job id is a candidate; git reads
        # a UTF-16 message only up to its first NUL (the BOM's), so it claims nothing there
        names = {k for k, v in c.items() if v in expected}
        assert names == {"upper", "side", "latin1", "blank", "subject"}


def test_a_counted_walk_cannot_say_what_it_walked(history: tuple[Path, dict[str, str]]
                                                  ) -> None:
    repo, c = history
    with Repository.discover(repo) as r:
        scan = log_scan(r, [c["tip"]], [])
        assert log_scan(r, [c["tip"]], [], counted=False).candidates == scan.candidates
    with pytest.raises(ValueError):
        scan.has(c["root"])
