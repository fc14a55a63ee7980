"""Derived font subsets as job artifacts: computed in prepare, recomputed on a font-only conflict.

For each ``fonts:`` entry of the configuration, the subset must cover the characters of the
*article set*: the files matching its ``text`` globs in a tree (the base snapshot in prepare, the
remote tip when delivering), with the job's own files in place of the tree's. The subset is an
artifact of the job, so it lands in the same commit as the article (promise 3).

Why the push path recomputes instead of merging: a subset file is derived data nobody can merge
by hand, and it is where concurrent writers collide most (each new article with new characters
regenerates it). So a job's font outputs are never compare-and-swapped against the remote; on
every rebase they are regenerated from the merged article set (the remote tip's articles plus the
job's), which is the union of both writers' characters. Article paths keep their
compare-and-swap: a real article conflict is still a CONFLICT.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gitpub.config.model import Config, FontSpec
from gitpub.core.errors import FontError
from gitpub.core.globs import matcher
from gitpub.git.repo import MODE_TREE, Repository


@dataclass
class Derived:
    outputs: dict[str, bytes] = field(default_factory=dict)  # every output, freshly computed
    changed: dict[str, bytes] = field(default_factory=dict)  # those differing from the tree
    missing: dict[str, str] = field(default_factory=dict)  # output -> characters the font lacks
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{out}: {'regenerated' if out in self.changed else 'unchanged'}"
                 for out in sorted(self.outputs)]
        parts += [f"{out}: {len(chars)} character(s) not in the font: {chars[:40]}"
                  for out, chars in sorted(self.missing.items())]
        return "; ".join(parts) or "no fonts configured"


def _literal_dir(glob: str) -> str:
    """The directory part of a glob before its first wildcard: where its matches can be."""
    cut = min((i for i, ch in enumerate(glob) if ch in "*?["), default=len(glob))
    head = glob[:cut]
    return head.rsplit("/", 1)[0] if "/" in head else ""


def text_files(repo: Repository, tree: str | None, spec: FontSpec,
               own: Mapping[str, bytes]) -> dict[str, bytes]:
    """The article set of ``spec``: matching files of ``tree``, then the job's own over them.

    Only the directories the globs can match in are walked, so the cost follows the articles,
    not the repository.
    """
    covers = matcher(spec.text)
    files: dict[str, bytes] = {}
    if tree is not None:
        for top in sorted({_literal_dir(g) for g in spec.text}):
            sub = tree if top == "" else None
            if top:
                entry = repo.lookup(tree, top)
                sub = entry.sha if entry is not None and entry.mode == MODE_TREE else None
            if sub is None:
                continue
            prefix = f"{top}/" if top else ""
            for path, entry in repo.walk_files(sub, prefix):
                if path not in files and covers(path):
                    files[path] = repo.blob(entry.sha)
    files.update({p: d for p, d in own.items() if covers(p)})
    return files


def derive(repo: Repository, config: Config, tree: str | None, own: Mapping[str, bytes],
           cache_dir: Path, progress: Callable[[str], None] | None = None) -> Derived:
    """Every configured subset for the article set of ``tree`` + ``own``."""
    from gitpub.fonts.subset import subset_for_spec  # fontTools' side: only with fonts to derive

    result = Derived()
    for spec in config.fonts:
        source = None if tree is None else repo.lookup(tree, spec.source)
        if source is None or source.mode == MODE_TREE:
            result.problems.append(missing_source(repo, tree, spec.source))
            continue
        texts = text_files(repo, tree, spec, own)
        try:
            subset = subset_for_spec(spec, repo.blob(source.sha), texts, cache_dir=cache_dir,
                                     progress=progress)
        except FontError as e:
            result.problems.append(f"{spec.output}: {e.message}")
            continue
        result.outputs[spec.output] = subset.data
        current = None if tree is None else repo.lookup(tree, spec.output)
        if current is None or repo.blob(current.sha) != subset.data:
            result.changed[spec.output] = subset.data
        if subset.missing:
            result.missing[spec.output] = "".join(sorted(subset.missing))
    return result


def missing_source(repo: Repository, tree: str | None, source: str) -> str:
    """Why the font source is not there, and what to do: fonts are read from the base commit
    (what every writer sees), never from the working tree."""
    if tree is None:
        return (f"font source {source}: there is no base commit to read it from (fetch the "
                "branch, or commit and push the font first)")
    if repo.work_tree is not None and (repo.work_tree / source).is_file():
        return (f"font source {source} is not in the base commit: commit it and push it first "
                "(fonts are read from the base snapshot, not the working tree)")
    return (f"font source {source} is not in the base commit, nor in the working tree: put the "
            "font file at that path in the repository, commit it and push it")
