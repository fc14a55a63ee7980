"""The context every pipeline and delivery step runs in: the repository, the job store, the
configuration, the clock and where progress goes.

Frozen: a step never changes it behind its caller's back. Options that vary per call (how long
to wait for another process's lease, the base a sync job snapshots) are arguments or part of the
job's record, never fields set and reset here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gitpub.config.model import Config
from gitpub.git.remote import Remote
from gitpub.git.repo import Repository
from gitpub.store.jobs import JobStore


def _quiet(message: str) -> None:
    """Progress nobody asked to see."""


@dataclass(frozen=True)
class Context:
    repo: Repository
    store: JobStore
    config: Config
    clock: Callable[[], float] = time.time
    progress: Callable[[str], None] = field(default=_quiet)

    def base_ref(self) -> str | None:
        """The ref the base snapshot comes from: the remote-tracking branch when present."""
        for ref in (f"refs/remotes/{self.config.remote}/{self.config.branch}",
                    f"refs/heads/{self.config.branch}"):
            if self.repo.read_ref(ref) is not None:
                return ref
        return None

    def search_tips(self) -> list[str]:
        refs = [f"refs/heads/{self.config.branch}",
                f"refs/remotes/{self.config.remote}/{self.config.branch}"]
        return [sha for sha in (self.repo.read_ref(r) for r in refs) if sha]

    def remote(self) -> Remote:
        """The configured remote branch, reached with C git."""
        return Remote(self.repo, self.config.remote, self.config.branch)
