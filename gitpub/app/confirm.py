"""``git pub confirm``: what CI runs, in a fresh clone, on every push.

This module opens the repository, reads its configuration and hands over to
``verify.confirm``; it needs neither the job store nor the pipeline.

With CI's key, in a working tree, the run starts from a *guess* of the remote and branch
(``verify.facts.guess_remote_branch``: plain ``key: value`` lines), and ``verify.confirm``
settles the configuration once the authentic ledger is read: the facts it vouches for this
very file (by blob id, for this gitpub: ``verify.facts``), else the file parsed and validated
(``settle``) — refetching if the guess was wrong. Without the key, for ``--accept``, in a bare
repository, or when no guess can be made, the configuration is read the full way first.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from gitpub.core.errors import CONFIG_FILE, UsageError
from gitpub.git.remote import Remote
from gitpub.git.repo import Repository
from gitpub.runtime.repoconfig import load_repo_config
from gitpub.runtime.session import open_repository
from gitpub.verify import facts as F
from gitpub.verify.confirm import KEY_ENV, ConfirmReport, Settle, confirm_key
from gitpub.verify.confirm import accept as accept_bad
from gitpub.verify.confirm import confirm as run_confirm

__all__ = ["ConfirmReport", "confirm"]


def confirm(where: Path, progress: Callable[[str], None], rev_range: str | None,
            push_notes: bool, accept: str | None = None,
            reason: str | None = None) -> ConfirmReport:
    """Verify the remote branch (CI); with ``accept``, record a person's acceptance of the BAD
    verdict on that commit instead."""
    if (accept is None) != (reason is None):
        raise UsageError("--accept SHA and --reason TEXT go together")
    key = confirm_key(os.environ.get(KEY_ENV))
    with open_repository(where, progress) as repo:
        if accept is not None and reason is not None:
            config = load_repo_config(repo)
            remote = Remote(repo, config.remote, config.branch)
            who = repo.user_identity()
            return accept_bad(repo, remote, accept, reason, f"{who.name} <{who.email}>",
                              push_notes=push_notes, key=key)
        guess = _guess(repo) if key is not None else None
        if guess is None:
            facts = F.facts_of(load_repo_config(repo))
            return run_confirm(repo, facts, Remote(repo, facts.remote, facts.branch),
                               rev_range=rev_range, push_notes=push_notes, progress=progress,
                               key=key)
        guessed, settle = guess
        return run_confirm(repo, guessed, Remote(repo, guessed.remote, guessed.branch),
                           rev_range=rev_range, push_notes=push_notes, progress=progress,
                           key=key, settle=settle)


def _guess(repo: Repository) -> tuple[F.ConfigFacts, Settle] | None:
    """A guess of the working tree's configuration and how to settle it (None: read it the
    full way now: no working tree, or no guess possible)."""
    if repo.work_tree is None:
        return None
    try:
        with open(repo.work_tree / CONFIG_FILE, "rb") as f:
            data: bytes | None = f.read()
    except FileNotFoundError:
        data = None
    except OSError:
        return None
    if data is None:  # no file: the defaults (``Config()``'s), certain
        return F.DEFAULTS, lambda _facts: F.DEFAULTS
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None  # load_config says what is wrong, at once
    guessed = F.guess_remote_branch(text)
    if guessed is None:
        return None
    blob = F.blob_id(data, repo.object_format)

    def settle(facts: F.Resolver) -> F.ConfigFacts:
        vouched = facts.vouched.get(blob)
        if vouched is not None:
            return vouched
        return F.facts_of(load_repo_config(repo))

    return F.DEFAULTS._replace(remote=guessed[0], branch=guessed[1]), settle
