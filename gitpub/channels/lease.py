"""The per-(channel, account) lease: one sender at a time for one account, across processes.

The lease is a ref, ``refs/pub/channel-leases/<channel>/<hash of the account>``, pointing at a
small JSON blob — the account's *ledger*: who holds the lease (token, owner, expiry) and when the
recent sends under it started (the per-account rate limit's window). Every change is a
compare-and-swap of that ref (``set_if_equals``), like the job store's writes, so two workers
never both believe they hold it; a holder that is gone (dead process on this host) or whose
expiry passed may be replaced.

The lease does not fence the platform — a worker stopped past its expiry may still wake up and
talk to it (reference §5). What it fences is our state: the holder's token is recorded in the
channel record with SENDING, the next holder turns such a record ``unknown``, and the stale
worker's later write fails its compare-and-swap (``channels.state``). Before each send the
holder checks that its lease still covers the whole send, and sends nothing otherwise.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from dataclasses import dataclass, replace

from gitpub.channels.model import ChannelRecordError, Holder, load_object
from gitpub.config.model import ChannelSpec, Rate
from gitpub.core.errors import CorruptStateError
from gitpub.core.sanitize import sanitize
from gitpub.git.repo import Repository
from gitpub.store.lease import Worker, owner_alive

LEASE_PREFIX = "refs/pub/channel-leases/"
#: Compare-and-swap rounds before giving up on a contended lease ref for this run.
CAS_ROUNDS = 20


class LeaseLost(Exception):
    """Our lease was taken over (it had expired): stop, write nothing more."""


def lease_ref(channel: str, account: str) -> str:
    return f"{LEASE_PREFIX}{channel}/{hashlib.sha256(account.encode()).hexdigest()[:20]}"


@dataclass(frozen=True)
class Ledger:
    channel: str
    account: str
    holder: Holder | None
    sends: tuple[float, ...] = ()  # start times of the recent sends (the rate window)

    def to_blob(self) -> bytes:
        holder = None if self.holder is None else {
            "token": self.holder.token, "owner": self.holder.owner,
            "expires_at": self.holder.expires_at}
        return (json.dumps({"format": 1, "channel": self.channel, "account": self.account,
                            "holder": holder, "sends": list(self.sends)},
                           sort_keys=True) + "\n").encode()


def parse_ledger(raw: bytes) -> Ledger:
    data = load_object(raw, "channel lease")
    if set(data) != {"format", "channel", "account", "holder", "sends"}:
        raise ChannelRecordError("channel lease has unexpected fields")
    holder, sends = data["holder"], data["sends"]
    if not (isinstance(data["channel"], str) and isinstance(data["account"], str)
            and isinstance(sends, list) and all(isinstance(t, int | float) for t in sends)):
        raise ChannelRecordError("channel lease has a field of the wrong type")
    if holder is not None:
        if not (isinstance(holder, dict) and set(holder) == {"token", "owner", "expires_at"}
                and isinstance(holder["expires_at"], int | float)):
            raise ChannelRecordError("channel lease has a bad holder")
        holder = Holder(str(holder["token"]), str(holder["owner"]), float(holder["expires_at"]))
    return Ledger(data["channel"], data["account"], holder, tuple(float(t) for t in sends))


@dataclass(frozen=True)
class AccountLease:
    """A lease we hold: the ledger as we wrote it and the blob the ref points at."""

    ref: str
    sha: str
    ledger: Ledger
    counted: bool = False  # a send is already counted in the rate window, not used yet

    @property
    def holder(self) -> Holder:
        assert self.ledger.holder is not None
        return self.ledger.holder


def live_holder(holder: Holder | None, now: float) -> bool:
    return holder is not None and holder.expires_at > now and owner_alive(holder.owner)


def rate_wait(ledger: Ledger, rate: Rate | None, now: float) -> float:
    """Seconds until the account may send again under ``rate`` (0: now)."""
    if rate is None:
        return 0.0
    recent = sorted(t for t in ledger.sends if t > now - rate.per)
    if len(recent) < rate.count:
        return 0.0
    return recent[len(recent) - rate.count] + rate.per - now


class Leases:
    """The channel leases of one repository, taken on behalf of one process."""

    def __init__(self, repo: Repository, owner: str | None = None) -> None:
        self.repo = repo
        self.owner = owner or Worker.current().owner

    def read(self, spec: ChannelSpec) -> tuple[str | None, Ledger]:
        ref = lease_ref(spec.name, spec.account)
        sha = self.repo.read_ref(ref)
        if sha is None:
            return None, Ledger(spec.name, spec.account, None)
        try:
            return sha, parse_ledger(self.repo.blob(sha))
        except (ChannelRecordError, KeyError, ValueError) as e:
            raise CorruptStateError(
                f"channel lease {ref} ({spec.name}) is unreadable: {e}",
                hint=f"no channel {spec.name!r} sends until it is repaired; inspect "
                     f"`git cat-file -p {ref}` and delete the ref if no send is running") from None

    def acquire(self, spec: ChannelSpec, *, count_send: bool = False) -> AccountLease | None:
        """The lease for ``spec``'s account, or None while another live worker holds it.
        ``count_send``: the caller means to send at once — count it now, in the same write,
        if the rate allows (one ref write less per send)."""
        for _ in range(CAS_ROUNDS):
            sha, ledger = self.read(spec)
            now = time.time()
            if live_holder(ledger.holder, now):
                return None
            holder = Holder(uuid.uuid4().hex, self.owner, now + spec.lease_seconds)
            window = spec.rate.per if spec.rate is not None else 0.0
            new = replace(ledger, holder=holder,
                          sends=tuple(t for t in ledger.sends if t > now - window))
            counted = count_send and rate_wait(new, spec.rate, now) == 0
            if counted:
                new = replace(new, sends=(*new.sends, now))
            taken = self._swap(lease_ref(spec.name, spec.account), sha, new)
            if taken is not None:
                return replace(taken, counted=counted)
        return None

    def note_send(self, lease: AccountLease) -> AccountLease:
        """Count a send against the account's rate (before it starts); ``LeaseLost`` if the
        lease is no longer ours. A send counted when the lease was taken is used up here."""
        if lease.counted:
            return replace(lease, counted=False)
        ledger = replace(lease.ledger, sends=(*lease.ledger.sends, time.time()))
        swapped = self._swap(lease.ref, lease.sha, ledger)
        if swapped is None:
            raise LeaseLost(lease.ref)
        return swapped

    def still_ours(self, lease: AccountLease, needed: float) -> bool:
        """Whether the ref still holds our lease and it covers ``needed`` more seconds."""
        try:
            current = self.repo.read_ref(lease.ref)
        except CorruptStateError:
            return False
        return current == lease.sha and lease.holder.expires_at > time.time() + needed

    def release(self, lease: AccountLease) -> None:
        """Give the lease back (keeping the rate window, minus a send counted but not made);
        a no-op if it was taken over."""
        if lease.counted:
            lease = replace(lease, ledger=replace(lease.ledger, sends=lease.ledger.sends[:-1]))
        self._swap(lease.ref, lease.sha, replace(lease.ledger, holder=None))

    def _swap(self, ref: str, old: str | None, ledger: Ledger) -> AccountLease | None:
        ledger = replace(ledger, account=sanitize(ledger.account))
        sha = self.repo.write_blob(ledger.to_blob())
        if not self.repo.cas_ref(ref, old, sha, "gitpub: channel lease"):
            return None
        return AccountLease(ref, sha, ledger)
