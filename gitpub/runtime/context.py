"""The context every pipeline and delivery step runs in: the repository, the job store, the
configuration, the clock and where progress goes.

Frozen: a step never changes it behind its caller's back. Options that vary per call (how long
to wait for another process's lease, the base a sync job snapshots) are arguments or part of the
job's record, never fields set and reset here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gitpub.config.model import Config
from gitpub.git.remote import Remote
from gitpub.git.repo import Repository
from gitpub.store.jobs import JobStore


def _quiet(message: str) -> None:
    """Progress nobody asked to see."""


class Context:
    """The repository, the job store, the configuration, the clock and where progress goes.

    Frozen: attributes cannot be set after construction.
    """

    __slots__ = ("clock", "config", "progress", "repo", "store")

    repo: Repository
    store: JobStore
    config: Config
    clock: Callable[[], float]
    progress: Callable[[str], None]

    def __init__(self, repo: Repository, store: JobStore, config: Config,
                 clock: Callable[[], float] = time.time,
                 progress: Callable[[str], None] = _quiet) -> None:
        init = object.__setattr__
        init(self, "repo", repo)
        init(self, "store", store)
        init(self, "config", config)
        init(self, "clock", clock)
        init(self, "progress", progress)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Context is frozen: cannot set {name!r}")

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
