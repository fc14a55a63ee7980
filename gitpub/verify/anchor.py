"""The rollback anchor: what CI remembers of the last ledger it wrote, where no pusher reaches.

A ledger's MAC proves that CI wrote it, not that it is the newest: anyone who can push can set
``refs/notes/pub`` back to an older authentic notes commit — and with it forget the BAD
verdicts opened since, and the points that would show a force-push — or delete it, so that the
next run starts from nothing. Only something kept outside the repository can tell. The anchor
is a small file CI keeps between runs (a cache or an artifact: ``--anchor FILE``) naming the
notes commit of the last ledger a run wrote and pushed, its serial and the branch it confirms,
under a MAC with CI's key (a file anyone could write would anchor nothing). A run then refuses
(exit 1) when the remote's notes no longer hold that commit — rolled back or deleted — and
writes the anchor again after it pushed its own ledger.

The anchor also names the *lineage* of the ledgers (``verify.ledger.LINEAGE``), a random name
a ``--first-run`` chooses: only ledgers of that lineage are believed, so ledgers another
repository's CI wrote with the same key — pushed into these notes, or merged with them — stand
for nothing here.

The anchor cannot be older than the remote's notes in any way that matters: a run that failed
to push wrote no anchor, and the next run's ledger descends from the anchored one. When the
anchor is lost (a cache evicted), or on the very first keyed run, a person says so:
``--first-run`` takes the remote's notes as they are, once.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from pathlib import Path
from typing import NamedTuple

from gitpub.core.errors import GitpubError
from gitpub.core.files import write_atomic
from gitpub.verify.ledger import LINEAGE_NAME, Key

FORMAT = 2
#: The format before lineages (read: its runs go on with a new lineage).
FORMAT_1 = 1


class AnchorError(GitpubError):
    """The anchor cannot be read or was not written with this key: nothing is believed."""


class Anchor(NamedTuple):
    notes: str  # the notes commit of the last ledger a run wrote and pushed
    serial: int  # that ledger's serial
    branch: str  # the branch it confirms
    lineage: str = ""  # whose ledgers are believed ("": an anchor from before lineages)

    def mac(self, key: Key) -> str:
        return key.mac("anchor", self.notes, str(self.serial), self.branch,
                       *([self.lineage] if self.lineage else []))


def load(path: Path, key: Key) -> Anchor | None:
    """The anchor at ``path``, None when there is no file; ``AnchorError`` when it is not one
    this key wrote (damaged, or forged)."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise AnchorError(f"the anchor {path} cannot be read ({type(e).__name__})",
                          hint="restore it from CI's cache, or run once with --first-run "
                               "to take the remote's notes as they are") from None
    fields = {"format", "notes", "serial", "branch", "mac"}
    if not isinstance(data, dict) or \
            set(data) != (fields | {"lineage"} if data.get("format") == FORMAT else fields) or \
            data["format"] not in (FORMAT, FORMAT_1) or \
            not all(isinstance(data[k], str) for k in ("notes", "branch", "mac")) or \
            not isinstance(data["serial"], int) or (data["format"] == FORMAT and not (
                isinstance(data["lineage"], str) and LINEAGE_NAME.fullmatch(data["lineage"]))):
        raise AnchorError(f"the anchor {path} is not an anchor gitpub writes",
                          hint="run once with --first-run to take the remote's notes as "
                               "they are")
    anchor = Anchor(data["notes"], data["serial"], data["branch"], data.get("lineage", ""))
    if not hmac.compare_digest(data["mac"], anchor.mac(key)):
        raise AnchorError(f"the anchor {path} was not written with this {_KEY}",
                          hint="someone changed it, or CI's key changed: run once with "
                               "--first-run to take the remote's notes as they are")
    return anchor


def save(path: Path, anchor: Anchor, key: Key) -> None:
    """Write the anchor (atomically: a reader sees the old one or the new one)."""
    if not LINEAGE_NAME.fullmatch(anchor.lineage):
        raise ValueError("an anchor is written with a lineage")
    text = json.dumps({"format": FORMAT, "notes": anchor.notes, "serial": anchor.serial,
                       "branch": anchor.branch, "lineage": anchor.lineage,
                       "mac": anchor.mac(key)}, sort_keys=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (text + "\n").encode(), mode=0o600)


def from_environment(given: str | None) -> Path | None:
    """The anchor file: ``--anchor``, else ``GITPUB_CONFIRM_ANCHOR``; None when neither."""
    value = given or os.environ.get(ENV)
    return None if not value else Path(value).expanduser()


ENV = "GITPUB_CONFIRM_ANCHOR"
_KEY = "GITPUB_CONFIRM_KEY"


def new_lineage() -> str:
    """A lineage for the ledgers a ``--first-run`` starts (random: no other repository's CI
    picks the same)."""
    return secrets.token_hex(16)
