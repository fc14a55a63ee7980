"""``git.walk.log_scan``'s two ways — filtered by C git (``--grep``, counted by a parallel
``rev-list --count``) and listed (every commit printed, filtered here) — give one answer, and
it is the oracle's: every commit of ``git rev-list`` counted, and exactly those whose message
as ``git log`` shows it contains ``-job-id`` in any ASCII case, on a history built to be
awkward: merges with claims on the side branch, claims in odd cases, messages in ISO-8859-1
(git re-encodes it) and UTF-16 (git reads it only to its first NUL), a message that opens
with a blank line, an empty message, a message that is a commit id, the needle only in a
subject. And the walk's hazards: a configuration that re-encodes git's output, messages that
look like records, a shallow boundary and grafts, a damaged history, the caller's work done
while git walks, a process killed while git walks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, git

from gitpub.core.errors import CorruptStateError
from gitpub.core.files import pub_dir
from gitpub.git.repo import Repository
from gitpub.git.walk import log_scan
from gitpub.proof.trailers import JOB_ID_NEEDLE as NEEDLE

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
        filtered = log_scan(r, tips, excludes, NEEDLE)
        listed = log_scan(r, tips, excludes, NEEDLE, listed=True)
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
        scan = log_scan(r, [c["tip"]], [], NEEDLE)
        assert log_scan(r, [c["tip"]], [], NEEDLE, counted=False).candidates == scan.candidates
    with pytest.raises(ValueError):
        scan.has(c["root"])


History = tuple[Path, dict[str, str]]


def chain(repo: Path, n: int) -> list[str]:
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "hash-object", "-w", "-t", "tree", "--stdin"], cwd=repo, input=b"",
                   check=True, capture_output=True)
    commits = [raw_commit(repo, [], b"Root\n")]
    for i in range(1, n):
        commits.append(raw_commit(repo, [commits[-1]], b"C%d\n\nBlog-Job-Id: j%d\n" % (i, i),
                                  when=i))
    return commits


def both_walks_are_gits(r: Repository, repo: Path, tips: list[str]) -> None:
    """The filtered and the listed walk of ``tips`` give the oracle's answer."""
    count, expected = oracle(repo, tips)
    walked = set(git(repo, "rev-list", *tips).split())
    every = git(repo, "rev-list", "--all").split()
    for listed in (False, True):
        scan = log_scan(r, tips, [], NEEDLE, listed=listed)
        assert scan.count == count, listed
        assert {sha for sha, _ in scan.candidates} == expected, listed
        assert len(scan.candidates) == len(expected), listed
        if listed:
            assert all(scan.has(sha) == (sha in walked) for sha in every)


@pytest.mark.parametrize("where", ["repo", "global"])
@pytest.mark.parametrize("key", ["i18n.logOutputEncoding", "i18n.commitEncoding"])
def test_an_output_encoding_of_the_configuration_blinds_no_walk(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, key: str) -> None:
    """git re-encodes its whole ``log`` output (ids and NULs too) to the configured output
    encoding: in UTF-16 the filtered walk found no claim at all (and said nothing), the
    listed one failed. Each walk reads git's output in the one encoding it parses."""
    repo = tmp_path / "r"
    tip = chain(repo, 8)[-1]
    count, expected = oracle(repo, [tip])
    if where == "repo":
        git(repo, "config", key, "UTF-16")
    else:
        (tmp_path / "global").write_text(f"[{key.split('.')[0]}]\n\t{key.split('.')[1]} = "
                                         "UTF-16\n", encoding="utf-8")
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "global"))
    with Repository.discover(repo) as r:
        for listed in (False, True):
            scan = log_scan(r, [tip], [], NEEDLE, listed=listed)
            assert scan.count == count, listed
            assert {sha for sha, _ in scan.candidates} == expected, listed
            assert all(m.startswith(b"C") for _, m in scan.candidates), listed  # as UTF-8


def test_messages_that_look_like_records_anywhere(tmp_path: Path) -> None:
    """Messages that look like records (``-`` or ``>`` and an id, a lone ``-``, NULs, an
    empty message), merges among them, and then a shallow boundary and grafts git honours:
    each walk's answer is git's."""
    repo = tmp_path / "r"
    commits = chain(repo, 2)
    hostile = [b"-", b"-\n", b">" + commits[0].encode(), b"-" + commits[1].encode() + b"\n",
               b"", b"x\0-" + commits[0].encode(), b"-\n\nBlog-Job-Id: m\n", b"\0\0",
               b">\n\nBlog-Job-Id: g\n"]
    for i, message in enumerate(hostile):
        parents = [commits[-1]] + ([commits[-3]] if i % 3 == 0 and len(commits) > 2 else [])
        commits.append(raw_commit(repo, parents, message, when=10 + i))
    tip = commits[-1]
    git(repo, "update-ref", "refs/heads/main", tip)  # (``has`` is asked of every commit)
    with Repository.discover(repo) as r:
        both_walks_are_gits(r, repo, [tip])
        (repo / ".git" / "shallow").write_text(commits[4] + "\n", encoding="ascii")
        both_walks_are_gits(r, repo, [tip])
        (repo / ".git" / "shallow").unlink()
        (repo / ".git" / "info").mkdir(exist_ok=True)
        (repo / ".git" / "info" / "grafts").write_text(f"{commits[6]} {commits[1]}\n",
                                                       encoding="ascii")
        both_walks_are_gits(r, repo, [tip])


def test_a_damaged_history_is_reported(tmp_path: Path) -> None:
    repo = tmp_path / "damaged"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "hash-object", "-w", "-t", "tree", "--stdin"], cwd=repo, input=b"",
                   check=True, capture_output=True)
    a = raw_commit(repo, [], b"A\n")
    b = raw_commit(repo, [a], b"B\n", when=1)
    tip = raw_commit(repo, [b], b"C\n", when=2)
    (repo / ".git/objects" / a[:2] / a[2:]).unlink()  # gone
    with Repository.discover(repo) as r:
        for listed in (False, True):
            with pytest.raises(CorruptStateError, match="git log failed"):
                log_scan(r, [tip], [], NEEDLE, listed=listed)


def children() -> set[int]:
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                found |= {int(p) for p in f.read().split()}
        except FileNotFoundError:  # a thread (of an earlier test) that ended meanwhile
            continue
    return found


def test_work_done_meanwhile_once_and_a_failure_ends_the_walk(history: History) -> None:
    repo, c = history
    calls: list[bool] = []
    with Repository.discover(repo) as r:
        before = children()
        for listed in (True, False):
            scan = log_scan(r, [c["tip"]], [c["root"]], NEEDLE, listed=listed,
                            meanwhile=lambda: calls.append(listed))  # noqa: B023
            assert scan.count == oracle(repo, [c["tip"], f"^{c['root']}"])[0]
        assert calls == [True, False]

        def fail() -> None:
            raise RuntimeError("meanwhile failed")

        for listed in (True, False):
            with pytest.raises(RuntimeError):
                log_scan(r, [c["tip"]], [], NEEDLE, listed=listed, meanwhile=fail)
        assert children() == before  # every git started was ended and waited for
        assert not list(pub_dir(r.common_dir).glob("log-*"))  # and its output file removed


_KILLED = """
import os, signal, sys
from pathlib import Path
from gitpub.git import walk
from gitpub.git.repo import Repository
from gitpub.proof.trailers import JOB_ID_NEEDLE
how = getattr(signal, sys.argv[3])
with Repository.discover(Path(sys.argv[1])) as r:
    walk.log_scan(r, [sys.argv[2]], [], JOB_ID_NEEDLE, listed=True,
                  meanwhile=lambda: os.kill(os.getpid(), how))
"""


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_a_walk_killed_while_git_walks_leaves_no_file(tmp_path: Path, how: str) -> None:
    """Killed while its git walks (``meanwhile`` kills the process: the git is started), a
    walk left its output file in ``.git/pub`` — as long as the history's listing — and
    nothing ever removed it."""
    repo = tmp_path / "r"
    tip = chain(repo, 6)[-1]
    proc = subprocess.run([sys.executable, "-c", _KILLED, str(repo), tip, how],
                          cwd=ROOT, capture_output=True, timeout=60)
    assert proc.returncode == -getattr(signal, how), proc.stderr
    pub = repo / ".git" / "pub"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and list(pub.glob("log-*")):
        time.sleep(0.05)  # (the orphaned git may still be writing)
    assert not os.listdir(pub)


# -- a long history walked as two halves at once (confirm's first run) --------------------------

def skewed(repo: Path) -> tuple[str, list[str]]:
    """A history with merges whose clocks go backwards here and there (git's walk of
    ``tip ^point`` may then show a commit the point reaches), and claims along the way; and a
    commit on another line of history (not the tip's)."""
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "hash-object", "-w", "-t", "tree", "--stdin"], cwd=repo, input=b"",
                   check=True, capture_output=True)
    commits = [raw_commit(repo, [], b"Root\n\nBlog-Job-Id: r\n")]
    for i in range(1, 40):
        when = -100 * i if i % 7 == 3 else i  # skew: older than its parents
        parents = [commits[-1]] + ([commits[-5]] if i % 6 == 0 else [])
        message = b"C%d\n" % i + (b"\nBlog-Job-Id: j%d\n" % i if i % 3 == 0 else b"")
        commits.append(raw_commit(repo, parents, message, when=when))
    other = raw_commit(repo, [commits[10]], b"Elsewhere\n\nBlog-Job-Id: e\n", when=99)
    return commits[-1], [*commits, other]


def test_a_split_walk_is_the_one_walk_whatever_the_point(tmp_path: Path) -> None:
    """Split at every commit of the history (and at one that is not in it, and at the tip):
    the count and the candidates are the one walk's, each commit counted once."""
    from gitpub.git.walk import split_scan

    repo = tmp_path / "r"
    tip, commits = skewed(repo)
    count, expected = oracle(repo, [tip])
    with Repository.discover(repo) as r:
        one = log_scan(r, [tip], [], NEEDLE, listed=True)
        assert one.count == count
        for point in commits:
            scan = split_scan(r, tip, point, NEEDLE)
            assert scan.count == count, point
            assert sorted(scan.candidates) == sorted(one.candidates), point
            assert {sha for sha, _ in scan.candidates} == expected, point


def test_a_split_walk_in_the_history_fixture(history: History) -> None:
    from gitpub.git.walk import split_scan

    repo, c = history
    count, expected = oracle(repo, [c["tip"]])
    with Repository.discover(repo) as r:
        for point in c.values():
            scan = split_scan(r, c["tip"], point, NEEDLE)
            assert scan.count == count and {s for s, _ in scan.candidates} == expected, point


def test_the_split_point_is_a_commit_of_the_packs(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Sampled from the packs' indexes: none in a short history (or with nothing packed); a
    commit otherwise (a damaged one in the packs passed over); and a walk given it is the one
    walk."""
    from gitpub.git import walk as W

    repo = tmp_path / "r"
    tip, commits = skewed(repo)
    git(repo, "update-ref", "refs/heads/main", tip)
    with Repository.discover(repo) as r:
        assert W.split_point(r, tip) is None  # nothing packed
        git(repo, "repack", "-adq")
        assert W.split_point(r, tip) is None  # packed, but short
        monkeypatch.setattr(W, "SPLIT_OBJECTS", 1)
        monkeypatch.setattr(W, "_load", lambda: 9999.0)
        assert W.split_point(r, tip) is None  # no idle core
        monkeypatch.setattr(W, "_load", lambda: 0.0)
        point = W.split_point(r, tip)
        assert point in commits and point != tip
        damaged = subprocess.run(["git", "hash-object", "-w", "--literally", "-t", "commit",
                                  "--stdin"], cwd=repo, input=b"no header\n",
                                 capture_output=True, check=True).stdout.decode().strip()
        subprocess.run(["git", "pack-objects", "-q", ".git/objects/pack/pack"], cwd=repo,
                       input=damaged.encode() + b"\n", capture_output=True, check=True)
        monkeypatch.setattr(W, "SAMPLE", 10_000)  # every object, the damaged one too
        assert W.split_point(r, tip) in commits
        count, expected = oracle(repo, [tip])
        scan = log_scan(r, [tip], [], NEEDLE, listed=True, split=point)
        assert scan.count == count and {s for s, _ in scan.candidates} == expected


def test_the_sample_is_the_packs_ids_and_git_says_which_are_commits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The split point's sample: object ids read evenly from the packs' indexes by dulwich,
    over two packs taken as one list (a sample as large as the packs is every object in
    them, each once), and their types as C git says them, in one batch — deltas too (the
    old reader of pack entries could type no delta)."""
    from gitpub.git import walk as W

    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    for i in range(40):
        (repo / "f.txt").write_text("line\n" * 50 + f"change {i}\n")
        (repo / f"g{i % 3}.txt").write_text(f"{i}\n")
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", f"commit {i}")
        if i == 25:
            git(repo, "repack", "-adfq", "--depth=10", "--window=50")
    git(repo, "repack", "-dq")  # a second pack: the commits since
    indexes = sorted((repo / ".git" / "objects" / "pack").glob("pack-*.idx"))
    assert len(indexes) == 2
    everything = git(repo, "cat-file", "--batch-all-objects",
                     "--batch-check=%(objectname) %(objecttype) %(deltabase)").split("\n")
    kinds = {line.split()[0]: line.split()[1] for line in everything if line}
    assert any(not line.endswith(" " + "0" * 40) for line in everything if line)  # deltas
    monkeypatch.setattr(W, "SAMPLE", len(kinds))
    with Repository.discover(repo) as r:
        sampled = W._sampled_ids(indexes, r.object_format.name)
        assert sorted(sampled) == sorted(kinds)
        assert r.object_kinds(sampled) == [kinds[sha] for sha in sampled]
        monkeypatch.setattr(W, "SAMPLE", 16)
        few = W._sampled_ids(indexes, r.object_format.name)
        assert len(few) == 16 == len(set(few)) and set(few) <= set(kinds)
        in_first = {line.split()[1] for line in git(repo, "show-index",
                                                    input=indexes[0].read_bytes()).splitlines()}
        assert 0 < len(set(few) & in_first) < 16  # spread over both packs


@pytest.mark.parametrize(("object_format", "index_version"),
                         [("sha1", "1"), ("sha1", "2,64"), ("sha256", "2"), ("sha256", "2,64")])
def test_a_split_point_in_either_hash_and_any_index_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, object_format: str,
        index_version: str) -> None:
    """SHA-1 and SHA-256 repositories get a split point from their packs' indexes, version 1
    (SHA-1 only) or 2, with all but the first offset in the large offsets' table (``2,64``);
    a walk given it is the one walk. An index dulwich cannot read is passed over, not an
    error."""
    from gitpub.git import walk as W

    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", f"--object-format={object_format}", str(repo))
    stream = "".join(f"commit refs/heads/main\ncommitter A <a@example.com> {1700000000 + i} "
                     f"+0000\ndata <<EOF\nC{i}\n" + ("\nBlog-Job-Id: j\n" if i % 4 == 0 else "")
                     + f"EOF\nM 100644 inline f{i % 5}.txt\ndata <<EOF\n{i}\nEOF\n\n"
                     for i in range(30))
    git(repo, "fast-import", "--quiet", input=stream.encode())
    git(repo, "repack", "-adq")
    (pack,) = (repo / ".git" / "objects" / "pack").glob("pack-*.pack")
    idx = pack.with_suffix(".idx")
    size = idx.stat().st_size
    idx.unlink()
    git(repo, "index-pack", f"--index-version={index_version}", "-o", str(idx), str(pack))
    grown = idx.stat().st_size - size  # version 1 has no CRCs; a large offset takes 8 more
    assert (grown > 0) - (grown < 0) == {"1": -1, "2": 0, "2,64": 1}[index_version]
    (repo / ".git" / "objects" / "pack" / "pack-0000.idx").write_bytes(b"\377tOc\0\0\0\7")
    tip = git(repo, "rev-parse", "main").strip()
    commits = git(repo, "rev-list", "main").split()
    monkeypatch.setattr(W, "SPLIT_OBJECTS", 1)
    monkeypatch.setattr(W, "_load", lambda: 0.0)
    with Repository.discover(repo) as r:
        assert r.object_format.name == object_format
        point = W.split_point(r, tip)
        assert point in commits and point != tip
        count, expected = oracle(repo, [tip])
        scan = log_scan(r, [tip], [], NEEDLE, listed=True, split=point)
        assert scan.count == count == 30 and {s for s, _ in scan.candidates} == expected


def test_a_commit_both_halves_show_is_counted_once(tmp_path: Path) -> None:
    """Clock skew that makes git's walk of ``tip ^point`` stop early and show a commit the
    point reaches (X: dated far ahead, below a long run of old commits under the point, whose
    other parent reaches the root at once): both halves show it; it is counted, and found,
    once."""
    from gitpub.git.walk import split_scan

    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "hash-object", "-w", "-t", "tree", "--stdin"], cwd=repo, input=b"",
                   check=True, capture_output=True)
    root = raw_commit(repo, [], b"root\n")
    x = raw_commit(repo, [root], b"X\n\nBlog-Job-Id: x\n", when=10000)
    run = [x]
    for i in range(20):
        run.append(raw_commit(repo, [run[-1]], b"q%d\n" % i, when=1 + i))
    other = raw_commit(repo, [root], b"R\n", when=40)
    point = raw_commit(repo, [run[-1], other], b"P\n", when=45)
    tip = raw_commit(repo, [raw_commit(repo, [point], b"A\n", when=50), x], b"M\n", when=60)
    shown = git(repo, "log", "--format=%H", tip, f"^{point}").split()
    assert x in shown  # git's walk shows it: the case this test is about
    count, expected = oracle(repo, [tip])
    with Repository.discover(repo) as r:
        scan = split_scan(r, tip, point, NEEDLE)
    assert scan.count == count
    assert sorted(sha for sha, _ in scan.candidates) == sorted(expected) == [x]
