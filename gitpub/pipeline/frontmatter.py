"""Front matter as static site generators write it, and an article's title.

Three formats, told apart by how the file opens (as Hugo does): YAML between ``---`` lines
(closed by ``---`` or ``...``), TOML between ``+++`` lines (read with the standard library's
``tomllib``), or a JSON object at the very start. Each is parsed with its own parser and must be
a mapping; the gate sends a file whose front matter does not parse to REVIEW (``problem``).

The title (the commit's subject) is the front matter's ``title`` when it is a non-empty string,
else the first Markdown heading of the *body*: outside the front matter, fenced code blocks and
HTML comments — a ``# comment`` in TOML front matter or a shell comment in a code block is not a
heading. PyYAML costs ~12 ms to import, so a plain ``title:`` line is read without it (see
``_plain_title``, property-tested against PyYAML); TOML and JSON parsers are cheap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    Format = Literal["yaml", "toml", "json"]

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
    import json

    try:
        _, end = json.JSONDecoder().raw_decode(text)
    except ValueError:
        return FrontMatter("json", text, "", False, 1)  # ``problem`` says where it breaks
    return FrontMatter("json", text[:end], text[end:].removeprefix("\n"), True, 1)


def parse(fm: FrontMatter) -> tuple[dict[str, object] | None, str | None]:
    """(the front matter's mapping, None) or (None, what is wrong with it)."""
    if not fm.closed and fm.format != "json":
        return None, f"front matter is not closed (missing '{_CLOSE[fm.format][0]}')"
    if fm.format == "toml":
        return _parse_toml(fm)
    if fm.format == "json":
        return _parse_json(fm)
    return _parse_yaml(fm)


def _parse_yaml(fm: FrontMatter) -> tuple[dict[str, object] | None, str | None]:
    import yaml

    try:
        data = yaml.safe_load(fm.block)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + fm.first_line}" if mark is not None else ""
        return None, f"front matter is not valid YAML{where}"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return None, "front matter is not a mapping"
    return data, None


def _parse_toml(fm: FrontMatter) -> tuple[dict[str, object] | None, str | None]:
    import tomllib

    try:
        return tomllib.loads(fm.block), None
    except tomllib.TOMLDecodeError as e:
        # "Invalid value (at line 1, column 9)": lines of the block; say the file's line.
        where = re.sub(r"at line (\d+)",
                       lambda m: f"at line {int(m.group(1)) + fm.first_line - 1}", str(e))
        return None, f"front matter is not valid TOML: {where}"


def _parse_json(fm: FrontMatter) -> tuple[dict[str, object] | None, str | None]:
    import json

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

def title(text: str) -> str | None:
    """The article's title: front matter ``title``, else the body's first heading."""
    fm = split(text)
    body = text.removeprefix("\ufeff") if fm is None else fm.body
    if fm is not None and fm.closed:
        found = _plain_title(fm.block) if fm.format == "yaml" else None
        if found is None:
            data, _ = parse(fm)
            value = None if data is None else data.get("title")
            found = value if isinstance(value, str) else None
        found = " ".join(found.split()) if found else None  # a subject is one line
        if found:
            return found
    return first_heading(body)


def _plain_title(block: str) -> str | None:
    """A ``title:`` line of YAML front matter whose value YAML would read as the same plain
    text (unquoted, or simply quoted); None when only a YAML parser can tell."""
    for line in block.splitlines():
        if not line.startswith("title:"):
            continue
        value = line[6:].strip(" \t")  # YAML trims spaces and tabs, not all whitespace
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            inner = value[1:-1]
            if (value[0] == "'" and "'" not in inner) or (value[0] == '"' and not any(
                    c in inner for c in '"\\')):
                return inner
            return None
        if not value or value[0] in "|>[]{}&*!%@`#'\"" or ": " in value or " #" in value:
            return None
        return value
    return None


_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_ATX = re.compile(r" {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
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
        if (atx := _ATX.fullmatch(line)) and atx.group(1):
            return atx.group(1).strip()
        if previous.strip() and _SETEXT_1.fullmatch(line):
            return previous.strip()
        previous = line
    return None
