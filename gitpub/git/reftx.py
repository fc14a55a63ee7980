"""Several refs moved together, each from the value we expect: one C git ref transaction.

dulwich has no multi-ref transaction (docs/dulwich.md); ``git update-ref --stdin`` with
``start``/``prepare``/``commit`` locks every ref, checks every expected value, and applies all
of the changes or none of them (a loose ref that moved, a lock someone holds: nothing
happens). Refs that live in ``packed-refs`` are deleted there under its lock, as git does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gitpub.git.repo import Repository

ZERO = "0" * 40


@dataclass(frozen=True)
class RefChange:
    """``ref`` from ``old`` (None: must not exist) to ``new`` (None: deleted)."""

    ref: str
    new: str | None
    old: str | None

    def command(self) -> str:
        if self.new is None:
            return f"delete {self.ref} {self.old or ZERO}"
        return f"update {self.ref} {self.new} {self.old or ZERO}"


def apply(repo: Repository, changes: Sequence[RefChange], message: str = "gitpub") -> bool:
    """Apply all of ``changes`` or none; whether they were applied (False: a ref did not hold
    its expected value, or was locked)."""
    if not changes:
        return True
    lines = ["start", *(c.command() for c in changes), "prepare", "commit", ""]
    proc = repo.git("update-ref", "--stdin", "-m", message,
                    input="\n".join(lines).encode("utf-8", "surrogateescape"))
    return proc.returncode == 0
