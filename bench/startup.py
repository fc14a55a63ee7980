"""What starting gitpub costs: each command side by side with a bare interpreter start.

An agent may call gitpub hundreds of times, and every commit runs its post-commit hook, so the
start-up is a tax on everything. Each row runs a command and ``python -c pass`` (the same
interpreter gitpub is installed in, so the comparison is of what gitpub adds) interleaved —
command, baseline, baseline, command, … — in one run, so that drift on a busy machine hits both
sides alike, and reports the medians and their ratio:

- ``git-pub --version`` and ``git-pub -h``;
- ``git-pub status`` over 10 unfinished jobs and ``git-pub log JOB``, then ``status`` again
  once ``git gc`` and ``git pack-refs`` packed the store (objects read from a pack, refs from
  ``packed-refs``). The target of ``status`` is absolute: ≤ 150 ms (its notes say so; the
  ratio to a bare interpreter is shown, not targeted);
- the post-commit hook on a commit touching no content path (its fast path), run as git runs
  it (the installed shim, in the repository);
- ``git-pub push`` of one prepared job with gitpub's hooks installed against the same without
  them (the pre-push hook's cost inside a delivery; the baseline column is the push without
  hooks).

``git-pub`` is the console script ``git pub`` executes. Run ``python -m bench.startup [RUNS]``;
``run()`` returns the rows for ``python -m bench`` (``--only startup``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from bench.common import hermetic_env, median, python

CONFIG = 'remote: origin\nbranch: main\narticles: ["posts/**/*.md"]\nnode: bench\n'
JOBS = 10
STATUS_TARGET = "target: ≤ 150 ms end to end (absolute, not a ratio)"


def git_pub() -> list[str]:
    """The ``git-pub`` executable next to gitpub's interpreter (what ``git pub`` runs); with
    ``GITPUB_BENCH_MODULE=1``, ``python -m gitpub`` (the gitpub ``PYTHONPATH`` names: to
    compare two source trees with one interpreter)."""
    if os.environ.get("GITPUB_BENCH_MODULE") == "1":
        return [python(), "-m", "gitpub"]
    script = Path(python()).parent / "git-pub"
    return [str(script) if script.exists() else "git-pub"]


def _run(argv: Sequence[str], cwd: Path, env: dict[str, str], stdin: bytes | None = None
         ) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(list(argv), cwd=cwd, env=env, input=stdin, capture_output=True,
                          check=False)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}: "
                           f"{proc.stderr.decode(errors='replace')[-500:]}")
    return took


def _git(repo: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True,
                          capture_output=True).stdout.decode()


def make_site(root: Path, name: str, env: dict[str, str]) -> Path:
    """A working repository with a bare remote ``origin`` and a committed configuration."""
    remote, site = root / f"{name}.git", root / name
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], env=env,
                   check=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(site)], env=env, check=True)
    (site / ".gitpub.yaml").write_text(CONFIG, encoding="utf-8")
    (site / "posts").mkdir()
    (site / "posts" / "welcome.md").write_text("---\ntitle: Welcome\n---\n\n# Welcome\n")
    _git(site, env, "add", ".")
    _git(site, env, "commit", "-q", "-m", "Start the site")
    _git(site, env, "remote", "add", "origin", str(remote))
    _git(site, env, "push", "-q", "origin", "main")
    _git(site, env, "fetch", "-q", "origin")
    return site


def prepare(site: Path, env: dict[str, str], tag: str) -> str:
    """A new job, prepared (LOCAL_COMMITTED, not pushed); its id."""
    text = f"---\ntitle: Post {tag}\n---\n\n# Post {tag}\n\nText {tag}.\n".encode()
    proc = subprocess.run([*git_pub(), "-C", str(site), "prepare", "--json", "--key", tag,
                           "--to", f"posts/{tag}.md", "-"], input=text, env=env,
                          capture_output=True, check=True)
    return str(json.loads(proc.stdout)["job_id"])


def install_hooks(site: Path, env: dict[str, str]) -> None:
    subprocess.run([*git_pub(), "-C", str(site), "hooks", "install"], env=env, check=True,
                   capture_output=True)


def interleaved(runs: int, a: Callable[[], float], b: Callable[[], float]
                ) -> tuple[list[float], list[float]]:
    """``runs`` timings of each, in the order a b b a a b …, after one warm-up of each."""
    a(), b()
    xs: list[float] = []
    ys: list[float] = []
    for i in range(runs):
        for first in ((b, a) if i % 2 else (a, b)):
            (xs if first is a else ys).append(first())
    return xs, ys


def row(scenario: str, xs: list[float], ys: list[float], target: float | None, what: str,
        baseline: str, notes: str = "") -> dict[str, object]:
    return {"scenario": scenario, "gitpub_median_s": median(xs), "baseline_median_s": median(ys),
            "target": target, "runs": len(xs), "gitpub": what, "baseline": baseline,
            "notes": notes}


def run(quick: bool = False, runs: int | None = None) -> list[dict[str, object]]:
    runs = runs or (5 if quick else 30)
    with tempfile.TemporaryDirectory(prefix="gitpub-bench-startup-") as tmp:
        env = hermetic_env(Path(tmp) / "home")
        if "PYTHONPATH" in os.environ:  # the gitpub this interpreter imports, in every process
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return measure(Path(tmp), env, runs)


def measure(root: Path, env: dict[str, str], runs: int) -> list[dict[str, object]]:
    exe, py = git_pub(), python()
    site = make_site(root, "site", env)
    jobs = [prepare(site, env, f"start-{i}") for i in range(JOBS)]
    bare = "`python -c pass` (the same interpreter)"

    def baseline() -> float:
        return _run([py, "-c", "pass"], site, env)

    def command(*args: str) -> Callable[[], float]:
        return lambda: _run([*exe, *args], site, env)

    rows = []
    for args, notes, name in (
            (("--version",), "", "`git pub --version`"),
            (("-h",), "", "`git pub -h`"),
            (("status",), STATUS_TARGET, f"`git pub status` ({JOBS} unfinished jobs)"),
            (("log", jobs[0]), "", "`git pub log JOB`")):
        xs, ys = interleaved(runs, command(*args), baseline)
        rows.append(row(f"start-up: {name}", xs, ys, None, name, bare, notes))
    _git(site, env, "gc", "-q", "--prune=now")
    _git(site, env, "pack-refs", "--all")
    xs, ys = interleaved(runs, command("status"), baseline)
    rows.append(row(f"start-up: `git pub status` ({JOBS} jobs, store packed by git gc)", xs, ys,
                    None, "`git pub status` after `git gc` and `git pack-refs --all`", bare,
                    STATUS_TARGET))

    install_hooks(site, env)
    hook = site / ".git" / "hooks" / "post-commit"
    _git(site, env, "commit", "-q", "--allow-empty", "-m", "no content")  # fills the cache
    xs, ys = interleaved(runs, lambda: _run([str(hook)], site, env), baseline)
    rows.append(row("start-up: post-commit hook, a commit touching no content path", xs, ys,
                    None, "the installed post-commit shim, run in the repository", bare,
                    "the fast path: stdlib only, python -S"))
    rows.append(push_row(root, env, max(3, runs // 3)))
    return rows


def push_row(root: Path, env: dict[str, str], runs: int) -> dict[str, object]:
    """``git-pub push`` of one prepared job, with gitpub's hooks installed and without."""
    hooked, plain = make_site(root, "hooked", env), make_site(root, "plain", env)
    install_hooks(hooked, env)
    counter = iter(range(10**6))

    def push(site: Path) -> Callable[[], float]:
        def go() -> float:
            prepare(site, env, f"push-{next(counter)}")  # untimed
            return _run([*git_pub(), "-C", str(site), "push"], site, env)
        return go

    xs, ys = interleaved(runs, push(hooked), push(plain))
    return row("start-up: `git pub push` of one job, with the hooks vs without", xs, ys, None,
               "`git pub push` with gitpub's hooks installed (pre-push runs inside)",
               "the same without hooks",
               "the pre-push hook recognises gitpub's own verified push (core.pushmark)")


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 30
    print(f"{'scenario':<72} {'gitpub':>9} {'baseline':>9} {'ratio':>6}")
    for r in run(runs=runs):
        g, b = float(str(r["gitpub_median_s"])), float(str(r["baseline_median_s"]))
        target = "" if r["target"] is None else f"  (target ≤ {r['target']})"
        print(f"{str(r['scenario'])[:72]:<72} {g * 1000:7.1f}ms {b * 1000:7.1f}ms "
              f"{g / b:5.2f}x{target}")
    print(f"(medians of {runs} interleaved runs; push: {max(3, runs // 3)})")
    return 0


if __name__ == "__main__":
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    raise SystemExit(main(sys.argv[1:]))
