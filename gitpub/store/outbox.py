"""The outbox: content changes made outside gitpub, recorded so that none is forgotten.

An entry is a ref ``refs/pub/outbox/<id>`` naming the commit that changed content paths without
being a job's commit (a hand edit). Its id is derived from the commit, so registering twice — by
the post-commit hook and again by ``reconcile`` — is a no-op (a create-only compare-and-swap).
The outbox is a hint, not the truth: ``sync`` and ``reconcile`` rediscover pending changes from
git itself (hook events may all be lost); ``sync`` clears the entries it has delivered.
"""

from __future__ import annotations

import uuid

from gitpub.git.repo import Repository

OUTBOX_PREFIX = "refs/pub/outbox/"
_OUTBOX_NAMESPACE = uuid.UUID("0d6b3c1e-8f0a-5b7e-9c2d-4a1e6f3b8d50")


def outbox_id(commit: str) -> str:
    """The outbox entry id of a commit: derived from it, so every run agrees without a lookup."""
    return str(uuid.uuid5(_OUTBOX_NAMESPACE, commit))


def register_external_change(repo: Repository, commit: str) -> bool:
    """Record ``commit`` in the outbox; False if it was already there (create-only swap)."""
    return repo.cas_ref(OUTBOX_PREFIX + outbox_id(commit), None, commit,
                        "gitpub: content changed outside a job")


def outbox_entries(repo: Repository) -> dict[str, str]:
    """The recorded external changes not yet cleared: outbox id → commit."""
    return repo.list_refs(OUTBOX_PREFIX)


def clear_outbox_entry(repo: Repository, entry_id: str, commit: str) -> bool:
    """Drop an entry once its change is delivered (or moot); only if it still names ``commit``."""
    return repo.delete_ref(OUTBOX_PREFIX + entry_id, commit)
