"""Built-in gates: checks every job's files pass before they may be committed.

A gate returns the problems it found as short sentences (never the offending secret itself);
any problem sends the job to REVIEW. Configured gate commands run after these (see ``prepare``).
"""

from __future__ import annotations

from collections.abc import Mapping

from gitpub.core.sanitize import find_secrets

TEXT_SUFFIXES = (
    ".md", ".markdown", ".mdx", ".txt", ".html", ".htm", ".rst", ".adoc",
    ".yaml", ".yml", ".json", ".toml", ".csv", ".xml", ".svg",
)
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")


def is_text_path(path: str) -> bool:
    return path.lower().endswith(TEXT_SUFFIXES)


def secret_problems(files: Mapping[str, bytes]) -> list[str]:
    """Where a secret appears, by file, line and kind — the value itself is never repeated."""
    problems = []
    for path, data in sorted(files.items()):
        text = data.decode("utf-8", "replace")
        for f in find_secrets(text):
            problems.append(f"{path}:{f.line}: possible secret ({f.kind})")
    return problems


def text_problems(files: Mapping[str, bytes]) -> list[str]:
    """Text files must be UTF-8; Markdown front matter, if present, must be a YAML mapping."""
    problems = []
    for path, data in sorted(files.items()):
        if not is_text_path(path):
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            problems.append(f"{path}: not valid UTF-8 (byte {e.start})")
            continue
        if "\0" in text:
            problems.append(f"{path}: contains a NUL character")
        if path.lower().endswith(MARKDOWN_SUFFIXES):
            problem = front_matter_problem(text)
            if problem:
                problems.append(f"{path}: {problem}")
    return problems


def front_matter(text: str) -> str | None:
    """The YAML front matter block of a Markdown text, if it opens with one."""
    body = text.removeprefix("\ufeff")
    if not body.startswith("---\n") and not body.startswith("---\r\n"):
        return None
    lines = body.splitlines(keepends=True)
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n") in ("---", "..."):
            return "".join(lines[1:i])
    return ""  # opened, never closed


def front_matter_problem(text: str) -> str | None:
    block = front_matter(text)
    if block is None:
        return None
    lines = text.removeprefix("\ufeff").splitlines()
    if not any(line in ("---", "...") for line in lines[1:]):
        return "front matter is not closed (missing '---')"
    import yaml

    try:
        data = yaml.safe_load(block)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        return f"front matter is not valid YAML{where}"
    if data is not None and not isinstance(data, dict):
        return "front matter is not a mapping"
    return None


def _plain_title(block: str) -> str | None:
    """A ``title:`` line of front matter whose value YAML would read as the same plain text
    (unquoted, or simply quoted); None when only a YAML parser can tell."""
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


def title_of(path: str, data: bytes) -> str | None:
    """The article's title: front matter ``title``, else its first Markdown heading."""
    if not path.lower().endswith(MARKDOWN_SUFFIXES):
        return None
    text = data.decode("utf-8", "replace")
    block = front_matter(text)
    if block:
        title = _plain_title(block)
        if title is None:
            import yaml  # ~12 ms to import: only for a title that is not a plain scalar

            try:
                meta = yaml.safe_load(block)
            except yaml.YAMLError:
                meta = None
            found = meta.get("title") if isinstance(meta, dict) else None
            title = found if isinstance(found, str) else None
        if title:
            return title
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None
