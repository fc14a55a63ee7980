"""``git pub confirm``: what CI runs, in a fresh clone, on every push.

This module opens the repository and hands over to ``verify.confirm``; it needs neither the job
store nor the pipeline. What is confirmed comes from CI (``--remote``, ``--branch``) and the
authentic ledger, never from the pushed ``.gitpub.yaml`` (``verify.facts``). With CI's key
(``GITPUB_CONFIRM_KEY``), a run keeps a rollback anchor between runs (``--anchor FILE`` or
``GITPUB_CONFIRM_ANCHOR``, ``verify.anchor``), or says explicitly that it keeps none
(``--no-anchor``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from gitpub.core.errors import UsageError
from gitpub.runtime.session import open_repository
from gitpub.verify import anchor as A
from gitpub.verify.confirm import KEY_ENV, Anchoring, ConfirmReport, Target, confirm_key
from gitpub.verify.confirm import accept as accept_bad
from gitpub.verify.confirm import confirm as run_confirm

__all__ = ["ConfirmReport", "confirm"]

#: A branch or remote name CI may give: what the ledger can record and no git command takes
#: for an option, a path or a revision expression.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*")


def confirm(where: Path, progress: Callable[[str], None], rev_range: str | None,
            push_notes: bool, accept: str | None = None, reason: str | None = None, *,
            remote: str | None = None, branch: str | None = None,
            anchor: str | None = None, no_anchor: bool = False,
            first_run: bool = False) -> ConfirmReport:
    """Verify the remote branch (CI); with ``accept``, record a person's acceptance of the BAD
    verdict on that commit instead."""
    if (accept is None) != (reason is None):
        raise UsageError("--accept SHA and --reason TEXT go together")
    target = Target(_name(remote or "origin", "--remote"),
                    None if branch is None else _name(branch, "--branch"))
    key = confirm_key(os.environ.get(KEY_ENV))
    path = A.from_environment(anchor)
    if no_anchor and anchor is not None:
        raise UsageError("--anchor FILE and --no-anchor contradict each other")
    if key is not None and accept is None and rev_range is None and path is None and \
            not no_anchor:
        raise UsageError(f"with {KEY_ENV}, give --anchor FILE (a file CI keeps between runs: "
                         f"the rollback anchor; or {A.ENV}), or --no-anchor",
                         hint="without an anchor a rollback of refs/notes/pub to an older "
                              "ledger cannot be detected: see docs/confirm-security.md")
    with open_repository(where, progress) as repo:
        if accept is not None and reason is not None:
            who = repo.user_identity()
            return accept_bad(repo, target, accept, reason, f"{who.name} <{who.email}>",
                              push_notes=push_notes, key=key)
        return run_confirm(repo, target, rev_range=rev_range, push_notes=push_notes,
                           progress=progress, key=key,
                           anchoring=Anchoring(None if no_anchor else path, first_run))


def _name(value: str, option: str) -> str:
    if _NAME.fullmatch(value) is None or ".." in value or value.endswith((".lock", ".")):
        raise UsageError(f"{option} {value!r} is not a name gitpub confirms (letters, digits, "
                         "'._-' and '/' between parts)")
    return value
