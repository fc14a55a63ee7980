"""Refs read, listed and moved the way git does: one ref costs one ref, however many there are.

dulwich's ``set_if_equals``, ``remove_if_equals`` and ``as_dict`` parse the whole
``packed-refs`` file (and check every name in it) to answer for one ref: with one packed ref per
job, creating a job cost more with every job ever published (150 ms of a 430 ms ``prepare`` at
7,000 jobs). Here a ref is its loose file, else one binary search of ``packed-refs``
(``git.packed``); a listing is a range scan of ``packed-refs`` plus the loose files below the
prefix. Writes keep git's protocol: the ``<ref>.lock`` taken with ``O_EXCL``
(``git.lockfile``, the protocol of dulwich's ``GitFile`` without its imports: a holder raises
``FileLocked``), the value re-read under the lock, the new value
written, fsynced and renamed over the ref. A ref that lives only in ``packed-refs`` is deleted
by C git (``update-ref -d``), which rewrites that file under its own lock.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gitpub.core.errors import CorruptStateError
from gitpub.git import packed

HEX = frozenset(b"0123456789abcdef")


def packed_refs(common: Path) -> Path:
    return common / "packed-refs"


def loose(common: Path, name: str) -> bytes | None:
    """The raw contents of ``name``'s loose file, None when there is none."""
    try:
        return (common / name).read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def is_object_id(value: bytes) -> bool:
    return len(value) == 40 and set(value) <= HEX


#: What git's ``isspace`` calls a blank (not the vertical tab or form feed).
_GIT_BLANKS = b" \t\n\r"


def loose_id(raw: bytes) -> str | None:
    """The object id a loose ref file's contents name, read as git reads them
    (``parse_loose_ref_contents``): 40 hex digits, either case, then the end or a blank
    (whatever follows it is ignored, as in ``FETCH_HEAD``); None for anything else — an
    empty, torn or garbage file, leading blanks, a symbolic ref — which git calls broken."""
    head = raw[:40].lower()
    if not is_object_id(head) or (len(raw) > 40 and raw[40] not in _GIT_BLANKS):
        return None
    return head.decode("ascii")


def corrupt(common: Path, name: str, raw: bytes) -> CorruptStateError:
    return CorruptStateError(
        f"ref {name} is corrupt ({len(raw)} bytes that are not an object id)",
        hint=f"inspect {common / name}; restore it from `git reflog` or a backup")


def corrupt_packed(common: Path, what: str) -> CorruptStateError:
    """The error for a ``packed-refs`` file git would not have written: C git refuses the
    whole repository then (``fatal: unexpected line``), ``git pack-refs`` included, so the
    only repair is by hand."""
    from gitpub.core.sanitize import sanitize  # only for the error: reading needs none

    path = common / "packed-refs"
    return CorruptStateError(
        f"{path} is corrupt ({sanitize(what)}): git itself refuses this repository until "
        "it is repaired", hint=f"keep a copy of {path}, then delete or correct the bad line "
                               "(each line is `<object id> <ref name>`, or `^<object id>` "
                               "after one); `git status` works again when it is right")


def packed_value(common: Path, name: str) -> str | None:
    try:
        return packed.lookup(packed_refs(common), name)
    except packed.PackedRefsError as e:
        raise corrupt_packed(common, str(e)) from None


def current(common: Path, name: str) -> str | None:
    """``name``'s object id (loose, else packed), None if absent; corruption raises. Symbolic
    refs are not followed here (the job store has none)."""
    raw = loose(common, name)
    if raw is None:
        return packed_value(common, name)
    found = loose_id(raw)
    if found is None:
        raise corrupt(common, name, raw)
    return found


def with_prefix(common: Path, prefix: str) -> dict[str, str]:
    """Every ref whose name starts with ``prefix`` (ending with ``/``), keyed by the rest of
    its name: the loose files below the prefix (which win) and a range of ``packed-refs``.
    Damaged loose files are left out (``Repository.ref_names`` lists them).

    The loose files are read first, as git reads them (``files-backend.c``): ``git
    pack-refs`` writes ``packed-refs`` before it deletes the loose files, so a ref is in what
    was read either way; read the other way round, a listing between the two saw neither."""
    found_loose: dict[str, bytes] = {}
    top = common / prefix
    for dirpath, _dirs, files in os.walk(top):
        rel = Path(dirpath).relative_to(top)
        for f in files:
            if f.endswith(".lock"):
                continue
            key = (rel / f).as_posix()
            raw = loose(common, prefix + key)
            if raw is not None:  # None: packed and pruned meanwhile (then packed-refs has it)
                found_loose[key] = raw
    try:
        found = packed.with_prefix(packed_refs(common), prefix)
    except packed.PackedRefsError as e:
        raise corrupt_packed(common, str(e)) from None
    out = {name[len(prefix):]: sha for name, sha in found.items()}
    for key, raw in found_loose.items():
        sha = loose_id(raw)
        if sha is not None:
            out[key] = sha
        else:
            out.pop(key, None)  # a damaged loose ref hides its packed value, as in git
    return out


def _check_name(name: str) -> None:
    parts = name.split("/")
    if parts[0] != "refs" or len(parts) < 2 or any(
            p in ("", ".", "..") or p.endswith(".lock") or p.startswith(".") for p in parts):
        raise ValueError(f"not a ref name gitpub writes: {name!r}")


def compare_and_swap(common: Path, name: str, old: str | None, new: str) -> bool:
    """Move ``name`` from ``old`` (None: it must not exist) to ``new`` under its lock; False
    when it holds another value. ``FileLocked`` when another process holds the lock."""
    _check_name(name)
    for i in range(2, name.count("/") + 1):  # a packed ref where a directory must go
        ancestor = "/".join(name.split("/")[:i])
        if packed_value(common, ancestor) is not None:
            raise NotADirectoryError(f"ref {ancestor} is in the way of {name}")
    with _locked(common / name) as f:
        try:
            found = current(common, name)
        except CorruptStateError:
            f.abort()
            raise
        if found != old:
            f.abort()
            return False
        if found == new:
            f.abort()
            return True
        if found is None and with_prefix(common, name + "/"):
            f.abort()  # as C git: "'<name>/…' exists; cannot create '<name>'"
            raise IsADirectoryError(f"refs below {name} are in the way of {name}")
        f.write(new.encode("ascii") + b"\n")
    return True


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[Any]:
    """``path``'s lock (``LockFile``), its directory created first; a directory removed by a
    concurrent delete of its last ref (``_prune_empty_dirs``) is created again."""
    from gitpub.git.lockfile import LockFile  # git's (and dulwich's) lock-file protocol

    for attempt in range(3):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            f = LockFile(path)
        except FileNotFoundError:
            if attempt == 2:
                raise
            continue
        with f:
            yield f
        return


def delete_loose(common: Path, name: str, old: str) -> bool | None:
    """Delete ``name`` if it is ``old`` and lives in a loose file only; False if it holds
    another value, None if ``packed-refs`` has it too (then C git must delete it)."""
    from gitpub.git.lockfile import LockFile

    _check_name(name)
    path = common / name
    if not path.parent.is_dir():  # no loose file: packed or absent
        return None if packed_value(common, name) == old else False
    with LockFile(path) as f:
        try:
            found = current(common, name)
            if found != old:
                return False
            if packed_value(common, name) is not None:
                return None
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        finally:
            f.abort()
    _prune_empty_dirs(common, path.parent)
    return True


def append_reflog(common: Path, name: str, old: str | None, new: str, message: str) -> None:
    """One line of ``logs/<name>`` for a move of ``name``, as git writes it: the old and new
    ids, who (gitpub: its store identity, the author of its state commits) and when (UTC),
    a tab and the message on one line. (In a repository that is not plain, dulwich writes it,
    naming the configured user.)"""
    from gitpub.git.values import STORE_IDENTITY

    path = common / "logs" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    text = " ".join(message.split())
    line = (f"{old or '0' * 40} {new} {STORE_IDENTITY.as_bytes().decode()} {int(time.time())} "
            f"+0000\t{text}\n")
    with open(path, "ab") as f:
        f.write(line.encode("utf-8", "surrogateescape"))


def delete_reflog(common: Path, name: str) -> None:
    """Remove the reflog of a deleted ref, as git does: a reflog left behind would block a
    later ref below its name (``logs/refs/x`` a file where ``refs/x/y`` needs a directory)."""
    path = common / "logs" / name
    with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
        path.unlink()
        _prune_empty_dirs(common, path.parent, common / "logs" / "refs")


def _prune_empty_dirs(common: Path, directory: Path, stop: Path | None = None) -> None:
    stop = stop or common / "refs"
    while directory != stop and stop in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
