"""The YAML reader of ``.gitpub.yaml`` and of Markdown front matter: PyYAML's safe loader (the C
one when available), refusing duplicate keys, aliases bounded before anything is built.

Apart from ``config.load`` so that PyYAML is loaded only when a YAML text is read: a command
whose configuration is cached (``config.load``) and whose articles have no YAML front matter
never loads it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml

from gitpub.core.errors import ConfigError
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


def load_yaml(text: str, source: str) -> object:
    """The value of the YAML document ``text`` (None for an empty one); ConfigError naming
    ``source`` for anything that is not valid, safe YAML within the bounds."""
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
