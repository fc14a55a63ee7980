"""Built-in gates: checks every job's files pass before they may be committed.

A gate returns the problems it found as short sentences (never the offending secret itself);
any problem sends the job to REVIEW. Configured gate commands run after these (see ``prepare``).
"""

from __future__ import annotations

from collections.abc import Mapping

from gitpub.core.sanitize import find_secrets
from gitpub.pipeline import frontmatter

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
    """Text files must be UTF-8; Markdown front matter, if present, must parse in its format
    (YAML, TOML or JSON) as a mapping."""
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
            problem = frontmatter.problem(text)
            if problem:
                problems.append(f"{path}: {problem}")
    return problems


def title_of(path: str, data: bytes) -> str | None:
    """The article's title (front matter ``title``, else its first heading); None for files
    that are not Markdown."""
    if not path.lower().endswith(MARKDOWN_SUFFIXES):
        return None
    return frontmatter.title(data.decode("utf-8", "replace"))
