"""Attacks on what ``pushpath`` and ``lazy`` merged (main be2d24c): refs a publishing command
keeps from its start (``git.refs``), the cached configuration, the path and secret pre-checks.
Each test failed on be2d24c."""

from __future__ import annotations

import json
import os
import signal
import time

from conftest import Site, git, spawn, wait_stopped
from test_delivery import article, prepare

JOBS = "refs/pub/jobs/"
DISTRIBUTING = "refs/pub/distributing/"


def _remote_has(site: Site, ref: str) -> bool:
    return bool(git(site.remote, "for-each-ref", "--format=%(refname)", ref).strip())


def _published(site: Site) -> str:
    job_id = str(prepare(site, "k", "posts/k.md", article("k"))["job_id"])
    r = site.call("push")
    assert r.code == 0, r.out + r.err
    return job_id


def _fold_in_a_command_started_before(site: Site, meanwhile: object) -> None:
    """A publishing command (its refs read at its start, ``read_first``) that folds after
    ``meanwhile`` (another process of this clone) ran: the fold as ``push`` runs it."""
    from gitpub.app.common import read_first
    from gitpub.app.distribution import settled
    from gitpub.delivery.deliver import Deliverer
    from gitpub.delivery.fold import fold
    from gitpub.delivery.lock import delivery_lock
    from gitpub.runtime.session import open_session

    with open_session(site.path, lambda _: None) as ctx:
        deliverer = Deliverer(ctx, ctx.remote())
        read_first(ctx, deliverer.remote)
        assert callable(meanwhile)
        meanwhile()
        with delivery_lock(ctx.repo):
            fold(deliverer.shared, settled(ctx))


def test_a_fold_does_not_drop_a_state_of_this_clone_the_remote_has_not_seen(site: Site) -> None:
    """A published job gets a newer state here (its channel records, say) that the remote has
    not seen, from another process of this clone, while a publishing command started before
    runs (the remote unchanged: its fetch moves nothing, and forgets nothing). That command's
    fold must leave the remote's job ref alone ("shared first"): it
    decides so on this clone's job refs, which must be read when it folds, not at its start
    (be2d24c: the value kept from the start, older than the remote's, let it fold)."""
    job_id = _published(site)

    def meanwhile() -> None:
        published = site.git("rev-parse", JOBS + job_id).strip()
        newer = site.git("commit-tree", "-p", published, "-m", "a newer state here",
                         published + "^{tree}").strip()
        site.git("update-ref", JOBS + job_id, newer, published)

    _fold_in_a_command_started_before(site, meanwhile)
    assert _remote_has(site, JOBS + job_id), "the remote's job ref was folded"


def test_a_fold_leaves_a_job_whose_distribution_is_expected_meanwhile(site: Site) -> None:
    """A published job's distribution is expected (this clone's distribution index,
    ``channels.state.expect``: a channel configured since, say) by another process of this
    clone while a publishing command started before runs (the remote unchanged): that
    command's fold must leave the job alone, its channels are about to be recorded. The
    index must be read when the fold decides (be2d24c: the listing kept from the command's
    start)."""
    job_id = _published(site)

    def meanwhile() -> None:
        site.git("update-ref", DISTRIBUTING + job_id, site.git("rev-parse", JOBS + job_id).strip())

    _fold_in_a_command_started_before(site, meanwhile)
    assert _remote_has(site, JOBS + job_id), "folded while its distribution was expected"
    assert site.git("for-each-ref", JOBS + job_id).strip(), "this clone's job ref was pruned"



def _released(site: Site, state: str) -> str:
    """A state commit on top of ``state``: its record without the lease."""
    record = json.loads(site.git("cat-file", "blob", f"{state}:job.json"))
    assert record["lease"] is not None
    record["lease"] = None
    blob = site.git("hash-object", "-w", "--stdin", input=json.dumps(record).encode()).strip()
    rows = [row if not row.endswith("\tjob.json") else f"100644 blob {blob}\tjob.json"
            for row in site.git("ls-tree", state).splitlines()]
    tree = site.git("mktree", input=("\n".join(rows) + "\n").encode()).strip()
    return site.git("commit-tree", "-p", state, "-m", "lease given up", tree).strip()


def test_a_wait_for_another_workers_lease_reads_the_job_afresh(site: Site) -> None:
    """``prepare`` waits while another live worker holds the job's lease
    (``pipeline.prepare.drive``, up to ``PREPARE_WAIT``), reading the job's ref again and
    again: as soon as no live worker holds it, it goes on. ``prepare`` keeps the job refs
    (``git.refs``), and the ref polled must still be read afresh (be2d24c: the wait polled the
    value kept from its start, the lease of a worker still alive, until the deadline — a
    ``prepare --push`` distributing the job, a ``sync`` gone on to its next commit, 120 s).
    Here the first worker is frozen holding the lease, and the lease is given up by hand (a
    state commit on top of its, without the lease)."""
    from gitpub.pipeline.prepare import drive
    from gitpub.runtime.session import open_session
    from gitpub.store.jobs import KEPT_PREFIXES

    args = ("prepare", "--json", "--key", "k", "--to", "posts/k.md", "-")
    first = spawn(site, *args, env={"GITPUB_PAUSE_AT": "prepare.gates-ran"},
                  input=article("k").encode())
    try:
        wait_stopped(first.pid)
        with open_session(site.path, lambda _: None) as ctx:
            ctx.repo.local_prefixes = KEPT_PREFIXES  # as ``prepare`` keeps them
            (job_id,) = ctx.store.job_ids()
            held = ctx.store.load(job_id)
            assert held is not None and held.record.lease is not None
            site.git("update-ref", JOBS + job_id, _released(site, held.commit), held.commit)
            started = time.monotonic()
            done = drive(ctx, held, wait=8.0)
            waited = time.monotonic() - started
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=60)
    assert waited < 6, f"waited {waited:.1f} s on a lease nobody holds"
    assert done.record.lease is None or done.record.lease.owner != held.record.lease.owner
