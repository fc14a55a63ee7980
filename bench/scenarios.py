"""The scenarios: each builds its sites, runs both sides alternately, verifies, returns rows.

Timing rules: one warm-up of each side first; then the sides alternate (A B, B A, A B, …) so
drift on a noisy machine hits both; the figure is the median. Setup that belongs to neither
side (making a job that needs confirming, building a store) is outside the timed region.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import RUN, BenchError, Harness, Proc, fresh_dir, median, run, timed
from bench.fixtures import (
    Site,
    article,
    corpus_template,
    history_template,
    make_remote,
    make_site,
    title_of,
    wide_template,
)
from bench.jobstore import add_finished_jobs

ProfileFn = Callable[[Path], None]


@dataclass
class Row:
    scenario: str
    gitpub_s: float
    baseline_s: float
    target: float | None
    runs: str
    gitpub_what: str
    baseline_what: str
    notes: str = ""
    gitpub_samples: list[float] = field(default_factory=list)
    baseline_samples: list[float] = field(default_factory=list)
    profile: ProfileFn | None = None

    @property
    def ratio(self) -> float:
        return self.gitpub_s / self.baseline_s if self.baseline_s > 0 else float("inf")

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.ratio <= self.target


@dataclass(frozen=True)
class Sizes:
    runs: int
    slow_runs: int
    wide_files: int
    deep_commits: int
    shallow_commits: int
    store_jobs: int
    small_store_jobs: int
    sequence_jobs: int
    wide_disk_runs: int  # when the wide repo must live on disk (see ``settled_pairs``)
    archived_jobs: int = 100_000  # the big archive (``bench/shared_store.py``)
    node_jobs: int = 50  # jobs per node of the three-node scenario

    @classmethod
    def for_mode(cls, quick: bool) -> Sizes:
        if quick:
            return cls(3, 3, 5_000, 10_000, 1_000, 1_000, 10, 20, 2, 2_000, 4)
        return cls(7, 5, 50_000, 100_000, 1_000, 10_000, 10, 100, 3, 100_000, 50)


# -- the baseline: the plain pipeline as a shell script -----------------------------------

BASELINE_SCRIPT = """\
# The plain "write, commit, pull --rebase, push" pipeline gitpub replaces, in a temporary
# worktree so the user's checkout is not touched (as gitpub does not touch it).
set -e
git worktree add -q --detach "$WT" refs/remotes/origin/main
mkdir -p "$(dirname "$WT/$TARGET")"
cp "$SRC" "$WT/$TARGET"
cd "$WT"
SHA=$(sha256sum "$SRC" | cut -d' ' -f1)
MANIFEST=$(printf 'gitpub-manifest v1\\n100644 %s %s\\n' "$SHA" "$TARGET")
MAN=$(printf '%s\\n' "$MANIFEST" | sha256sum | cut -d' ' -f1)
git add -- "$TARGET"
git commit -q -m "Publish: $TITLE" -m "$MANIFEST" \\
    --trailer "Blog-Job-Id: $JOB" --trailer "Blog-Manifest-Sha256: $MAN" \\
    --trailer "Blog-Base-Commit: $(git rev-parse HEAD)" --trailer "Blog-Writer-Node: bench"
git fetch -q origin
git rebase -q refs/remotes/origin/main
git push -q origin HEAD:refs/heads/main
cd "$REPO"
git worktree remove --force "$WT"
"""


def baseline_script() -> Path:
    path = RUN / "baseline-publish.sh"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(BASELINE_SCRIPT, encoding="utf-8")
    return path


# -- one writer publishing articles -----------------------------------------------------

class Publisher:
    """Publishes fresh articles (new key, new path) into a site, either way."""

    def __init__(self, h: Harness, site: Site, tag: str) -> None:
        self.h, self.site, self.tag = h, site, tag
        self.n = 0
        self.articles = RUN / "articles" / f"{tag}-{site.path.parent.name}-{site.path.name}"
        self.articles.mkdir(parents=True, exist_ok=True)
        self.retries = 0
        self.job_ids: list[str] = []
        self.last_prepare = 0.0
        self.last_push = 0.0

    def _next(self) -> tuple[int, Path, str]:
        self.n += 1
        i = self.n
        src = self.articles / f"a{i:04d}.md"
        src.write_bytes(article(self.tag, i))
        return i, src, f"{self.site.article_dir}/{self.tag}-{self.site.path.name}-{i:04d}.md"

    def prepare(self) -> tuple[str, float]:
        i, src, target = self._next()
        key = f"bench-{self.tag}-{self.site.path.name}-{i}"
        t0 = time.perf_counter()
        p = self.h.pub(self.site.path, "prepare", "--key", key, "--to", target, str(src),
                       "--json")
        dt = time.perf_counter() - t0
        job = json.loads(p.out)
        if job.get("state") != "LOCAL_COMMITTED":
            raise BenchError(f"prepare ended in {job.get('state')}: {p.out[:500]}")
        self.job_ids.append(job["job_id"])
        return job["job_id"], dt

    def push(self, job_id: str, *, retry: bool = False) -> float:
        t0 = time.perf_counter()
        p = self.h.pub(self.site.path, "push", "--json", check=False)
        state = _state_of(p, job_id)
        tries = 0
        while state != "PUBLISHED" and retry and state in ("RETRY_WAIT", "LOCAL_COMMITTED",
                                                           "PUSHING", None) and tries < 30:
            tries += 1
            self.retries += 1
            p = self.h.pub(self.site.path, "push", job_id, "--json", check=False)
            state = _state_of(p, job_id)
        dt = time.perf_counter() - t0
        if state != "PUBLISHED":
            raise BenchError(f"push left job {job_id} in {state} (exit {p.code}): "
                             f"{p.out[:800]} {p.err[-800:]}")
        return dt

    def gitpub(self, *, retry: bool = False) -> float:
        """prepare + push of one new article; returns the total seconds."""
        job_id, t_prep = self.prepare()
        t_push = self.push(job_id, retry=retry)
        self.last_prepare, self.last_push = t_prep, t_push
        return t_prep + t_push

    def gitpub_one(self) -> float:
        """``prepare --push`` of one new article: the same work in one CLI process."""
        i, src, target = self._next()
        key = f"bench-{self.tag}-{self.site.path.name}-{i}"
        t0 = time.perf_counter()
        p = self.h.pub(self.site.path, "prepare", "--push", "--key", key, "--to", target,
                       str(src), "--json")
        dt = time.perf_counter() - t0
        job = json.loads(p.out)
        if job.get("state") != "PUBLISHED":
            raise BenchError(f"prepare --push ended in {job.get('state')}: {p.out[:500]}")
        self.job_ids.append(job["job_id"])
        self.last_prepare, self.last_push = dt, 0.0
        return dt

    def baseline(self) -> float:
        i, src, target = self._next()
        wt = self.site.path.parent / f"wt-{self.site.path.name}-{i}"
        env = {**self.h.env, "WT": str(wt), "SRC": str(src),
               "TARGET": target, "TITLE": title_of(self.tag, i), "REPO": str(self.site.path),
               "JOB": f"plain-{self.tag}-{i}"}
        script = str(baseline_script())
        return timed(lambda: run(["sh", script], self.site.path, env))


def _state_of(p: Proc, job_id: str) -> str | None:
    try:
        data = json.loads(p.out)
    except ValueError:
        return None
    for job in data.get("jobs", []):
        if job.get("job_id") == job_id:
            return str(job.get("state"))
    return None


def alternate(runs: int, a: Callable[[], float], b: Callable[[], float], warmup: int = 1
              ) -> tuple[list[float], list[float]]:
    for _ in range(warmup):
        a()
        b()
    xs: list[float] = []
    ys: list[float] = []
    for i in range(runs):
        if i % 2 == 0:
            xs.append(a())
            ys.append(b())
        else:
            ys.append(b())
            xs.append(a())
    return xs, ys


def settled_pairs(runs: int, a: Callable[[], float], b: Callable[[], float], settle: float
                  ) -> tuple[list[float], list[float]]:
    """Like ``alternate``, but every pair starts on a settled filesystem: A then B, then
    ``sync`` and a pause of ``settle`` seconds. For a side that deletes tens of thousands of
    files (``worktree remove``) on ext4 *without a journal* (these VMs): there, every inode
    allocation skips the inodes of its block group deleted in the last 60 s (300 s more while
    their inode-table block is dirty) — the kernel's ``recently_deleted()`` in
    ``find_inode_bit()``, 80 % of a ``perf`` profile of file creation — so the next run of
    either side pays quadratically for this one's deletions (measured: a 50,000-file
    ``worktree add`` took 12-74 s instead of 2-3 s). A publisher does not delete 50,000 files
    every few seconds; so pairs are spaced out and A, which deletes nothing, goes first.
    """
    xs: list[float] = []
    ys: list[float] = []
    for i in range(runs + 1):
        x, y = a(), b()
        if i > 0:  # the first pair is the warm-up
            xs.append(x)
            ys.append(y)
        os.sync()
        time.sleep(settle)
    return xs, ys


def landed_once(h: Harness, remote: Path, job_ids: list[str]) -> int:
    """Every job's commit is on the remote branch exactly once; returns how many were found."""
    out = h.git(remote, "log", "--format=%(trailers:key=Blog-Job-Id,valueonly)", "main")
    counts = Counter(line.strip() for line in out.splitlines() if line.strip())
    missing = [j for j in job_ids if counts[j] == 0]
    twice = [j for j in job_ids if counts[j] > 1]
    if missing or twice:
        raise BenchError(f"{len(missing)} job(s) missing and {len(twice)} landed twice on "
                         f"{remote}: {(missing + twice)[:5]}")
    return len(job_ids)


def all_published(h: Harness, site: Path, job_ids: list[str]) -> None:
    """Every job PUBLISHED: in this clone's job refs (``status --all``) or, folded by the
    ordinary flow since, in the archive as fetched (read in-process: ``status JOB`` per job
    would cost a process each)."""
    p = h.pub(site, "status", "--all", "--json")
    states = {j["job_id"]: j["state"] for j in json.loads(p.out)["jobs"]}
    folded = [j for j in job_ids if j not in states]
    if folded:
        from gitpub.git.repo import Repository
        from gitpub.store.jobs import JobStore
        from gitpub.store.shared import SharedView

        with Repository.discover(site) as repo:
            view = SharedView(JobStore(repo), "refs/pub/remote/origin/")
            for j in folded:
                job = view.archived_job(j)
                if job is not None:
                    states[j] = job.state.value
    bad = [(j, states.get(j)) for j in job_ids if states.get(j) != "PUBLISHED"]
    if bad:
        raise BenchError(f"{len(bad)} job(s) not PUBLISHED in {site}: {bad[:5]}")


def _ms(x: float) -> str:
    return f"{x * 1000:.0f} ms"


# -- scenarios ---------------------------------------------------------------------------

PUBLISH_WHAT = "`prepare` + `push` (2 CLI processes)"
PLAIN_WHAT = "worktree add, write, add, commit, fetch, rebase, push, worktree remove (sh)"


def _publish(h: Harness, name: str, template: Path, article_dir: str, runs: int,
             target: float, label: str, settle: float = 0.0, one_process: bool = False) -> Row:
    site = make_site(h, template, fresh_dir(h.sites / name), article_dir)
    pub = Publisher(h, site, name)
    prep: list[float] = []
    push: list[float] = []

    def g() -> float:
        t = pub.gitpub_one() if one_process else pub.gitpub()
        prep.append(pub.last_prepare)
        push.append(pub.last_push)
        return t

    if settle > 0:
        xs, ys = settled_pairs(runs, g, pub.baseline, settle)
    else:
        xs, ys = alternate(runs, g, pub.baseline)
    prep, push = prep[1:], push[1:]  # drop the warm-up

    def profile(d: Path) -> None:
        with h.profiling(d):
            pub.gitpub()

    notes = f"prepare {_ms(median(prep))}, push {_ms(median(push))}"
    if one_process:
        notes = "one process: `git pub prepare --push`"
    if settle > 0:
        notes += (f"; on disk: pairs spaced {settle:.0f} s apart after `sync`, gitpub first "
                  "(see `settled_pairs`)")
    what = "`prepare --push` (1 CLI process)" if one_process else PUBLISH_WHAT
    return Row(label, median(xs), median(ys), target, str(runs), what, PLAIN_WHAT,
               notes, xs, ys, profile)


def publish_corpus(h: Harness, s: Sizes) -> list[Row]:
    return [_publish(h, "publish-corpus", corpus_template(h), "docs/bench", s.runs, 1.0,
                     "publish one article, corpus (420 files, 856 commits)"),
            _publish(h, "publish-corpus-1p", corpus_template(h), "docs/bench", s.runs, 1.0,
                     "publish one article, corpus, `prepare --push`", one_process=True)]


def publish_wide(h: Harness, s: Sizes) -> list[Row]:
    """On disk (``--on-disk``) on these VMs' journal-less ext4, the baseline's 50,000-file
    worktree churn makes every later file creation quadratic for minutes (see
    ``settled_pairs``), so there the pairs are spaced out; on tmpfs they simply alternate."""
    template = wide_template(h, s.wide_files)
    label = f"publish one article, {s.wide_files:,} files"
    if h.sites_on_tmpfs:
        return [_publish(h, "publish-wide", template, "docs/bench", s.runs, 0.2, label),
                _publish(h, "publish-wide-1p", template, "docs/bench", s.runs, 0.2,
                         f"{label}, `prepare --push`", one_process=True)]
    return [_publish(h, "publish-wide", template, "docs/bench", s.wide_disk_runs, 0.2, label,
                     settle=0.0 if h.quick else 65.0)]


def history_depth(h: Harness, s: Sizes) -> list[Row]:
    deep_t = history_template(h, s.deep_commits)
    shallow_t = history_template(h, s.shallow_commits)
    deep = Publisher(h, make_site(h, deep_t, fresh_dir(h.sites / "history-deep"), "posts/bench"),
                     "deep")
    shallow = Publisher(h, make_site(h, shallow_t, fresh_dir(h.sites / "history-shallow"),
                                     "posts/bench"), "shallow")
    xs, ys = alternate(s.runs, deep.gitpub, shallow.gitpub)

    def profile(d: Path) -> None:
        with h.profiling(d):
            deep.gitpub()

    return [Row(f"history depth: publish into {s.deep_commits:,} vs {s.shallow_commits:,} "
                "commits", median(xs), median(ys), 1.2, str(s.runs),
                f"{PUBLISH_WHAT}, {s.deep_commits:,}-commit history",
                f"the same, {s.shallow_commits:,}-commit history", "", xs, ys, profile)]


def confirm(h: Harness, s: Sizes) -> list[Row]:
    """A job whose push reached the remote but whose reply was lost (the process was killed
    right after ``git push``: crash point ``delivery.pushed``) sits in PUSHING; ``git pub push
    JOB`` must find its commit by trailers and mark it PUBLISHED. The baseline greps the whole
    history for the job id as a person would."""
    template = history_template(h, s.deep_commits)
    site = make_site(h, template, fresh_dir(h.sites / "confirm"), "posts/bench")
    pub = Publisher(h, site, "confirm")

    def setup() -> str:
        job_id, _ = pub.prepare()
        p = h.pub(site.path, "push", job_id, check=False,
                  extra_env={"GITPUB_CRASH_AT": "delivery.pushed"})
        if p.code != -9:
            raise BenchError(f"expected the crash point to kill push, got exit {p.code}")
        st = json.loads(h.pub(site.path, "status", job_id, "--json").out)
        if st["state"] != "PUSHING":
            raise BenchError(f"set-up job is {st['state']}, not PUSHING")
        return job_id

    def cli(job_id: str) -> float:
        t0 = time.perf_counter()
        p = h.pub(site.path, "push", job_id, "--json", check=False)
        dt = time.perf_counter() - t0
        if _state_of(p, job_id) != "PUBLISHED":
            raise BenchError(f"confirmation failed: {p.out[:500]} {p.err[-500:]}")
        return dt

    def grep(job_id: str) -> float:
        t0 = time.perf_counter()
        out = h.git(site.path, "log", f"--grep=Blog-Job-Id: {job_id}", "--fixed-strings",
                    "--format=%H", "refs/remotes/origin/main")
        dt = time.perf_counter() - t0
        if len(out.split()) != 1:
            raise BenchError(f"git log --grep found {out.split()} for {job_id}")
        return dt

    xs: list[float] = []
    ys: list[float] = []
    lib: list[float] = []
    for i in range(s.runs + 1):
        job_id = setup()
        if i % 2 == 0:
            x, y = cli(job_id), grep(job_id)
        else:
            y = grep(job_id)
            x = cli(job_id)
        z = probe_in_process(site.path, job_id)
        if i > 0:  # the first round is the warm-up
            xs.append(x)
            ys.append(y)
            lib.append(z)

    def profile(d: Path) -> None:
        job_id = setup()
        with h.profiling(d):
            cli(job_id)

    what = f"grep the whole {s.deep_commits:,}-commit history: `git log --grep=… --fixed-strings`"
    return [
        Row("confirm a job on the remote (CLI: `git pub push JOB` after a lost reply)",
            median(xs), median(ys), 0.3, str(s.runs),
            "`git pub push JOB`: fetch, probe by trailers, record PUBLISHED", what,
            f"{s.deep_commits:,}-commit history", xs, ys, profile),
        Row("confirm: the probe alone (`verify.probe.find_job_commit`, in-process)",
            median(lib), median(ys), 0.3, str(s.runs),
            "`find_job_commit(repo, [remote tip], record)` after the fetch", what,
            "excludes interpreter start, fetch and the state write", lib, ys),
    ]


def probe_in_process(site: Path, job_id: str) -> float:
    from gitpub.git.repo import Repository
    from gitpub.store.jobs import JobStore
    from gitpub.verify.probe import find_job_commit

    with Repository.discover(site) as repo:
        job = JobStore(repo).load(job_id)
        tip = repo.read_ref("refs/remotes/origin/main")
        assert job is not None and tip is not None
        t0 = time.perf_counter()
        found = find_job_commit(repo, [tip], job.record, "Blog")
        dt = time.perf_counter() - t0
    if found is None:
        raise BenchError(f"find_job_commit did not find {job_id}")
    return dt


def job_store(h: Harness, s: Sizes) -> list[Row]:
    template = corpus_template(h)
    sites = {}
    for n in (s.store_jobs, s.small_store_jobs):
        site = make_site(h, template, fresh_dir(h.sites / f"store-{n}"), "docs/bench")
        pub = Publisher(h, site, f"store{n}")
        pub.gitpub()  # one real published job: the model for the others
        t0 = time.perf_counter()
        add_finished_jobs(h, site.path, pub.job_ids[0], n - 1, "docs/bench")
        h.log(f"  wrote {n - 1:,} finished jobs in {time.perf_counter() - t0:.1f}s")
        listed = json.loads(h.pub(site.path, "status", "--all", "--json").out)["jobs"]
        if len(listed) != n:
            raise BenchError(f"status --all lists {len(listed)} jobs, expected {n}")
        sites[n] = site

    def status(n: int) -> float:
        def go() -> None:
            p = h.pub(sites[n].path, "status")
            if "no unfinished jobs" not in p.out:
                raise BenchError(f"unexpected status output: {p.out[:300]}")
        return timed(go)

    xs, ys = alternate(s.slow_runs, lambda: status(s.store_jobs),
                       lambda: status(s.small_store_jobs))

    def profile(d: Path) -> None:
        with h.profiling(d):
            h.pub(sites[s.store_jobs].path, "status")

    big = Publisher(h, sites[s.store_jobs], "storebig")
    small = Publisher(h, sites[s.small_store_jobs], "storesmall")
    # Folding is part of publishing: the first publish over the big store (finished job refs an
    # older gitpub left unfolded) folds a bounded share of them (``delivery.fold.flow_limit``)
    # and says how many are left; ``reconcile`` folds the rest, once; from then on a publish
    # costs what it costs over a small store.
    big_site = sites[s.store_jobs].path

    def job_refs() -> int:
        return h.git(big_site, "for-each-ref", "refs/pub/jobs/").count("\n")

    first = big.gitpub()
    refs = job_refs()
    if refs >= s.store_jobs:
        raise BenchError(f"{refs} job refs left after the first publish: nothing was folded")
    h.log(f"  first publish over {s.store_jobs:,} finished jobs: {first:.1f}s "
          f"(folded {s.store_jobs + 1 - refs:,}; {refs:,} job refs left)")
    baseline_first = small.gitpub()
    rec = timed(lambda: h.pub(big_site, "reconcile"))
    left = json.loads(h.pub(big_site, "status", "--all", "--json").out)["jobs"]
    refs_after = job_refs()
    if refs_after > 64 + 1:
        raise BenchError(f"{refs_after} job refs left after reconcile: not all were folded")
    h.log(f"  reconcile folded the rest in {rec:.1f}s ({refs_after} job refs left, "
          f"{len(left)} jobs listed)")
    rec_small = timed(lambda: h.pub(sites[s.small_store_jobs].path, "reconcile"))
    pxs, pys = alternate(s.slow_runs, big.gitpub, small.gitpub)

    def profile_publish(d: Path) -> None:
        with h.profiling(d):
            big.gitpub()

    return [Row(f"job store: `git pub status`, {s.store_jobs:,} vs {s.small_store_jobs} "
                "finished jobs", median(xs), median(ys), 1.5, str(s.slow_runs),
                f"`git pub status` over {s.store_jobs:,} PUBLISHED jobs (loose refs)",
                f"the same over {s.small_store_jobs}", "", xs, ys, profile),
            Row(f"job store: the first publish over {s.store_jobs:,} finished job refs folds a "
                "bounded share of them into the archive (info)", first, baseline_first, None,
                "1", f"{PUBLISH_WHAT}, {s.store_jobs:,} finished job refs, no reconcile",
                f"the same, {s.small_store_jobs} job refs",
                f"{refs:,} job refs left after it (each deleted ref costs `git push` in "
                "proportion to the refs there are: a publish takes on a bounded share)",
                [first], [baseline_first]),
            Row(f"job store: `git pub reconcile` folds the {refs:,} finished job refs left, "
                "once (info)", rec, rec_small, None, "1",
                f"`git pub reconcile` after that publish, {refs:,} finished job refs",
                f"the same, {s.small_store_jobs} job refs", f"{refs_after} job refs left after it",
                [rec], [rec_small]),
            Row(f"job store: publish one article after {s.store_jobs:,} finished jobs vs "
                f"{s.small_store_jobs}, folded into the archive", median(pxs),
                median(pys), 1.2, str(s.slow_runs),
                f"{PUBLISH_WHAT}, {s.store_jobs:,} jobs folded by the flow and one reconcile",
                f"the same, {s.small_store_jobs} job refs",
                "publish, prepare --push and sync fold finished jobs when archive_after of "
                "them piled up: the per-job cost stays flat",
                pxs, pys, profile_publish)]


# -- throughput and two writers -------------------------------------------------------------

@dataclass
class SequenceRun:
    total: float
    per_job: list[float]
    retries: int
    site: Site
    publisher: Publisher


_one_writer: dict[int, SequenceRun] = {}


def one_writer(h: Harness, n: int, between: Callable[[], None] | None = None,
               every: int = 10) -> SequenceRun:
    """n jobs prepared and pushed one after another by one writer (memoized per run).
    ``between`` runs (untimed) after every ``every``-th job: the throughput scenario measures
    its single jobs there, so both sides see the same background load."""
    if n not in _one_writer:
        site = make_site(h, corpus_template(h), fresh_dir(h.sites / "one-writer"), "docs/bench")
        pub = Publisher(h, site, "seq")
        per: list[float] = []
        for j in range(n):
            per.append(pub.gitpub(retry=True))
            if between is not None and j % every == every - 1:
                between()
        landed_once(h, site.remote, pub.job_ids)
        all_published(h, site.path, pub.job_ids)
        _one_writer[n] = SequenceRun(sum(per), per, pub.retries, site, pub)
    return _one_writer[n]


def throughput(h: Harness, s: Sizes) -> list[Row]:
    """The sequence's total against n x the *mean* time of a single job published into a
    fresh site (its store stays at <= 21 jobs), measured after every twentieth of the
    sequence so both sides see the same background load. The mean, not the median: a total
    carries every slow outlier of a busy machine, so only a mean is its like-for-like
    counterpart (the medians are in the notes)."""
    n = s.sequence_jobs
    ref = Publisher(h, make_site(h, corpus_template(h), fresh_dir(h.sites / "single"),
                                 "docs/bench"), "single")
    ref.gitpub()  # warm-up
    singles = [ref.gitpub()]
    seq = one_writer(h, n, between=lambda: singles.append(ref.gitpub()),
                     every=max(1, n // 20))
    if len(singles) < 4:  # the sequence was run earlier (memoized): measure singles now
        singles += [ref.gitpub() for _ in range(9)]
    k = max(1, n // 10)
    mean = sum(singles) / len(singles)
    notes = (f"one job: mean {_ms(mean)}, median {_ms(median(singles))} ({len(singles)} "
             f"single jobs into a fresh site); in the sequence: median "
             f"{_ms(median(seq.per_job))} per job, first {k} jobs "
             f"{_ms(median(seq.per_job[:k]))}, last {k} {_ms(median(seq.per_job[-k:]))}; "
             f"all {n} landed once")

    def profile(d: Path) -> None:
        with h.profiling(d):
            seq.publisher.gitpub()

    return [Row(f"throughput: {n} jobs one after another", seq.total, n * mean,
                1.0, f"1x{n} / {len(singles)}", f"{n} x (`prepare` + `push`), one writer",
                f"{n} x the mean time of one job", notes, [seq.total], singles, profile)]


@dataclass
class Race:
    """Clones publishing to one remote at once: the remote, their publishers, the wall time."""

    remote: Path
    pubs: list[Publisher]
    total: float

    @property
    def ids(self) -> list[str]:
        return [j for p in self.pubs for j in p.job_ids]


def race(h: Harness, name: str, node: str, nodes: int, per: int) -> Race:
    """``nodes`` clones of one corpus remote, each publishing ``per`` jobs in its own thread;
    checks that every job landed exactly once and is PUBLISHED in its clone."""
    dest = fresh_dir(h.sites / name)
    remote = make_remote(h, corpus_template(h), dest)
    sites = [make_site(h, remote, dest, "docs/bench", remote=remote, name=f"{node}{w}")
             for w in range(1, nodes + 1)]
    pubs = [Publisher(h, site, f"{node[0]}{w}") for w, site in enumerate(sites, 1)]
    errors: list[BaseException] = []

    def work(pub: Publisher) -> None:
        try:
            for _ in range(per):
                pub.gitpub(retry=True)
        except BaseException as e:  # reported after the join
            errors.append(e)

    threads = [threading.Thread(target=work, args=(p,)) for p in pubs]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = time.perf_counter() - t0
    if errors:
        raise errors[0]
    result = Race(remote, pubs, total)
    landed_once(h, remote, result.ids)
    for p in pubs:
        all_published(h, p.site.path, p.job_ids)
    return result


def two_writers(h: Harness, s: Sizes) -> list[Row]:
    n = s.sequence_jobs
    half = n // 2
    r = race(h, "two-writers", "writer", 2, half)
    pubs, total, ids = r.pubs, r.total, r.ids
    rounds = sum(_count_subjects(h, p.site.path, "rejected") for p in pubs)
    waits = sum(_count_subjects(h, p.site.path, "RETRY_WAIT:") for p in pubs)
    seq = one_writer(h, n)

    def profile(d: Path) -> None:
        with h.profiling(d):
            pubs[0].gitpub(retry=True)

    notes = (f"all {len(ids)} landed exactly once; {rounds} rebase round(s) after a rejected "
             f"push, {waits} RETRY_WAIT(s), {sum(p.retries for p in pubs)} extra `push JOB`")
    return [Row(f"two writers: 2 x {half} jobs concurrently, one remote", total, seq.total,
                1.5, f"1x{n} / 1x{n}", f"2 clones x {half} x (`prepare` + `push`), in parallel",
                f"{n} jobs by one writer", notes, [total], [seq.total], profile)]


def _count_subjects(h: Harness, site: Path, needle: str) -> int:
    out = h.git(site, "log", "--format=%s", "--glob=refs/pub/jobs")
    return sum(1 for line in out.splitlines() if needle in line)


def confirm_ci(h: Harness, s: Sizes) -> list[Row]:
    """``git pub confirm`` as CI runs it, and the probe's cost (``bench/confirm_ci.py``)."""
    from bench.confirm_ci import confirm_ci as run_rows

    return run_rows(h, s)


SCENARIOS: dict[str, Callable[[Harness, Sizes], list[Row]]] = {
    "publish-corpus": publish_corpus,
    "publish-wide": publish_wide,
    "history-depth": history_depth,
    "confirm": confirm,
    "confirm-ci": confirm_ci,
    "job-store": job_store,
    "throughput": throughput,
    "two-writers": two_writers,
}


def _shared_store(name: str) -> Callable[[Harness, Sizes], list[Row]]:
    def run(h: Harness, s: Sizes) -> list[Row]:
        from bench import shared_store

        return getattr(shared_store, name)(h, s)  # type: ignore[no-any-return]

    return run


SCENARIOS["archive"] = _shared_store("archive")
SCENARIOS["three-nodes"] = _shared_store("three_nodes")
SCENARIOS["atomic-push"] = _shared_store("atomic_push")
