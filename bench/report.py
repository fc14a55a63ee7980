"""The results: the console table, the machine description, profiles, BENCHMARKS.md."""

from __future__ import annotations

import datetime as dt
import os
import platform
import pstats
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import ROOT, python
from bench.scenarios import Row

HEADER = ("scenario", "gitpub median", "baseline median", "ratio", "target", "met?", "runs")


def fmt_s(x: float) -> str:
    if x < 0.01:
        return f"{x * 1000:.2f} ms"
    return f"{x:.3f} s" if x < 10 else f"{x:.1f} s"


def cells(row: Row) -> tuple[str, ...]:
    met = {True: "yes", False: "**NO**", None: "-"}[row.met]
    target = "-" if row.target is None else f"≤ {row.target:g}"
    return (row.scenario, fmt_s(row.gitpub_s), fmt_s(row.baseline_s), f"{row.ratio:.2f}",
            target, met, row.runs)


def console_table(rows: list[Row]) -> str:
    data = [HEADER, *(tuple(c.replace("**", "") for c in cells(r)) for r in rows)]
    widths = [max(len(r[i]) for r in data) for i in range(len(HEADER))]
    lines = []
    for n, r in enumerate(data):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows: list[Row]) -> str:
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    out += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    return "\n".join(out)


def _cmd(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False,
                              timeout=30).stdout.strip()
    except OSError:
        return "?"


def machine() -> dict[str, str]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        from dulwich import __version__ as dv

        dulwich = ".".join(str(p) for p in dv)
    except ImportError:
        dulwich = "?"
    return {
        "nproc": str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                     else os.cpu_count()),
        "cpu": model,
        "python": _cmd([python(), "-c", "import sys; print(sys.version.split()[0])"]),
        "git": _cmd(["git", "--version"]).removeprefix("git version "),
        "dulwich": dulwich,
        "os": platform.platform(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


# -- profiles ------------------------------------------------------------------------------

@dataclass
class Profile:
    scenario: str
    files: list[Path]
    lines: list[str] = field(default_factory=list)


def _where(filename: str, line: int, name: str) -> str:
    if filename == "~":
        return name
    for marker in ("site-packages/", str(ROOT) + "/", "/lib/python3"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
            break
    return f"{filename}:{line}({name})"


def summarize(path: Path, top: int = 14) -> list[str]:
    """A pyinstrument call tree as it is (nodes under 2 % pruned); for a cProfile file, its
    top functions by cumulative time (gitpub's own, which is what can be changed) and the top
    functions by self time."""
    if path.suffix == ".txt":
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
        body = [ln for ln in text if ln.strip() and not ln.lstrip().startswith(
            ("_     ._", "/_//_///", "/   _/", "To view this report"))]
        return [f"{path.name}:", *body]
    st = pstats.Stats(str(path))
    raw = st.stats  # type: ignore[attr-defined]
    total = max((v[3] for v in raw.values()), default=0.0)
    rows = [(k, v) for k, v in raw.items()]
    out = [f"{path.name}: {total:.3f} s in the profiled process"]
    ours = sorted(((k, v) for k, v in rows if "/gitpub/" in k[0]), key=lambda kv: -kv[1][3])
    out.append("  gitpub functions by cumulative time:")
    for (f, ln, name), (_cc, nc, tt, ct, _callers) in ours[:top]:
        out.append(f"    {ct:7.3f} s cum {tt:7.3f} s self {nc:7d} calls  {_where(f, ln, name)}")
    out.append("  all functions by self time:")
    for (f, ln, name), (_cc, nc, tt, ct, _callers) in sorted(rows, key=lambda kv: -kv[1][2])[
            :top]:
        out.append(f"    {tt:7.3f} s self {ct:7.3f} s cum {nc:7d} calls  {_where(f, ln, name)}")
    return out


# -- BENCHMARKS.md ----------------------------------------------------------------------

def write_markdown(path: Path, rows: list[Row], info: dict[str, str], elapsed: float,
                   mode: str, errors: list[str], profiles: list[Profile]) -> None:
    lines = [
        "# Benchmarks",
        "",
        f"Written by `python -m bench` ({mode}) on {info['date']}; the suite took "
        f"{elapsed:.0f} s.",
        "",
        f"Machine: {info['nproc']} CPUs ({info['cpu']}), {info['os']}; Python {info['python']}, "
        f"git {info['git']}, dulwich {info['dulwich']}. Load average (1 min): "
        f"{info.get('load', '?')} — the machine is shared, so figures from one run are "
        f"compared only with figures from the same run. Sites: {info.get('sites', '?')}; "
        f"file-creation canary (2,000 empty files, `common.fs_canary`): "
        f"{info.get('canary', '?')} (quiet ext4 here: about 50 ms; tmpfs: about 20 ms).",
        "",
        "ratio = gitpub median / baseline median, both measured in the same run, alternating "
        "sides after a warm-up. gitpub runs through its CLI in a new process each time, with a "
        "hermetic environment (own HOME, no system git config); git is real git everywhere.",
        "",
        markdown_table(rows),
        "",
        "## What each row measures",
        "",
    ]
    for r in rows:
        lines.append(f"- **{r.scenario}** — gitpub: {r.gitpub_what}; baseline: "
                     f"{r.baseline_what}." + (f" {r.notes}." if r.notes else ""))
        if len(r.gitpub_samples) > 1 or len(r.baseline_samples) > 1:
            lines.append("  Samples (s): gitpub " + ", ".join(f"{x:.3f}" for x in
                                                             r.gitpub_samples)
                         + "; baseline " + ", ".join(f"{x:.3f}" for x in r.baseline_samples)
                         + ".")
    lines += [
        "",
        "## Method",
        "",
        "- Fixtures are built by the runner under `bench/.work/` (cached between runs: "
        "`--fresh` rebuilds them): the corpus (`weekly.bundle`, cloned bare as the remote, plus "
        "a commit adding `.gitpub.yaml` with `articles: [\"docs/**/*.md\"]`) and synthetic "
        "histories written with `git fast-import`.",
        "- Every publish run writes a new article under a new key; the remote grows by one "
        "commit per run on both sides (both sides share one site and one remote, so they see "
        "the same repository state).",
        "- Baseline pipeline: `bench/scenarios.py` `BASELINE_SCRIPT` (one `sh` process).",
        "- Sites (clones, remotes, worktrees) are on tmpfs (`/dev/shm`), fixtures cached on "
        "disk. The VMs' disk is ext4 without a journal: after deletions, every file created "
        "in the next minute or more skips the recently deleted inodes of its block group "
        "(kernel `recently_deleted()`, 80 % of a `perf` profile of file creation). On disk "
        "the baseline's own `worktree remove` made later baseline runs slower (0.27 s → 0.51 "
        "s within seven corpus runs; 12-74 s instead of 2-3 s for 50,000 files), which flatters "
        "gitpub erratically. tmpfs matches the quiet disk (corpus baseline 0.155 s on tmpfs, "
        "0.165-0.17 s on a quiet disk) and stays quiet. `--on-disk` measures on disk (waiting "
        "for a quiet filesystem first; 50,000-file pairs spaced 65 s apart after `sync`). "
        "Neither reflects fsync cost on real hardware: here an fsync takes ~20 µs, and gitpub "
        "issues ~100 per published article, prepare and push together; git's defaults "
        "issue none for loose objects.",
        "- Throughput: 100 x (`prepare` + `push`) in one site, against 100 x the mean of 20 "
        "single jobs published into a fresh site, measured between every fifth job of the "
        "sequence (same background load on both sides; mean, because a total carries every "
        "outlier).",
        "- Confirm: a job is pushed with `GITPUB_CRASH_AT=delivery.pushed` (SIGKILL right after "
        "`git push` succeeded: a lost reply), so it rests in PUSHING with its commit on the "
        "remote; `git pub push JOB` then confirms it by trailers. The in-process row times "
        "only `gitpub.verify.probe.find_job_commit` on the fetched remote tip.",
        "- Confirm (CI): `bench/confirm_ci.py`. First run: `git pub confirm --no-push-notes` "
        "in a clone of the 100,000-commit remote with no notes (every sample a first run). "
        "Second run: the remote's notes hold the last run's ledger, one new commit is pushed, "
        "a fresh clone runs `git pub confirm` (pushing its notes). As CI does: the same in a "
        "`--depth=1` clone over the transport, clone included. Probe: the content-bound "
        "`find_job_commit` against the trailers-only search it replaced, in-process.",
        "- Job store: one job is prepared and pushed for real; the others are written with "
        "`git fast-import` as PUBLISHED state commits in gitpub's format (`JobRecord.to_json`, "
        "`Manifest`, `job_id_for_key`, loose refs), checked with `JobStore.load`.",
        "- Two writers: two clones of one bare remote, each a thread running 50 x (`prepare`; "
        "`push`; `push JOB` again while the job is not PUBLISHED); checked afterwards: every "
        "job's commit is on the remote branch exactly once and every job is PUBLISHED.",
    ]
    if errors:
        lines += ["", "## Errors", ""] + [f"- {e}" for e in errors]
    if profiles:
        lines += ["", "## Profiles of the misses", "",
                  "One extra gitpub run per missed scenario under pyinstrument (a sampling "
                  "profiler; cProfile when pyinstrument is not installed), files in "
                  "`bench/.work/profiles/`. Profiling adds overhead: read the proportions, "
                  "not the absolute times.", ""]
        for p in profiles:
            lines += [f"### {p.scenario}", "", "```", *p.lines, "```", ""]
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
