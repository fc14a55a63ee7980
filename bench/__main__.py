"""``python -m bench``: run the benchmark suite, print the table, write BENCHMARKS.md.

    python -m bench                 # the full suite (< 10 minutes on 2 cores); BENCHMARKS.md
    python -m bench --quick         # smoke check: fewer runs, small synthetic sizes
    python -m bench --only confirm  # one scenario (repeatable; a prefix is enough)
    python -m bench --profile       # also profile one gitpub run of every missed scenario

Only a full run (no ``--quick``, no ``--only``) writes ``BENCHMARKS.md`` at the project root;
other runs write ``bench/.work/last-run.md`` unless ``--output`` says otherwise. The font, hook
and start-up benchmarks (``bench/fonts.py``, ``bench/hooks.py``, ``bench/startup.py``, each
exposing ``run()``) are included when importable; ``--no-fonts`` / ``--no-hooks`` leave them out.

Fixtures are cached in ``bench/.work/cache`` (``--fresh`` rebuilds them). Each run's sites
(working clones, bare remotes, the baseline's worktrees) live on tmpfs (``/dev/shm``) when there
is one, else — or with ``--on-disk`` — in ``bench/.work/run`` (``--keep`` keeps them). Why: these
VMs' disk is ext4 *without a journal*, where file creation slows down 10x, erratically, for a
minute or more after deletions nearby — including the baseline's own ``worktree remove`` — so
on-disk baseline figures drift within a run (measured: 0.27 s → 0.51 s over seven runs) and
flatter gitpub (see ``scenarios.settled_pairs``). tmpfs matches this disk when it is quiet and
stays that way. On disk, a full run first waits (up to two minutes) for file creation to be
quick again (``settle_filesystem``).
"""

from __future__ import annotations

import argparse
import fcntl
import importlib
import inspect
import os
import shutil
import sys
import time
import traceback
from pathlib import Path

from bench.common import (
    PROFILES,
    ROOT,
    RUN,
    WORK,
    Harness,
    fresh_dir,
    fs_canary,
    hermetic_env,
    python,
)
from bench.report import Profile, console_table, machine, summarize, write_markdown
from bench.scenarios import SCENARIOS, Row, Sizes


def _ensure_gitpub() -> None:
    """Re-run under the project's venv when this interpreter cannot import gitpub."""
    try:
        import gitpub  # noqa: F401
    except ImportError:
        venv = python()
        if os.path.realpath(venv) != os.path.realpath(sys.executable):
            os.execv(venv, [venv, "-m", "bench", *sys.argv[1:]])
        raise


def main(argv: list[str] | None = None) -> int:
    _ensure_gitpub()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="fewer runs and small synthetic sizes (a smoke check)")
    parser.add_argument("--only", action="append", metavar="SCENARIO", default=[],
                        help="run only this scenario (repeatable; prefix match): "
                             + ", ".join([*SCENARIOS, "fonts", "hooks", "channels", "startup"]))
    parser.add_argument("--profile", action="store_true",
                        help="profile one gitpub run of every scenario that misses its target")
    parser.add_argument("--fonts", action=argparse.BooleanOptionalAction, default=True,
                        help="include bench/fonts.py when importable (default: yes)")
    parser.add_argument("--hooks", action=argparse.BooleanOptionalAction, default=True,
                        help="include bench/hooks.py when importable (default: yes)")
    parser.add_argument("--fresh", action="store_true", help="rebuild the cached fixtures")
    parser.add_argument("--on-disk", action="store_true",
                        help="put the sites under bench/.work/run instead of tmpfs (on these "
                             "VMs' ext4 without a journal, file creation after deletions is "
                             "erratic: see scenarios.settled_pairs)")
    parser.add_argument("--output", type=Path, help="where to write the Markdown results")
    parser.add_argument("--keep", action="store_true",
                        help="keep bench/.work/run (the sites and remotes) afterwards")
    args = parser.parse_args(argv)

    names = [*SCENARIOS, "fonts", "hooks", "channels", "startup"]
    selected = [n for n in names if not args.only or any(n.startswith(o) for o in args.only)]
    if args.only and not selected:
        parser.error(f"no scenario matches {args.only}; choose from {', '.join(names)}")
    if not args.fonts and "fonts" in selected:
        selected.remove("fonts")
    if not args.hooks and "hooks" in selected:
        selected.remove("hooks")

    WORK.mkdir(parents=True, exist_ok=True)
    lock = open(WORK / "run.lock", "a+b")  # noqa: SIM115 (held for the whole run)
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("python -m bench: another benchmark run is using bench/.work; wait for it",
              file=sys.stderr)
        return 2
    # A previous run's sites are moved aside and deleted only after the measurements: mass
    # deletions slow file creation down for a minute or more here (see settled_pairs).
    trash = WORK / f"trash-{os.getpid()}"
    if RUN.exists():
        RUN.rename(trash)
    if args.fresh and (WORK / "cache").exists():
        (WORK / "cache").rename(trash.with_name(trash.name + "-cache"))
    h = Harness(hermetic_env(fresh_dir(RUN) / "home"), quick=args.quick)
    shm = Path("/dev/shm")
    if not args.on_disk and shm.is_dir() and os.access(shm, os.W_OK):
        h.sites = fresh_dir(shm / f"gitpub-bench-{os.getpid()}" / "sites")
        h.sites_on_tmpfs = True
    try:
        return run_suite(args, selected, h)
    finally:
        shutil.rmtree(trash, ignore_errors=True)
        shutil.rmtree(trash.with_name(trash.name + "-cache"), ignore_errors=True)
        if not args.keep:
            if h.sites_on_tmpfs:
                shutil.rmtree(h.sites.parent, ignore_errors=True)
            shutil.rmtree(RUN, ignore_errors=True)


def run_suite(args: argparse.Namespace, selected: list[str], h: Harness) -> int:
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    # On disk, wait for file creation to be quick again first (not for a smoke check).
    settle = not args.quick and not h.sites_on_tmpfs
    canary_before = settle_filesystem(h.sites) if settle else fs_canary(h.sites)
    sizes = Sizes.for_mode(args.quick)
    rows: list[Row] = []
    errors: list[str] = []
    for name in selected:
        t0 = time.perf_counter()
        h.log(f"== {name}")
        try:
            maybe = SCENARIOS[name](h, sizes) if name in SCENARIOS else external(name, args.quick)
            if maybe is None:
                h.log(f"   bench/{name}.py is not there (yet): skipped")
                continue
            got = maybe
        except Exception as e:  # one broken scenario must not lose the others
            errors.append(f"{name}: {type(e).__name__}: {e}")
            h.log(traceback.format_exc())
            continue
        for r in got:
            h.log(f"   {r.scenario}: gitpub {r.gitpub_s:.3f}s, baseline {r.baseline_s:.3f}s, "
                  f"ratio {r.ratio:.2f}")
        h.log(f"   ({time.perf_counter() - t0:.0f} s)")
        rows.extend(got)

    profiles: list[Profile] = []
    if args.profile:
        for r in rows:
            if r.met is False and r.profile is not None:
                slug = "".join(c if c.isalnum() else "-" for c in r.scenario.lower())[:60]
                d = fresh_dir(PROFILES / slug)
                h.log(f"== profiling: {r.scenario}")
                try:
                    r.profile(d)
                except Exception as exc:
                    errors.append(f"profile of {r.scenario}: {exc}")
                    continue
                prof = Profile(r.scenario, sorted([*d.glob("*.prof"), *d.glob("*.txt")]))
                for f in prof.files:
                    prof.lines += summarize(f)
                (d / "summary.txt").write_text("\n".join(prof.lines) + "\n")
                profiles.append(prof)

    elapsed = time.perf_counter() - started
    print()
    print(console_table(rows))
    for err in errors:
        print(f"error: {err}")
    for p in profiles:
        print(f"\nprofile: {p.scenario}")
        print("\n".join(p.lines))
    full = not args.quick and not args.only
    out = args.output or (ROOT / "BENCHMARKS.md" if full else WORK / "last-run.md")
    mode = "full run" if full else "partial run: " + " ".join(
        (["--quick"] if args.quick else []) + [f"--only {o}" for o in args.only])
    info = machine()
    info["load"] = f"{load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
    info["canary"] = (f"{canary_before * 1000:.0f} ms at the start, "
                      f"{fs_canary(h.sites) * 1000:.0f} ms at the end")
    info["sites"] = (f"tmpfs ({h.sites.parent})" if h.sites_on_tmpfs
                     else f"disk ({h.sites})")
    write_markdown(out, rows, info, elapsed, mode, errors, profiles)
    print(f"\nsuite took {elapsed:.0f} s; results written to {out}")
    return 1 if errors else 0


QUIET_CANARY = 0.15  # seconds for 2,000 files; a quiet disk here takes 0.05
SETTLE_LIMIT = 120.0


def settle_filesystem(where: Path) -> float:
    """Wait (up to two minutes) until file creation under bench/.work is quick again, so the
    run does not start in the slow minute after a mass deletion (e.g. the previous run's
    cleanup); returns the last canary."""
    deadline = time.monotonic() + SETTLE_LIMIT
    canary = fs_canary(where)
    while canary > QUIET_CANARY and time.monotonic() < deadline:
        print(f"waiting for the filesystem to settle (canary {canary * 1000:.0f} ms)",
              file=sys.stderr, flush=True)
        time.sleep(15)
        canary = fs_canary(where)
    return canary


def external(name: str, quick: bool) -> list[Row] | None:
    """Rows from bench/<name>.py's ``run() -> list[dict]`` (None if the module is absent)."""
    try:
        module = importlib.import_module(f"bench.{name}")
    except ModuleNotFoundError as e:
        if e.name == f"bench.{name}":
            return None
        raise
    fn = module.run
    params = inspect.signature(fn).parameters
    kwargs: dict[str, object] = {}
    if "quick" in params:
        kwargs["quick"] = quick
    elif quick and "runs" in params:
        kwargs["runs"] = 5  # a smoke check, not a measurement
    rows: list[Row] = []
    for d in fn(**kwargs):
        g, b = float(d["gitpub_median_s"]), float(d["baseline_median_s"])
        target = d.get("target")
        rows.append(Row(str(d["scenario"]), g, b,
                        None if target is None else float(target), str(d["runs"]),
                        str(d.get("gitpub", f"bench/{name}.py")),
                        str(d.get("baseline", f"bench/{name}.py")), str(d.get("notes", ""))))
    return rows


if __name__ == "__main__":
    sys.exit(main())
