"""Loading ``.gitpub.yaml``: the file, the YAML, and a cache of the parsed data.

The file lives at the repository root and is committed, so every machine publishing into the same
site applies the same rules. PyYAML is imported only here and only when a file is parsed; the
parsed data may be cached as JSON under ``.git/pub/`` (keyed by the file's exact text), so a
command does not pay PyYAML's import when the file did not change. The data is validated every
time all the same (``config.schema``), and only data that passed is cached, with the stamp of
the validator that passed it (``config.source``: a command may then build the Config only when
it needs it, ``app.session``). Anchors and aliases
are allowed but bounded: the document's node graph is measured with every alias expanded
*before* anything is built from it, and refused past ``MAX_NODES`` (a "billion laughs" file is
an error naming the file, not 3 GB of memory).
"""

from __future__ import annotations

import contextlib
import functools
import os

from gitpub.config.model import CONFIG_FILE, Config, ConfigError
from gitpub.config.schema import Parser
from gitpub.config.source import (
    CACHE_NAME,
    CACHE_VERSION,
    cache_key,
    read_cache,
    validator_stamp,
)
from gitpub.core.globs import shown

TYPE_CHECKING = False  # typing costs ~1.5 ms to import; mypy treats this name as True
if TYPE_CHECKING:
    import pathlib
    from collections.abc import Hashable
    from typing import Any

    import yaml


@functools.cache
def strict_loader() -> type[yaml.SafeLoader]:
    """A safe YAML loader (the C one when available) that refuses duplicate keys.

    PyYAML keeps the last of two equal keys without a word; in a config file that is almost
    always a mistake (two ``gates:`` sections, say), so it is an error here.
    """
    import yaml

    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[valid-type,misc]
        def construct_mapping(
            self, node: yaml.MappingNode, deep: bool = False
        ) -> dict[Hashable, Any]:
            seen: set[object] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                except TypeError:  # unhashable: the base class reports it
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {shown(key)}",
                        key_node.start_mark,
                    )
                seen.add(key)
            result: dict[Hashable, Any] = super().construct_mapping(node, deep=deep)
            return result

    return Loader


#: The most YAML nodes a file may describe once its aliases are expanded. A real
#: ``.gitpub.yaml`` has a few hundred; a "billion laughs" file (aliases of aliases) has 10**9.
MAX_NODES = 100_000


def bound_aliases(node: yaml.Node, source: str) -> None:
    """Refuse a document whose aliases would expand past ``MAX_NODES`` nodes, or that refers
    to itself, before anything is built from it (PyYAML builds aliases as shared objects, but
    everything that walks the result — validation, the JSON cache — expands them)."""
    import yaml

    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(n: yaml.Node) -> int:
        key = id(n)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise ConfigError(f"{source}: line {n.start_mark.line + 1}: an alias refers to "
                              "the node that contains it", source=source)
        on_path.add(key)
        total = 1
        if isinstance(n, yaml.SequenceNode):
            total += sum(size(child) for child in n.value)
        elif isinstance(n, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in n.value)
        on_path.discard(key)
        sizes[key] = total
        if total > MAX_NODES:
            raise ConfigError(
                f"{source}: the document expands to more than {MAX_NODES} values "
                "(through its aliases)",
                "write the values out, or use fewer nested anchors and aliases", source=source)
        return total

    size(node)


def _load_yaml(text: str, source: str) -> object:
    import yaml

    try:
        loader = strict_loader()(text)  # a SafeLoader subclass: safe
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            bound_aliases(node, source)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except RecursionError:
        raise ConfigError(f"{source}: invalid YAML: nested too deeply", source=source) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = error.problem or error.context or "syntax error"
        hint = None
        if problem.startswith("found duplicate key"):
            hint = "a key may appear only once in a mapping; merge the two"
        elif isinstance(error, yaml.scanner.ScannerError | yaml.parser.ParserError):
            hint = "check the indentation and quoting on that line and the one before"
        raise ConfigError(
            f"{source}: {where}invalid YAML: {problem}", hint, source=source
        ) from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{source}: invalid YAML: {error}", source=source) from None


def parse_config(text: str, source: str = CONFIG_FILE) -> Config:
    """The Config described by the YAML ``text``; ``source`` names the file in error messages.

    An empty file, or one with only comments, means all defaults; so does an absent key.
    Raises ConfigError for anything else that is not exactly right.
    """
    return Parser(source).config(_load_yaml(text, source))


def load_config(repo_root: pathlib.Path, cache_dir: pathlib.Path | None = None) -> Config:
    """The configuration of the repository at ``repo_root``: its ``.gitpub.yaml``, else defaults.

    The file is read from the working tree, where a user edits it before committing it. With
    ``cache_dir``, the YAML's data is cached there as JSON keyed by the file's exact text, so a
    command does not pay PyYAML's import (~15 ms) when the file has not changed; the data is
    validated every time all the same.
    """
    path = os.path.join(repo_root, CONFIG_FILE)
    try:
        with open(path, encoding="utf-8-sig") as file:
            text = file.read()
    except FileNotFoundError:
        return Config()
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{CONFIG_FILE}: not valid UTF-8 (byte {error.start})",
            "save the file as UTF-8",
            source=CONFIG_FILE,
        ) from None
    except OSError as error:
        raise ConfigError(
            f"{CONFIG_FILE}: cannot read: {error.strerror or error}", source=CONFIG_FILE
        ) from None
    return config_from_text(text, CONFIG_FILE, cache_dir)


def config_from_text(text: str, source: str = CONFIG_FILE,
                     cache_dir: pathlib.Path | None = None) -> Config:
    """The Config of a ``.gitpub.yaml`` whose text is ``text`` (read from a file or a commit),
    through the cache in ``cache_dir`` when given; ``source`` names it in error messages."""
    if cache_dir is None:
        return parse_config(text, source)
    return _cached_config(text, cache_dir, source)


def decode_config(data: bytes, source: str) -> str:
    """A ``.gitpub.yaml``'s bytes as text (UTF-8, a BOM allowed), or ConfigError."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(f"{source}: not valid UTF-8 (byte {error.start})",
                          "save the file as UTF-8", source=source) from None


def from_validated(data: object) -> Config:
    """The Config of data that passed validation by this validator before (``config.source``:
    the cache) — validated again all the same; it cannot fail."""
    return Parser(CONFIG_FILE).config(data)


def _cached_config(text: str, cache_dir: pathlib.Path, source: str = CONFIG_FILE) -> Config:
    """``parse_config(text)``, with the YAML's data through a JSON cache (derived data: a bad
    cache is a miss). Only data that passed validation is ever cached.

    A file holding text the sanitizer would redact (a token inside a gate command) is not
    cached: the cache would be a second, unsanitized copy of the secret under ``.git/pub/``.
    Its data is the command gitpub must run, so a sanitized copy would be wrong, and such a
    file is parsed each time instead (PyYAML's ~15 ms); a cache left by another file goes.
    """
    key = cache_key(text)
    path = os.path.join(cache_dir, CACHE_NAME)
    cached = read_cache(cache_dir)
    if (cached is not None and cached.get("v") == CACHE_VERSION
            and cached.get("key") == key and "data" in cached):
        config = Parser(source).config(cached["data"])
        if cached.get("validator") != validator_stamp():  # passed this validator just now
            _write_cache(path, cache_dir, text, key, cached["data"])
        return config
    data = _load_yaml(text, source)
    config = Parser(source).config(data)  # refuses bad data before anything is written
    _write_cache(path, cache_dir, text, key, data)
    return config


def _write_cache(path: str, cache_dir: pathlib.Path, text: str, key: str,
                 data: object) -> None:
    import json

    from gitpub.core.sanitize import contains_secret

    try:
        blob = json.dumps({"v": CACHE_VERSION, "key": key, "validator": validator_stamp(),
                           "data": data})
        if contains_secret(text) or contains_secret(blob):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            return
        if json.loads(blob)["data"] != data:
            return  # not plain JSON data (e.g. a YAML date): do not cache
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as file:
            file.write(blob)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError, RecursionError):
        pass


def default_config_text() -> str:
    """The commented template ``git pub init`` writes; it parses to ``Config()``."""
    from importlib import resources

    template = resources.files("gitpub.config").joinpath("default_config.yaml")
    return template.read_text(encoding="utf-8")
