"""Walking history as git's ``tips ^base`` does: in-process for short walks, with C git for long.

``walk_since`` searches the commits after a job's base for its publication (``verify.probe``):
the walk covers only what a rebase or another writer could have added since the base, so its
cost follows the number of commits since the job was prepared, not the length of the history.
``log_scan`` is one ``git log`` for walks that may be long (``git pub confirm`` in CI).
"""

from __future__ import annotations

import functools
import heapq
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import IO

from gitpub.core.errors import CorruptStateError
from gitpub.git.objects import is_object_id
from gitpub.git.repo import CommitInfo, Repository
from gitpub.git.run import Popen, spawn_git


def walk_since(
    repo: Repository, tips: Sequence[str], base: str | None
) -> Iterator[tuple[str, bytes]]:
    """(sha, message) of every commit reachable from ``tips`` and not from ``base`` — git's
    ``tips ^base`` — newest first.

    Two colours, as git's revision walk does: commits reached from ``base`` are uninteresting
    and so are all their ancestors; the walk goes newest-first by commit date and stops when
    only uninteresting commits are left to expand. So the work follows the commits since the
    base, not the length of the history. Dates only order the walk, they never cut it off: a
    commit with a skewed clock can make the walk expand a few commits more, never fewer (an
    extra commit searched for trailers is harmless; a missed one would not be).
    """
    infos: dict[str, CommitInfo | None] = {}

    def info(sha: str) -> CommitInfo | None:
        if sha not in infos:
            infos[sha] = repo.commit(sha) if repo.has_object(sha) else None  # shallow edge
        return infos[sha]

    uninteresting: set[str] = set()
    done: dict[str, bool] = {}  # sha -> the colour it was expanded with
    heap: list[tuple[int, str, bool]] = []
    pending = 0  # interesting entries in the heap

    def push(sha: str, boring: bool) -> None:
        nonlocal pending
        found = info(sha)
        if found is None or done.get(sha) in (True, boring):
            return
        if boring:
            uninteresting.add(sha)
        else:
            pending += 1
        heapq.heappush(heap, (-found.commit_time, sha, boring))

    if base is not None:
        push(base, True)
    for tip in tips:
        push(tip, False)
    while pending > 0 and heap:
        _, sha, boring = heapq.heappop(heap)
        if not boring:
            pending -= 1
        boring = boring or sha in uninteresting
        if done.get(sha) in (True, boring):
            continue
        done[sha] = boring
        found = info(sha)
        assert found is not None
        if not boring:
            yield sha, found.message
        for parent in found.parents:
            push(parent, boring)


#: What marks a commit whose message may claim a job, under any prefix (``<prefix>-Job-Id``).
JOB_ID_NEEDLE = b"-job-id"


class LogScan:
    """A ``git log`` walk: how many commits it covered, and the (sha, message) of those whose
    message contains the needle (ASCII case-insensitively, as ``bytes.lower`` compares),
    newest first (in git's walk order). ``listing`` is the listed walk's output
    (``log_scan(listed=True)``), kept as it came (to ask ``has``, rarely, without splitting
    100,000 records); None when C git only counted the commits."""

    __slots__ = ("candidates", "count", "listing")

    def __init__(self, count: int, candidates: tuple[tuple[str, bytes], ...],
                 listing: bytes | None = None) -> None:
        self.count, self.candidates, self.listing = count, candidates, listing

    def has(self, sha: str) -> bool:
        """Was ``sha`` walked? Only a listed walk can say."""
        if self.listing is None:
            raise ValueError("a counted walk does not list its commits")
        out, key = self.listing, sha.encode("ascii") + b"\0"
        pos = out.find(key)
        while pos >= 0:  # a commit id field: at a record's start (an even number of NULs)
            if (pos == 0 or out[pos - 1:pos] == b"\0") and out.count(b"\0", 0, pos) % 2 == 0:
                return True
            pos = out.find(key, pos + 1)
        return False


def log_scan(repo: Repository, tips: Sequence[str], excludes: Sequence[str],
             needle: bytes = JOB_ID_NEEDLE, *, listed: bool = False,
             counted: bool = True, meanwhile: Callable[[], object] | None = None) -> LogScan:
    """Every commit reachable from ``tips`` and not from ``excludes`` (``git log tips
    ^excludes``), walked by C git, so the cost is C git's walk (its object cache, the
    commit-graph when there is one), not a Python walk's. Two ways, one answer (the tests hold
    them to it):

    - *filtered* (the default): C git itself keeps only the commits whose message contains
      ``needle`` (``--grep`` with ``--fixed-strings --regexp-ignore-case`` under ``LC_ALL=C``:
      ASCII case folding, on the message as ``git log`` shows it — what ``%B`` prints), so
      only those messages cross the pipe; the count comes from a ``git rev-list --count`` of
      the same range run at the same time (``counted``), on the other core;
    - *listed*: one ``git log`` prints every commit (id and message) and the messages are
      filtered here; slower on a long walk, but it lists what was walked (``has``): a shallow
      clone needs that to see whether the walk reached its boundary.

    ``meanwhile``: the caller's work that needs no walk, run while C git walks.
    """
    revs = [*tips, *[f"^{x}" for x in excludes]]
    if listed:
        return _listed_scan(repo, revs, needle, meanwhile)
    return _filtered_scan(repo, revs, needle, counted, meanwhile)


#: The listed walk's record: the commit id, NUL, the message (``-z``: each record ends in NUL).
_RECORD = "%H%x00%B"


def _log_args(revs: Sequence[str], *extra: str) -> list[str]:
    """``git log`` of ``revs``, its records in UTF-8 whatever the configuration says: git
    re-encodes its whole output (ids and NULs too) to ``i18n.logOutputEncoding`` (by default
    ``i18n.commitEncoding``), and in UTF-16 no record would be read (nor a claim found)."""
    return ["-c", "log.showSignature=false", "-c", "i18n.logOutputEncoding=UTF-8", "log",
            "-z", "--no-notes", "--no-decorate", f"--format={_RECORD}", *extra, *revs, "--"]


def _scratch(repo: Repository) -> IO[bytes]:
    """A file for a git's output (its stdout: read at once, after — a pipe read 32 KiB at a
    time costs more than the walk's formatting for a long history), without a name: nothing
    is left behind when the process is killed while git walks (``O_TMPFILE`` on Linux, else
    unlinked at once), however long the listing."""
    repo.pub_dir.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryFile(dir=repo.pub_dir, prefix="log-", suffix=".tmp")


def _output(f: IO[bytes]) -> bytes:
    """All a git wrote to ``f`` (its stdout: the offset is shared, so read from the start)."""
    f.seek(0)
    return f.read()


def _records(out: bytes, needle: bytes) -> tuple[int, list[tuple[str, bytes]]]:
    """How many ``%H%x00%B`` records ``out`` holds (``-z``: NUL-separated), and the (sha,
    message) of those whose message contains ``needle`` (ASCII case-insensitively). The
    bytes are searched at once, not record by record: a long walk lists 100,000 of them."""
    if out and not out.endswith(b"\0"):
        out += b"\0"
    fields = out.count(b"\0")
    if fields % 2:
        raise CorruptStateError("git log printed a record without its message")
    found: dict[int, None] = {}
    for match in _folded(needle).finditer(out):
        found[out.rfind(b"\0", 0, match.start()) + 1] = None  # where that field starts
    records = []
    for start in found:
        sha = out[out.rfind(b"\0", 0, start - 1) + 1:start - 1] if start else b""
        if out[start - 1:start] != b"\0" or not _is_sha(sha):
            continue  # the needle in no message (it cannot be in a commit id)
        end = out.find(b"\0", start)
        records.append((sha.decode("ascii"), out[start:end]))
    return fields // 2, records


@functools.cache
def _folded(needle: bytes) -> re.Pattern[bytes]:
    """``needle`` in any ASCII case (a pattern: faster than lowering 7 MB, as ``bytes.lower``
    folds: ASCII letters only)."""
    return re.compile(b"".join(b"[" + bytes([c]).lower() + bytes([c]).upper() + b"]"
                               if bytes([c]).isalpha() else re.escape(bytes([c]))
                               for c in needle))


def _is_sha(data: bytes) -> bool:
    return is_object_id(data.decode("ascii", "replace"))


def _log_failed(stderr: bytes) -> CorruptStateError:
    return CorruptStateError("git log failed: "
                             + stderr.decode("utf-8", "replace").strip()[-300:])


def _listed_scan(repo: Repository, revs: Sequence[str], needle: bytes,
                 meanwhile: Callable[[], object] | None) -> LogScan:
    with _scratch(repo) as f:
        log = _spawned(repo, _log_args(revs), f, meanwhile)
        _, err = log.communicate()
        if log.returncode != 0:
            raise _log_failed(err)
        out = _output(f)
    count, candidates = _records(out, needle)
    return LogScan(count, tuple(candidates), out)


def _spawned(repo: Repository, args: Sequence[str], output: IO[bytes],
             meanwhile: Callable[[], object] | None) -> Popen[bytes]:
    """A git of ``args`` writing to ``output``, started, and ``meanwhile`` run while it works
    (work of the caller's that needs no walk); if ``meanwhile`` fails, the git is ended and
    waited for, and the error goes on."""
    proc = spawn_git(args, cwd=repo.work_tree or repo.git_dir, git_dir=repo.git_dir,
                     work_tree=repo.work_tree, stdout=output)
    try:
        if meanwhile is not None:
            meanwhile()
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return proc


def _filtered_scan(repo: Repository, revs: Sequence[str], needle: bytes,
                   counted: bool, meanwhile: Callable[[], object] | None) -> LogScan:
    grep = ["--regexp-ignore-case", "--fixed-strings",
            "--grep=" + needle.decode("ascii")]
    with _scratch(repo) as f:
        log = _spawned(repo, _log_args(revs, *grep), f, meanwhile)
        try:
            count = _count(repo, revs) if counted else 0
        finally:
            _, err = log.communicate()
        if log.returncode != 0:
            raise _log_failed(err)
        _, candidates = _records(_output(f), needle)  # git's folding: ours decides
    return LogScan(count, tuple(candidates))


def _count(repo: Repository, revs: Sequence[str]) -> int:
    proc = repo.git("rev-list", "--count", *revs, "--")
    text = proc.stdout.decode("ascii", "replace").strip()
    if proc.returncode != 0 or not text.isdigit():
        raise _log_failed(proc.stderr)
    return int(text)


def shallow_commits(repo: Repository) -> frozenset[str]:
    """The shallow boundary of a shallow clone (commits whose parents are not here)."""
    try:
        text = (repo.common_dir / "shallow").read_text(encoding="ascii")
    except FileNotFoundError:
        return frozenset()
    return frozenset(text.split())
