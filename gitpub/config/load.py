"""Loading ``.gitpub.yaml``: the file, the YAML, and the checks that come before validation.

The file lives at the repository root and is committed, so every machine publishing into the same
site applies the same rules. It is parsed (``config.yamlread``: PyYAML's safe loader, refusing
duplicate keys) and validated (``config.schema``) every time it is loaded. Anchors and aliases
are allowed but bounded: the document's node graph is measured with every alias expanded
*before* anything is built from it, and refused past ``MAX_NODES`` (a "billion laughs" file is
an error naming the file, not 3 GB of memory). The working tree's file is parsed once per
content: its parsed value is cached (``load_config``), never its validation.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from pathlib import Path

from gitpub import __version__
from gitpub.config.model import Config
from gitpub.config.schema import Parser
from gitpub.core.errors import CONFIG_FILE, ConfigError
from gitpub.core.files import write_atomic


def parse_config(text: str, source: str = CONFIG_FILE) -> Config:
    """The Config described by the YAML ``text``; ``source`` names the file in error messages.

    An empty file, or one with only comments, means all defaults; so does an absent key.
    Raises ConfigError for anything else that is not exactly right.
    """
    from gitpub.config.yamlread import load_yaml

    return Parser(source).config(load_yaml(text, source))


def load_config(repo_root: str | os.PathLike[str],
                cache_dir: str | os.PathLike[str] | None = None) -> Config:
    """The configuration of the repository at ``repo_root``: its ``.gitpub.yaml``, else defaults.

    The file is read from the working tree, where a user edits it before committing it. With
    ``cache_dir`` (``.git/pub``), the YAML it holds is read once per content: ``CACHE_FILE``
    keeps the parsed value under the SHA-256 of the file's exact bytes, and a command whose
    configuration did not change loads no YAML parser. The value is validated every time, as
    a parsed one is; a cache file that is not exactly what this version writes, for these
    bytes, is ignored (and replaced). Only what the working tree holds is cached: the committed
    configuration ``confirm`` trusts is always parsed (``verify.facts``).
    """
    path = os.path.join(repo_root, CONFIG_FILE)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return Config()
    except OSError as error:
        raise _unreadable(error) from None
    try:  # as a text-mode read decodes it: a BOM dropped, universal newlines
        text = data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError:
        read = _read_text(path)  # its own error, as ever (or the file changed meanwhile)
        return Config() if read is None else parse_config(read, CONFIG_FILE)
    if cache_dir is None:
        return parse_config(text, CONFIG_FILE)
    cache = os.path.join(cache_dir, CACHE_FILE)
    key = hashlib.sha256(data).hexdigest()
    found = _cached(cache, key)
    if found is not None:
        return Parser(CONFIG_FILE).config(found[0])
    from gitpub.config.yamlread import load_yaml

    value = load_yaml(text, CONFIG_FILE)
    exact = _as_json(value)  # before validation: nothing of the value is changed then
    config = Parser(CONFIG_FILE).config(value)
    if exact is not None:
        _store(cache, key, exact)
    return config


def _read_text(path: str) -> str | None:
    """The file read in text mode (None: it is not there), or ConfigError."""
    try:
        with open(path, encoding="utf-8-sig") as file:
            return file.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{CONFIG_FILE}: not valid UTF-8 (byte {error.start})",
            "save the file as UTF-8",
            source=CONFIG_FILE,
        ) from None
    except OSError as error:
        raise _unreadable(error) from None


def _unreadable(error: OSError) -> ConfigError:
    return ConfigError(f"{CONFIG_FILE}: cannot read: {error.strerror or error}",
                       source=CONFIG_FILE)


#: The cache of the parsed ``.gitpub.yaml`` (one entry: the working tree's file), in
#: ``.git/pub``. Its format, checked whole on every read (``_cached``): ``format``, ``version``
#: and ``gitpub`` (this version's, nothing else), ``sha256`` (of the file's exact bytes),
#: ``value`` (the YAML's value, only when JSON holds it exactly: ``_as_json``) and ``check``
#: (the SHA-256 of ``sha256`` and ``value``: a damaged file is not read as another value).
CACHE_FILE = "config-cache.json"
_CACHE_FORMAT = "gitpub parsed .gitpub.yaml"
_CACHE_VERSION = 1
_CACHE_KEYS = {"format", "version", "gitpub", "sha256", "check", "value"}
#: A cache file larger than this is not read (a configuration that large is parsed each time).
_CACHE_MAX = 1 << 20


def _check(key: str, value_json: str) -> str:
    return hashlib.sha256(f"{key}\n{value_json}".encode()).hexdigest()


def _exact(value: object) -> bool:
    """Whether JSON gives ``value`` back exactly: the same types (no YAML dates, sets, binary,
    non-string keys, infinities), the same values."""
    if value is None or type(value) in (str, bool, int):
        return True
    if isinstance(value, float):
        return type(value) is float and math.isfinite(value)
    if isinstance(value, list):
        return type(value) is list and all(_exact(item) for item in value)
    if isinstance(value, dict):
        return type(value) is dict and all(type(k) is str and _exact(v)
                                           for k, v in value.items())
    return False


def _as_json(value: object) -> str | None:
    """``value`` as canonical JSON, or None when JSON would not give it back exactly."""
    try:
        if not _exact(value):
            return None
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    except (RecursionError, ValueError):  # nested too deeply for either: never cached
        return None


def _cached(cache: str, key: str) -> tuple[object] | None:
    """The cached value for the file of SHA-256 ``key``, in a 1-tuple; None when there is none,
    or the cache file is not exactly one this version wrote for these bytes."""
    try:
        with open(cache, "rb") as file:
            raw = file.read(_CACHE_MAX + 1)
        if len(raw) > _CACHE_MAX:  # not one this wrote for a configuration gitpub reads
            return None
        record = json.loads(raw)
        if not (type(record) is dict and set(record) == _CACHE_KEYS
                and record["format"] == _CACHE_FORMAT and record["version"] == _CACHE_VERSION
                and record["gitpub"] == __version__ and record["sha256"] == key):
            return None
        value = record["value"]
        canonical = _as_json(value)
        if canonical is None or record["check"] != _check(key, canonical):
            return None
    except (OSError, ValueError, RecursionError):
        return None
    return (value,)


def _store(cache: str, key: str, value_json: str) -> None:
    """Write the cache file whole (a new file renamed over the old one), if ``.git/pub`` is
    there; a failure only means the next command parses the YAML again."""
    if not os.path.isdir(os.path.dirname(cache)):
        return
    record = (f'{{"format":{json.dumps(_CACHE_FORMAT)},"version":{_CACHE_VERSION},'
              f'"gitpub":{json.dumps(__version__)},"sha256":"{key}",'
              f'"check":"{_check(key, value_json)}","value":{value_json}}}\n')
    if len(record) > _CACHE_MAX:
        return
    with contextlib.suppress(OSError):  # a new file renamed over the old (core.files)
        write_atomic(Path(cache), record.encode("ascii"))


def decode_config(data: bytes, source: str) -> str:
    """A ``.gitpub.yaml``'s bytes as text (UTF-8, a BOM allowed), or ConfigError."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{source}: not valid UTF-8 (byte {error.start})",
                          "save the file as UTF-8", source=source) from None


def default_config_text() -> str:
    """The commented template ``git pub init`` writes; it parses to ``Config()``."""
    from importlib import resources  # only here: importing it costs every command

    template = resources.files("gitpub.config").joinpath("default_config.yaml")
    return template.read_text(encoding="utf-8")


def __getattr__(name: str) -> object:
    """``StrictLoader``, ``bound_aliases``, ``MAX_NODES``: the YAML reader's, from
    ``config.yamlread`` (PyYAML is loaded only when they are asked for)."""
    if name in ("StrictLoader", "bound_aliases", "MAX_NODES"):
        from gitpub.config import yamlread

        return getattr(yamlread, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
