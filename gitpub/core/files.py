"""Durable file writes outside git's object store: gitpub's own files under ``.git/pub/`` (its
private space in the git directory, ``ensure_pub_dir``) and the hook shims it installs.

A file is replaced in one rename (readers see the old file or the new one, never a torn one),
and a rename is durable only once its directory is fsynced: both helpers are here so that
every writer does both.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gitpub.core.errors import GitpubError


class PubDirError(GitpubError):
    """``.git/pub`` (gitpub's private space) cannot be used."""


def pub_dir(common_dir: Path) -> Path:
    """gitpub's private space inside the git directory ``common_dir`` (scratch, caches,
    locks); a ``PubDirError`` if something else stands there."""
    path = common_dir / "pub"
    if path.exists() and not path.is_dir():
        ensure_pub_dir(path)  # raises, saying what is wrong
    return path


def ensure_pub_dir(path: Path) -> Path:
    """``path`` (``.git/pub``) as a directory, created if absent; a clear error otherwise."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        pass
    except OSError as e:
        raise PubDirError(f"cannot create {path}: {e.strerror or e}",
                          hint="gitpub keeps its scratch space and caches there") from None
    if not path.is_dir():
        raise PubDirError(f"{path} is not a directory",
                          hint=f"gitpub keeps its scratch space and caches there: move {path} "
                               "away (it is not part of git)")
    return path


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
