"""The font cache under ``<git dir>/pub/fonts-cache/v1``: finished subsets, face indexes and
per-glyph WOFF2 encodings, each file verified by its SHA-256 on read (see ``fonts.subset`` for
what each holds and why). Best-effort: a cache that cannot be read or written only makes gitpub
slower, never wrong.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import tempfile
import time
from array import array
from dataclasses import dataclass
from pathlib import Path

from gitpub.fonts.profile import Flavor
from gitpub.fonts.woff2 import FaceStore

#: The cache's file formats; the cache lives in ``<cache_dir>/v<CACHE_FORMAT>/``.
CACHE_FORMAT = 1
#: Finished subsets kept in the cache (each is a few hundred KB for a CJK site).
MAX_CACHED_SUBSETS = 48
# Face indexes and glyph encoding files kept (one per font face and library version; <1 MB each).
_MAX_CACHED_FACES = 8


@dataclass(frozen=True)
class FaceIndex:
    """What gitpub needs to know about a face without parsing it: the code points it covers.

    ``supported``: the best Unicode cmap plus variation selectors the face has sequences for — a
    character outside it is *missing*. ``keys``: every code point any Unicode cmap subtable
    mentions (including format 14's selectors and base characters) — only these can change the
    subset, so the requested set is reduced to them before subsetting and keying.
    """

    collection: bool
    supported: frozenset[int]
    keys: frozenset[int]

    def covered(self, chars: frozenset[str]) -> frozenset[str]:
        return frozenset(c for c in chars if ord(c) in self.keys)

    def to_bytes(self) -> bytes:
        best = array("I", sorted(self.supported))
        rest = array("I", sorted(self.keys - self.supported))
        head = struct.pack(">BII", self.collection, len(best), len(rest))
        return head + best.tobytes() + rest.tobytes()  # native order: the cache is local

    @classmethod
    def from_bytes(cls, data: bytes) -> FaceIndex:
        collection, n_best, n_rest = struct.unpack_from(">BII", data)
        arrays = array("I"), array("I")
        arrays[0].frombytes(data[9 : 9 + 4 * n_best])
        arrays[1].frombytes(data[9 + 4 * n_best : 9 + 4 * (n_best + n_rest)])
        if len(arrays[0]) != n_best or len(arrays[1]) != n_rest:
            raise ValueError("truncated face index")
        supported = frozenset(arrays[0])
        return cls(bool(collection), supported, supported | frozenset(arrays[1]))


_MAGIC = b"gitpub-fonts\n"


class Cache:
    """The files under ``<cache_dir>/v1``; every method is best-effort and never raises OSError."""

    def __init__(self, root: str) -> None:
        self.root = root

    @classmethod
    def open(cls, cache_dir: Path | str | None) -> Cache | None:
        if cache_dir is None:
            return None
        return cls(os.path.join(os.fspath(cache_dir), f"v{CACHE_FORMAT}"))

    # Files are _MAGIC, a kind, the SHA-256 of the body, the body: verified before use.

    def _read(self, relpath: str, kind: bytes) -> bytes | None:
        path = os.path.join(self.root, relpath)
        try:
            with open(path, "rb") as file:
                blob = file.read()
        except OSError:
            return None
        prefix = _MAGIC + kind + b"\n"
        body = blob[len(prefix) + 32 :]
        if not blob.startswith(prefix) or blob[len(prefix) : len(prefix) + 32] != hashlib.sha256(
            body
        ).digest():
            return None  # corrupt or from elsewhere: a miss; the rewrite replaces it
        return body

    def _write(self, relpath: str, kind: bytes, body: bytes) -> bool:
        path = os.path.join(self.root, relpath)
        directory = os.path.dirname(path)
        blob = _MAGIC + kind + b"\n" + hashlib.sha256(body).digest() + body
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(blob)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError:
            return False
        return True

    def read_subset(self, key: str, flavor: Flavor) -> bytes | None:
        relpath = os.path.join("subsets", f"{key}.{flavor}")
        data = self._read(relpath, b"subset")
        if data is not None:
            with contextlib.suppress(OSError):  # least recently used goes first when pruning
                os.utime(os.path.join(self.root, relpath))
        return data

    def write_subset(self, key: str, flavor: Flavor, data: bytes) -> None:
        if self._write(os.path.join("subsets", f"{key}.{flavor}"), b"subset", data):
            self.prune(os.path.join(self.root, "subsets"), MAX_CACHED_SUBSETS)

    def read_index(self, font_sha: str, face: int) -> FaceIndex | None:
        body = self._read(os.path.join("index", f"{font_sha}-{face}.idx"), b"index")
        if body is None:
            return None
        try:
            return FaceIndex.from_bytes(body)
        except (struct.error, ValueError):
            return None

    def write_index(self, font_sha: str, face: int, index: FaceIndex) -> None:
        if self._write(os.path.join("index", f"{font_sha}-{face}.idx"), b"index",
                       index.to_bytes()):
            self.prune(os.path.join(self.root, "index"), _MAX_CACHED_FACES)

    def read_face(self, name: str) -> FaceStore | None:
        body = self._read(os.path.join("faces", f"{name}.bin"), b"face")
        return None if body is None else FaceStore.from_bytes(name, body)

    def write_face(self, store: FaceStore) -> None:
        body = store.to_bytes()
        store.dirty = False
        if self._write(os.path.join("faces", f"{store.name}.bin"), b"face", body):
            self.prune(os.path.join(self.root, "faces"), _MAX_CACHED_FACES)

    @staticmethod
    def prune(directory: str, keep: int) -> None:
        """Keep the ``keep`` most recently used files; drop temporary files older than an hour."""
        now = time.time()
        files: list[tuple[float, str]] = []
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    try:
                        mtime = entry.stat().st_mtime
                    except OSError:
                        continue
                    if entry.name.startswith(".tmp-"):
                        if now - mtime > 3600:
                            files.append((-1.0, entry.path))
                    else:
                        files.append((mtime, entry.path))
        except OSError:
            return
        files.sort(reverse=True)
        stale = [path for mtime, path in files[keep:]]
        stale += [path for mtime, path in files[:keep] if mtime < 0]
        for path in stale:
            with contextlib.suppress(OSError):
                os.unlink(path)
