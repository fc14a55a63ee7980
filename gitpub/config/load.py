"""Loading ``.gitpub.yaml``: the file, the YAML, and the checks that come before validation.

The file lives at the repository root and is committed, so every machine publishing into the same
site applies the same rules. It is parsed (PyYAML's safe loader, refusing duplicate keys) and
validated (``config.schema``) every time it is loaded. Anchors and aliases are allowed but
bounded: the document's node graph is measured with every alias expanded *before* anything is
built from it, and refused past ``MAX_NODES`` (a "billion laughs" file is an error naming the
file, not 3 GB of memory).
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from typing import Any

import yaml

from gitpub.config.model import Config
from gitpub.config.schema import Parser
from gitpub.core.errors import CONFIG_FILE, ConfigError
from gitpub.core.globs import shown

_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """A safe YAML loader (the C one when available) that refuses duplicate keys.

    PyYAML keeps the last of two equal keys without a word; in a config file that is almost
    always a mistake (two ``gates:`` sections, say), so it is an error here.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False
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


#: The most YAML nodes a file may describe once its aliases are expanded. A real
#: ``.gitpub.yaml`` has a few hundred; a "billion laughs" file (aliases of aliases) has 10**9.
MAX_NODES = 100_000


def bound_aliases(node: yaml.Node, source: str) -> None:
    """Refuse a document whose aliases would expand past ``MAX_NODES`` nodes, or that refers
    to itself, before anything is built from it (PyYAML builds aliases as shared objects, but
    everything that walks the result — validation — expands them)."""
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
    try:
        loader = StrictLoader(text)  # a SafeLoader subclass: safe
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


def load_config(repo_root: str | os.PathLike[str]) -> Config:
    """The configuration of the repository at ``repo_root``: its ``.gitpub.yaml``, else defaults.

    The file is read from the working tree, where a user edits it before committing it.
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
    return parse_config(text, CONFIG_FILE)


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
