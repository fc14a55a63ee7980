"""Loose objects written by gitpub itself, in a plain repository, exactly as git lays them out.

An object's id is the SHA-1 of ``<type> <size>\\0<content>``; its file is
``objects/<2 hex>/<38 hex>``, that same text zlib-compressed, read-only. It is written under
the lock-file protocol dulwich's object store uses (``git.lockfile``: ``<file>.lock`` created
exclusively, fsynced, renamed), so a concurrent writer of the same object waits, and a killed
one leaves a lock that ``git.locks`` heals. The directories are fsynced by the caller
(``git.writing``: once per batch). Trees and commits are serialised as dulwich serialises the
ones gitpub writes (``tree_body``, ``commit_body``; ``tests/test_loose.py`` compares the bytes
and ``git fsck --strict`` checks them): entries in git's order, a directory sorting as
``name/``; a commit with its tree, parents, author and committer at time zone ``+0000`` and
no encoding header.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping, Sequence

from gitpub.core.digest import sha1_hex
from gitpub.git.lockfile import LockFile

MODE_TREE = 0o040000


def object_id(kind: bytes, body: bytes) -> str:
    return sha1_hex(b"%s %d\0%s" % (kind, len(body), body))


def write_loose(objects: str, kind: bytes, body: bytes) -> str:
    """Write ``body`` as a loose ``kind`` object under ``objects`` (nothing if its file is
    there already); its id. ``FileLocked`` while another process writes it."""
    raw = b"%s %d\0%s" % (kind, len(body), body)
    sha = sha1_hex(raw)
    directory = os.path.join(objects, sha[:2])
    path = os.path.join(directory, sha[2:])
    if os.path.exists(path):
        return sha
    os.makedirs(directory, exist_ok=True)
    with LockFile(path, mask=0o444) as f:
        f.write(zlib.compress(raw))
    return sha


def tree_body(entries: Mapping[bytes, tuple[int, str]]) -> bytes:
    """A tree's content: ``<octal mode> <name>\\0<20-byte id>`` per entry, in git's order."""
    def order(name: bytes) -> bytes:
        return name + b"/" if entries[name][0] & 0o170000 == MODE_TREE else name

    return b"".join(b"%o %s\0%s" % (entries[n][0], n, bytes.fromhex(entries[n][1]))
                    for n in sorted(entries, key=order))


def commit_body(tree: str, parents: Sequence[str], author: bytes, committer: bytes,
                when: int, message: bytes) -> bytes:
    """A commit's content as dulwich writes gitpub's: no encoding header, time zone +0000."""
    lines = [b"tree " + tree.encode("ascii"), *(b"parent " + p.encode("ascii") for p in parents),
             b"author %s %d +0000" % (author, when), b"committer %s %d +0000" % (committer, when)]
    return b"\n".join(lines) + b"\n\n" + message
