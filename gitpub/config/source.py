"""The configuration's source, read without building it: the file's text and its cached data.

Building a ``Config`` means importing its definitions and its validator (a dozen dataclasses,
the rules, the sanitizer: ~15 ms), and ``git pub status`` needs the configuration only in rare
cases (a CONFLICT's hint, a job on the remote only, a published job's channels). So a command
first looks here, in a module that imports none of them: the file's exact text, and the data
``config.load`` cached for that text. Such data passed validation when it was written, by the
validator the entry names (``validator_stamp``: the size and time of the validator's own
source files); with the same validator, validating it again can only give the same answer, so
``config.load.config_later`` builds the Config from it when it is first used, not before. A
missing file, another text, another validator, or anything unreadable: the full way
(``config.load``), with its errors, at once — as before.
"""

from __future__ import annotations

import json
import os

CONFIG_FILE = ".gitpub.yaml"
CACHE_NAME = "config-cache.json"
CACHE_VERSION = 3  # v1 copied every file's data, secrets included; v2 had no validator stamp

#: The sources whose code decides whether data is a valid configuration (relative to the
#: ``gitpub`` package); a test keeps the list complete.
VALIDATOR = ("config/model.py", "config/schema.py", "config/channel_rules.py",
             "config/load.py", "config/source.py", "core/globs.py", "core/paths.py",
             "core/sanitize.py", "core/secretrules.py", "core/errors.py", "core/digest.py")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TYPE_CHECKING = False  # mypy treats this name as True
if TYPE_CHECKING:
    import pathlib


def validator_stamp() -> str | None:
    """What identifies this validator: gitpub's version, and the size and modification time of
    each of its source files (an upgrade that kept both still changes the version); None when
    one cannot be found (then nothing is trusted without validation)."""
    from gitpub import __version__

    parts = [f"gitpub:{__version__}"]
    for name in VALIDATOR:
        try:
            st = os.stat(os.path.join(_PACKAGE, name))
        except OSError:
            return None
        parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    return ";".join(parts)


def validator_digest() -> str | None:
    """What identifies this validator wherever it is installed: the SHA-256 of its source
    files' contents (``verify.facts``: facts vouched for by a run with another validator are
    not believed); None when one cannot be read."""
    from gitpub.core.digest import sha256_hex

    parts = []
    for name in VALIDATOR:
        try:
            with open(os.path.join(_PACKAGE, name), "rb") as file:
                parts.append(b"%s\0%s" % (name.encode(), sha256_hex(file.read()).encode()))
        except OSError:
            return None
    return sha256_hex(b"\n".join(parts))


def guess_remote_branch(text: str) -> tuple[str, str] | None:
    """A *guess* of the ``remote`` and ``branch`` a ``.gitpub.yaml`` names, without PyYAML:
    plain top-level ``key: value`` lines only, anything else None. Never believed: ``confirm``
    fetches with it, then checks it against the file's facts (vouched for, or validated) and
    fetches again if it was wrong."""
    found = {"remote": "origin", "branch": "main"}
    seen: set[str] = set()
    for line in text.splitlines():
        if not line or line[0] in " #":
            continue
        if not (line[0].isascii() and (line[0].isalpha() or line[0] == "_")):
            return None  # a document marker, a flow mapping, an alias, a tab, a directive
        key, sep, value = line.partition(":")
        if key not in found:
            continue
        value = value.split(" #", 1)[0].strip()
        if not sep or key in seen or not _plain_name(value, slash=key == "branch"):
            return None
        seen.add(key)
        found[key] = value
    return found["remote"], found["branch"]


def _plain_name(value: str, *, slash: bool) -> bool:
    """A name no git command could take for an option, a path or a revision expression: a
    letter or digit, then letters, digits and ``._-`` (and ``/`` in a branch), no ``..``."""
    allowed = "._-/" if slash else "._-"
    return bool(value) and value[0].isascii() and value[0].isalnum() and \
        all(c.isascii() and (c.isalnum() or c in allowed) for c in value) and \
        ".." not in value and "//" not in value and not value.endswith(("/", ".", ".lock"))


def cache_key(text: str) -> str:
    """The cache key of a file's text: its SHA-256."""
    from gitpub.core.digest import sha256_hex

    return sha256_hex(text.encode())


def read_text(repo_root: pathlib.Path) -> str | None:
    """The text of ``.gitpub.yaml`` at ``repo_root``; None when it is absent or cannot be
    read as text (``config.load`` then says why, or gives the defaults)."""
    try:
        with open(os.path.join(repo_root, CONFIG_FILE), encoding="utf-8-sig") as file:
            return file.read()
    except (OSError, UnicodeDecodeError):
        return None


def read_cache(cache_dir: pathlib.Path) -> dict[str, object] | None:
    """The cache entry under ``cache_dir``, or None (absent, unreadable, not an entry)."""
    try:
        with open(os.path.join(cache_dir, CACHE_NAME), encoding="utf-8") as file:
            cached = json.load(file)
    except (OSError, ValueError, RecursionError):
        return None
    return cached if isinstance(cached, dict) else None


def validated_data(text: str, cache_dir: pathlib.Path) -> tuple[bool, object]:
    """``(True, data)`` when the cache holds the data of exactly ``text``, validated by this
    same validator; else ``(False, None)``."""
    cached = read_cache(cache_dir)
    stamp = validator_stamp()
    if (cached is None or stamp is None or cached.get("v") != CACHE_VERSION
            or cached.get("validator") != stamp or "data" not in cached
            or cached.get("key") != cache_key(text)):
        return False, None
    return True, cached["data"]
