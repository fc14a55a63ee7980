"""The job state machine: states, what each means, and which transitions are legal.

The transition table is the design of docs/design.md (sections 2, 5 and 6: the durable record,
the states that say who must act, the bounded rebase) written as data, so the store can refuse
an illegal move instead of recording it.
A transition from a state to itself records an event (a finished pipeline phase, a lease,
an attempt) without changing the state.
"""

from __future__ import annotations

from enum import StrEnum

from gitpub.core.errors import EXIT_KEY_REUSED, EXIT_NEEDS_PERSON, EXIT_OK, EXIT_UNCONFIRMED


class State(StrEnum):
    RECEIVED = "RECEIVED"  # accepted and durable; nothing else done yet
    PREPARING = "PREPARING"  # base snapshotted; pipeline phases running, each recorded
    SKIPPED = "SKIPPED"  # the dedup judge said SKIP, or a person abandoned the job
    REVIEW = "REVIEW"  # a content or rule gate did not pass: a person must look at content
    READY_TO_COMMIT = "READY_TO_COMMIT"  # artifacts and manifest are immutable and recorded
    RECHECK_CANDIDATES = "RECHECK_CANDIDATES"  # new remote articles: one dedup-only re-check
    LOCAL_COMMITTING = "LOCAL_COMMITTING"  # about to build the content commit
    LOCAL_COMMITTED = "LOCAL_COMMITTED"  # the content commit exists and is kept by the job
    RECOVERING = "RECOVERING"  # a commit attempt had an unknown outcome; find or rebuild it
    PUSHING = "PUSHING"  # the exact commit being pushed is recorded; outcome not yet known
    RETRY_WAIT = "RETRY_WAIT"  # a transient delivery failure; retry after next_retry_at
    #: Delivery through review (``delivery: {mode: pull_request}``, not in the brief's list: an
    #: addition): the job's commit is on its review branch and its pull/merge request is open,
    #: or being opened; the job rests here until the request is merged (PUBLISHED, proven by
    #: content on the branch) or closed (REVIEW).
    IN_REVIEW = "IN_REVIEW"
    PUBLISHED = "PUBLISHED"  # the remote branch has a commit with our job id and manifest hash
    CONFLICT = "CONFLICT"  # cannot be merged safely: a person must look at git
    FAILED = "FAILED"  # delivery budget exhausted; only cheap probes run from here


S = State

TERMINAL = frozenset({S.PUBLISHED, S.SKIPPED})
NEEDS_PERSON = frozenset({S.REVIEW, S.CONFLICT})
#: States in which a job is done as far as automation goes (FAILED is still probed cheaply, and
#: IN_REVIEW checked cheaply: it waits for people to merge or close its request).
SETTLED = TERMINAL | NEEDS_PERSON | {S.FAILED, S.IN_REVIEW}
#: States in which nobody works on the job until the next run: entering one releases the lease.
RESTING = SETTLED | {S.LOCAL_COMMITTED, S.RETRY_WAIT}
#: States the local pipeline (prepare) moves a job out of.
LOCAL = frozenset({S.RECEIVED, S.PREPARING, S.READY_TO_COMMIT, S.LOCAL_COMMITTING,
                   S.RECOVERING})

ALLOWED: dict[State, frozenset[State]] = {
    # → SKIPPED from every state in which the job is not on the remote: `resolve --abandon`
    # (from PUSHING, RETRY_WAIT and FAILED only after a probe found it absent).
    S.RECEIVED: frozenset({S.PREPARING, S.REVIEW, S.CONFLICT, S.SKIPPED}),
    # → PUBLISHED: the base's history already holds the job's publication (made from another
    # clone); found by the once-per-job history search, never pushed again.
    S.PREPARING: frozenset({S.SKIPPED, S.REVIEW, S.READY_TO_COMMIT, S.CONFLICT, S.PUBLISHED}),
    S.READY_TO_COMMIT: frozenset({S.LOCAL_COMMITTING, S.RECHECK_CANDIDATES, S.CONFLICT,
                                  S.REVIEW, S.SKIPPED}),
    S.LOCAL_COMMITTING: frozenset({S.LOCAL_COMMITTED, S.RECOVERING, S.CONFLICT, S.REVIEW,
                                   S.SKIPPED}),
    S.RECOVERING: frozenset({S.LOCAL_COMMITTED, S.LOCAL_COMMITTING, S.REVIEW, S.SKIPPED}),
    S.LOCAL_COMMITTED: frozenset(
        {S.PUSHING, S.RECHECK_CANDIDATES, S.CONFLICT, S.PUBLISHED, S.REVIEW, S.SKIPPED,
         S.RETRY_WAIT, S.FAILED}
    ),
    S.RECHECK_CANDIDATES: frozenset(
        {S.SKIPPED, S.LOCAL_COMMITTED, S.CONFLICT, S.REVIEW, S.PUBLISHED}
    ),
    # → IN_REVIEW: the commit reached its review branch (``delivery.review``).
    S.PUSHING: frozenset(
        {S.PUBLISHED, S.RETRY_WAIT, S.CONFLICT, S.LOCAL_COMMITTED, S.RECHECK_CANDIDATES,
         S.FAILED, S.REVIEW, S.SKIPPED, S.IN_REVIEW}
    ),
    # Merged (the branch holds the job's content) → PUBLISHED; closed, or merged with other
    # content → REVIEW; the request could not be opened within the budget → FAILED;
    # ``resolve --abandon`` once the forge says it is not open → SKIPPED.
    S.IN_REVIEW: frozenset({S.PUBLISHED, S.REVIEW, S.FAILED, S.SKIPPED}),
    S.RETRY_WAIT: frozenset(
        {S.PUSHING, S.FAILED, S.PUBLISHED, S.LOCAL_COMMITTED, S.CONFLICT, S.RECHECK_CANDIDATES,
         S.REVIEW, S.SKIPPED}
    ),
    S.FAILED: frozenset({S.PUBLISHED, S.LOCAL_COMMITTED, S.RECEIVED, S.SKIPPED, S.REVIEW}),
    # `resolve --retry`: RECEIVED when the job never had a snapshot; PREPARING re-runs the
    # pipeline on the job's own snapshot (its compare-and-swap conditions kept).
    S.REVIEW: frozenset({S.RECEIVED, S.PREPARING, S.SKIPPED}),
    # `resolve`: --retry when the conflicting change is gone, or --overwrite (LOCAL_COMMITTED);
    # --from FILE (PREPARING: merged content against the current tip); a probe that finds the
    # job on the remote (PUBLISHED); a conflict from the snapshot itself (RECEIVED).
    S.CONFLICT: frozenset({S.RECEIVED, S.PREPARING, S.LOCAL_COMMITTED, S.PUBLISHED,
                           S.SKIPPED}),
    S.PUBLISHED: frozenset(),
    S.SKIPPED: frozenset(),
}

#: States in which a job may be on the remote (a push was or may be under way): abandoning one
#: needs a probe first. In every other state nothing of the job has been pushed.
MAYBE_REMOTE = frozenset({S.PUSHING, S.RETRY_WAIT, S.FAILED, S.IN_REVIEW})


class IllegalTransition(Exception):
    pass


def check_transition(old: State, new: State) -> None:
    if old == new or new in ALLOWED[old]:
        return
    raise IllegalTransition(f"{old} -> {new} is not a legal transition")


def exit_code_for(state: State, failure_code: FailureCode | None = None) -> int:
    """The command-line exit code that reports a job resting in ``state``: 3 for a job stopped
    because its key was used elsewhere for other content (``key_reused``)."""
    if state in NEEDS_PERSON and failure_code == FailureCode.KEY_REUSED:
        return EXIT_KEY_REUSED
    if state in NEEDS_PERSON:
        return EXIT_NEEDS_PERSON
    if state in TERMINAL or state in (S.READY_TO_COMMIT, S.LOCAL_COMMITTED):
        return EXIT_OK
    return EXIT_UNCONFIRMED  # not confirmed yet (IN_REVIEW too: not merged yet): run again later


class Kind(StrEnum):
    """What a job publishes."""

    PUBLISH = "publish"  # a request made with `git pub prepare`
    SYNC = "sync"  # content changes made outside gitpub (no draft, no dedup judge)


class Phase(StrEnum):
    """The sub-steps of PREPARING whose outcome is recorded in ``JobRecord.phases``: a rerun
    after a crash resumes at the first one not recorded."""

    SOURCE_SCAN = "source-scan"  # a secret found in the input when the job was accepted
    DRAFT = "draft"
    JUDGE = "judge"
    GATES = "gates"
    FONTS = "fonts"
    #: The base's whole history searched once for the job id (``verify.history``):
    #: ``checked <commit>``, or ``at the first delivery`` when the base is not the remote's.
    HISTORY = "history"


#: ``phases[draft]`` of a job whose article a person gave (``resolve --from``): a rerun keeps
#: that content instead of drafting again.
MERGED = "merged"


class Stage(StrEnum):
    """Where in a job's life an event of its history happened (the ``phase`` of an event)."""

    RECEIVED = "received"
    LEASE = "lease"
    SOURCE_SCAN = "source-scan"
    SNAPSHOT = "snapshot"
    DRAFT = "draft"
    JUDGE = "judge"
    GATES = "gates"
    FONTS = "fonts"
    HISTORY = "history"
    COMMIT = "commit"
    RECOVER = "recover"
    RECHECK = "recheck"
    REBASE = "rebase"
    PUSH = "push"
    CONFIRM = "confirm"
    PROBE = "probe"
    RETRY = "retry"
    RESOLVE = "resolve"
    CHANNELS = "channels"  # the payload frozen and the channels recorded pending
    SEND = "send"  # a channel send: SENDING recorded before it, the outcome after
    RECONCILE = "reconcile"  # an unknown channel outcome looked for (probe, same-key resend)
    LIVE = "live"  # the live check of the published page
    REVIEW = "review"  # the pull/merge request: opened, found, checked (``delivery.review``)
    INTERNAL = "internal"  # an unexpected error while handling the job (a bug, or the disk)


class Answer(StrEnum):
    """The dedup judge's only valid answers; anything else fails closed (REVIEW)."""

    SKIP = "SKIP"
    KEEP = "KEEP"


class FailureCode(StrEnum):
    """Why a job is where it is (``JobRecord.failure_code``): one word a script can act on."""

    SECRET_IN_SOURCE = "secret_in_source"  # REVIEW: the input holds a secret
    SECRET_IN_CONTENT = "secret_in_content"  # REVIEW: the drafted files hold a secret
    DRAFT_UNCONFIGURED = "draft_unconfigured"  # REVIEW: a drafted job, no draft command
    DRAFT_FAILED = "draft_failed"  # REVIEW: the draft command failed
    DRAFT_INCOMPLETE = "draft_incomplete"  # REVIEW: it did not write every target
    INPUT_MODIFIED = "input_modified"  # REVIEW: a step changed its input
    TEMP_FILE_LEAK = "temp_file_leak"  # REVIEW: a step left files outside its outputs
    JUDGE_UNDECIDED = "judge_undecided"  # REVIEW: the judge gave no valid answer
    GATE_FAILED = "gate_failed"  # REVIEW: a gate (built-in or configured) did not pass
    FONT_FAILED = "font_failed"  # REVIEW: a font subset cannot be made
    ARTIFACTS_UNSAFE = "artifacts_unsafe"  # REVIEW: stored artifacts fail their manifest
    CASE_COLLISION = "case_collision"  # REVIEW: two paths differ only in case
    TARGET_BLOCKED = "target_blocked"  # CONFLICT: a directory or file stands in the way
    TARGET_CHANGED = "target_changed"  # CONFLICT: the compare-and-swap failed
    #: CONFLICT: a tree the job's files would be written into (the base's, the remote tip's)
    #: is one ``git fsck`` refuses (an entry twice, a bad mode or name): nothing is built on it
    TREE_UNSOUND = "tree_unsound"
    DELIVERY_UNCONFIRMED = "delivery_unconfirmed"  # RETRY_WAIT: a transient failure
    DELIVERY_EXHAUSTED = "delivery_exhausted"  # FAILED: the attempt budget is spent
    KEY_REUSED = "key_reused"  # REVIEW: the remote has this job id published with other content
    ABANDONED = "abandoned"  # SKIPPED: a person gave the job up
    INTERNAL_ERROR = "internal_error"  # REVIEW: handling the job failed unexpectedly
    #: SKIPPED: the remote already holds every file of the job as the job would leave it (the
    #: same edit made by another writer): nothing to publish
    ALREADY_ON_REMOTE = "already_on_remote"
    SUPERSEDED = "superseded"  # SKIPPED: sync: the hand commit left the local branch, unsent
    REVIEW_CLOSED = "review_closed"  # REVIEW: its pull/merge request was closed unmerged
    #: REVIEW: its request was merged, but no commit on the branch changes exactly the job's
    #: files with the job's content (a reviewer's edit, another file in a squash)
    REVIEW_MERGED_OTHER = "review_merged_other"
    REVIEW_REFUSED = "review_refused"  # REVIEW: the forge refused to open the request
    #: CONFLICT: someone else's commit is on the job's review branch: never overwritten
    REVIEW_BRANCH_TAKEN = "review_branch_taken"
