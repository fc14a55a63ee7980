"""The shared job store's costs (issue 15), side by side:

- ``archive``: ``git pub status``, ``status JOB`` of an archived job, a publish (``prepare`` +
  ``push``) and a state fetch (``git pub reconcile`` with nothing to do: one fetch of the branch
  and ``refs/pub/*``) with 100,000 archived jobs against 10 (``bench/archive.py`` builds the
  archives with ``git fast-import``; every measured command is the real CLI);
- ``three_nodes``: three clones of one remote publishing 50 jobs each at once against one
  clone publishing 150;
- ``atomic_push``: the delivery's push — the branch and the job's state ref in one
  ``git push --atomic`` with a lease — against a push of the branch alone, on the corpus.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench.archive import archive_site
from bench.common import BenchError, Harness, fresh_dir, median, run, timed
from bench.fixtures import Site, corpus_template, make_site
from bench.scenarios import (
    PUBLISH_WHAT,
    Publisher,
    Row,
    Sizes,
    _count_subjects,
    all_published,
    alternate,
    one_writer,
    race,
)

SMALL_ARCHIVE = 10


def archive(h: Harness, s: Sizes) -> list[Row]:
    n, m = s.archived_jobs, SMALL_ARCHIVE
    t0 = time.perf_counter()
    big, big_remote, big_ids = archive_site(h, n, "archive-big")
    small, small_remote, small_ids = archive_site(h, m, "archive-small")
    h.log(f"  archives of {n:,} and {m} jobs ready in {time.perf_counter() - t0:.1f}s")
    what = f"{n:,} jobs in the remote's archive (fetched here)"
    base = f"the same, {m} archived jobs"
    rows: list[Row] = []

    def status(site: Path) -> float:
        def go() -> None:
            p = h.pub(site, "status")
            if "no unfinished jobs" not in p.out and "job" not in p.out:
                raise BenchError(f"unexpected status output: {p.out[:300]}")
        return timed(go)

    xs, ys = alternate(s.slow_runs, lambda: status(big), lambda: status(small))
    rows.append(Row(f"archive: `git pub status`, {n:,} vs {m} archived jobs", median(xs),
                    median(ys), 1.2, str(s.slow_runs), f"`git pub status`, {what}", base, "",
                    xs, ys))

    def show(site: Path, job_id: str) -> float:
        def go() -> None:
            p = h.pub(site, "status", "--json", job_id)
            if json.loads(p.out).get("state") != "PUBLISHED":
                raise BenchError(f"archived job {job_id} not shown: {p.out[:300]}")
        return timed(go)

    xs, ys = alternate(s.slow_runs, lambda: show(big, big_ids[len(big_ids) // 2]),
                       lambda: show(small, small_ids[len(small_ids) // 2]))
    rows.append(Row(f"archive: `git pub status JOB` of an archived job, {n:,} vs {m}",
                    median(xs), median(ys), 1.2, str(s.slow_runs),
                    f"`git pub status JOB`, found in the fetched archive; {what}", base,
                    "no network: four small trees read", xs, ys))

    pubs = [Publisher(h, Site(big, big_remote, "docs/bench"), "archbig"),
            Publisher(h, Site(small, small_remote, "docs/bench"), "archsmall")]
    xs, ys = alternate(s.slow_runs, pubs[0].gitpub, pubs[1].gitpub)
    rows.append(Row(f"archive: publish one article, {n:,} vs {m} archived jobs", median(xs),
                    median(ys), 1.2, str(s.slow_runs), f"{PUBLISH_WHAT}, {what}", base,
                    "prepare looks the key up in the archive; push fetches refs/pub/*",
                    xs, ys))

    def fetch(site: Path) -> float:
        return timed(lambda: h.pub(site, "reconcile"))

    xs, ys = alternate(s.slow_runs, lambda: fetch(big), lambda: fetch(small))
    rows.append(Row(f"archive: state fetch (`git pub reconcile`, nothing to do), {n:,} vs {m}",
                    median(xs), median(ys), 1.2, str(s.slow_runs),
                    f"`git pub reconcile`: one fetch of the branch and refs/pub/*; {what}",
                    base, "the remote advertises the archive as one ref", xs, ys))
    for site, ids in ((big, big_ids), (small, small_ids)):
        pubs_ids = pubs[0].job_ids if site == big else pubs[1].job_ids
        all_published(h, site, pubs_ids)
        if not h.git(site, "rev-parse", "refs/pub/remote/origin/archive").strip():
            raise BenchError(f"the archive of {len(ids)} jobs is gone from {site}")
    return rows


def _held_on_remote(remote: Path, job_ids: list[str]) -> int:
    """How many of ``job_ids`` the remote holds: a job ref each, or (folded by the ordinary
    flow since) an entry in the archive, read with gitpub's own reader."""
    from gitpub.git.repo import Repository
    from gitpub.store.jobs import JobStore
    from gitpub.store.shared import SharedView

    with Repository.discover(remote) as repo:
        refs = repo.list_refs("refs/pub/jobs/")
        view = SharedView(JobStore(repo), "refs/pub/")
        return sum(1 for j in set(job_ids) if j in refs or view.archived_job(j) is not None)


def three_nodes(h: Harness, s: Sizes) -> list[Row]:
    per = s.node_jobs
    n = 3 * per
    r = race(h, "three-nodes", "node", 3, per)
    pubs, total, remote = r.pubs, r.total, r.remote
    held = _held_on_remote(remote, [j for p in pubs for j in p.job_ids])
    if held != n:
        raise BenchError(f"the remote holds {held} of the jobs (job refs and archive), "
                         f"expected {n}")
    seq = one_writer(h, n)
    rounds = sum(_count_subjects(h, p.site.path, "rejected") for p in pubs)
    lost = sum(_count_subjects(h, p.site.path, "RETRY_WAIT:") for p in pubs)
    notes = (f"all {n} landed exactly once, each with its job ref or archive entry on the "
             f"remote; {rounds} "
             f"rebase round(s) after a rejected push, {lost} RETRY_WAIT(s), "
             f"{sum(p.retries for p in pubs)} extra `push JOB`; 2 cores for 3 nodes")
    return [Row(f"three nodes: 3 x {per} jobs concurrently vs one node x {n}", total,
                seq.total, None, f"1x{n} / 1x{n}",
                f"3 clones x {per} x (`prepare` + `push`), in parallel",
                f"{n} jobs by one clone", notes, [total], [seq.total])]


def atomic_push(h: Harness, s: Sizes) -> list[Row]:
    """The push of a delivery, measured at the git level (the same command gitpub runs): a
    fresh content commit on the remote tip each time, with (a) its job state ref in the same
    ``--atomic`` push, under ``--force-with-lease``, or (b) alone."""
    site = make_site(h, corpus_template(h), fresh_dir(h.sites / "atomic-push"), "docs/bench")
    counter = [0]

    def commit() -> tuple[str, str, str]:
        counter[0] += 1
        i = counter[0]
        h.git(site.path, "fetch", "-q", "origin")
        tip = h.git(site.path, "rev-parse", "refs/remotes/origin/main").strip()
        content = f"# Push {i}\n\nText {i}.\n".encode()
        blob = h.git(site.path, "hash-object", "-w", "--stdin", input=content).strip()
        index = site.path / ".git" / "bench-index"
        env = {**h.env, "GIT_INDEX_FILE": str(index)}
        h.git(site.path, "read-tree", tip, env=env)
        h.git(site.path, "update-index", "--add", "--cacheinfo",
              f"100644,{blob},docs/bench/push-{i:04d}.md", env=env)
        tree = h.git(site.path, "write-tree", env=env).strip()
        new = h.git(site.path, "commit-tree", tree, "-p", tip, "-m", f"Publish: push {i}",
                    ).strip()
        state_tree = h.git(site.path, "mktree", input=f"100644 blob {blob}\tjob.json\n"
                           .encode()).strip()
        state = h.git(site.path, "commit-tree", state_tree, "-p", new, "-m",
                      "PUBLISHED: push").strip()
        return new, state, f"{i:08d}-0000-5000-8000-000000000000"

    def push(atomic: bool) -> float:
        new, state, job_id = commit()
        ref = f"refs/pub/jobs/{job_id}"
        if atomic:
            argv = ["git", "push", "--porcelain", "--no-verify", "--atomic",
                    f"--force-with-lease={ref}:", "origin", f"{new}:refs/heads/main",
                    f"{state}:{ref}"]
        else:
            argv = ["git", "push", "--porcelain", "--no-verify", "origin",
                    f"{new}:refs/heads/main"]
        return timed(lambda: run(argv, site.path, h.env))

    runs = max(s.runs, 9)
    xs, ys = alternate(runs, lambda: push(True), lambda: push(False))
    return [Row("atomic push: branch + job state ref vs the branch alone, corpus",
                median(xs), median(ys), None, str(runs),
                "`git push --atomic --force-with-lease=<job ref>:` of the content commit and "
                "its state commit", "`git push` of the content commit alone",
                "a delivery pushes twice: the claim, then this push", xs, ys)]
