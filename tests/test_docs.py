"""The documentation holds together: a short README, links that resolve, a page per command.

- README.md stays within 10 KB and starts with the two set-up commands; CI runs exactly the
  README's test command;
- every relative link and ``#anchor`` in README.md, docs/**/*.md and the other READMEs resolves:
  the file exists, and an anchor matches a heading of the target file by GitHub's slug rules;
- every command of the CLI (the click group in ``gitpub.cli.main``) has a row in the README's
  command table that links to its reference page, and that page has a heading naming it.

Plain file reading: no git, no subprocess.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import click
import pytest

from gitpub.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_LIMIT = 10_240
PAGES = sorted([README, *ROOT.glob("docs/**/*.md"), ROOT / "bench" / "README.md",
                ROOT / "hooks" / "README.md"])

_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_LINK = re.compile(r"!?\[(?P<text>(?:[^\[\]]|\[[^\]]*\])*)\]\((?P<target><[^>]*>|[^)\s]*)"
                   r"(?:\s+\"[^\"]*\")?\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(\S+)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text: str) -> Iterator[str]:
    """The lines outside fenced code blocks."""
    fence: str | None = None
    for line in text.splitlines():
        match = _FENCE.match(line)
        if match:
            if fence is None:
                fence = match.group(1)
                continue
            if line.strip().startswith(fence):
                fence = None
                continue
        if fence is None:
            yield line


def plain(markdown: str) -> str:
    """Inline Markdown as the text GitHub renders: code spans, links and emphasis unwrapped."""
    text = _CODE_SPAN.sub(lambda m: m.group(2).strip(), markdown)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("*", "")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = plain(heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path: Path) -> list[str]:
    return [m.group(2) for line in prose_lines(path.read_text(encoding="utf-8"))
            if (m := _HEADING.match(line))]


def anchors(path: Path) -> set[str]:
    """Every anchor the headings of ``path`` define (a repeated slug gets ``-1``, ``-2``…)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in headings(path):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(path: Path) -> Iterator[str]:
    """Every link target in ``path``'s prose (inline links, images, reference definitions)."""
    for line in prose_lines(path.read_text(encoding="utf-8")):
        reference = _REFERENCE.match(line)
        if reference:
            yield reference.group(1)
            continue
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            yield match.group("target").strip("<>")


def broken(page: Path, target: str) -> str | None:
    """Why ``target``, linked from ``page``, does not resolve (None: it does)."""
    if _SCHEME.match(target):
        return None  # an absolute URL: not checked here (no network)
    path_part, _, anchor = target.partition("#")
    file = (page.parent / unquote(path_part)).resolve() if path_part else page
    if not file.exists():
        return f"{target}: no such file {file.relative_to(ROOT) if ROOT in file.parents else file}"
    if anchor and file.suffix == ".md" and anchor not in anchors(file):
        return f"{target}: no heading with the anchor #{anchor} in {file.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    problems = [p for target in links(page) if (p := broken(page, target)) is not None]
    assert problems == []


def test_readme_is_short() -> None:
    size = len(README.read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes; the limit is {README_LIMIT}"


def test_readme_starts_with_the_setup_commands_ci_runs() -> None:
    """The first lines: install and run the demo, then the test command .ci/run runs."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert lines[2] == "```sh"
    install, tests = lines[3], lines[4]
    assert lines[5] == "```"
    assert "pip install -e '.[test]'" in install and install.endswith("git-pub demo")
    assert tests == ".venv/bin/python -m pytest -n 2 -q"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert tests in ci


def command_paths() -> list[tuple[str, ...]]:
    """Every visible command of the CLI, a group's subcommands after the group."""
    ctx = click.Context(cli)
    paths: list[tuple[str, ...]] = []
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        if command.hidden:
            continue
        paths.append((name,))
        if isinstance(command, click.Group):
            sub_ctx = click.Context(command, parent=ctx)
            paths += [(name, sub) for sub in command.list_commands(sub_ctx)
                      if not command.get_command(sub_ctx, sub).hidden]  # type: ignore[union-attr]
    return paths


def command_table() -> dict[str, str]:
    """The README's command table: command name → the target of its row's link."""
    rows: dict[str, str] = {}
    for line in prose_lines(README.read_text(encoding="utf-8")):
        if not line.startswith("| ["):
            continue
        first = re.split(r"(?<!\\)\|", line)[1]
        match = _LINK.search(first)
        assert match is not None, line
        words = plain(match.group("text")).split()
        if words[:2] == ["git", "pub"] and len(words) > 2:
            rows[words[2]] = match.group("target")
    return rows


def test_every_command_has_a_reference_page_linked_from_the_readme() -> None:
    table = command_table()
    paths = command_paths()
    assert sorted(table) == sorted({p[0] for p in paths})  # no command missing, none extra
    for path in paths:
        target = table[path[0]]
        page = (README.parent / target.partition("#")[0]).resolve()
        assert page.parent == ROOT / "docs" / "commands", target
        named = [plain(h) for h in headings(page)]
        wanted = "git pub " + " ".join(path)
        assert any(re.search(rf"{re.escape(wanted)}(?![\w-])", h) for h in named), \
            f"{page.relative_to(ROOT)} has no heading naming `{wanted}`"


@pytest.mark.parametrize(("heading", "anchor"), [
    ("`confirm` (CI)", "confirm-ci"),
    ("`push`, `reconcile`", "push-reconcile"),
    ("The key: `GITPUB_CONFIRM_KEY`", "the-key-gitpub_confirm_key"),
    ("Several writers: the remote as the shared job store",
     "several-writers-the-remote-as-the-shared-job-store"),
    ("What a job may write, and secrets", "what-a-job-may-write-and-secrets"),
    ("`git pub hooks install` and `git pub hooks uninstall`",
     "git-pub-hooks-install-and-git-pub-hooks-uninstall"),
    ("Façade — über [links](x.md)", "façade--über-links"),
])
def test_slugs_follow_github(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor
