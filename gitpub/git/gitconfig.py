"""Whether a repository's configuration is plain: nothing in it changes how it is read.

Opening a repository with dulwich costs ~40 ms of imports; ``status`` needs none of it when the
repository is an ordinary one. Ordinary is decided here, from the repository's own ``config``
file (the one dulwich reads when it opens a repository), by a scan that understands only the
common shapes of git's format and says *not plain* for anything else: an ``[extensions]``
section (``objectFormat``, ``refStorage``, ``worktreeConfig``, …), an include, ``core.worktree``,
``core.bare`` set to true, a ``repositoryformatversion`` other than 0 or 1, a line continued
with a backslash, a key after a section header on one line, a line it cannot parse. Not plain
means: open the repository the full way, with dulwich, exactly as before (``Repository``), so
that whatever dulwich would accept or refuse there, it still does.
"""

from __future__ import annotations

import os

#: The ``core`` keys whose value decides how the repository is opened (lower case).
_DECIDING = {"bare", "worktree", "repositoryformatversion"}


def _value(raw: str) -> str | None:
    """A value without its trailing comment; None when it is quoted or escaped (not plain)."""
    for mark in ("#", ";"):
        raw = raw.split(mark, 1)[0]
    if '"' in raw or "\\" in raw:
        return None
    return raw.strip()


def _header(line: str) -> str | None:
    """The section name of a ``[section]`` or ``[section "sub"]`` line (lower case, the
    subsection dropped); None for any other shape."""
    end = line.find("]")
    rest = line[end + 1:].strip() if end > 0 else "x"
    if rest and rest[0] not in "#;":
        return None
    inner = line[1:end].strip()
    name, _, sub = inner.partition(" ")
    if not name or not all(c.isalnum() or c in "-." for c in name):
        return None
    if sub and not (sub.startswith('"') and sub.endswith('"') and len(sub) >= 2):
        return None
    return name.lower()


def is_plain(path: str) -> bool:
    """Whether the configuration file at ``path`` (absent: plain) is plain (see the module)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return _plain_text(text)


def _plain_text(text: str) -> bool:
    section: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            return False
        if line.startswith("["):
            section = _header(line)
            if section is None or section in ("include", "includeif", "extensions") \
                    or section.startswith(("include.", "includeif.", "extensions.")):
                return False
            continue
        if section is None:
            return False
        key, _, raw_value = line.partition("=")
        key = key.strip().lower()
        if not key or not all(c.isalnum() or c == "-" for c in key):
            return False
        if section == "core" and key in _DECIDING and not _plain_core(key, raw_value):
            return False
    return True


def _plain_core(key: str, raw_value: str) -> bool:
    value = _value(raw_value)
    if value is None or key == "worktree":
        return False
    if key == "bare":
        return value.lower() in ("false", "no", "off", "0")
    return value in ("0", "1")


def config_path(common_dir: str | os.PathLike[str]) -> str:
    return os.path.join(common_dir, "config")
