"""The manifest: every change a job's commit makes, and the hash that proves which were published.

Canonical serialization, documented in the README so that anyone can recompute it from a
published commit::

    gitpub-manifest v1\\n                (v2 when at least one entry is a deletion)
    <mode> <sha256> <path>\\n      one line per path, sorted by the UTF-8 bytes of the path

``mode`` is the git file mode in six octal digits (``100644``, ``100755`` or ``120000``), ``sha256``
the lower-case hex SHA-256 of the file's content, ``path`` the repository path (UTF-8,
``/``-separated, no newline). A *deletion* — the commit removes the file at ``path`` — is the line
``000000 <64 zeros> <path>``, as ``git diff --raw`` writes an absent side. Deletions exist only in
version 2 (hand commits delivered by ``git pub sync`` delete and rename files; a job's own files
never do), and the version is part of the canonical form: a manifest is v2 exactly when it holds
a deletion, so one set of changes has one serialization and one hash. The manifest hash is the
lower-case hex SHA-256 of those bytes. The same text is written as a paragraph of the job commit's
message, so the commit carries its own proof.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import NamedTuple

from gitpub.core.paths import structural_problem, symlink_problem

HEADER_V1 = b"gitpub-manifest v1\n"
HEADER_V2 = b"gitpub-manifest v2\n"
HEADER = HEADER_V1  # the header of every manifest without deletions
HEADERS = (HEADER_V1, HEADER_V2)
_MODES = (0o100644, 0o100755, 0o120000)
#: The mode and hash of a deletion entry: no file at this path after the commit.
DELETED_MODE = 0
DELETED_SHA256 = "0" * 64


class ManifestError(ValueError):
    pass


class ManifestEntry(NamedTuple):
    path: str
    mode: int  # DELETED_MODE for a deletion
    sha256: str  # DELETED_SHA256 for a deletion

    @classmethod
    def deletion(cls, path: str) -> ManifestEntry:
        return cls(path, DELETED_MODE, DELETED_SHA256)

    @property
    def deleted(self) -> bool:
        return self.mode == DELETED_MODE

    def line(self) -> bytes:
        return f"{self.mode:06o} {self.sha256} {self.path}\n".encode()


def check_path(path: str) -> str:
    """A repository path the manifest can hold (``core.paths.structural_problem``): relative,
    normalised, UTF-8, no control character or backslash, no spelling of ``.git``."""
    problem = structural_problem(path)
    if problem is not None:
        raise ManifestError(f"invalid repository path {path!r}: {problem}")
    return path


def content_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Manifest(NamedTuple):
    entries: tuple[ManifestEntry, ...]

    @classmethod
    def build(cls, files: Iterable[tuple[str, int, bytes]],
              deleted: Iterable[str] = ()) -> Manifest:
        """From (path, mode, content) triples, and the paths the commit deletes."""
        written = [ManifestEntry(check_path(p), m, content_sha256(d)) for p, m, d in files]
        return cls.of(written + [ManifestEntry.deletion(check_path(p)) for p in deleted])

    @classmethod
    def of(cls, entries: Iterable[ManifestEntry]) -> Manifest:
        ordered = tuple(sorted(entries, key=lambda e: e.path.encode()))
        seen = set()
        for e in ordered:
            if e.deleted:
                if e.sha256 != DELETED_SHA256:
                    raise ManifestError(f"deletion of {e.path} with a content hash")
            elif e.mode not in _MODES:
                raise ManifestError(f"unsupported file mode {e.mode:o} for {e.path}")
            elif e.sha256 == DELETED_SHA256:
                raise ManifestError(f"file {e.path} with the deletion hash")
            problem = symlink_problem(e.path) if e.mode == 0o120000 else None
            if problem is not None:
                raise ManifestError(f"{e.path}: {problem}")
            if e.path in seen:
                raise ManifestError(f"duplicate path in manifest: {e.path}")
            seen.add(e.path)
        return cls(ordered)

    @property
    def version(self) -> int:
        return 2 if self.deleted else 1

    def serialize(self) -> bytes:
        header = HEADER_V2 if self.version == 2 else HEADER_V1
        return header + b"".join(e.line() for e in self.entries)

    def sha256(self) -> str:
        return hashlib.sha256(self.serialize()).hexdigest()

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the commit changes: the files it writes and the ones it deletes."""
        return tuple(e.path for e in self.entries)

    @property
    def files(self) -> tuple[ManifestEntry, ...]:
        """The entries of files the commit writes (no deletions)."""
        return tuple(e for e in self.entries if not e.deleted)

    @property
    def deleted(self) -> tuple[str, ...]:
        """The paths the commit deletes."""
        return tuple(e.path for e in self.entries if e.deleted)

    @classmethod
    def parse(cls, data: bytes) -> Manifest:
        """The inverse of ``serialize``; rejects anything that is not exactly canonical."""
        header = next((h for h in HEADERS if data.startswith(h)), None)
        if header is None:
            raise ManifestError("not a gitpub manifest (missing 'gitpub-manifest v1' or "
                                "'v2' header)")
        entries = []
        for raw in data[len(header) :].split(b"\n")[:-1]:
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
