"""Walking history as git's ``tips ^base`` does: in-process for short walks, with C git for long.

``walk_since`` searches the commits after a job's base for its publication (``verify.probe``):
the walk covers only what a rebase or another writer could have added since the base, so its
cost follows the number of commits since the job was prepared, not the length of the history.
``log_scan`` is one ``git log`` for walks that may be long (``git pub confirm`` in CI).
"""

from __future__ import annotations

import functools
import heapq
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from gitpub.core.errors import CorruptStateError
from gitpub.git.objects import is_object_id
from gitpub.git.repo import CommitInfo, Repository
from gitpub.git.run import spawn_git

TYPE_CHECKING = False  # mypy treats this name as True
if TYPE_CHECKING:
    import subprocess
    from typing import IO


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
    newest first (in git's walk order; a split walk gives the newer part's before the
    older's). ``listing`` is the listed walk's output (``log_scan(listed=True)``), kept as it
    came (to ask ``has``, rarely, without splitting 100,000 records), or ``walked`` the ids a
    split walk covered (two disjoint sets); both None when C git only counted the commits."""

    __slots__ = ("candidates", "count", "listing", "walked")

    def __init__(self, count: int, candidates: tuple[tuple[str, bytes], ...],
                 listing: bytes | None = None,
                 walked: tuple[frozenset[bytes], ...] | None = None) -> None:
        self.count, self.candidates, self.listing = count, candidates, listing
        self.walked = walked

    def has(self, sha: str) -> bool:
        """Was ``sha`` walked? Only a listed walk can say."""
        if self.walked is not None:
            return any(sha.encode("ascii") in ids for ids in self.walked)
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
      clone needs that to see whether the walk reached its boundary. A whole long history
      (one tip, nothing excluded) is walked in two halves at once, on two cores
      (``split_scan``).

    ``meanwhile``: the caller's work that needs no walk, run while C git walks.
    """
    revs = [*tips, *[f"^{x}" for x in excludes]]
    if listed:
        return _listed_scan(repo, revs, needle, meanwhile)
    return _filtered_scan(repo, revs, needle, counted, meanwhile)


#: The listed walk's record: the commit id, NUL, the message (``-z``: each record ends in NUL).
_RECORD = "%H%x00%B"
#: The same with git's mark before the message: ``>`` for a commit shown, ``-`` for the
#: boundary.
_MARKED = "%H%x00%m%B"


def _log_args(revs: Sequence[str], *extra: str, fmt: str = _RECORD) -> list[str]:
    """``git log`` of ``revs``, its records in UTF-8 whatever the configuration says: git
    re-encodes its whole output (ids and NULs too) to ``i18n.logOutputEncoding`` (by default
    ``i18n.commitEncoding``), and in UTF-16 no record would be read (nor a claim found)."""
    return ["-c", "log.showSignature=false", "-c", "i18n.logOutputEncoding=UTF-8", "log",
            "-z", "--no-notes", "--no-decorate", f"--format={fmt}", *extra, *revs, "--"]


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
    if len(revs) == 1 and not revs[0].startswith("^"):  # a whole history: long, maybe
        point = split_point(repo, revs[0])
        if point is not None:
            return split_scan(repo, revs[0], point, needle, meanwhile)
    return _single_scan(repo, revs, needle, meanwhile)


def _single_scan(repo: Repository, revs: Sequence[str], needle: bytes,
                 meanwhile: Callable[[], object] | None) -> LogScan:
    with _scratch(repo) as f:
        (log,) = _spawned(repo, [(_log_args(revs), f)], meanwhile)
        _, err = log.communicate()
        if log.returncode != 0:
            raise _log_failed(err)
        out = _output(f)
    count, candidates = _records(out, needle)
    return LogScan(count, tuple(candidates), out)


def _spawned(repo: Repository, commands: Sequence[tuple[Sequence[str], IO[bytes]]],
             meanwhile: Callable[[], object] | None) -> list[subprocess.Popen[bytes]]:
    """The gits of ``commands`` (arguments, the file for the output) started at once, and
    ``meanwhile`` run while they work (work of the caller's that needs no walk); if starting
    one or ``meanwhile`` fails, those started are ended and waited for, and the error goes
    on."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        for args, output in commands:
            started.append(spawn_git(args, cwd=repo.work_tree or repo.git_dir,
                                     git_dir=repo.git_dir, work_tree=repo.work_tree,
                                     stdout=output))
        if meanwhile is not None:
            meanwhile()
    except BaseException:
        for proc in started:
            proc.kill()
            proc.communicate()
        raise
    return started


def _filtered_scan(repo: Repository, revs: Sequence[str], needle: bytes,
                   counted: bool, meanwhile: Callable[[], object] | None) -> LogScan:
    grep = ["--regexp-ignore-case", "--fixed-strings",
            "--grep=" + needle.decode("ascii")]
    with _scratch(repo) as f:
        (log,) = _spawned(repo, [(_log_args(revs, *grep), f)], meanwhile)
        try:
            count = _count(repo, revs) if counted else 0
        finally:
            _, err = log.communicate()
        if log.returncode != 0:
            raise _log_failed(err)
        _, candidates = _records(_output(f), needle)  # git's folding: ours decides
    return LogScan(count, tuple(candidates))


#: A listed walk of a whole history is split in two, walked by two gits at once
#: (``split_scan``), when the packs hold at least this many objects and there are two cores.
SPLIT_OBJECTS = 50_000
#: How many object ids the split point is chosen from (read from the packs' indexes).
SAMPLE = 128


def split_point(repo: Repository, tip: str) -> str | None:
    """A commit about halfway down ``tip``'s history, to split a long walk at; None when a
    split would not pay (a short history, one core). Chosen without a walk: of the commits
    among objects read evenly from the packs' indexes (sorted by id, so spread at random
    over the history), the one with the median commit time. A guess only: ``split_scan`` is
    right whatever commit it is given — one that is not in ``tip``'s history, or near either
    end, costs time, never a wrong answer."""
    return None  # the split walk is being removed (branch fastpath)


def split_scan(repo: Repository, tip: str, point: str, needle: bytes = JOB_ID_NEEDLE,
               meanwhile: Callable[[], object] | None = None) -> LogScan:
    """``tip``'s whole history (``git log tip``) as two walks at once, on two cores:
    ``tip ^point`` with its boundary, and ``point``. Their union is the history when ``point``
    is in it, and the first walk proves whether it is: ``point`` is then a parent of a commit
    that walk shows, so on its boundary. When it is not, the rest of the history is what that
    boundary reaches, walked after (nothing, when the point is on another line of history):
    a path down from the tip leaves the commits the first walk shows at a parent of one of
    them, which the point reaches — its boundary. (When it shows none, the point reaches the
    tip, and the one walk is made instead.)
    A commit both walks show — git's walk with a negative end may stop early on a history
    with clock skew, and show a commit the point reaches — is counted once. Whichever walk
    ends first is read while the other goes on. If either git fails, the one walk of
    ``tip`` decides (its answer, or its error): a split never fails where it would not.

    The first walk's records carry git's mark (``>`` shown, ``-`` boundary) before the
    message, where it costs nothing to leave (the ids stay whole, for the sets below). git
    prints the boundary after every commit shown; a boundary commit taken for a shown one
    would anyway be counted once, as the point reaches it."""
    with _scratch(repo) as nf, _scratch(repo) as of:
        walks = _spawned(repo, [
            (_log_args([tip, f"^{point}"], "--boundary", fmt=_MARKED), nf),
            (_log_args([point]), of)], meanwhile)
        ending = _as_they_end(walks)
        newer: _Part | None = None
        older: _Part | None = None
        try:
            for proc, err in ending:
                if proc.returncode != 0:
                    raise _NoSplit(err)
                if proc is walks[0]:
                    newer = _part(_output(nf), needle, marked=True)
                    if not newer.ids:  # the point reaches the tip: its walk is too long
                        raise _NoSplit(b"")
                    if point.encode("ascii") not in newer.boundary:
                        break  # not in tip's history: the other walk is not part of it
                else:
                    older = _part(_output(of), needle, marked=False)
            _stop(ending, walks)
            assert newer is not None
            if point.encode("ascii") not in newer.boundary:
                older = _part(_reached(repo, of, newer.boundary), needle, marked=False)
        except _NoSplit:
            _stop(ending, walks)
            return _single_scan(repo, [tip], needle, None)
        finally:
            _stop(ending, walks)
    assert older is not None
    heads, messages = newer.heads, newer.messages
    newer_ids = newer.ids
    kept: frozenset[int] | None = None  # those of the first walk's the second did not show
    if not older.ids.isdisjoint(newer_ids):  # rare (clock skew): each commit counted once
        kept = frozenset(i for i in range(len(newer.ids)) if heads[i] not in older.ids)
        newer_ids = frozenset(heads[i] for i in kept)
    candidates = [(heads[i], messages[i][1:]) for i in newer.matching
                  if kept is None or i in kept]
    candidates += [(older.heads[i], older.messages[i]) for i in older.matching]
    if not all(_is_sha(sha) for sha, _ in candidates):
        raise CorruptStateError("git log printed a record without its commit id")
    return LogScan(len(older.ids) + len(newer_ids),
                   tuple((sha.decode("ascii"), m) for sha, m in candidates),
                   walked=(older.ids, newer_ids))


class _NoSplit(Exception):
    """A git of a split walk failed: the one walk decides."""


class _Part(NamedTuple):
    """One walk of a split: its records' heads and messages, the ids of the commits it
    showed, the records among those whose message holds the needle, and its boundary."""

    heads: list[bytes]
    messages: list[bytes]
    ids: frozenset[bytes]
    matching: list[int]
    boundary: list[bytes]


def _part(out: bytes, needle: bytes, *, marked: bool) -> _Part:
    heads, messages = _fields(out)
    shown = len(heads)
    if marked:  # the boundary comes last; each message opens with its record's mark
        while shown and messages[shown - 1][:1] == b"-":
            shown -= 1
        if (shown and messages[shown - 1][:1] != b">") or \
                not all(map(_is_sha, heads[shown:])):
            raise _NoSplit(b"git log printed a record without its mark")
    matching = [i for i in _matching(out, needle) if i < shown]
    return _Part(heads, messages, frozenset(heads[:shown]), matching, heads[shown:])


def _stop(ending: Iterator[object], procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Every one of ``procs`` ended and waited for (those still walking are killed)."""
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    close = getattr(ending, "close", None)
    if close is not None:
        close()
    for proc in procs:
        if proc.stderr is not None:
            proc.stderr.close()


def _as_they_end(procs: Sequence[subprocess.Popen[bytes]]
                 ) -> Iterator[tuple[subprocess.Popen[bytes], bytes]]:
    """Each of ``procs`` with what it wrote to stderr, in the order they end."""
    import selectors

    errors: dict[int, list[bytes]] = {id(p): [] for p in procs}
    with selectors.DefaultSelector() as selector:
        for proc in procs:
            assert proc.stderr is not None
            selector.register(proc.stderr, selectors.EVENT_READ, proc)
        left = len(procs)
        while left:
            for key, _ in selector.select():
                proc = key.data
                data = os.read(key.fd, 1 << 16)
                if data:
                    errors[id(proc)].append(data)
                    continue
                selector.unregister(key.fileobj)
                proc.wait()
                left -= 1
                yield proc, b"".join(errors[id(proc)])


def _reached(repo: Repository, output: IO[bytes], starts: Sequence[bytes]) -> bytes:
    """The listed walk of every commit ``starts`` reach (b"" for none), into ``output``
    (emptied first: its git was stopped)."""
    if not starts:
        return b""
    output.seek(0)
    output.truncate()
    with _scratch(repo) as ids:
        ids.write(b"".join(s + b"\n" for s in starts))
        ids.flush()
        ids.seek(0)
        proc = spawn_git(_log_args([], "--stdin"), cwd=repo.work_tree or repo.git_dir,
                         git_dir=repo.git_dir, work_tree=repo.work_tree, stdin=ids,
                         stdout=output)
        _, err = proc.communicate()
    if proc.returncode != 0:
        raise _log_failed(err)
    return _output(output)


def _fields(out: bytes) -> tuple[list[bytes], list[bytes]]:
    """The heads (commit ids, marked or not) and the messages of ``-z`` records."""
    if not out:
        return [], []
    fields = out[:-1].split(b"\0") if out.endswith(b"\0") else out.split(b"\0")
    if len(fields) % 2:
        raise CorruptStateError("git log printed a record without its message")
    return fields[0::2], fields[1::2]


def _matching(out: bytes, needle: bytes) -> list[int]:
    """The records of ``out`` whose message contains ``needle`` (ASCII case-insensitively),
    in order: a record's message is the field after its id's, so a match after an odd number
    of NULs is in record ``nuls // 2``'s message (the needle holds no NUL)."""
    found: dict[int, None] = {}
    nuls = last = 0
    for match in _folded(needle).finditer(out):
        nuls += out.count(b"\0", last, match.start())
        last = match.start()
        if nuls % 2:
            found[nuls // 2] = None
    return list(found)


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
