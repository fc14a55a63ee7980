"""Reading what ``prepare`` is given: files, directories, or standard input.

``--to PATH SOURCE`` pairs: ``-`` is stdin, a directory maps below a ``--to`` ending in ``/``.
Each source becomes a ``Source`` (its label for messages and its bytes); nothing here writes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from gitpub.core.errors import UsageError
from gitpub.pipeline.request import Source


def read_sources(
    targets: Sequence[str], sources: Sequence[str], drafted: bool
) -> tuple[list[str], list[Source]]:
    """Expand ``--to``/SOURCE pairs: ``-`` is stdin, a directory maps below a ``--to`` ending
    in ``/``."""
    if list(sources).count("-") > 1:
        raise UsageError("stdin (-) can be only one SOURCE")
    if drafted:
        return list(targets), [_read_one(s) for s in sources]
    if len(targets) != len(sources):
        raise UsageError(f"{len(targets)} --to paths but {len(sources)} sources",
                         hint="give one SOURCE per --to PATH")
    out_targets: list[str] = []
    out_sources: list[Source] = []
    for target, source in zip(targets, sources, strict=True):
        path = Path(source)
        if source != "-" and path.is_dir():
            if not target.endswith("/"):
                raise UsageError(f"{source} is a directory: its --to must end with '/'")
            files = sorted(p for p in path.rglob("*") if p.is_file())
            if not files:
                raise UsageError(f"{source} is an empty directory")
            for f in files:
                out_targets.append(target + f.relative_to(path).as_posix())
                out_sources.append(Source(str(f), f.read_bytes()))
        else:
            if target.endswith("/"):
                raise UsageError(f"--to {target} ends with '/' but {source} is not a directory")
            out_targets.append(target)
            out_sources.append(_read_one(source))
    return out_targets, out_sources


def _read_one(source: str) -> Source:
    if source == "-":
        return Source("-", sys.stdin.buffer.read())
    try:
        return Source(source, Path(source).read_bytes())
    except OSError as e:
        raise UsageError(f"cannot read {source}: {e.strerror}") from None
