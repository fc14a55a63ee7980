"""``--to`` paths are repository paths, from the root, wherever the command runs.

A person in ``posts/`` who types ``--to hello.md`` most likely means ``posts/hello.md``; read
from the root, it is ``hello.md``. Guessing either way publishes to a place nobody checked, so a
``--to`` that looks relative to the working directory is refused (exit 2) with the root path it
probably meant. Precisely:

1. ``--to`` is always read from the top of the repository (as ``git ls-tree`` paths are),
   never from the working directory.
2. A ``--to`` with a ``.`` or ``..`` component (``./x``, ``../x``, ``a/./b``) is refused
   everywhere: it is how a path relative to the working directory is spelled. So is an
   absolute path.
3. In a subdirectory ``P/`` of the working tree (``git rev-parse --show-prefix``), a ``--to T``
   is accepted when ``T`` starts with ``P/``, or when ``T``'s first component exists at the top
   of the working tree and *not* in the working directory. Anything else — ``hello.md``, or
   ``new/x.md`` where ``new`` exists nowhere, or ``images/x.png`` where both ``./images`` and
   the root's ``images`` exist — is refused.

At the top of the working tree, and in a repository without one, rule 3 does not apply.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from pathlib import Path

from gitpub.core.errors import UsageError

_HINT = "--to takes a path from the top of the repository"


def _from_here(prefix: str, target: str) -> str | None:
    """``target`` read from the working directory ``prefix``, as a root path (None: outside)."""
    joined = posixpath.normpath(posixpath.join(prefix, target))
    return None if joined == "." or joined.startswith("../") or joined == ".." else joined


def check_target(target: str, prefix: str, top: Path | None) -> None:
    """Refuse a ``--to`` that looks relative to the working directory (see the module)."""
    path = target.rstrip("/")
    here = Path.cwd()
    if path.startswith("/"):
        meant = None
        if top is not None:
            try:
                meant = Path(path).resolve().relative_to(top.resolve()).as_posix()
            except ValueError:
                meant = None
        hint = f"{_HINT}: --to {meant}" if meant else _HINT
        raise UsageError(f"--to {target!r} is an absolute path", hint=hint)
    parts = path.split("/")
    if any(p in (".", "..") for p in parts):
        meant = _from_here(prefix, path)
        hint = (f"{_HINT}; from here that is --to {meant}" if meant
                else f"{_HINT}; {target!r} from here is outside the repository")
        raise UsageError(f"--to {target!r} is not a repository path in normal form ('.' and "
                         "'..' are relative to the working directory)", hint=hint)
    if not prefix or top is None or path.startswith(prefix) or not path:
        return
    first = parts[0]
    at_root = (top / first).exists() or (top / first).is_symlink()
    in_cwd = (here / first).exists() or (here / first).is_symlink()
    if at_root and not in_cwd:
        return
    meant = _from_here(prefix, path)
    if at_root:
        raise UsageError(
            f"--to {target!r} is ambiguous here ({prefix.rstrip('/')}): {first!r} exists both "
            "at the top of the repository and in this directory",
            hint=f"{_HINT}: write --to {target} for the top one or --to {meant} for this one")
    raise UsageError(
        f"--to {target!r} looks relative to this directory ({prefix.rstrip('/')}), but "
        f"{_HINT} and there is no {first!r} there",
        hint=f"did you mean --to {meant}{'/' if target.endswith('/') else ''}?")


def check_targets(targets: Sequence[str], prefix: str, top: Path | None) -> None:
    for target in targets:
        check_target(target, prefix, top)
