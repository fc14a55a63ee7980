"""``git pub confirm``: what CI runs, in a fresh clone, on every push.

Its own module, apart from ``commands``, because CI pays for every import on every run: this
one opens the repository, reads its configuration and hands over to ``verify.confirm``,
without the job store, the pipeline or the delivery machinery the other commands load.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from gitpub.app.repoconfig import load_repo_config
from gitpub.core.errors import UsageError
from gitpub.git.remote import Remote
from gitpub.git.repo import Repository
from gitpub.verify.confirm import KEY_ENV, ConfirmReport, confirm_key
from gitpub.verify.confirm import accept as accept_bad
from gitpub.verify.confirm import confirm as run_confirm


def confirm(where: Path, progress: Callable[[str], None], rev_range: str | None,
            push_notes: bool, accept: str | None = None,
            reason: str | None = None) -> ConfirmReport:
    """Verify the remote branch (CI); with ``accept``, record a person's acceptance of the BAD
    verdict on that commit instead."""
    if (accept is None) != (reason is None):
        raise UsageError("--accept SHA and --reason TEXT go together")
    key = confirm_key(os.environ.get(KEY_ENV))
    with Repository.discover(where) as repo:
        repo.notice = progress
        config = load_repo_config(repo)
        remote = Remote(repo, config.remote, config.branch)
        if accept is not None and reason is not None:
            who = repo.user_identity()
            return accept_bad(repo, remote, accept, reason, f"{who.name} <{who.email}>",
                              push_notes=push_notes, key=key)
        return run_confirm(repo, config, remote, rev_range=rev_range, push_notes=push_notes,
                           progress=progress, key=key)
