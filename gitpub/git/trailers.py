"""The proof-of-publication trailers, written and read with dulwich's trailer support.

We write only git's canonical form — exact-case keys, ``Key: value``, in the message's last
paragraph, no comment lines — because that is the form on which dulwich's parser and
``git interpret-trailers --parse`` agree (docs/dulwich.md lists where they differ).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dulwich.trailers import Trailer, format_trailers, parse_trailers

_VALUE_OK = re.compile(r"^[A-Za-z0-9._:@+/-]+$")


@dataclass(frozen=True)
class TrailerNames:
    job_id: str
    manifest: str
    base: str
    node: str
    sync: str

    @classmethod
    def for_prefix(cls, prefix: str) -> TrailerNames:
        return cls(f"{prefix}-Job-Id", f"{prefix}-Manifest-Sha256", f"{prefix}-Base-Commit",
                   f"{prefix}-Writer-Node", f"{prefix}-Sync-Id")


@dataclass(frozen=True)
class PubTrailers:
    job_id: str
    manifest_sha256: str
    base_commit: str | None = None
    writer_node: str | None = None
    sync_id: str | None = None  # set on the commits of sync jobs (hand edits, no job of theirs)


def parse(message: bytes) -> list[tuple[str, str]]:
    """Every trailer of a commit message as (key, value), in order."""
    _, trailers = parse_trailers(message)
    return [(t.key, t.value) for t in trailers]


def read_pub_trailers(message: bytes, prefix: str) -> PubTrailers | None:
    """The job trailers of a message, or None unless both job id and manifest hash are there."""
    names = TrailerNames.for_prefix(prefix)
    found: dict[str, str] = {}
    for key, value in parse(message):
        found.setdefault(key, value)
    job_id, manifest = found.get(names.job_id), found.get(names.manifest)
    if not job_id or not manifest:
        return None
    return PubTrailers(job_id, manifest, found.get(names.base), found.get(names.node),
                       found.get(names.sync))


def _no_divider(line: str) -> str:
    """A line that parsers could take for a patch divider, rewritten so none can.

    git stops looking for trailers at the first line starting with ``---`` (in
    ``interpret-trailers --parse``, not in ``%(trailers)``); dulwich at the last line whose
    stripped text starts with ``---``. We never write such a line: leading dashes become an
    em dash.
    """
    stripped = line.lstrip()
    return "\u2014" + stripped.lstrip("-") if stripped.startswith("---") else line


def proof_pairs(trailers: PubTrailers, prefix: str) -> list[tuple[str, str]]:
    """The proof trailers as (key, value), in the order they are written; values checked."""
    names = TrailerNames.for_prefix(prefix)
    pairs = [(names.job_id, trailers.job_id), (names.manifest, trailers.manifest_sha256)]
    if trailers.base_commit:
        pairs.append((names.base, trailers.base_commit))
    if trailers.writer_node:
        pairs.append((names.node, trailers.writer_node))
    if trailers.sync_id:
        pairs.append((names.sync, trailers.sync_id))
    for key, value in pairs:
        if not _VALUE_OK.match(value):
            raise ValueError(f"trailer value not in canonical form: {key}: {value!r}")
    return pairs


def format_message(subject: str, body: bytes, trailers: PubTrailers, prefix: str) -> bytes:
    """A commit message: subject, optional body paragraph(s), then the trailer block."""
    pairs = proof_pairs(trailers, prefix)
    printable = "".join(ch for ch in subject if ch.isprintable() or ch.isspace())
    subject_line = _no_divider(" ".join(printable.split()) or "Publish")
    parts = [subject_line.encode("utf-8") + b"\n"]
    if body.strip():
        text = body.rstrip(b"\n").decode("utf-8", "surrogateescape")
        safe = "\n".join(_no_divider(line) for line in text.split("\n"))
        parts.append(safe.encode("utf-8", "surrogateescape") + b"\n")
    parts.append(format_trailers([Trailer(k, v) for k, v in pairs]))
    return b"\n".join(parts)
