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

from gitpub.config.model import Config
from gitpub.core.errors import CONFIG_FILE
from gitpub.git.repo import Repository
from gitpub.verify import ledger as L
from gitpub.verify.commit import DEFAULT_PREFIX
from gitpub.verify.facts import Bad, Resolver

_CLAIM_KEY = re.compile(rb"^([A-Za-z][A-Za-z0-9-]*)-job-id[ \t]*:", re.I | re.M)


class Rules:
    def __init__(self) -> None:
        self.prefixes: tuple[str, ...] = ()  # checked, in order: the start's first
        self.config_changes: list[str] = []  # commits changing .gitpub.yaml
        self.remarks: list[str] = []


def _prefix_at(facts: Resolver, commit: str) -> str | None:
    """The trailer prefix the configuration at ``commit`` names (None: unreadable)."""
    if not facts.repo.has_object(commit):
        return None
    found = facts.at(commit)
    return None if isinstance(found, Bad) else found.trailer_prefix


def checked_prefixes(repo: Repository, config: Config | Bad, memory: L.Memory,
                     candidates: Sequence[tuple[str, bytes]], start: str | None,
                     tip: str, facts: Resolver) -> Rules:
    """The prefixes whose claims are checked in ``start..tip`` (``candidates``: the commits
    of the walk that mention a job id, with their messages); only ever more. ``config``: the
    tip's, used only without a trusted start (a first run)."""
    out = Rules()
    if start is None:
        first = DEFAULT_PREFIX if isinstance(config, Bad) else config.trailer_prefix
        if not memory.found:
            out.remarks.append("no verified start: the configuration at the tip, the default "
                               "prefix and every prefix the configuration at a claiming "
                               "commit names apply")
    else:
        first = _prefix_at(facts, start) or DEFAULT_PREFIX
        out.config_changes = _config_changes(repo, facts, start, tip)
    found = [first, DEFAULT_PREFIX, *memory.ledger.prefixes]
    for commit in out.config_changes:
        changed = _prefix_at(facts, commit)
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
            if any(_prefix_at(facts, c) == prefix for c in (sha, *parents[:1])):
                found.append(prefix)
    out.prefixes = tuple(dict.fromkeys(found))
    return out


def _config_changes(repo: Repository, facts: Resolver, start: str, tip: str) -> list[str]:
    if facts.blob_at(start) == facts.blob_at(tip):
        return []
    # Ids in ASCII whatever ``i18n.logOutputEncoding`` says; no rename followed into the file;
    # no signature's verification among them (``log.showSignature``).
    proc = repo.git("-c", "i18n.logOutputEncoding=UTF-8", "-c", "log.follow=false",
                    "-c", "log.showSignature=false", "log",
                    "--format=%H", "--full-history", tip, f"^{start}", "--", CONFIG_FILE)
    return list(reversed(proc.stdout.decode().split()))
