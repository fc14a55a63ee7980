"""``git pub confirm`` as CI runs it, on the 100,000-commit history, and the probe's cost.

Rows (each side by side with its baseline, alternating, after a warm-up):

- *first run*: a clone of the remote with no notes yet (``--no-push-notes``, so every sample is a
  first run) walks and checks the whole history, against ``git log --grep`` over the same
  history (target ≤ 1.0);
- *second run*: the remote's notes say where the last run stopped; one new commit was pushed;
  a fresh clone runs ``confirm`` (which pushes its notes, so the next sample is again one new
  commit), against ``git log --grep`` in the same clone (target ≤ 0.3);
- *as CI does*: the same second run in a fresh ``--depth=1`` clone over the transport, clone
  included, against a full clone plus ``git log --grep`` (no target: what a CI job waits for);
- *the probe*: the content-bound probe (``verify.probe.find_job_commit``: trailers *and*
  content) against the trailers-only search it replaced, in-process, on the fetched tip.
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


def confirm_ci(h: Harness, s: Sizes) -> list[Row]:
    template = history_template(h, s.deep_commits)
    root = fresh_dir(h.sites / "confirm-ci")
    site = make_site(h, template, root, "posts/bench")
    pub = Publisher(h, site, "ci")
    job_id, _ = pub.prepare()
    pub.push(job_id)
    history = int(h.git(site.path, "rev-list", "--count", "main").strip())
    rows = [_first_run(h, s, site.path, history), *_second_runs(h, s, site.remote, root)]
    rows.append(_probe(h, s, site.path, job_id))
    return rows


def _confirm(h: Harness, repo: Path, *args: str) -> dict[str, object]:
    p = h.pub(repo, "confirm", "--json", *args, check=False)
    if p.code != 0:
        raise BenchError(f"confirm failed ({p.code}): {p.out[-500:]} {p.err[-500:]}")
    data: dict[str, object] = json.loads(p.out)
    return data


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _first_run(h: Harness, s: Sizes, site: Path, history: int) -> Row:
    def gitpub() -> float:
        t0 = time.perf_counter()
        data = _confirm(h, site, "--no-push-notes")
        dt = time.perf_counter() - t0
        if data["checked"] != history or len(data["commits"]) != 1:  # type: ignore
            raise BenchError(f"first run checked {data['checked']} of {history}")
        return dt

    def grep() -> float:
        return _timed(lambda: h.git(site, *GREP, "refs/remotes/origin/main"))

    xs, ys = alternate(s.runs, gitpub, grep)
    return Row(f"confirm (CI), first run: {history:,} commits, no notes yet", median(xs),
               median(ys), 1.0, str(s.runs),
               "`git pub confirm --no-push-notes`: walk, verify the job commits",
               "`git log --grep=Blog-Job-Id --fixed-strings` over the same history", "",
               xs, ys)


def _second_runs(h: Harness, s: Sizes, remote: Path, root: Path) -> list[Row]:
    work = root / "writer"
    h.git(root, "clone", "-q", str(remote), str(work))
    seed = root / "seed"
    h.git(root, "clone", "-q", str(remote), str(seed))
    _confirm(h, seed)  # the remote's notes now say where this run stopped
    n = [0]

    def new_commit() -> None:
        n[0] += 1
        (work / "notes.txt").write_text(f"hand edit {n[0]}\n")
        h.git(work, "add", "notes.txt")
        h.git(work, "commit", "-q", "-m", f"Hand edit {n[0]}")
        h.git(work, "push", "-q", "origin", "HEAD:main")

    def clone(*args: str) -> Path:
        n[0] += 1
        path = root / f"ci-{n[0]}"
        h.git(root, "clone", "-q", *args, str(remote) if not args else remote.as_uri(),
              str(path))
        return path

    local_x: list[float] = []
    local_y: list[float] = []
    ci_x: list[float] = []
    ci_y: list[float] = []
    for i in range(s.runs + 1):
        new_commit()
        ci = clone()
        order = [("gitpub", ci), ("grep", ci)] if i % 2 == 0 else [("grep", ci), ("gitpub", ci)]
        for side, path in order:
            if side == "gitpub":
                t0 = time.perf_counter()
                data = _confirm(h, path)
                x = time.perf_counter() - t0
                if data["checked"] != 1:
                    raise BenchError(f"second run checked {data['checked']}, not 1")
            else:
                y = _timed(lambda p=path: h.git(p, *GREP, "refs/remotes/origin/main"))
        new_commit()
        t0 = time.perf_counter()
        shallow = clone("--no-local", "--depth=1")
        data = _confirm(h, shallow)
        cx = time.perf_counter() - t0
        if data["checked"] != 1:
            raise BenchError(f"CI run checked {data['checked']}, not 1")
        t0 = time.perf_counter()
        full = clone("--no-local")
        h.git(full, *GREP, "refs/remotes/origin/main")
        cy = time.perf_counter() - t0
        if i > 0:
            local_x.append(x)
            local_y.append(y)
            ci_x.append(cx)
            ci_y.append(cy)
    return [
        Row("confirm (CI), second run after one new commit (notes on the remote)",
            median(local_x), median(local_y), 0.3, str(s.runs),
            "`git pub confirm` in a fresh clone: the checked-through point from the remote's "
            "notes, one commit walked, notes pushed",
            "`git log --grep=Blog-Job-Id --fixed-strings` in the same clone", "",
            local_x, local_y),
        Row("confirm (CI) as CI does: `--depth=1` clone + confirm", median(ci_x), median(ci_y),
            None, str(s.runs),
            "`git clone --no-local --depth=1` + `git pub confirm` (deepens to the point)",
            "`git clone --no-local` + `git log --grep`", "", ci_x, ci_y),
    ]


def _probe(h: Harness, s: Sizes, site: Path, job_id: str) -> Row:
    from gitpub.git import trailers
    from gitpub.git.repo import Repository
    from gitpub.git.walk import walk_since
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

        xs, ys = alternate(s.runs, bound, trailers_only)
    return Row("probe: content-bound vs trailers only (in-process, after a lost reply)",
               median(xs), median(ys), None, str(s.runs),
               "`find_job_commit`: trailers, tree vs manifest, diff vs first parent",
               "the trailers-only search it replaced", "", xs, ys)
