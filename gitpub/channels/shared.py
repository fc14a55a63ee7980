"""Channel state shared through the remote: every write lands there first, by compare-and-swap.

A published job's channel records live in its state commits, and the job's ref is shared: the
remote's ``refs/pub/jobs/<id>`` (``delivery.shared``) is the truth every clone builds on. So a
channel write here is a *push* before it is anything else:

1. the new state commit is made on top of this clone's value of the job (which the caller has
   synced with the remote's: the same, or ahead of it), nothing pointing at it yet;
2. one ``git push --atomic`` moves the remote's job ref from the value this clone last fetched
   (``--force-with-lease=refs/pub/jobs/<id>:<it>``), together with what must move with it: the
   account's ledger (``channels.lease``: the lease, the rate window, the counters — again by
   compare-and-swap) and, before a send, the intent's claim (``channels.claim``, pushed without
   force: created, or ours already);
3. only then does this clone's own ref follow (a fast-forward: what lands on the remote is what
   this clone records).

A compare-and-swap that loses (another clone moved the job, the ledger or holds the claim)
changed nothing anywhere: fetch, sync, decide again. A push without an answer (a timeout, a
dropped reply) is looked up by a fetch: landed, or not. A server without atomic push gets the
same changes one after the other, in the order the caller gives (the ledger first: a send
counted and not made only over-counts the window), and the caller reads which of them landed.

``Upstream`` is the remote's job store as the command sees it (``app`` builds it over
``delivery.shared``: fetch, and the sync of a job with the remote's value, proof of publication
included); ``Writer`` pushes sets of changes through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gitpub.core.sanitize import sanitize
from gitpub.git.push import PushOutcome, PushResult, Update
from gitpub.git.remote import Remote, RemoteConfigError, RemoteError
from gitpub.store.fetch import note_pushed
from gitpub.store.jobs import Job
from gitpub.store.mirror import store_prefix

STORE = "refs/pub/"
#: The detail of a change that was not pushed because an earlier one of the same set was
#: refused (without atomic push); its words make it collateral (``PushOutcome.collateral``).
NOT_PUSHED = "not pushed: atomic push failed for an earlier change of the same set"
#: The detail of a change whose push had no answer and that a fetch did not find there.
NOT_LANDED = "not on the remote after a push without an answer (atomic push failed)"


class Upstream(Protocol):
    """The remote's shared job store, for one command."""

    @property
    def remote(self) -> Remote: ...

    def refresh(self) -> None:
        """Fetch the branch and the store (``refs/pub/*``); raises ``RemoteError`` /
        ``RemoteConfigError``."""

    def sync(self, job: Job) -> Job | None:
        """``job`` reconciled with the remote's value as fetched (adopted when the remote is
        ahead or is the truth); None when this clone must not write it (another request
        holds the key there)."""


class Offline(Exception):
    """The remote could not be asked, or did not say whether a push landed: nothing that
    needs the remote happened (no send), and the next run finds out."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = sanitize(detail)


@dataclass(frozen=True)
class Change:
    """One ref of a push, named below ``refs/pub/``: ``new`` (None: delete it) where the
    remote had ``old`` as last fetched (None: absent). ``lease``: a compare-and-swap on ``old``;
    otherwise a plain push without force (a claim: created, or the same value already)."""

    name: str
    new: str | None
    old: str | None
    lease: bool = True

    def update(self) -> Update:
        return Update(STORE + self.name, self.new, (self.old or "") if self.lease else None)


@dataclass(frozen=True)
class Landing:
    """What one push did, change by change (by name)."""

    outcomes: Mapping[str, PushOutcome]

    @property
    def landed(self) -> bool:
        return all(o.result == PushResult.SENT for o in self.outcomes.values())

    def sent(self, name: str) -> bool:
        return self.outcomes[name].result == PushResult.SENT

    def blamed(self) -> dict[str, PushOutcome]:
        """The changes refused for their own sake (not only because another one was)."""
        return {n: o for n, o in self.outcomes.items()
                if o.result != PushResult.SENT and not o.collateral}

    @property
    def unknown(self) -> bool:
        return any(o.result == PushResult.UNKNOWN for o in self.outcomes.values())

    def detail(self) -> str:
        blamed = self.blamed() or {n: o for n, o in self.outcomes.items()
                                   if o.result != PushResult.SENT}
        return "; ".join(f"refs/pub/{n}: {o.detail}" for n, o in blamed.items())


class Writer:
    """Pushes sets of ``Change`` to the remote (see the module docstring)."""

    def __init__(self, upstream: Upstream, progress: Callable[[str], None]) -> None:
        self.upstream = upstream
        self.progress = progress
        self.atomic = True  # until the server says it does not support it

    @property
    def remote(self) -> Remote:
        return self.upstream.remote

    def value(self, name: str) -> str | None:
        """The remote's value of ``refs/pub/<name>`` as last fetched."""
        return self.remote.repo.read_ref(store_prefix(self.remote) + name)

    def push(self, changes: Sequence[Change]) -> Landing:
        """Push ``changes``, all or nothing where the server can (see the module docstring).
        Raises ``Offline`` when the remote cannot be asked at all (nothing was pushed) or a
        push had no answer and a fetch could not tell whether it landed."""
        if not changes:
            return Landing({})
        try:
            outcomes = self._push(changes)
        except (RemoteError, RemoteConfigError) as e:
            raise Offline(e.message) from None
        landing = Landing(outcomes)
        if landing.unknown:
            landing = self._look(changes, landing)
        for c in changes:
            if landing.sent(c.name):
                note_pushed(self.remote, c.name, c.old, c.new)
        return landing

    def _push(self, changes: Sequence[Change]) -> dict[str, PushOutcome]:
        remote = self.remote
        if self.atomic:
            pushed = remote.push_updates([c.update() for c in changes], atomic=True,
                                         verify=False)
            if not pushed.atomic_unsupported:
                return {c.name: pushed.of(STORE + c.name) for c in changes}
            self.atomic = False
            self.progress(f"warning: the remote {sanitize(remote.remote)} does not support "
                          "atomic pushes: pushing channel state one ref after the other")
        outcomes: dict[str, PushOutcome] = {}
        for c in changes:
            if outcomes and any(o.result != PushResult.SENT for o in outcomes.values()):
                outcomes[c.name] = PushOutcome(PushResult.RACE, NOT_PUSHED)
                continue
            outcomes[c.name] = remote.push_updates([c.update()], verify=False).of(STORE + c.name)
        return outcomes

    def _look(self, changes: Sequence[Change], landing: Landing) -> Landing:
        """A push without an answer for some changes: a fetch says which landed."""
        try:
            self.upstream.refresh()
        except (RemoteError, RemoteConfigError) as e:
            raise Offline(f"{landing.detail()}; and the remote could not be asked whether it "
                          f"landed: {e.message}") from None
        outcomes = dict(landing.outcomes)
        for c in changes:
            if outcomes[c.name].result != PushResult.UNKNOWN:
                continue
            if self.value(c.name) == c.new:
                outcomes[c.name] = PushOutcome(PushResult.SENT, "landed (found by a fetch "
                                                                "after the push had no answer)")
            else:
                outcomes[c.name] = PushOutcome(PushResult.RACE, NOT_LANDED)
        return Landing(outcomes)
