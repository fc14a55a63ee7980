"""Built-in gates: checks every job's files pass before they may be committed.

A gate returns the problems it found as short sentences (never the offending secret itself);
any problem sends the job to REVIEW. The secret scan judges what the job adds or changes: a
finding the base version of the same file already had, unchanged and in place, is the branch's
business, not the job's (``core.secretdiff``); and it lets known non-secrets through (an inline
pragma, or a rule of the allowlist committed in the job's base: ``core.allowlist``).
Configured gate commands run after these (see ``prepare``).
"""

from __future__ import annotations

from collections.abc import Mapping

from gitpub.core.allowlist import ALLOWLIST_FILE, NO_RULES, Allowlist, scan
from gitpub.core.secretdiff import NOTHING, Inherited
from gitpub.git.repo import BLOB_MODES, MODE_TREE, Repository
from gitpub.pipeline import frontmatter
from gitpub.pipeline.frontmatter import MARKDOWN_SUFFIXES

TEXT_SUFFIXES = (
    ".md", ".markdown", ".mdx", ".txt", ".html", ".htm", ".rst", ".adoc",
    ".yaml", ".yml", ".json", ".toml", ".csv", ".xml", ".svg",
)


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


class Base:
    """A job's base commit as the secret scan reads it: the allowlist committed there, and the
    version there of each file the job writes. Each is read only when a scan found something."""

    def __init__(self, repo: Repository, commit: str | None) -> None:
        self.repo = repo
        self.commit = commit
        self._allowlist: Allowlist | None = None
        self._tree: str | None = None

    def allowlist(self) -> Allowlist:
        """Raises ``AllowlistError`` for an allowlist that does not parse."""
        if self._allowlist is None:
            self._allowlist = allowlist_at(self.repo, self.commit)
        return self._allowlist

    def inherited(self, path: str) -> Inherited:
        """What ``path``'s findings in the base are (nothing: a file new to the base)."""
        if self.commit is None:
            return NOTHING
        if self._tree is None:
            self._tree = self.repo.commit(self.commit).tree
        entry = self.repo.lookup(self._tree, path)
        if entry is None or entry.mode not in BLOB_MODES:
            return NOTHING
        return Inherited(self.repo.blob(entry.sha).decode("utf-8", "surrogateescape"))


def secret_scan(files: Mapping[str, bytes], base: Base) -> tuple[list[str], list[str]]:
    """(where a secret the job brings appears, by file, line, kind and fingerprint — never the
    value itself; the findings let through — known non-secrets, and those the base already had
    in place — for the job's history)."""
    texts = {path: data.decode("utf-8", "surrogateescape")
             for path, data in sorted(files.items())}
    if not any(scan(text, (path,), NO_RULES, path) for path, text in texts.items()):
        return [], []
    rules = base.allowlist()
    hits = [hit for path, text in texts.items()
            for hit in scan(text, (path,), rules, path, base.inherited(path))]
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
