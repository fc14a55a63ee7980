"""Walking history as git's ``tips ^base`` does: in-process for short walks, with C git for long.

``walk_since`` searches the commits after a job's base for its publication (``verify.probe``):
the walk covers only what a rebase or another writer could have added since the base, so its
cost follows the number of commits since the job was prepared, not the length of the history.
``log_scan`` is one ``git log`` for walks that may be long (``git pub confirm`` in CI); a
whole long history is walked as two halves at once on two cores (``split_scan``), split at a
commit chosen from a sample of the packs' object ids (``split_point``: the ids read by
dulwich's pack index reader, their types and dates asked of C git; no format of git's is read
here).
"""

from __future__ import annotations

import functools
import heapq
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

from gitpub.core.errors import CorruptStateError
from gitpub.core.files import pub_dir
from gitpub.git.objects import is_object_id
from gitpub.git.repo import CommitInfo, Repository
from gitpub.git.run import GitKilled, Popen, spawn_git


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
             needle: bytes, *, listed: bool = False,
             counted: bool = True, meanwhile: Callable[[], object] | None = None,
             split: str | None = None) -> LogScan:
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

    ``meanwhile``: the caller's work that needs no walk, run while C git walks. ``split``: a
    commit to split a listed walk of one tip's whole history at (``split_point``), walked as
    two halves at once (``split_scan``); its listing then answers no ``has``.
    """
    revs = [*tips, *[f"^{x}" for x in excludes]]
    if listed and split is not None and len(tips) == 1 and not excludes:
        return split_scan(repo, tips[0], split, needle, meanwhile)
    if listed:
        return _listed_scan(repo, revs, needle, meanwhile)
    return _filtered_scan(repo, revs, needle, counted, meanwhile)


#: The listed walk's record: the commit id, NUL, the message (``-z``: each record ends in NUL).
_RECORD = "%H%x00%B"


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
    where = pub_dir(repo.common_dir)
    where.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryFile(dir=where, prefix="log-", suffix=".tmp")


def _output(f: IO[bytes]) -> bytes:
    """All a git wrote to ``f`` (its stdout: the offset is shared, so read from the start)."""
    f.seek(0)
    return f.read()


def _records(out: bytes, needle: bytes, head: int | None = None
             ) -> tuple[int, list[tuple[str, bytes]]]:
    """How many ``%H%x00%B`` records ``out`` holds (``-z``: NUL-separated), and the (sha,
    message) of those whose message contains ``needle`` (ASCII case-insensitively). The
    bytes are searched at once, not record by record: a long walk lists 100,000 of them.
    ``head``: the first field holds more than the id (``%H %P``), whose first ``head``
    characters are the id."""
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
        if head is not None:
            sha = sha[:head] if sha[head:head + 1] == b" " else b""
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


def _log_failed(stderr: bytes, code: int = 1) -> CorruptStateError | GitKilled:
    """What a walk's git that failed says: killed by a signal from outside (``code``
    negative), it said nothing (``GitKilled``, as ``git.run`` raises)."""
    if code < 0:
        return GitKilled(["log"], -code)
    return CorruptStateError("git log failed: "
                             + stderr.decode("utf-8", "replace").strip()[-300:])


def _listed_scan(repo: Repository, revs: Sequence[str], needle: bytes,
                 meanwhile: Callable[[], object] | None) -> LogScan:
    with _scratch(repo) as f:
        log = _spawned(repo, _log_args(revs), f, meanwhile)
        _, err = log.communicate()
        if log.returncode != 0:
            raise _log_failed(err, log.returncode)
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
            raise _log_failed(err, log.returncode)
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


# -- a long history walked as two halves at once ----------------------------------------------

#: A whole history is split in two and walked by two gits at once (``split_scan``) when the
#: packs hold at least this many objects and this process may run on two cores: C git's walk
#: of a long history is the cost of a first ``confirm`` run, and one git uses one core.
SPLIT_OBJECTS = 50_000
#: How many object ids of the packs the split point is chosen from (the commits among them
#: are dated: about one in five objects, so some 100 commits).
SAMPLE = 512


def split_point(repo: Repository, tip: str) -> str | None:
    """A commit about halfway down ``tip``'s history, to split a long walk at; None when a
    split would not pay (a short history, one core, or no idle core: the machine's load is
    at least its cores). Chosen without a walk: of the commits among object ids read evenly
    from the packs' indexes (sorted by id, so spread at random over the objects), the one
    with the median commit time. A guess: ``split_scan`` is right whatever commit it is given
    — one that is not in ``tip``'s history, or near either end, costs time, never a wrong
    answer; the more commits sampled, the nearer the middle (a walk takes as long as its
    longer half).

    No format of git's is read here: C git says how many objects the packs hold (``git
    count-objects -v``: a short history goes no further, and loads no dulwich), dulwich reads
    the ids from the indexes (``_sampled_ids``), and C git says which of them are commits (one
    batch of the repository's ``git cat-file``) and their dates."""
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity is not None else os.cpu_count() or 1
    if cores < 2 or _load() >= cores:  # no core to spare: two gits would take turns
        return None
    indexes = sorted((repo.common_dir / "objects" / "pack").glob("pack-*.idx"))
    if not indexes or _packed(repo) < SPLIT_OBJECTS:
        return None
    ids = [sha for sha in dict.fromkeys(_sampled_ids(indexes, repo.object_format.name))
           if sha != tip]
    dated: list[tuple[int, str]] = []
    for sha, kind in zip(ids, repo.object_kinds(ids), strict=True):
        if kind == "commit":
            try:
                dated.append((repo.commit(sha).commit_time, sha))
            except CorruptStateError:  # damaged: passed over (the walk says so if it must)
                continue
    dated.sort()
    return dated[len(dated) // 2][1] if dated else None


def _load() -> float:
    """The machine's load (runnable processes, averaged over the last minute); 0 when the
    system does not say."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def _packed(repo: Repository) -> int:
    """How many objects the repository's own packs hold, as C git counts them (``in-pack``
    of ``git count-objects -v``); 0 when git does not say."""
    proc = repo.git("count-objects", "-v")
    for line in proc.stdout.decode("ascii", "replace").splitlines():
        key, _, value = line.partition(":")
        if key == "in-pack" and value.strip().isdigit() and proc.returncode == 0:
            return int(value)
    return 0


def _sampled_ids(indexes: Sequence[Path], object_format: str) -> list[str]:
    """``SAMPLE`` object ids read at even steps over the pack indexes ``indexes`` taken as
    one list (each lists its pack's ids in order), by dulwich (``dulwich.pack``: index
    versions 1 and 2, SHA-1 and SHA-256, the large offsets' table; imported only here, where
    a split is considered). Only a sample: an index dulwich cannot read is passed over."""
    from dulwich.object_format import OBJECT_FORMATS
    from dulwich.pack import load_pack_index

    hash_format = OBJECT_FORMATS[object_format]
    hex_length = 2 * hash_format.oid_length
    opened, sizes = [], []
    ids: list[str] = []
    try:
        for path in indexes:
            try:  # a guess: whatever dulwich cannot read (or says how) is passed over
                index = load_pack_index(path, hash_format)
            except Exception:
                continue
            opened.append(index)
            sizes.append(len(index))
        step = sum(sizes) / SAMPLE
        at, start = step / 2, 0
        for index, n in zip(opened, sizes, strict=True):
            try:
                while at < start + n:
                    sha = index.object_sha_at_position(int(at - start)).hex()
                    if len(sha) == hex_length:
                        ids.append(sha)
                    at += step
            except Exception:  # damaged past its header: the rest of it is passed over
                pass
            start += n
            at = max(at, start + step / 2)
    finally:
        for index in opened:
            index.close()
    return ids


#: The first half's records: the commit id and its parents (``%H %P``), NUL, the message.
_WITH_PARENTS = "%H %P%x00%B"


def split_scan(repo: Repository, tip: str, point: str, needle: bytes,
               meanwhile: Callable[[], object] | None = None) -> LogScan:
    """``tip``'s whole history (``git log tip``) as two walks at once, on two cores:
    ``tip ^point`` (its records with their parents) and ``point``. Their union is the
    history when ``point`` is in it, which the first walk proves: ``point`` is then a parent
    of a commit it shows. When it is not (a commit of another branch, the notes, the job
    store), or the first walk shows nothing (``point`` reaches the tip), the one walk of
    ``tip`` is made instead: the split costs time then, never a wrong answer. A commit both
    walks show — with clock skew, git's walk of ``tip ^point`` may stop late and show a commit
    ``point`` reaches — is counted once. If either git fails, the one walk decides."""
    width = repo.object_format.hex_length
    with _scratch(repo) as newer_file, _scratch(repo) as older_file:
        newer = _spawned(repo, _log_args([tip, f"^{point}"], fmt=_WITH_PARENTS), newer_file,
                         meanwhile)
        try:
            older = _spawned(repo, _log_args([point]), older_file, None)
        except BaseException:
            newer.kill()
            newer.communicate()
            raise
        try:
            newer.communicate()
            # the newer half read while the older is still walked (on the core the newer's
            # git has left)
            split = _newer_half(_output(newer_file), point, width, needle) \
                if newer.returncode == 0 else None
        except BaseException:
            older.kill()
            older.communicate()
            raise
        if split is None:
            older.kill()  # the one walk decides
        older.communicate()
        if split is None or older.returncode != 0:
            return _listed_scan(repo, [tip], needle, None)
        old_out = _output(older_file)
    ids, newer_count, newer_found = split
    older_count, older_found = _records(old_out, needle)
    older_ids = [h for h in old_out.split(b"\0")[0::2] if h]
    both = ids.intersection(older_ids)
    if both:  # clock skew: counted once, found once
        newer_count -= len(both)
        newer_found = [(sha, m) for sha, m in newer_found if sha.encode() not in both]
    return LogScan(newer_count + older_count, tuple(newer_found + older_found))


def _newer_half(out: bytes, point: str, width: int, needle: bytes
                ) -> tuple[set[bytes], int, list[tuple[str, bytes]]] | None:
    """The walk of ``tip ^point`` (``out``: its ``%H %P`` records): its commit ids, how many,
    and the candidates; None when ``point`` is no parent of a commit it shows (not in the
    history, or the walk shows nothing): no split then."""
    heads = [h for h in out.split(b"\0")[0::2] if h]
    marker = point.encode("ascii")
    if not heads or not any(h.find(marker, width) > 0 for h in heads):
        return None
    count, found = _records(out, needle, head=width)
    return {h[:width] for h in heads}, count, found
