"""What gitpub's hooks add to ``git commit``: the median of many commits, with and without.

Two repositories, identical but for the hooks (``gitpub.hooks.install``, the same shims
``git pub hooks install`` writes). Each scenario makes ``runs`` commits in each, interleaved
(hooked, plain, plain, hooked, …) so that drift on a busy machine hits both sides alike, and
times only ``git commit`` (the ``git add`` before it is untimed). Scenarios:

- a small commit touching no content path: the case every commit pays, served by the fast path;
- a commit touching an article: the slow path, which records an outbox ref.

Run ``python -m bench.hooks [RUNS]``; ``run()`` returns the rows for other reports.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.common import hermetic_env, median, python

CONFIG = 'remote: origin\nbranch: main\narticles: ["posts/**/*.md"]\nnode: bench\n'

SCENARIOS: dict[str, Callable[[int], str]] = {
    "commit touching no content path": lambda i: "notes/scratch.txt",
    "commit touching an article": lambda i: f"posts/bench-{i}.md",
}


def _git(repo: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _make_repo(path: Path, env: dict[str, str]) -> Path:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], env=env, check=True)
    (path / ".gitpub.yaml").write_text(CONFIG, encoding="utf-8")
    (path / "posts").mkdir()
    (path / "posts" / "welcome.md").write_text("---\ntitle: Welcome\n---\n\n# Welcome\n")
    _git(path, env, "add", ".")
    _git(path, env, "commit", "-q", "-m", "Start the site")
    return path


def _timed_commit(repo: Path, env: dict[str, str], rel: str, i: int) -> float:
    file = repo / rel
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(f"---\ntitle: Bench {i}\n---\n\nEdit {i}.\n", encoding="utf-8")
    _git(repo, env, "add", rel)
    t0 = time.perf_counter()
    _git(repo, env, "commit", "-q", "-m", f"Edit {i}")
    return time.perf_counter() - t0


def _install(repo: Path, env: dict[str, str]) -> None:
    code = ("import sys; from pathlib import Path; from gitpub.hooks.install import install; "
            "install(Path(sys.argv[1]))")
    subprocess.run([python(), "-c", code, str(repo)], env=env, check=True)


@dataclass(frozen=True)
class Row:
    scenario: str
    gitpub_median_s: float
    baseline_median_s: float
    ratio: float
    runs: int


def run(runs: int = 30) -> list[dict[str, object]]:
    """One row per scenario: medians in seconds with gitpub's hooks and without."""
    return [asdict(row) for row in measure(runs)]


def measure(runs: int) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="gitpub-bench-hooks-") as tmp:
        env = hermetic_env(Path(tmp) / "home")
        for n, (scenario, path_for) in enumerate(SCENARIOS.items()):
            plain = _make_repo(Path(tmp) / f"plain-{n}", env)
            hooked = _make_repo(Path(tmp) / f"hooked-{n}", env)
            _install(hooked, env)
            for repo in (plain, hooked):  # warm-up: page cache, the fast path's config cache
                _timed_commit(repo, env, path_for(-1), -1)
            times: dict[Path, list[float]] = {plain: [], hooked: []}
            for i in range(runs):
                for repo in (hooked, plain) if i % 2 else (plain, hooked):
                    times[repo].append(_timed_commit(repo, env, path_for(i), i))
            with_hooks, without = median(times[hooked]), median(times[plain])
            rows.append(Row(scenario, with_hooks, without, with_hooks / without, runs))
    return rows


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 30
    print(f"{'scenario':<34} {'with hooks':>11} {'without':>9} {'added':>9} {'ratio':>6}")
    for r in measure(runs):
        added = r.gitpub_median_s - r.baseline_median_s
        print(f"{r.scenario:<34} {r.gitpub_median_s * 1000:9.1f}ms "
              f"{r.baseline_median_s * 1000:7.1f}ms {added * 1000:+7.1f}ms {r.ratio:5.2f}x")
    print(f"(median of {runs} commits each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
