"""The context every pipeline and delivery step runs in: the repository, the job store, the
configuration, the clock and where progress goes.

Frozen: a step never changes it behind its caller's back. Options that vary per call (how long
to wait for another process's lease, the base a sync job snapshots) are arguments or part of the
job's record, never fields set and reset here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gitpub.git.repo import Repository
from gitpub.store.jobs import JobStore

TYPE_CHECKING = False  # mypy treats this name as True
if TYPE_CHECKING:
    from gitpub.config.model import Config
    from gitpub.git.remote import Remote


def _quiet(message: str) -> None:
    """Progress nobody asked to see."""


class Context:
    """The repository, the job store, the configuration, the clock and where progress goes.

    ``config`` may be given as the function that gives it (``app.session``): it is then built
    on first use, once, so that a command that never reads it (``status`` of most jobs) does
    not import its definitions. Frozen: attributes cannot be set after construction.
    """

    __slots__ = ("_config", "_config_of", "clock", "progress", "repo", "store")

    repo: Repository
    store: JobStore
    clock: Callable[[], float]
    progress: Callable[[str], None]
    _config: Config | None
    _config_of: Callable[[], Config] | None

    def __init__(self, repo: Repository, store: JobStore,
                 config: Config | Callable[[], Config],
                 clock: Callable[[], float] = time.time,
                 progress: Callable[[str], None] = _quiet) -> None:
        init = object.__setattr__
        init(self, "repo", repo)
        init(self, "store", store)
        init(self, "clock", clock)
        init(self, "progress", progress)
        init(self, "_config_of", config if callable(config) else None)
        init(self, "_config", None if callable(config) else config)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Context is frozen: cannot set {name!r}")

    @property
    def config(self) -> Config:
        config = self._config
        if config is None:
            assert self._config_of is not None
            config = self._config_of()
            object.__setattr__(self, "_config", config)
        return config

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
        from gitpub.git.remote import Remote  # the network: not for `status` (a fast start)

        return Remote(self.repo, self.config.remote, self.config.branch)
