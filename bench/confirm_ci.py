"""``git pub confirm`` as CI runs it, on the 100,000-commit history, and the probe's cost.

Every ``confirm`` runs with CI's key (``GITPUB_CONFIRM_KEY``), as CI does, and every sample is
a fresh ``git clone`` of the remote (what every CI run is); the baseline, ``git log --grep``,
runs in the same clone, alternating with gitpub, after a warm-up. Rows:

- *first run*: the remote has no notes yet (``--no-push-notes``, so every sample is a first
  run): the whole history is walked and every claim checked, against ``git log --grep`` over
  the same history (target ≤ 1.0);
- *without the key*: nothing in the notes can be believed, so every run is a first run (the
  slow, safe path; no target);
- *the walk alone*: the first run's walk in-process (no interpreter start, no fetch), listed
  and split in two halves walked at once as confirm runs it (the split point sampled from the
  packs: ``git.walk.split_point``), listed in one git, and filtered by C git with a parallel
  count, against ``git log --grep`` (no target: they say what the walk costs against C git's
  own);
- *second run*: the remote's notes say where the last run stopped; one new commit was pushed;
  a fresh clone runs ``confirm`` (which pushes its notes, so the next sample is again one new
  commit), against ``git log --grep`` in the same clone (target ≤ 0.3);
- *second run in-process*: the same, called in this process (the CLI row less the
  interpreter's start and the imports; no target: it says what the work itself costs);
- *as CI does*: the same second run in a fresh ``--depth=1`` clone over the transport, clone
  included, against a full clone plus ``git log --grep`` (no target: what a CI job waits for);
- *the probe*: the content-bound probe (``verify.probe.find_job_commit``: trailers *and*
  content), in-process on the fetched tip, against ``git log --grep`` (target ≤ 0.3) and
  against the trailers-only search it replaced (no target).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import BenchError, Harness, fresh_dir, median
from bench.fixtures import history_template, make_site
from bench.scenarios import Publisher, Row, Sizes, alternate

GREP = ("log", "--grep=Blog-Job-Id", "--fixed-strings", "--format=%H")
#: CI's key in the bench (a test value: it authenticates nothing outside the bench).
KEY = "bench-confirm-key-0123456789abcdef"
GREP_WHAT = "`git log --grep=Blog-Job-Id --fixed-strings` over the same history, same clone"


def confirm_ci(h: Harness, s: Sizes) -> list[Row]:
    template = history_template(h, s.deep_commits)
    root = fresh_dir(h.sites / "confirm-ci")
    _anchor(h).unlink(missing_ok=True)
    site = make_site(h, template, root, "posts/bench")
    pub = Publisher(h, site, "ci")
    job_id, _ = pub.prepare()
    pub.push(job_id)
    history = int(h.git(site.path, "rev-list", "--count", "main").strip())
    clones = _Clones(h, site.remote, root)
    rows = [_first_run(h, s, clones, history, keyed=True),
            _first_run(h, s, clones, history, keyed=False),
            *_walks(h, s, clones, history),
            *_second_runs(h, s, clones)]
    rows += _probe(h, s, site.path, job_id)
    return rows


class _Clones:
    """Fresh clones of the remote, one per sample."""

    def __init__(self, h: Harness, remote: Path, root: Path) -> None:
        self.h, self.remote, self.root, self.n = h, remote, root, 0

    def clone(self, *args: str) -> Path:
        self.n += 1
        path = self.root / f"ci-{self.n}"
        source = self.remote.as_uri() if args else str(self.remote)
        self.h.git(self.root, "clone", "-q", *args, source, str(path))
        return path


def _anchor(h: Harness) -> Path:
    """The rollback anchor CI keeps between runs (one per bench run)."""
    return h.sites / "confirm-anchor.json"


def _confirm(h: Harness, repo: Path, *args: str, keyed: bool = True) -> dict[str, object]:
    env = {"GITPUB_CONFIRM_KEY": KEY, "GITPUB_CONFIRM_ANCHOR": str(_anchor(h))} if keyed \
        else None
    if keyed and not _anchor(h).exists():
        args = (*args, "--first-run")  # the person who set CI up, once (or a first run)
    p = h.pub(repo, "confirm", "--json", *args, check=False, extra_env=env)
    if p.code != 0:
        raise BenchError(f"confirm failed ({p.code}): {p.out[-500:]} {p.err[-500:]}")
    data: dict[str, object] = json.loads(p.out)
    return data


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _grep(h: Harness, repo: Path) -> float:
    return _timed(lambda: h.git(repo, *GREP, "refs/remotes/origin/main"))


def _first_run(h: Harness, s: Sizes, clones: _Clones, history: int, *, keyed: bool) -> Row:
    def gitpub(repo: Path) -> float:
        t0 = time.perf_counter()
        data = _confirm(h, repo, "--no-push-notes", keyed=keyed)
        dt = time.perf_counter() - t0
        if data["checked"] != history or len(data["commits"]) != 1:  # type: ignore
            raise BenchError(f"first run checked {data['checked']} of {history}")
        return dt

    xs, ys = in_fresh_clones(s.runs, clones, gitpub, lambda repo: _grep(h, repo))
    if keyed:
        return Row(f"confirm (CI), first run: {history:,} commits, no notes yet, fresh clone",
                   median(xs), median(ys), 1.0, str(s.runs),
                   "`git pub confirm --no-push-notes` with the key in a fresh clone: walk, "
                   "verify the job commits", GREP_WHAT, "", xs, ys)
    return Row(f"confirm (CI) without the key: {history:,} commits (every run)", median(xs),
               median(ys), None, str(s.runs),
               "`git pub confirm --no-push-notes` without GITPUB_CONFIRM_KEY in a fresh clone: "
               "the whole history, every run", GREP_WHAT, "", xs, ys)


def _walks(h: Harness, s: Sizes, clones: _Clones, history: int) -> list[Row]:
    """The first run's walk alone (in-process, no interpreter start, no fetch): the listed way
    confirm uses (one git), and the filtered way (``--grep`` plus a ``rev-list --count`` at
    the same time, on the other core)."""
    from gitpub.git import walk as W
    from gitpub.git.repo import Repository
    from gitpub.proof.trailers import JOB_ID_NEEDLE

    repo = clones.clone()

    def walk(listed: bool, split: bool = False) -> float:
        with Repository.discover(repo) as r:
            tip = r.read_ref("refs/remotes/origin/main")
            assert tip is not None
            t0 = time.perf_counter()
            point = W.split_point(r, tip) if split else None
            scan = W.log_scan(r, [tip], [], JOB_ID_NEEDLE, listed=listed, split=point)
            dt = time.perf_counter() - t0
        if scan.count != history or len(scan.candidates) != 1:
            raise BenchError(f"the walk counted {scan.count} of {history}")
        return dt

    grep = lambda: _grep(h, repo)  # noqa: E731
    sx, sy = alternate(s.runs, lambda: walk(True, split=True), grep)
    lx, ly = alternate(s.runs, lambda: walk(True), grep)
    fx, fy = alternate(s.runs, lambda: walk(False), grep)
    what = "`git.walk.log_scan` in-process over the whole history"
    return [
        Row("first-run walk alone, listed and split (what confirm runs)", median(sx),
            median(sy), None, str(s.runs),
            f"{what}: two `git log -z` at once, `tip ^point` (with parents) and `point`, the "
            "point sampled from the packs' indexes", GREP_WHAT, "", sx, sy),
        Row("first-run walk alone, listed in one git", median(lx),
            median(ly), None, str(s.runs),
            f"{what}: one `git log -z --format=%H%x00%B`, searched at once", GREP_WHAT, "", lx, ly),
        Row("first-run walk alone, filtered + counted (two gits at once)", median(fx),
            median(fy), None, str(s.runs),
            f"{what}: `git log --grep=-job-id -i -F` and `git rev-list --count` in parallel",
            GREP_WHAT, "", fx, fy),
    ]


def in_fresh_clones(runs: int, clones: _Clones, a: Callable[[Path], float],
                    b: Callable[[Path], float]) -> tuple[list[float], list[float]]:
    """Like ``scenarios.alternate`` (a warm-up, then A B, B A, …), each round in a fresh clone
    that both sides use."""
    xs: list[float] = []
    ys: list[float] = []
    for i in range(runs + 1):
        repo = clones.clone()
        if i % 2 == 0:
            x, y = a(repo), b(repo)
        else:
            y = b(repo)
            x = a(repo)
        if i > 0:
            xs.append(x)
            ys.append(y)
    return xs, ys


def _second_runs(h: Harness, s: Sizes, clones: _Clones) -> list[Row]:
    work = clones.clone()
    _confirm(h, clones.clone())  # the remote's notes now say where this run stopped
    n = [0]

    def new_commit() -> None:
        n[0] += 1
        (work / "notes.txt").write_text(f"hand edit {n[0]}\n")
        h.git(work, "add", "notes.txt")
        h.git(work, "commit", "-q", "-m", f"Hand edit {n[0]}")
        h.git(work, "push", "-q", "origin", "HEAD:main")

    local_x: list[float] = []
    local_y: list[float] = []
    lib: list[float] = []
    ci_x: list[float] = []
    ci_y: list[float] = []
    for i in range(s.runs + 1):
        new_commit()
        ci = clones.clone()
        order = ["gitpub", "grep"] if i % 2 == 0 else ["grep", "gitpub"]
        for side in order:
            if side == "gitpub":
                t0 = time.perf_counter()
                data = _confirm(h, ci)
                x = time.perf_counter() - t0
                if data["checked"] != 1:
                    raise BenchError(f"second run checked {data['checked']}, not 1")
            else:
                y = _grep(h, ci)
        new_commit()
        z = _in_process(h, clones.clone())
        new_commit()
        t0 = time.perf_counter()
        shallow = clones.clone("--no-local", "--depth=1")
        data = _confirm(h, shallow)
        cx = time.perf_counter() - t0
        if data["checked"] != 1:
            raise BenchError(f"CI run checked {data['checked']}, not 1")
        t0 = time.perf_counter()
        full = clones.clone("--no-local")
        h.git(full, *GREP, "refs/remotes/origin/main")
        cy = time.perf_counter() - t0
        if i > 0:
            local_x.append(x)
            local_y.append(y)
            lib.append(z)
            ci_x.append(cx)
            ci_y.append(cy)
    return [
        Row("confirm (CI), second run after one new commit (notes on the remote)",
            median(local_x), median(local_y), 0.3, str(s.runs),
            "`git pub confirm` with the key in a fresh clone: the checked-through point from "
            "the remote's notes, one commit walked, notes pushed", GREP_WHAT, "",
            local_x, local_y),
        Row("confirm (CI), second run in-process (no interpreter start, no imports)",
            median(lib), median(local_y), None, str(s.runs),
            "`app.confirm.confirm` called in-process in a fresh clone (the CLI row less the "
            "interpreter's start and the imports)", GREP_WHAT, "", lib, local_y),
        Row("confirm (CI) as CI does: `--depth=1` clone + confirm", median(ci_x), median(ci_y),
            None, str(s.runs),
            "`git clone --no-local --depth=1` + `git pub confirm` (deepens to the point)",
            "`git clone --no-local` + `git log --grep`", "", ci_x, ci_y),
    ]


def _in_process(h: Harness, repo: Path) -> float:
    """One second run in this process, in the harness's environment, with the key."""
    import os

    from gitpub.app.confirm import confirm

    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update({**h.env, "GITPUB_CONFIRM_KEY": KEY,
                       "GITPUB_CONFIRM_ANCHOR": str(_anchor(h))})
    try:
        t0 = time.perf_counter()
        report = confirm(repo, lambda _: None, None, True)
        dt = time.perf_counter() - t0
    finally:
        os.environ.clear()
        os.environ.update(saved)
    if report.checked != 1 or not report.notes_pushed:
        raise BenchError(f"in-process second run checked {report.checked}")
    return dt


def _probe(h: Harness, s: Sizes, site: Path, job_id: str) -> list[Row]:
    from gitpub.git.repo import Repository
    from gitpub.git.walk import walk_since
    from gitpub.proof import trailers
    from gitpub.store.jobs import JobStore
    from gitpub.verify.probe import find_job_commit

    with Repository.discover(site) as repo:
        job = JobStore(repo).load(job_id)
        tip = repo.read_ref("refs/remotes/origin/main")
        if job is None or tip is None:
            raise BenchError("no published job to probe")
        record = job.record
        base = repo.commit(tip).parents[0]
        record = record.evolve(first_base=base, base_commit=base)  # the probe after a lost reply

        def bound() -> float:
            t0 = time.perf_counter()
            found = find_job_commit(repo, [tip], record, "Blog")
            dt = time.perf_counter() - t0
            if found != tip:
                raise BenchError("the content-bound probe did not find the job")
            return dt

        def trailers_only() -> float:  # the probe before: any commit with both trailers
            t0 = time.perf_counter()
            found = None
            for sha, message in walk_since(repo, [tip], record.first_base):
                proof = trailers.read_pub_trailers(message, "Blog")
                if proof and proof.job_id == record.job_id \
                        and proof.manifest_sha256 == record.manifest_sha256:
                    found = sha
                    break
            dt = time.perf_counter() - t0
            if found != tip:
                raise BenchError("the trailers-only probe did not find the job")
            return dt

        def grep() -> float:
            return _grep(h, site)

        xs, ys = alternate(s.runs, bound, trailers_only)
        _, gs = alternate(s.runs, bound, grep)
    what = "`find_job_commit`: trailers, tree vs manifest, diff vs first parent (in-process)"
    return [
        Row("probe: content-bound vs `git log --grep` (after a lost reply)", median(xs),
            median(gs), 0.3, str(s.runs), what, "`git log --grep=Blog-Job-Id` over the "
            "whole history (what a person would run)", "", xs, gs),
        Row("probe: content-bound vs trailers only (the probe it replaced)", median(xs),
            median(ys), None, str(s.runs), what, "the trailers-only search it replaced", "",
            xs, ys),
    ]
