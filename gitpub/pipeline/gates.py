"""Built-in gates: checks every job's files pass before they may be committed.

A gate returns the problems it found as short sentences (never the offending secret itself);
any problem sends the job to REVIEW. The secret scan lets known non-secrets through (an inline
pragma, or a rule of the allowlist committed in the job's base: ``core.allowlist``).
Configured gate commands run after these (see ``prepare``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gitpub.core.allowlist import ALLOWLIST_FILE, Allowlist, scan
from gitpub.git.repo import MODE_TREE, Repository
from gitpub.pipeline import frontmatter

TEXT_SUFFIXES = (
    ".md", ".markdown", ".mdx", ".txt", ".html", ".htm", ".rst", ".adoc",
    ".yaml", ".yml", ".json", ".toml", ".csv", ".xml", ".svg",
)
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx")


def is_text_path(path: str) -> bool:
    return path.lower().endswith(TEXT_SUFFIXES)


def allowlist_at(repo: Repository, commit: str | None) -> Allowlist:
    """The allowlist of known non-secrets committed in ``commit`` (none without a base).
    Raises ``AllowlistError`` for a file that does not parse."""
    if commit is None:
        return Allowlist()
    entry = repo.lookup(repo.commit(commit).tree, ALLOWLIST_FILE)
    if entry is None or entry.mode == MODE_TREE:
        return Allowlist()
    return Allowlist.parse(repo.blob(entry.sha).decode("utf-8", "replace"))


def secret_scan(files: Mapping[str, bytes],
                allowlist: Callable[[], Allowlist]) -> tuple[list[str], list[str]]:
    """(where a secret appears, by file, line, kind and fingerprint — never the value itself;
    the known non-secrets let through, for the job's history). ``allowlist`` is read only
    when something was found."""
    hits = []
    for path, data in sorted(files.items()):
        hits += scan(data.decode("utf-8", "surrogateescape"), (path,), Allowlist(), path)
    if not hits:
        return [], []
    rules = allowlist()
    hits = [hit for path, data in sorted(files.items())
            for hit in scan(data.decode("utf-8", "surrogateescape"), (path,), rules, path)]
    return ([h.problem() for h in hits if h.allowed_by is None],
            [h.use() for h in hits if h.allowed_by is not None])


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
