"""Which trailer prefixes ``git pub confirm`` checks: the rules of the range's start, only ever
more (``verify.confirm``'s docstring says why).

The configuration at the range's start — the last verified commit, never the pushed tree —
names the prefix; the default ``Blog``, every prefix the ledger says was ever checked and every
prefix a ``.gitpub.yaml`` changed inside the range names are checked too, and so is the prefix
of any claim that the configuration at the claiming commit (or its first parent) names. So a
change of ``trailer_prefix`` is reported and only ever adds checks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gitpub.config.load import config_from_text
from gitpub.config.model import CONFIG_FILE, Config, ConfigError
from gitpub.git.repo import Repository
from gitpub.verify import ledger as L
from gitpub.verify.commit import DEFAULT_PREFIX

_CLAIM_KEY = re.compile(rb"^([A-Za-z][A-Za-z0-9-]*)-job-id[ \t]*:", re.I | re.M)


@dataclass
class Rules:
    prefixes: tuple[str, ...] = ()  # checked, in order: the start's first
    config_changes: list[str] = field(default_factory=list)  # commits changing .gitpub.yaml
    remarks: list[str] = field(default_factory=list)


def config_at(repo: Repository, commit: str) -> Config:
    """The configuration committed at ``commit`` (defaults when it has no ``.gitpub.yaml``).
    Parsed through the configuration cache (keyed by the file's exact text, validated every
    time): the start's file is most often the one just read from the working tree."""
    entry = repo.lookup(repo.commit(commit).tree, CONFIG_FILE)
    if entry is None:
        return Config()
    text = repo.blob(entry.sha).decode("utf-8-sig", "replace")
    return config_from_text(text, f"{CONFIG_FILE} at {commit[:12]}", repo.pub_dir)


def _prefix_at(repo: Repository, commit: str, cache: dict[str, str | None]) -> str | None:
    """The trailer prefix the configuration at ``commit`` names (None: unreadable)."""
    if not repo.has_object(commit):
        return None
    entry = repo.lookup(repo.commit(commit).tree, CONFIG_FILE)
    blob = "" if entry is None else entry.sha
    if blob not in cache:
        try:
            cache[blob] = config_at(repo, commit).trailer_prefix
        except ConfigError:
            cache[blob] = None
    return cache[blob]


def checked_prefixes(repo: Repository, config: Config, memory: L.Memory,
                     candidates: Sequence[tuple[str, bytes]], start: str | None,
                     tip: str) -> Rules:
    """The prefixes whose claims are checked in ``start..tip`` (``candidates``: the commits
    of the walk that mention a job id, with their messages); only ever more."""
    out, cache = Rules(), dict[str, str | None]()
    if start is None:
        first = config.trailer_prefix
        if not memory.found:
            out.remarks.append("no verified start: the configuration at the tip, the default "
                               "prefix and every prefix the configuration at a claiming "
                               "commit names apply")
    else:
        first = _prefix_at(repo, start, cache) or DEFAULT_PREFIX
        out.config_changes = _config_changes(repo, start, tip)
    found = [first, DEFAULT_PREFIX, *memory.ledger.prefixes]
    for commit in out.config_changes:
        changed = _prefix_at(repo, commit, cache)
        if changed is not None and changed.lower() not in {p.lower() for p in found}:
            out.remarks.append(f"trailer_prefix changes to {changed} in {commit}: claims "
                               f"under it are checked from now on, and so are claims under "
                               f"{', '.join(dict.fromkeys(found))}")
            found.append(changed)
    for sha, message in candidates:
        known = {p.lower() for p in found}
        claimed = {m.group(1).decode("ascii") for m in _CLAIM_KEY.finditer(message)}
        for prefix in sorted(p for p in claimed if p.lower() not in known):
            parents = repo.commit(sha).parents if repo.has_object(sha) else ()
            if any(_prefix_at(repo, c, cache) == prefix for c in (sha, *parents[:1])):
                found.append(prefix)
    out.prefixes = tuple(dict.fromkeys(found))
    return out


def _config_changes(repo: Repository, start: str, tip: str) -> list[str]:
    def blob(commit: str) -> str | None:
        entry = repo.lookup(repo.commit(commit).tree, CONFIG_FILE)
        return None if entry is None else entry.sha

    if blob(start) == blob(tip):
        return []
    proc = repo.git("log", "--format=%H", "--full-history", tip, f"^{start}", "--",
                    CONFIG_FILE)
    return list(reversed(proc.stdout.decode().split()))
