"""The mark gitpub puts on its own ``git push`` so that its pre-push hook does not check twice.

gitpub verifies the commit it is about to deliver (``verify.commit``, in its own process, where
everything it needs is loaded), then runs ``git push``, which runs gitpub's pre-push hook, which
would start a second interpreter, import the git layer and verify the same commit again (on the
corpus: a ``git pub push`` took 302 ms with the hooks installed, 188 ms without). So the one
``git push`` gitpub runs for a delivery gets ``GITPUB_VERIFIED_PUSH`` in its environment, naming
exactly what was verified; the hook's stdlib-only fast path (``hooks.fast``) compares it with the
ref updates git hands the hook on stdin and returns at once when *every* update is one the mark
names. Anything else — another commit, another destination ref, another old value on the
remote, another repository, a malformed mark — gets the full check, as before.

What one mark entry names, and why each part:

- the repository (its git directory, resolved): a mark inherited into another repository's
  push is worth nothing there;
- the pushed commit: a mark can never vouch for a commit it does not name;
- the remote ref and its old value (the remote tip the commit was verified against, and the
  commit's only parent): the hook checks the commits in ``pushed ^old``; for gitpub's delivery
  that is exactly the one verified commit. If the remote moved meanwhile, git reports another
  old value, and the full check runs (the push is then refused as a non-fast-forward anyway).

Threat model. The mark is not a secret and not a signature: anyone who can set an environment
variable for ``git push`` can as well pass ``--no-verify`` (which skips every pre-push hook) or
edit the hook, so the mark gives a person with a shell no power they did not have. The pre-push
hook is a safety net against mistakes — a hand-amended job commit pushed by accident — and the
proof that counts is checked on the remote (``git pub confirm`` in CI). What the binding does
prevent is a mark *leaking* into a push it was not made for: gitpub sets it only in the
environment of its one ``git push`` (never in its own ``os.environ``), the hook removes it
before running a chained legacy hook, and an entry matches only the exact (repository,
commit, ref, old value) it was made for, so even a mark left exported in an agent's shell
cannot make the hook skip a different commit, ref or repository.

Stdlib-only and import-free: the hook's fast path imports it on every push. Its annotations
name builtin types only (``list``, not ``collections.abc.Iterable``): under ``from __future__
import annotations`` they are never evaluated, and nothing is imported for them.
"""

from __future__ import annotations

import os

ENV = "GITPUB_VERIFIED_PUSH"
VERSION = "v1"
_SEP = ";"  # between entries; within one, fields are separated by spaces


def entry(git_dir: str, commit: str, remote_ref: str, remote_old: str) -> str:
    """One verified update: ``commit`` pushed to ``remote_ref`` over ``remote_old``, in the
    repository at ``git_dir``."""
    return " ".join((VERSION, _resolved(git_dir), commit, remote_ref, remote_old))


def mark(entries: list[str]) -> str:
    return _SEP.join(entries)


def covers(value: str | None, git_dir: str,
           updates: list[tuple[str, str, str]]) -> bool:
    """Whether the mark ``value`` names every update — (pushed commit, remote ref, remote's
    old value), as pre-push's stdin gives them — in the repository at ``git_dir``. False
    for no updates (nothing to vouch for), for a deletion, and for anything malformed."""
    if not value:
        return False
    named = set(value.split(_SEP))
    where = _resolved(git_dir)
    if not updates or any(commit.strip("0") == "" for commit, _, _ in updates):
        return False
    return all(" ".join((VERSION, where, *u)) in named for u in updates)


def _resolved(git_dir: str) -> str:
    # Spaces cannot appear in the other fields (object ids, ref names); in a path they can,
    # and are kept: an entry is compared whole, never split. A path holding ";" splits its
    # entry and so never matches: the full check runs (safe, merely slower).
    return os.path.realpath(git_dir)
