"""The once-per-job search of a base's whole history for the job's id.

The probe walks only what came after a job's base. That is not enough for "one job id is
published at most once, across every clone": a clone whose base already contains the job's
publication (an agent re-run on a fresh runner, a second publisher who pulled) would never look
there, and would publish the key a second time — or overwrite the first article. So, once per
job (``pipeline.prepare``, or its first delivery), every commit of the base's history whose
message mentions the job id is judged like the probe's finds (``probe.judge_claims``).

The search is prefix-agnostic (the job id is a UUID, found whatever trailer carries it) and is
C git's walk. Its cost is kept to the new commits by a per-clone index, ``.git/pub/job-ids``:
for every commit whose message mentions a ``-Job-Id``, the UUIDs it mentions, and the commit
the index is complete through. Each search first brings the index up to the base
(``git log base ^through``: the commits since the last search; the whole history only the
first time in a clone, or after the branch was rewritten). The index is derived data, built
by C git from this clone's own objects: lost or unreadable, it is rebuilt; it holds commit
ids and UUIDs only (nothing the sanitizer would redact). A hit is only a candidate: the
verifier decides.
"""

from __future__ import annotations

import contextlib
import fcntl
import re
from collections.abc import Iterator
from pathlib import Path

from gitpub.core.files import pub_dir, write_atomic
from gitpub.git.repo import Repository
from gitpub.git.walk import log_scan
from gitpub.proof.trailers import JOB_ID_NEEDLE

INDEX_FILE = "job-ids"
_HEADER = b"gitpub job-id index v1 through "
_UUID = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_SHA = re.compile(rb"[0-9a-f]{40}(?:[0-9a-f]{24})?")


@contextlib.contextmanager
def _locked(repo: Repository) -> Iterator[Path]:
    """The index file, held exclusively (an flock on ``job-ids.flock``, released if we die;
    not named ``*.lock``, which is a git lock file that the lock sweep may judge stale)."""
    where = pub_dir(repo.common_dir)
    where.mkdir(parents=True, exist_ok=True)
    with open(where / f"{INDEX_FILE}.flock", "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield where / INDEX_FILE
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _read(path: Path) -> tuple[str | None, bytes]:
    """(the commit the index is complete through, its entry lines); (None, b"") if there is no
    readable index."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, b""
    first, _, body = data.partition(b"\n")
    through = first[len(_HEADER):]
    if not first.startswith(_HEADER) or not _SHA.fullmatch(through) or (body and
                                                                         body[-1:] != b"\n"):
        return None, b""  # not ours, or torn: rebuilt from the history
    return through.decode("ascii"), body


def _entries(repo: Repository, tip: str, through: str | None) -> bytes:
    """``<uuid> <commit>`` lines for the commits of ``tip ^through`` that mention a job id."""
    scan = log_scan(repo, [tip], [] if through is None else [through], JOB_ID_NEEDLE,
                    counted=False)
    lines = []
    for sha, message in scan.candidates:
        for uuid in dict.fromkeys(m.group().lower() for m in _UUID.finditer(message)):
            lines.append(uuid + b" " + sha.encode() + b"\n")
    return b"".join(lines)


def _is_ancestor(repo: Repository, commit: str, tip: str) -> bool:
    if not repo.has_object(commit):
        return False
    return repo.git("merge-base", "--is-ancestor", commit, tip).returncode == 0


def commits_mentioning(repo: Repository, tip: str, job_id: str) -> list[str]:
    """Every commit of ``tip``'s history whose message mentions ``job_id`` next to a
    ``-Job-Id`` (in any case, under any prefix)."""
    with _locked(repo) as path:
        through, body = _read(path)
        if through != tip:
            if through is not None and _is_ancestor(repo, through, tip):
                body += _entries(repo, tip, through)  # the usual case: new commits since
            elif through is not None and _is_ancestor(repo, tip, through):
                return [c for c in _lookup(body, job_id) if _is_ancestor(repo, c, tip)]
            else:  # the first search in this clone, or the branch was rewritten
                body = _entries(repo, tip, None)
            write_atomic(path, _HEADER + tip.encode() + b"\n" + body)
    return _lookup(body, job_id)


def _lookup(body: bytes, job_id: str) -> list[str]:
    needle = job_id.lower().encode() + b" "
    found: dict[str, None] = {}
    pos = body.find(needle)
    while pos >= 0:
        if pos == 0 or body[pos - 1:pos] == b"\n":
            start = pos + len(needle)
            end = body.find(b"\n", start)
            found[body[start:None if end < 0 else end].decode("ascii", "replace")] = None
        pos = body.find(needle, pos + 1)
    return list(found)
