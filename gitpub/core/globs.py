"""Paths and globs as gitpub's configuration writes them, and the one glob engine.

Paths and globs are relative to the repository root, ``/``-separated and anchored there: ``*``
and ``?`` never cross a ``/``, ``[...]`` is a character class (``[!...]`` or ``[^...]`` negates)
and a ``**`` path component matches zero or more directories (a trailing ``/**`` matches
everything below a directory). ``**`` inside a component is an ordinary ``*``, as in gitignore.
There are no escapes: backslashes are refused, ``[*]`` matches a literal star.

The configuration (``config``), the font step (which files a font's ``text`` globs cover) and
the hooks' exact content check all match with ``compile_globs``: one engine, one semantics.
Pure functions of strings; ``re`` is the only import.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable


def shown(value: object) -> str:
    """``repr`` of a bad value for an error message, cut short: the file may hold anything."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."



CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def path_problem(path: str) -> tuple[str, str | None] | None:
    """Why ``path`` (a path or glob from the file) may not be used, as (problem, hint), or None.

    The rules keep every configured path inside the repository's working tree and in the one
    spelling git uses, so a glob can never match something outside the repository or in ``.git``.
    """
    if not path:
        return "expected a non-empty path, got ''", None
    if CONTROL_RE.search(path):
        return f"must not contain control characters, got {shown(path)}", None
    if "\\" in path:
        return (
            f"must not contain backslashes, got {shown(path)}",
            "separate directories with '/'; to match a literal glob character use a class: '[*]'",
        )
    if path.startswith("/"):
        return (
            f"must be relative to the repository root, got {shown(path)}",
            f"drop the leading '/': {path.lstrip('/')!r}" if path.strip("/") else None,
        )
    parts = path.split("/")
    if ".." in parts:
        return f"must not contain '..' components, got {shown(path)}", None
    if any(part in ("", ".") for part in parts):
        hint: str | None = None
        if path.endswith("/") and path.strip("/"):
            hint = f"to mean everything below a directory write {path.rstrip('/') + '/**'!r}"
        else:
            normal = "/".join(part for part in parts if part not in ("", "."))
            if normal:
                hint = f"write {normal!r}"
        return f"must not contain empty or '.' components, got {shown(path)}", hint
    if any(part.lower() == ".git" for part in parts):
        return f"must not point into .git, got {shown(path)}", None
    return None


def is_clean_path(path: str) -> bool:
    """The fast form of ``path_problem(path) is None``, for matching repository paths."""
    if not path or path[0] == "/" or path[-1] == "/" or "//" in path or "\\" in path:
        return False
    if CONTROL_RE.search(path):
        return False
    return all(part not in (".", "..") and part.lower() != ".git" for part in path.split("/"))


def _segment_regex(segment: str) -> str:
    """The regex for one path component of a glob (which contains no ``/``)."""
    out: list[str] = []
    i, n = 0, len(segment)
    while i < n:
        char = segment[i]
        if char == "*":
            while i + 1 < n and segment[i + 1] == "*":  # '**' inside a component is just '*'
                i += 1
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            j = i + 1
            negate = j < n and segment[j] in "!^"
            if negate:
                j += 1
            start = j
            if j < n and segment[j] == "]":  # a ']' first in the class is literal
                j += 1
            while j < n and segment[j] != "]":
                j += 1
            if j >= n:
                raise ValueError(
                    f"unterminated character class in {segment!r} (write '[[]' for a literal '[')"
                )
            out.append(_class_regex(segment[start:j], negate))
            i = j
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def _class_regex(body: str, negate: bool) -> str:
    items: list[str] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            low, high = body[k], body[k + 2]
            if low > high:
                raise ValueError(f"character range {low}-{high} is out of order")
            items.append(f"{re.escape(low)}-{re.escape(high)}")
            k += 3
        else:
            items.append(re.escape(body[k]))
            k += 1
    # A negated class must still never match the separator.
    return ("[^/" if negate else "[") + "".join(items) + "]"


@functools.lru_cache(maxsize=256)
def glob_regex(pattern: str) -> str:
    """Translate one glob to a regex for ``fullmatch``; ValueError says why it is invalid."""
    problem = path_problem(pattern)
    if problem is not None:
        raise ValueError(problem[0])
    segments: list[str] = []
    for segment in pattern.split("/"):
        if segment == "**" and segments and segments[-1] == "**":
            continue  # '**/**' is '**'
        segments.append(segment)
    out: list[str] = []
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        if segment == "**":
            # Followed by more: zero or more whole directories. Last: everything below.
            out.append(".+" if index == last else "(?:[^/]+/)*")
        else:
            out.append(_segment_regex(segment))
            if index != last:
                out.append("/")
    return "".join(out)


@functools.lru_cache(maxsize=64)
def compile_globs(globs: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching any of ``globs`` (use ``fullmatch``); ValueError for a bad glob."""
    if not globs:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?:{glob_regex(glob)})" for glob in globs))


def matcher(globs: tuple[str, ...]) -> Callable[[str], bool]:
    """A predicate: whether a repository path matches any of ``globs`` (a path not in normal
    form never does)."""
    return functools.partial(_matches, compile_globs(globs))


def _matches(pattern: re.Pattern[str], path: str) -> bool:
    return is_clean_path(path) and pattern.fullmatch(path) is not None
