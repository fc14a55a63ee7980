"""The intent's claim on the remote: no send without a claim that another clone can see.

Channel state is shared through the remote (``channels.state``): a send's SENDING record lands
on the remote's job ref by compare-and-swap before the send, so two clones that both hold the
job cannot both start it. The claim adds what survives that record: before every send (every
attempt) the intent is claimed *on the remote*, ``refs/pub/channel-claims/<intent key>``, in
the same atomic push as the SENDING record, pushed without force, pointing at a root commit
that names the claimer. A push without force to a ref that exists with another commit is
refused (not a fast-forward): that refusal is the compare-and-swap that lets exactly one clone
create the claim — even if the job's shared record is later lost, forged back to ``pending``,
or never reached a remote an older gitpub wrote to.

Claims do not pile up: once the intent's record settles (confirmed, skipped), the write that
records it — whichever clone makes it — deletes the claim on the remote (compare-and-swap) and
folds its intent key into the account's ledger (``channels.lease``: ``settled``), in the same
atomic push; this clone's own copy goes too. A send whose intent the ledger lists as settled is
never made (another clone settled it: ``unknown``, reconciled as below), and every send pushes
the ledger by compare-and-swap with its claim, so a claim folded meanwhile is never re-created
by a send. The remote keeps one claim ref per intent in flight or waiting for a person.

- ``ours``: the remote ref is our claim commit (pushed now, or "up to date": an earlier attempt
  of ours, or a push whose answer was lost, made it) — the send may go ahead;
- ``theirs``: another claim is there — another clone owns the intent and may have sent it: the
  channel becomes ``unknown`` and is reconciled (probe, or the same-key resend), never sent as
  new;
- ``failed``: the remote could not be asked (unreachable, timeout, credentials): nothing was
  sent, retryable;
- ``refused``: the remote refuses the ref (a hook): nothing was sent; a person decides.

A person's ``git pub resolve --channel NAME --not-sent`` (nothing went out) deletes the claim
with the record's move back to ``pending``, in one push: any clone may claim the intent again.

The claim commit is made once per intent and clone and kept at the same ref name locally until
the intent settles (so each retry pushes the very same commit, and it is never
garbage-collected). It carries a random
nonce: two clones driven by one process (or by two with the same host name and pid, in
containers) in the same second would otherwise make the very same commit, and the second's push
would read "up to date" — ``ours`` — and send again. The local ref is not
evidence of anything on the platform; the remote's is the claim.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import StrEnum

from gitpub.channels.model import ChannelRecord
from gitpub.channels.shared import Change
from gitpub.core.errors import GitpubError
from gitpub.core.sanitize import sanitize
from gitpub.git.remote import PushResult, Remote, classify_push
from gitpub.git.repo import Repository
from gitpub.git.run import GitTimeout

CLAIMS = "channel-claims/"
CLAIM_PREFIX = "refs/pub/" + CLAIMS
#: The longest a claim's push may take (it is inside the lease, before the send's timeout).
CLAIM_TIMEOUT = 30.0


class Claimed(StrEnum):
    OURS = "ours"
    THEIRS = "theirs"
    FAILED = "failed"
    REFUSED = "refused"


@dataclass(frozen=True)
class Verdict:
    claimed: Claimed
    detail: str  # sanitized


def claim_ref(intent_key: str) -> str:
    return CLAIM_PREFIX + intent_key


class Claims:
    """The claims of one repository on its configured remote."""

    def __init__(self, repo: Repository, remote: Remote, owner: str) -> None:
        self.repo = repo
        self.remote = remote
        self.owner = owner

    def commit_for(self, job_id: str, record: ChannelRecord) -> str:
        """Our claim commit of ``record``'s intent: made once, then always the same."""
        ref = claim_ref(record.intent_key)
        for _ in range(3):
            sha = self.repo.read_ref(ref)
            if sha is not None:
                return sha
            message = sanitize(
                f"gitpub: channel claim {record.intent_key}\n\n"
                f"job {job_id}\nchannel {record.channel}\naccount {record.account}\n"
                f"operation {record.operation}\nclaimed by {self.owner}\n"
                f"nonce {uuid.uuid4().hex}\n").encode()
            new = self.repo.write_commit(self.repo.write_tree(None, {}), [], message)
            if self.repo.cas_ref(ref, None, new, "gitpub: channel claim"):
                return new
        raise GitpubError(f"could not record the channel claim {ref}: it kept moving")

    def change(self, job_id: str, record: ChannelRecord, seen: str | None) -> Change:
        """The claim as one change of the push that records SENDING (``seen``: the remote's
        claim as last fetched)."""
        return Change(CLAIMS + record.intent_key, self.commit_for(job_id, record), seen,
                      lease=False)

    @staticmethod
    def released(intent_key: str, seen: str) -> Change:
        """The remote's claim ``seen`` deleted (a person found nothing went out)."""
        return Change(CLAIMS + intent_key, None, seen)

    def claim(self, job_id: str, record: ChannelRecord) -> Verdict:
        """Push our claim of ``record``'s intent to the remote (see the module docstring)."""
        ref = claim_ref(record.intent_key)
        try:
            sha = self.commit_for(job_id, record)
            self.remote.check()
            proc = self.remote.push_git(["push", "--porcelain", "--no-verify",
                                         "--no-recurse-submodules", "--no-follow-tags",
                                         self.remote.remote, f"{sha}:{ref}"], CLAIM_TIMEOUT)
        except GitTimeout:
            return Verdict(Claimed.FAILED, "the claim's push timed out")
        except GitpubError as e:
            return Verdict(Claimed.FAILED, sanitize(e.message))
        out = proc.stdout.decode("utf-8", "replace")
        err = proc.stderr.decode("utf-8", "replace")
        outcome = classify_push(proc.returncode, out, err, ref)
        if outcome.result == PushResult.SENT:
            return Verdict(Claimed.OURS, outcome.detail)
        if outcome.result == PushResult.RACE:
            return Verdict(Claimed.THEIRS, f"another clone claimed it on the remote "
                                           f"({outcome.detail})")
        if outcome.result == PushResult.REJECTED:
            return Verdict(Claimed.REFUSED, f"the remote refused the claim ref "
                                            f"({outcome.detail})")
        return Verdict(Claimed.FAILED, outcome.detail)
