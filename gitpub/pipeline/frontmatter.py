"""Front matter as static site generators write it, and an article's title.

Three formats, told apart by how the file opens (as Hugo does): YAML between ``---`` lines
(closed by ``---`` or ``...``), TOML between ``+++`` lines (read with the standard library's
``tomllib``), or a JSON object at the very start. Each is parsed with its own parser and must be
a mapping; the gate sends a file whose front matter does not parse to REVIEW (``problem``).

YAML front matter is read as the configuration is (``config.yamlread``): a key may appear only once
(PyYAML would silently keep the last ``title:``, Hugo refuses the file), and aliases are bounded
before anything is expanded. Nesting is bounded in every format: past ``MAX_DEPTH`` levels (or
where a parser would run out of stack) the front matter is "nested too deeply", a gate problem,
never a ``RecursionError``.

The title (the commit's subject) is the front matter's ``title`` as its parser reads it, when that
is a non-empty string (``title: null`` or ``~`` is no title), else the first Markdown heading of
the *body*: outside the front matter, fenced code blocks and HTML comments — a ``# comment`` in
TOML front matter or a shell comment in a code block is not a heading. Headings are read without
regular expressions that backtrack: the time is linear in the line's length.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from gitpub.core.errors import ConfigError

Format = Literal["yaml", "toml", "json"]

MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")

_OPEN = {"---": "yaml", "+++": "toml"}
_CLOSE = {"yaml": ("---", "..."), "toml": ("+++",)}
#: A JSON object's start: ``{`` then a key or ``}`` (so ``{{< shortcode >}}`` and ``{% tag %}``
#: bodies are not front matter).
_JSON_START = re.compile(r'\{\s*["}]')


@dataclass(frozen=True)
class FrontMatter:
    format: Format
    block: str  # the front matter without its delimiters
    body: str  # the rest of the file: the article itself
    closed: bool
    first_line: int  # the file line (1-based) where ``block`` starts


def split(text: str) -> FrontMatter | None:
    """The front matter of a Markdown text, if it opens with one."""
    text = text.removeprefix("\ufeff")
    if _JSON_START.match(text):
        return _split_json(text)
    first, newline, rest = text.partition("\n")
    kind = _OPEN.get(first.rstrip())
    if kind is None or not newline:
        return None
    fmt: Format = "yaml" if kind == "yaml" else "toml"
    lines = rest.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.rstrip() in _CLOSE[fmt]:
            return FrontMatter(fmt, "".join(lines[:i]), "".join(lines[i + 1:]), True, 2)
    return FrontMatter(fmt, rest, "", False, 2)


def _split_json(text: str) -> FrontMatter:
    try:
        _, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        return FrontMatter("json", text, "", False, 1)  # ``problem`` says where it breaks
    return FrontMatter("json", text[:end], text[end:].removeprefix("\n"), True, 1)


def parse(fm: FrontMatter) -> tuple[dict[str, object] | None, str | None]:
    """(the front matter's mapping, None) or (None, what is wrong with it)."""
    if not fm.closed and fm.format != "json":
        return None, f"front matter is not closed (missing '{_CLOSE[fm.format][0]}')"
    parser = {"toml": _parse_toml, "json": _parse_json, "yaml": _parse_yaml}[fm.format]
    try:
        data, wrong = parser(fm)
    except RecursionError:
        return None, _TOO_DEEP
    if data is not None and _depth(data) > MAX_DEPTH:
        return None, _TOO_DEEP
    return data, wrong


#: The deepest nesting of lists and mappings front matter may have (Hugo's own pages use 4).
MAX_DEPTH = 100
_TOO_DEEP = f"front matter is nested too deeply (more than {MAX_DEPTH} levels)"


def _depth(data: object) -> int:
    """How deeply lists and mappings nest in ``data`` (iteratively: no stack to run out of;
    aliases make shared values, counted once per level they appear at)."""
    deepest, level = 0, [data]
    while level:
        deepest += 1
        if deepest > MAX_DEPTH:
            return deepest
        nested: list[object] = []
        for value in level:
            if isinstance(value, dict):
                nested += [v for v in value.values() if isinstance(v, dict | list)]
            elif isinstance(value, list):
                nested += [v for v in value if isinstance(v, dict | list)]
        level = nested
    return deepest - 1


def _parse_yaml(fm: FrontMatter) -> tuple[dict[str, object] | None, str | None]:
    import yaml  # loaded only for a text with YAML front matter

    from gitpub.config.yamlread import StrictLoader, bound_aliases

    try:
        loader = StrictLoader(fm.block)
        try:
            node = loader.get_single_node()
            if node is not None:
                bound_aliases(node, "front matter")
            data = None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except ConfigError:
        return None, "front matter expands to too many values (through its aliases)"
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" at line {mark.line + fm.first_line}" if mark is not None else ""
        problem = e.problem or ""
        if "nesting depth" in problem:
            return None, _TOO_DEEP
        why = f": {problem}" if problem.startswith("found duplicate key") else ""
        return None, f"front matter is not valid YAML{where}{why}"
    except yaml.YAMLError:
        return None, "front matter is not valid YAML"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return None, "front matter is not a mapping"
    return data, None


def _parse_toml(fm: FrontMatter) -> tuple[dict[str, object] | None, str | None]:
    import tomllib  # loaded only for a text with TOML front matter (rare)

    try:
        return tomllib.loads(fm.block), None
    except tomllib.TOMLDecodeError as e:
        # "Invalid value (at line 1, column 9)": lines of the block; say the file's line.
        where = re.sub(r"at line (\d+)",
                       lambda m: f"at line {int(m.group(1)) + fm.first_line - 1}", str(e))
        return None, f"front matter is not valid TOML: {where}"


def _parse_json(fm: FrontMatter) -> tuple[dict[str, object] | None, str | None]:
    try:
        data = json.loads(fm.block)
    except ValueError as e:
        line = getattr(e, "lineno", None)
        return None, "front matter is not valid JSON" + (f" at line {line}" if line else "")
    if not isinstance(data, dict):
        return None, "front matter is not a mapping"
    return data, None


def problem(text: str) -> str | None:
    """Why the text's front matter is not acceptable, or None (also when it has none)."""
    fm = split(text)
    return None if fm is None else parse(fm)[1]


# -- the title ----------------------------------------------------------------------------

def title_of(path: str, data: bytes) -> str | None:
    """The article's title (front matter ``title``, else its first heading); None for files
    that are not Markdown."""
    if not path.lower().endswith(MARKDOWN_SUFFIXES):
        return None
    return title(data.decode("utf-8", "replace"))


def title(text: str) -> str | None:
    """The article's title: front matter ``title``, else the body's first heading."""
    fm = split(text)
    body = text.removeprefix("\ufeff") if fm is None else fm.body
    if fm is not None and fm.closed:
        data, _ = parse(fm)
        value = None if data is None else data.get("title")
        found = " ".join(value.split()) if isinstance(value, str) else None  # one line
        if found:
            return found
    return first_heading(body)


_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_SETEXT_1 = re.compile(r" {0,3}=+[ \t]*")


def first_heading(body: str) -> str | None:
    """The text of the first ATX (``# Title``) or setext (``Title`` over ``===``) heading of a
    Markdown body, skipping fenced code blocks and HTML comments."""
    fence: str | None = None
    in_comment = False
    previous = ""
    for line in body.splitlines():
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            continue
        if in_comment:
            in_comment = "-->" not in line
            continue
        if (opened := _FENCE.fullmatch(line)) and not (
                opened.group(1)[0] == "`" and "`" in opened.group(2)):
            fence, previous = opened.group(1), ""
            continue
        if line.lstrip().startswith("<!--"):
            in_comment = "-->" not in line
            previous = ""
            continue
        if heading := atx_heading(line):
            return heading
        if previous.strip() and _SETEXT_1.fullmatch(line):
            return previous.strip()
        previous = line
    return None


def atx_heading(line: str) -> str | None:
    """The text of an ATX heading line (CommonMark: up to 3 spaces, 1 to 6 ``#``, a space or
    tab, the text, an optional closing run of ``#`` after a space or tab); None for any other
    line or an empty heading. Linear in the line's length (no backtracking)."""
    rest = line.lstrip(" ")
    if len(line) - len(rest) > 3:
        return None  # indented code
    marks = len(rest) - len(rest.lstrip("#"))
    if not 1 <= marks <= 6:
        return None
    text = rest[marks:]
    if text and text[0] not in " \t":
        return None
    text = text.strip(" \t")
    closing = text.rstrip("#")
    if not closing:
        return None  # only a closing run: an empty heading
    if len(closing) < len(text) and closing[-1] in " \t":
        text = closing
    return text.strip(" \t") or None
