"""Whether a repository's configuration is plain: nothing in it changes how it is read.

Opening a repository with dulwich costs ~40 ms of imports; ``status`` needs none of it when the
repository is an ordinary one. Ordinary is decided here, from the repository's own ``config``
file (the one dulwich reads when it opens a repository), by a scan that understands only the
common shapes of git's format and says *not plain* for anything else: an ``[extensions]``
section (``objectFormat``, ``refStorage``, ``worktreeConfig``, …), an include,
``core.worktree``, ``core.bare`` set to true, a ``repositoryformatversion`` other than 0 or 1,
any ``core`` key but the everyday ones that dulwich does not read when it opens a repository (it
parses compression levels, size limits and more, and refuses a value it cannot parse; it limits
the size of a loose object it inflates to ``core.bigFileThreshold``), any ``pack`` or ``repack``
setting, a line continued with a backslash, a key after a section header on one line, a line it
cannot parse. Lines end where git and dulwich end them, at LF only (a form feed or U+2028 in a
comment does not start a new line, so it cannot hide a ``[core]`` setting behind a header that
git never sees), and names are ASCII, as git's are. Not plain means: open the repository the
full way, with dulwich, exactly as before (``Repository``), so that whatever dulwich would
accept or refuse there, it still does.
"""

from __future__ import annotations

import os

#: The ``core`` keys whose value decides how the repository is opened (lower case).
_DECIDING = {"bare", "worktree", "repositoryformatversion"}
#: The other ``core`` keys a repository may have and still be plain: what ``git init`` and
#: ``git clone`` write, and everyday settings that neither dulwich's opening nor reading
#: objects depend on (lower case).
_EVERYDAY = {"filemode", "logallrefupdates", "ignorecase", "precomposeunicode", "symlinks",
             "autocrlf", "eol", "safecrlf", "hookspath", "editor", "pager", "excludesfile",
             "attributesfile", "quotepath", "sparsecheckout", "untrackedcache", "fsmonitor",
             "abbrev", "whitespace", "checkstat", "trustctime", "preloadindex", "splitindex",
             "askpass", "sshcommand", "notesref", "commentchar"}
#: Sections whose presence alone makes a configuration not plain: includes, extensions, and
#: what dulwich reads (and may refuse) when it opens a repository.
_NOT_PLAIN = ("include", "includeif", "extensions", "pack", "repack")


def _is_name_char(c: str) -> bool:
    """A character git allows in a section or key name: ASCII letters, digits and ``-`` (not
    the other letters ``str.isalnum`` knows, nor those ``str.lower`` maps onto ASCII)."""
    return c.isascii() and (c.isalnum() or c == "-")


def _value(raw: str) -> str | None:
    """A value without its trailing comment; None when it is quoted or escaped (not plain)."""
    for mark in ("#", ";"):
        raw = raw.split(mark, 1)[0]
    if '"' in raw or "\\" in raw:
        return None
    return raw.strip(_BLANKS)


def _header(line: str) -> str | None:
    """The section name of a ``[section]`` or ``[section "sub"]`` line (lower case, the
    subsection dropped); None for any other shape."""
    end = line.find("]")
    rest = line[end + 1:].strip(_BLANKS) if end > 0 else "x"
    if rest and rest[0] not in "#;":
        return None
    inner = line[1:end].strip(_BLANKS)
    name, _, sub = inner.partition(" ")
    if not name or not all(_is_name_char(c) or c == "." for c in name):
        return None
    if sub and not (sub.startswith('"') and sub.endswith('"') and len(sub) >= 2):
        return None
    return name.lower()


def is_plain(path: str, *, bare_matters: bool = True) -> bool:
    """Whether the configuration file at ``path`` (absent: plain) is plain (see the module).
    ``bare_matters=False``: ``core.bare`` does not count — a repository opened at a location
    already found (``Repository``) is bare or not by that location, whatever it says."""
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
    return _plain_text(text, bare_matters)


#: The blanks git skips around names and values (its ``isspace``): not the form feed, vertical
#: tab or Unicode spaces that ``str.strip`` would also remove.
_BLANKS = " \t\r"


def _plain_text(text: str, bare_matters: bool) -> bool:
    section: str | None = None
    for raw in text.split("\n"):  # git and dulwich end a line at LF only: not splitlines()
        line = raw.strip(_BLANKS)
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            return False
        if line.startswith("["):
            section = _header(line)
            if section is None or section.split(".", 1)[0] in _NOT_PLAIN:
                return False
            continue
        if section is None:
            return False
        key, _, raw_value = line.partition("=")
        key = key.strip(_BLANKS).lower()
        if not key or not all(_is_name_char(c) for c in key):
            return False
        if section == "core" and not ((key == "bare" and not bare_matters)
                                      or _plain_core(key, raw_value)):
            return False
    return True


def _plain_core(key: str, raw_value: str) -> bool:
    if key in _EVERYDAY:
        return True
    if key not in _DECIDING:
        return False
    value = _value(raw_value)
    if value is None or key == "worktree":
        return False
    if key == "bare":
        return value.lower() in ("false", "no", "off", "0")
    return value in ("0", "1")


def config_path(common_dir: str | os.PathLike[str]) -> str:
    return os.path.join(common_dir, "config")
