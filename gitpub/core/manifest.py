"""The manifest: every file a job writes, and the hash that proves which files were published.

Canonical serialization (version 1), documented in the README so that anyone can recompute it
from a published commit::

    gitpub-manifest v1\\n
    <mode> <sha256> <path>\\n      one line per file, sorted by the UTF-8 bytes of the path

``mode`` is the git file mode in octal (``100644``, ``100755`` or ``120000``), ``sha256`` the
lower-case hex SHA-256 of the file's content, ``path`` the repository path (UTF-8, ``/``-separated,
no newline). The manifest hash is the lower-case hex SHA-256 of those bytes. The same text is
written as a paragraph of the job commit's message, so the commit carries its own proof.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from gitpub.core.paths import structural_problem, symlink_problem

HEADER = b"gitpub-manifest v1\n"
_MODES = (0o100644, 0o100755, 0o120000)


class ManifestError(ValueError):
    pass


@dataclass(frozen=True, order=True)
class ManifestEntry:
    path: str
    mode: int
    sha256: str

    def line(self) -> bytes:
        return f"{self.mode:o} {self.sha256} {self.path}\n".encode()


def check_path(path: str) -> str:
    """A repository path the manifest can hold (``core.paths.structural_problem``): relative,
    normalised, UTF-8, no control character or backslash, no spelling of ``.git``."""
    problem = structural_problem(path)
    if problem is not None:
        raise ManifestError(f"invalid repository path {path!r}: {problem}")
    return path


def content_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Manifest:
    entries: tuple[ManifestEntry, ...]

    @classmethod
    def build(cls, files: Iterable[tuple[str, int, bytes]]) -> Manifest:
        """From (path, mode, content) triples."""
        return cls.of(ManifestEntry(check_path(p), m, content_sha256(d)) for p, m, d in files)

    @classmethod
    def of(cls, entries: Iterable[ManifestEntry]) -> Manifest:
        ordered = tuple(sorted(entries, key=lambda e: e.path.encode()))
        seen = set()
        for e in ordered:
            if e.mode not in _MODES:
                raise ManifestError(f"unsupported file mode {e.mode:o} for {e.path}")
            problem = symlink_problem(e.path) if e.mode == 0o120000 else None
            if problem is not None:
                raise ManifestError(f"{e.path}: {problem}")
            if e.path in seen:
                raise ManifestError(f"duplicate path in manifest: {e.path}")
            seen.add(e.path)
        return cls(ordered)

    def serialize(self) -> bytes:
        return HEADER + b"".join(e.line() for e in self.entries)

    def sha256(self) -> str:
        return hashlib.sha256(self.serialize()).hexdigest()

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(e.path for e in self.entries)

    @classmethod
    def parse(cls, data: bytes) -> Manifest:
        """The inverse of ``serialize``; rejects anything that is not exactly canonical."""
        if not data.startswith(HEADER):
            raise ManifestError("not a gitpub manifest (missing 'gitpub-manifest v1' header)")
        entries = []
        for raw in data[len(HEADER) :].split(b"\n")[:-1]:
            try:
                mode_s, sha, path = raw.decode("utf-8").split(" ", 2)
                mode = int(mode_s, 8)
            except ValueError:
                raise ManifestError(f"malformed manifest line: {raw!r}") from None
            if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
                raise ManifestError(f"malformed sha256 in manifest line: {raw!r}")
            entries.append(ManifestEntry(check_path(path), mode, sha))
        manifest = cls.of(entries)
        if manifest.serialize() != data:
            raise ManifestError("manifest is not in canonical form")
        return manifest
