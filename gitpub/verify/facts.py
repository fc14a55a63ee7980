"""The ``.gitpub.yaml`` that ``confirm`` may believe: never the pushed tree's.

Whoever can push can change ``.gitpub.yaml``, so the configuration at the tip of what is being
confirmed is an attacker's if anything is. ``confirm`` takes what it relies on from places no
pusher reaches, or from a configuration a previous run already checked:

- the **branch** it confirms and the **remote**: CI's arguments (``--branch``, ``--remote``),
  else the branch CI's rollback anchor names (``verify.anchor``), else the one the authentic
  ledger names (``verify.ledger``: the last keyed run's), else
  the remote's default branch (its ``HEAD``, which only the host's administrators set);
- the **trailer prefixes**, **``confirm_unrecorded``** and the **write scope** (``publish``,
  ``content``, ``articles``, the font outputs): the configuration at the range's *start* — the
  commit the last run checked through — which that run confirmed; on a first run (a person's
  explicit ``--first-run``, or without the key) the tip's, said in a remark. A configuration
  changed inside the range applies from the next run on (its change is reported); a trailer
  prefix it adds is checked at once (checks are only ever added: ``verify.rules``).

``Resolver`` reads the file at a commit, parsed and validated as every gitpub command reads it,
each blob once.
"""

from __future__ import annotations

from typing import NamedTuple

from gitpub.config.load import parse_config
from gitpub.config.model import Config
from gitpub.core.errors import CONFIG_FILE, ConfigError
from gitpub.git.repo import Repository


class Bad(NamedTuple):
    """A configuration that does not validate (the error is raised where it is used)."""

    error: Exception


class Resolver:
    """``.gitpub.yaml`` at commits: parsed and validated, each blob once (``Config()``'s
    defaults where a commit has no file)."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self.known: dict[str, Config | Bad] = {}

    def blob_at(self, commit: str) -> str | None:
        """The blob id of ``.gitpub.yaml`` at ``commit`` (None: it has none)."""
        entry = self.repo.lookup(self.repo.commit(commit).tree, CONFIG_FILE)
        return None if entry is None else entry.sha

    def at(self, commit: str) -> Config | Bad:
        blob = self.blob_at(commit)
        if blob is None:
            return Config()
        if blob not in self.known:
            data = self.repo.blob(blob)
            try:  # decoded as every committed file is
                self.known[blob] = parse_config(data.decode("utf-8-sig", "replace"),
                                                f"{CONFIG_FILE} at {commit[:12]}")
            except ConfigError as e:
                self.known[blob] = Bad(e)
        return self.known[blob]
