"""What a ``git push --porcelain`` did, ref by ref: sent, race, rejected or unknown.

A push names one or more refs. A branch is pushed as a plain fast-forward (never forced: the
fast-forward *is* the compare-and-swap of concurrent writers); every other ref gitpub moves on
a remote — a job's state, the archive, the notes — goes with its expected old value,
``--force-with-lease=<ref>:<expected>`` (empty: the ref must not exist yet), so that the
server moves it only from the value this node last saw. ``--atomic`` makes the server apply
all of a push or none of it (GitHub, GitLab, Gitea/Forgejo, Bitbucket, ``git daemon``, ssh and
smart HTTP with C git on the other side support it; a server that does not advertise it
refuses the push before anything is sent, which we report as ``atomic_unsupported``).

Every ref ends in one of four outcomes:

- ``sent``: the remote has our value now (flags ``' '``, ``'*'``, ``'+'``, ``'='``, ``'-'``);
- ``race``: refused because the remote's ref is not what we expected — not a fast-forward,
  a lease that no longer holds (``stale info``), a lock held by a concurrent update: nothing
  changed there, another writer moved it;
- ``rejected``: refused for another reason (a hook, a protected ref): nothing changed;
- ``unknown``: no report for the ref (the connection died, the reply was lost): the update may
  or may not have happened, so the next attempt looks before it writes again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import NamedTuple

from gitpub.core.sanitize import sanitize


class PushResult(StrEnum):
    SENT = "sent"
    RACE = "race"
    REJECTED = "rejected"
    UNKNOWN = "unknown"


#: Reasons in a porcelain ``[rejected]``/``[remote rejected]`` summary that mean the remote ref
#: moved under us: another writer won the race (the push was the compare-and-swap that lost).
#: With ``--atomic``, a ref that was fine itself is refused as ``atomic push failed`` (git) or
#: ``atomic transaction failed`` (the server) because another one of the push was.
RACE_REASONS = ("non-fast-forward", "fetch first", "stale info", "cannot lock ref",
                "failed to update ref", "failed to lock", "atomic push failed",
                "atomic transaction failed")

#: Why a ref of an ``--atomic`` push was refused when the ref itself was fine: another ref of the
#: push was refused (the server's ``atomic push failure``, git's own ``atomic push failed``) or
#: the server's transaction failed as a whole.
COLLATERAL = ("atomic push failure", "atomic push failed", "atomic transaction failed")

#: git's words when the server does not support ``--atomic``: it sent nothing.
NO_ATOMIC = "does not support --atomic"

_SENT_FLAGS = (" ", "*", "+", "=", "-")


class PushOutcome(NamedTuple):
    result: PushResult
    detail: str  # sanitized

    @property
    def collateral(self) -> bool:
        """Refused only because another ref of the same atomic push was (see COLLATERAL)."""
        return self.result != PushResult.SENT and any(c in self.detail for c in COLLATERAL)


class Update(NamedTuple):
    """One ref of a push: ``src`` (an object id; None deletes the ref) to remote ref ``dst``.

    ``lease`` None: a plain fast-forward (a branch). Otherwise a compare-and-swap on the remote:
    the ref must be at ``lease`` (``""``: must not exist) for the update to happen."""

    dst: str
    src: str | None
    lease: str | None = None

    def refspec(self) -> str:
        return f"{self.src or ''}:{self.dst}"

    def options(self) -> list[str]:
        return [] if self.lease is None else [f"--force-with-lease={self.dst}:{self.lease}"]


class Pushed(NamedTuple):
    """The outcome of one push: each ref's, and the push's as a whole."""

    refs: Mapping[str, PushOutcome]
    atomic_unsupported: bool = False
    detail: str = ""  # what git said when no ref has a report (sanitized)

    def of(self, dst: str) -> PushOutcome:
        return self.refs.get(dst, PushOutcome(PushResult.UNKNOWN, self.detail or "no report"))

    @property
    def result(self) -> PushResult:
        """SENT when every ref is; else UNKNOWN if any ref is; else RACE if any ref lost a
        race; else REJECTED."""
        results = {o.result for o in self.refs.values()} or {PushResult.UNKNOWN}
        for result in (PushResult.UNKNOWN, PushResult.RACE, PushResult.REJECTED):
            if result in results:
                return result
        return PushResult.SENT


def push_args(updates: Sequence[Update], *, atomic: bool) -> list[str]:
    """``git push`` arguments for ``updates`` (without the remote and the refspecs): exactly
    those refs (no submodule, no tag ``push.followTags`` would add: a person's local tags are
    theirs to publish)."""
    args = ["push", "--porcelain", "--no-recurse-submodules", "--no-follow-tags"]
    if atomic:
        args.append("--atomic")
    for u in updates:
        args += u.options()
    return args


def parse_push(code: int, out: str, err: str, updates: Sequence[Update]) -> Pushed:
    """Each update's outcome from ``git push --porcelain``'s status lines."""
    if NO_ATOMIC in err:
        return Pushed({}, atomic_unsupported=True, detail=_detail(code, err))
    refs: dict[str, PushOutcome] = {}
    wanted = {u.dst for u in updates}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        dst = parts[1].rpartition(":")[2]
        if dst in wanted:
            refs[dst] = _outcome(parts[0], parts[2], _remote_said(err))
    detail = _detail(code, err)
    for u in updates:
        refs.setdefault(u.dst, PushOutcome(PushResult.UNKNOWN, detail))
    return Pushed(refs, detail=detail)


def _outcome(flag: str, summary: str, remote_said: str = "") -> PushOutcome:
    if flag in _SENT_FLAGS:
        return PushOutcome(PushResult.SENT, sanitize(summary))
    if flag == "!":
        race = any(reason in summary for reason in RACE_REASONS)
        said = f" (the remote said: {remote_said})" if remote_said else ""
        return PushOutcome(PushResult.RACE if race else PushResult.REJECTED,
                           sanitize(summary + said))
    return PushOutcome(PushResult.UNKNOWN, sanitize(summary))


def _remote_said(err: str) -> str:
    """The server's own words (its ``remote:`` lines: a hook's, a protection rule's), which
    say why a ref was refused; the last 300 characters, on one line."""
    lines = [ln[len("remote:"):].strip() for ln in err.splitlines() if ln.startswith("remote:")]
    return " / ".join(ln for ln in lines if ln)[-300:]


def _detail(code: int, err: str) -> str:
    return sanitize(err.strip())[-500:] or f"git push exited {code}"


def classify_push(code: int, out: str, err: str, dst: str) -> PushOutcome:
    """sent / race / rejected / unknown, from ``git push --porcelain``'s status line for ``dst``.

    Porcelain lines are ``<flag>\\t<src>:<dst>\\t<summary>``; flag ``' '``, ``'*'``, ``'+'``
    or ``'='`` means the ref is (now) at our commit, ``'!'`` that it was refused, the summary
    saying why (``[rejected] (fetch first)``). Without a line for our ref, we do not know what
    happened.
    """
    return parse_push(code, out, err, [Update(dst, None)]).of(dst)
