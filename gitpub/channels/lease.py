"""The per-(channel, account) ledger on the remote: one sender at a time, the rate window, and
the counters of ``git pub metrics`` — shared by every clone.

The ledger is a commit at ``refs/pub/channel-leases/<channel>/<hash of the account>``
*on the remote* (fetched with the job store, read here under
``refs/pub/remote/<remote>/channel-leases/…``): who holds the account's lease (token, owner,
expiry), when the recent sends under it started (the ``rate`` window), two counters that
only ever grow — sends attempted and sends confirmed, for every job of that account, including
jobs folded into the archive long ago — and the intents whose claim was folded in once their
record settled (``channels.claim``: so claim refs do not pile up, and a settled intent is still
never sent again). The commit's tree holds ``ledger.json`` (all of the above but the settled
intents, which it only counts) and one empty file per settled intent,
``settled/<its first two characters>/<intent key>``: a write rebuilds only the trees on the
paths it changes, so its cost stays flat however many intents settled. Each value is a new
parentless commit (the old ones are garbage once no ref holds them).

It is never written here and never moved by an unconditional push: every change is a
compare-and-swap on the remote (``--force-with-lease=<ref>:<the value fetched>``), in the same
atomic push as the channel record it goes with (``channels.state``) — so a send is counted in
the window exactly when its SENDING record lands, whichever clone sends it, and two clones can
never both take the lease or both use the last free slot of the window.

The lease does not fence the platform — a worker stopped past its expiry may still wake up and
talk to it (reference §5). What it fences is our state: the holder's token is recorded in the
channel record with SENDING, the next holder turns such a record ``unknown``, and the stale
worker's later write fails its compare-and-swap (``channels.state``). Before each send the
holder checks that its lease still covers the whole send, and sends nothing otherwise.

Everything here is pure (values and their changes), except ``Ledgers`` (reading); the
ledger commits are written by ``channels.state``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from gitpub.channels.model import ChannelRecordError, Holder, load_object
from gitpub.config.model import Rate
from gitpub.core.errors import CorruptStateError
from gitpub.core.sanitize import sanitize
from gitpub.git.repo import MODE_FILE, Repository
from gitpub.store.lease import owner_alive

#: Below ``refs/pub/`` (on the remote; here below the remote's tracking prefix).
LEASES = "channel-leases/"
LEASE_PREFIX = "refs/pub/" + LEASES
LEDGER_FORMAT = 2
#: The ledger's document in its commit's tree; the settled intents' directory.
LEDGER_FILE = "ledger.json"
SETTLED_DIR = "settled"
#: The intent keys that may be folded (a tree entry's name); any other keeps its claim ref.
FOLDABLE_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{2,127}")
#: A channel's name (``config.channel_rules``): a ledger naming another is not one of ours.
CHANNEL_NAME = re.compile(r"[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?")
_FIELDS = {"format", "channel", "account", "holder", "sends", "attempted", "confirmed",
           "settled"}


def ledger_name(channel: str, account: str) -> str:
    """The ledger's ref below ``refs/pub/``. ``account`` as the channel records keep it
    (sanitized): a record alone names its ledger, even once its channel is unconfigured."""
    return f"{LEASES}{channel}/{hashlib.sha256(account.encode()).hexdigest()[:20]}"


def lease_ref(channel: str, account: str) -> str:
    """The ledger's ref on the remote."""
    return "refs/pub/" + ledger_name(channel, account)


@dataclass(frozen=True)
class Ledger:
    channel: str
    account: str  # sanitized
    holder: Holder | None = None
    sends: tuple[float, ...] = ()  # start times of the recent sends (the rate window)
    attempted: int = 0  # sends ever started (SENDING records that landed): only grows
    confirmed: int = 0  # channel records ever confirmed: only grows
    settled: int = 0  # intents whose claim was folded in here (``channels.claim``): only grows
    #: The tree of the ledger's commit as read (None: a new ledger): the settled intents are
    #: its ``settled/<first two characters>/<intent key>`` entries.
    tree: str | None = None
    folding: tuple[str, ...] = ()  # intents this change folds in (written by ``channels.state``)

    def to_blob(self) -> bytes:
        holder = None if self.holder is None else {
            "token": self.holder.token, "owner": self.holder.owner,
            "expires_at": self.holder.expires_at}
        return (json.dumps({"format": LEDGER_FORMAT, "channel": self.channel,
                            "account": sanitize(self.account), "holder": holder,
                            "sends": list(self.sends), "attempted": self.attempted,
                            "confirmed": self.confirmed, "settled": self.settled},
                           sort_keys=True,
                           allow_nan=False) + "\n").encode()

    def taken(self, holder: Holder, now: float, rate: Rate | None, *,
              count: bool) -> Ledger:
        """The lease given to ``holder``; ``count``: a send starts now (in the window)."""
        window = rate.per if rate is not None else 0.0
        # A send dated after now (a clone whose clock runs ahead, a forged ledger) is kept as
        # made now: it holds the window one period at most, never for ever.
        sends = tuple(min(t, now) for t in self.sends if t > now - window)
        return replace(self, holder=holder, sends=(*sends, now) if count else sends)

    def released(self, token: str, uncount: float | None = None) -> Ledger:
        """The lease given back if ``token`` still holds it (``uncount``: the start time of a
        send that was counted but not made); unchanged otherwise."""
        if self.holder is None or self.holder.token != token:
            return self
        sends = self.sends
        if uncount is not None and uncount in sends:
            i = len(sends) - 1 - sends[::-1].index(uncount)
            sends = sends[:i] + sends[i + 1:]
        return replace(self, holder=None, sends=sends)

    def counted(self, attempted: int, confirmed: int) -> Ledger:
        return replace(self, attempted=self.attempted + attempted,
                       confirmed=self.confirmed + confirmed)

    def settling(self, intent_keys: Iterable[str]) -> Ledger:
        """``intent_keys`` to fold into the settled intents (their claims go in the same
        push)."""
        return replace(self, folding=(*self.folding, *intent_keys))


class LedgerMoved(Exception):
    """The ledger a write is built on is not the one its decision read, and the decision does
    not hold on it (another process of this clone fetched a newer one meanwhile: the
    compare-and-swap would be against that one). Nothing was pushed; decide again."""


def parse_ledger(raw: bytes) -> Ledger:
    data = load_object(raw, "channel lease", LEDGER_FORMAT)
    if set(data) != _FIELDS:
        raise ChannelRecordError("channel lease has unexpected fields")
    holder, sends = data["holder"], data["sends"]
    counters = (data["attempted"], data["confirmed"], data["settled"])
    if not (isinstance(data["channel"], str) and isinstance(data["account"], str)
            and isinstance(sends, list)
            and all(isinstance(t, int | float) and not isinstance(t, bool) for t in sends)
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                    for n in counters)):
        raise ChannelRecordError("channel lease has a field of the wrong type")
    if holder is not None:
        if not (isinstance(holder, dict) and set(holder) == {"token", "owner", "expires_at"}
                and isinstance(holder["token"], str) and isinstance(holder["owner"], str)
                and isinstance(holder["expires_at"], int | float)):
            raise ChannelRecordError("channel lease has a bad holder")
        holder = Holder(holder["token"], holder["owner"], float(holder["expires_at"]))
    return Ledger(data["channel"], data["account"], holder, tuple(float(t) for t in sends),
                  counters[0], counters[1], counters[2])


#: Seconds a lease's expiry may lie beyond the longest one a clone takes (its clock ahead).
CLOCK_SLACK = 3600.0


def live_holder(holder: Holder | None, now: float, longest: float | None = None) -> bool:
    """Whether ``holder`` still holds its lease. ``longest``: the longest lease a clone takes
    for the channel (``lease``): one running further than that (and ``CLOCK_SLACK``) was
    never taken by a clone with a sane clock — forged, or a clock far off — and holds
    nothing (else it would stop the account for as long as it says)."""
    if holder is None or holder.expires_at <= now or not owner_alive(holder.owner):
        return False
    return longest is None or holder.expires_at <= now + longest + CLOCK_SLACK


def rate_wait(ledger: Ledger, rate: Rate | None, now: float) -> float:
    """Seconds until the account may send again under ``rate`` (0: now)."""
    if rate is None:
        return 0.0
    recent = sorted(min(t, now) for t in ledger.sends if t > now - rate.per)
    if len(recent) < rate.count:
        return 0.0
    return recent[len(recent) - rate.count] + rate.per - now


class Ledgers:
    """The remote's ledgers as this clone last fetched them (``prefix``: the remote's tracking
    prefix, ``refs/pub/remote/<remote>/``)."""

    def __init__(self, repo: Repository, prefix: str) -> None:
        self.repo = repo
        self.prefix = prefix

    def read(self, channel: str, account: str) -> tuple[str | None, Ledger]:
        """The ledger's value on the remote (as fetched) and its contents; a ledger nobody
        wrote yet is empty. An unreadable one raises, naming the remote's ref."""
        name = ledger_name(channel, account)
        sha = self.repo.read_ref(self.prefix + name)
        if sha is None:
            return None, Ledger(channel, account)
        try:
            ledger = self._parse(sha, name)
        except (ChannelRecordError, KeyError, ValueError) as e:
            raise CorruptStateError(
                f"channel lease refs/pub/{name} ({channel}) on the remote is unreadable: {e}",
                hint=f"no channel {channel!r} sends until it is repaired; inspect "
                     f"`git cat-file -p {self.prefix}{name}`, then delete it on the remote "
                     f"(`git push <remote> :refs/pub/{name}`) once no send is running") from None
        return sha, ledger

    def all(self) -> dict[str, Ledger | CorruptStateError]:
        """Every ledger on the remote (as fetched), by ref name below ``refs/pub/``."""
        found: dict[str, Ledger | CorruptStateError] = {}
        for rest, sha in sorted(self.repo.list_refs(self.prefix + LEASES).items()):
            name = LEASES + rest
            try:
                found[name] = self._parse(sha, name)
            except (ChannelRecordError, KeyError, ValueError) as e:
                found[name] = CorruptStateError(f"channel lease refs/pub/{name}: {e}")
        return found

    def _parse(self, sha: str, name: str) -> Ledger:
        """The ledger commit ``sha`` at ``name``: its ``ledger.json``, and its tree (the
        settled intents). One naming another channel or account than its ref's (forged, or
        copied from another ref) is unreadable: its counters are not that account's."""
        try:
            tree = self.repo.commit(sha).tree
            entry = self.repo.lookup(tree, LEDGER_FILE)
        except CorruptStateError as e:  # not a commit, or damaged
            raise ChannelRecordError(e.message) from None
        if entry is None or entry.mode != MODE_FILE:
            raise ChannelRecordError(f"it has no {LEDGER_FILE}")
        try:
            raw = self.repo.blob(entry.sha)
        except CorruptStateError as e:
            raise ChannelRecordError(e.message) from None
        ledger = parse_ledger(raw)
        if not CHANNEL_NAME.fullmatch(ledger.channel) or \
                ledger_name(ledger.channel, ledger.account) != name:
            raise ChannelRecordError(f"it names channel {sanitize(ledger.channel)!r} and "
                                     "another account than its ref's")
        return replace(ledger, tree=tree)

    def is_settled(self, ledger: Ledger, intent_key: str) -> bool:
        """Whether ``intent_key`` is one of ``ledger``'s settled intents."""
        return ledger.tree is not None and FOLDABLE_KEY.fullmatch(intent_key) is not None \
            and self.repo.lookup(ledger.tree, settled_path(intent_key)) is not None


def settled_path(intent_key: str) -> str:
    """Where a settled intent is in the ledger's tree."""
    return f"{SETTLED_DIR}/{intent_key[:2]}/{intent_key}"
