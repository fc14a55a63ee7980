"""Attacks on what ``pushpath`` and ``lazy`` merged (main be2d24c): refs a publishing command
keeps from its start (``git.refs``), the cached configuration, the path and secret pre-checks.
Each test failed on be2d24c."""

from __future__ import annotations

from conftest import Site, git
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
