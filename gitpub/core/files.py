"""Durable file writes outside git's object store: gitpub's own files under ``.git/pub/`` and
the hook shims it installs.

A file is replaced in one rename (readers see the old file or the new one, never a torn one),
and a rename is durable only once its directory is fsynced: both helpers are here so that
every writer does both.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make the entries of directory ``path`` (creations, renames) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` in one rename: readers see the old file or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
