"""Leases: which process may work on a job right now.

A lease is part of the job record (token, owner, expiry), so taking one is a compare-and-swap of
the job's ref like every other write. The holder's every transition renews it (the heartbeat);
a transition into a resting state releases it. A worker that lost its lease finds out at its
next write — the swap fails because the new holder's write moved the ref — and stops silently:
losing a lease race is normal concurrency, not an error.

A lease whose owner is a process on this host that no longer exists (killed, crashed) is dead
at once, without waiting for the expiry: the owner string carries host, pid and the process
start time, so a recycled pid is not mistaken for the old owner.

A lease that claims to run for more than ``CREDIBLE`` lease durations from now (the longer of
``lease_seconds`` and the default: 30 minutes at least) is not believed
(it counts as expired) unless this host can see its owner running: no worker renews a lease that
far ahead, so it was written by a clock far ahead or by a clone squatting the job. Taking such a
job is safe — leases are for efficiency, the compare-and-swap of every write is the fence.

A lease's owner may come from another clone (the remote's record): messages quote it through
``shown_owner`` — sanitized, control characters escaped, cut short.
"""

from __future__ import annotations

import os
import re
import time
from typing import NamedTuple

from gitpub.core.record import Lease
from gitpub.core.sanitize import sanitize

DEFAULT_TTL = 900.0
#: How many lease durations ahead an expiry may lie and still be believed (see above).
CREDIBLE = 2.0
#: How much of a lease's owner string messages quote.
MAX_SHOWN = 120
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), None if unknown/dead."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(b")", 1)[-1].split()
    if len(fields) <= 19 or fields[0] == b"Z":  # a zombie is as dead as it gets
        return None
    return fields[19].decode()


def _this_host() -> str:
    return os.uname().nodename.replace(":", "_")


class Worker(NamedTuple):
    """This process as a lease holder (a frozen value)."""

    token: str
    owner: str
    #: How long a lease lasts (``open_session``: from the configuration).
    ttl: float = DEFAULT_TTL

    @classmethod
    def current(cls, ttl: float = DEFAULT_TTL) -> Worker:
        pid = os.getpid()
        owner = f"{_this_host()}:{pid}:{_start_time(pid) or '?'}"
        return cls(os.urandom(16).hex(), owner, ttl)  # random, as uuid4

    def seconds(self) -> float:
        """How long a lease taken now lasts."""
        return self.ttl

    def lease(self, now: float | None = None) -> Lease:
        return Lease(self.token, self.owner,
                     (time.time() if now is None else now) + self.seconds())

    def holds(self, lease: Lease | None) -> bool:
        return lease is not None and lease.token == self.token


def shown_owner(owner: str) -> str:
    """A lease's owner as a message quotes it: another clone may have written it."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", sanitize(owner[:1000]))
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN - 3] + "..."


def owner_alive(owner: str, *, here_only: bool = False) -> bool:
    """False only when we can tell the owner process is gone (same host, pid dead or reused);
    ``here_only``: True only when we can tell it runs (on this host)."""
    host, _, rest = owner.partition(":")
    pid_s, _, start = rest.partition(":")
    if host != _this_host() or not pid_s.isdigit():
        return not here_only
    current = _start_time(int(pid_s))
    if current is None:
        try:
            os.kill(int(pid_s), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return start == "?"
    return start in ("?", current)


def held_by_other(lease: Lease | None, worker: Worker, now: float | None = None) -> bool:
    """Whether someone else holds a live lease (so we must leave the job alone)."""
    if lease is None or worker.holds(lease):
        return False
    now = time.time() if now is None else now
    if lease.expires_at <= now:
        return False
    if lease.expires_at > now + CREDIBLE * max(worker.seconds(), DEFAULT_TTL):
        return owner_alive(lease.owner, here_only=True)  # not believed (see above)
    return owner_alive(lease.owner)
