"""``git pub push --dry-run`` / ``sync --dry-run``: what would be pushed, changing nothing.

Nothing is fetched (a fetch writes objects and the tracking ref): the remote's tip is asked
with ``git ls-remote``, which writes nothing. Each job is then judged against what is known
locally — the same probe and compare-and-swap a delivery runs, on the remote's tip when its
objects are here, else on the last fetched state with a note that the remote moved. No lease is
taken, no index entry tidied, no commit built: no ref and no object is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gitpub.config.model import font_outputs
from gitpub.core.errors import CorruptStateError
from gitpub.core.states import LOCAL, State
from gitpub.delivery.deliver import PUSHABLE, Deliverer
from gitpub.delivery.sync import Foreseen, Pending, discover, foresee
from gitpub.git.remote import RemoteError
from gitpub.pipeline.commit import target_problems
from gitpub.runtime.context import Context
from gitpub.runtime.session import find_job, open_session
from gitpub.store.jobs import Job
from gitpub.verify.probe import find_job_commit

S = State


@dataclass(frozen=True)
class Step:
    job: Job
    action: str  # prepare | publish | probe | wait | conflict | nothing | busy
    detail: str


@dataclass(frozen=True)
class Plan:
    remote_tip: str | None  # the remote branch now (ls-remote), None: no such branch/unknown
    fetched_tip: str | None  # the tracking ref: what was fetched last
    steps: tuple[Step, ...]
    hand_edits: Pending | None = None  # sync: what would be committed and delivered
    errors: tuple[str, ...] = ()
    #: sync: each pending commit (the uncommitted changes last) with what sync would do with
    #: it and every path it changes
    foreseen: Foreseen | None = None


def plan(where: Path, progress: Callable[[str], None], job_refs: Sequence[str],
         hand_edits: bool) -> Plan:
    with open_session(where, progress) as ctx:
        deliverer = Deliverer(ctx, ctx.remote(), now_please=bool(job_refs))
        remote = deliverer.remote
        errors: list[str] = []
        try:
            tip = remote.ls_remote()  # a misconfigured remote raises (exit 2)
        except RemoteError as e:
            tip = None
            errors.append(f"the remote did not answer: {e.message}")
        fetched = ctx.repo.read_ref(remote.tracking_ref)
        if job_refs:
            jobs = [find_job(ctx.store, ref) for ref in job_refs]
        else:
            jobs = []
            for item in ctx.store.iter_jobs(finished=False, tidy=False):
                if isinstance(item, CorruptStateError):
                    errors.append(item.message)
                elif item.state in PUSHABLE | LOCAL:
                    jobs.append(item)
            jobs.sort(key=lambda j: j.record.created_at)
        known = tip if tip is not None and ctx.repo.has_object(tip) else fetched
        steps = tuple(_step(ctx, deliverer, job, tip, known, bool(errors))
                      if job.state in PUSHABLE | LOCAL else
                      Step(job, "nothing", f"{job.state.value}: a push leaves it as it is")
                      for job in jobs)
        pending = discover(ctx, known) if hand_edits else None
        foreseen = foresee(ctx, known) if hand_edits else None
        return Plan(tip, fetched, steps, pending, tuple(errors), foreseen)


def _step(ctx: Context, deliverer: Deliverer, job: Job, tip: str | None, known: str | None,
          unreachable: bool) -> Step:
    record, jid = job.record, job.job_id[:13]
    if ctx.store.held_by_other(job):
        return Step(job, "busy", "another process is working on it: left alone")
    if job.state in LOCAL:
        return Step(job, "prepare", f"would finish its local {job.state.value} phase, then "
                                    "deliver it")
    if job.state == S.IN_REVIEW:
        review = record.review
        where = (review.url or review.branch) if review is not None else "its request"
        return Step(job, "wait", f"in review ({where}): would ask the forge how its request "
                                 "stands and probe the branch (PUBLISHED once merged)")
    if not deliverer.due(job):
        return Step(job, "wait", f"not due yet: would only probe the remote (`git pub push "
                                 f"{jid}` tries now)")
    found = None if known is None else find_job_commit(ctx.repo, [known], record,
                                                        ctx.config.trailer_prefix)
    if found is not None:
        return Step(job, "probe", f"already on the remote as {found}: would record PUBLISHED")
    tree = None if known is None else ctx.repo.commit(known).tree
    fonts = font_outputs(ctx.config)
    problems = target_problems(ctx.repo, tree, [t for t in record.targets if t.path not in fonts])
    name = f"{ctx.config.remote}/{ctx.config.branch}"
    if problems:
        return Step(job, "conflict", f"would stop at CONFLICT: {'; '.join(problems)}")
    if unreachable:
        return Step(job, "publish", f"would push {len(record.targets)} file(s) to {name} once "
                                    "the remote answers")
    moved = "" if tip == known else (f" (the remote moved to {tip[:12] if tip else 'nothing'} "
                                     "since the last fetch: it would fetch and re-check first)")
    onto = known[:12] if known else "a new branch"
    if deliverer.review.applies(job):
        branch = deliverer.ctx.config.delivery.branch_prefix + job.job_id
        return Step(job, "publish", f"would push {len(record.targets)} file(s) "
                                    f"({', '.join(record.target_paths[:5])}), built onto "
                                    f"{onto}, to the review branch {branch} and open a "
                                    f"request into {name}{moved}")
    return Step(job, "publish", f"would push {len(record.targets)} file(s) "
                                f"({', '.join(record.target_paths[:5])}) onto {onto} as a "
                                f"fast-forward of {name}{moved}")
