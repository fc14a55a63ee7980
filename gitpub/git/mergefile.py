"""Three-way merge of one file's content, as ``git merge-file`` does it.

C git's own line merge (xdiff), run on three temporary files in a private directory: the
result is exactly what ``git merge-file -p OURS BASE THEIRS`` prints, so a person who merges
the same versions by hand gets the same bytes. Line endings are bytes like any other: three
CRLF versions merge as CRLF. A version git would treat as binary (a NUL byte in its first
8,000 bytes, git's own test) is never merged.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from gitpub.git.run import run_git

#: How far git looks for a NUL byte to call content binary (``buffer_is_binary``).
BINARY_PEEK = 8000


def is_binary(data: bytes) -> bool:
    """Whether git would call ``data`` binary (and refuse to merge it by lines)."""
    return b"\0" in data[:BINARY_PEEK]


@dataclass(frozen=True)
class FileMerge:
    """The outcome of a three-way merge: ``content`` when it merged cleanly; otherwise None and
    ``conflicts``, the number of overlapping regions (0 when it could not be merged at all:
    ``why`` says why)."""

    content: bytes | None
    conflicts: int = 0
    why: str = ""


def merge_file(base: bytes, ours: bytes, theirs: bytes, scratch: Path) -> FileMerge:
    """Merge ``ours`` and ``theirs``, both changed from ``base``; temporary files go under
    ``scratch`` (created if needed) and are removed."""
    if any(is_binary(d) for d in (base, ours, theirs)):
        return FileMerge(None, why="binary content is never merged")
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="merge-", dir=scratch) as tmp:
        where = Path(tmp)
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            (where / name).write_bytes(data)
        # The conflict style is the only configuration merge-file reads: fixed, so that the
        # number of conflicting regions reported does not depend on anyone's config.
        proc = run_git(["-c", "merge.conflictStyle=merge", "merge-file", "-p", "-q", "ours",
                        "base", "theirs"], cwd=where)
    if proc.returncode == 0:
        return FileMerge(proc.stdout)
    if 0 < proc.returncode < 128:
        return FileMerge(None, conflicts=proc.returncode)
    why = proc.stderr.decode("utf-8", "replace").strip() or f"exit {proc.returncode}"
    return FileMerge(None, why=f"git merge-file failed: {why}")
