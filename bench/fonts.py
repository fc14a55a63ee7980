"""Font subset regeneration: gitpub against a full ``pyftsubset`` run of the same subset.

The case that matters is a push that lost a race only in the derived font file: gitpub
regenerates the subset from the union of both sides' characters, on the critical path of the
push. The bench reproduces it with real data — the corpus' articles (``docs/*.md``, about 3,900
CJK characters) and Debian's WenQuanYi Micro Hei (``wqy-microhei.ttc`` face 0, 5 MB) — and times,
as the median of several runs after a warm-up, each in a fresh process (a push regenerates in the
process that pushes, which has not imported fontTools yet):

- *baseline*: ``pyftsubset`` of the merged character set to WOFF2 with gitpub's options
  (``--no-hinting --no-harfbuzz-repacker``; pyftsubset has no brotli-quality flag: 11);
- *conflict*: gitpub regenerating after a font-only conflict: its cache is warm for the old set
  (every article but the newest that brings a character the font has), the new set adds that
  article's characters;
- *cache hit*: the same regeneration repeated (the other node, or a retried push, asks again);
- for information: the conflict with ``PYFTSUBSET_PROFILE`` (brotli quality 11, pyftsubset's
  bytes exactly) and a cold subset with an empty cache (a fresh clone's first ``prepare``).

It checks the outputs too: with ``PYFTSUBSET_PROFILE`` gitpub's file must equal pyftsubset's byte
for byte, and with the default profile decompress to the same font. Run
``python -m bench.fonts [RUNS]`` from the project root; ``run()`` returns the rows for
``python -m bench``. Needs the venv, the font
(``apt-get install -y fonts-wqy-microhei``, or ``GITPUB_BENCH_FONT``) and the corpus bundle
(``../shared/corpus/weekly.bundle`` from the project root, or ``GITPUB_CORPUS``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")
FACE = 0

# A new process regenerating one subset, as a push would: prints the in-process timings.
CHILD = """
import json, sys, time
t0 = time.perf_counter()
from pathlib import Path
from gitpub.fonts import subset as fonts
font_path, chars_path, cache, out, profile, face = sys.argv[1:7]
font = Path(font_path).read_bytes()
chars = Path(chars_path).read_text(encoding="utf-8")
profile = {"default": fonts.DEFAULT_PROFILE, "pyftsubset": fonts.PYFTSUBSET_PROFILE}[profile]
got = fonts.subset_font(font, face=int(face), chars=chars, flavor="woff2", cache_dir=cache or None,
                        profile=profile)
Path(out).write_bytes(got.data)
print(json.dumps({"cached": got.cached, "in_process": time.perf_counter() - t0,
                  "timings": dict(got.timings)}))
"""


class BenchError(RuntimeError):
    """The bench cannot run here, or its outputs are wrong (so its figures would mean nothing)."""


def python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def corpus_bundle() -> Path:
    for candidate in (os.environ.get("GITPUB_CORPUS", ""),
                      str(ROOT.parent / "shared" / "corpus" / "weekly.bundle")):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise BenchError("corpus not found: set GITPUB_CORPUS to weekly.bundle")


def font_path() -> Path:
    path = Path(os.environ.get("GITPUB_BENCH_FONT", FONT))
    if not path.is_file():
        raise BenchError(f"{path} is missing: apt-get install -y fonts-wqy-microhei")
    return path


@dataclass
class Workload:
    font: Path
    old_chars: Path
    new_chars: Path
    article: str
    added: str  # the characters the new article brings that the font has
    total: int  # characters in the new set


def prepare(work: Path) -> Workload:
    """Clone the corpus, pick the newest article bringing new characters, write both sets."""
    from fontTools.ttLib import TTFont  # type: ignore[import-untyped]

    from gitpub.fonts.subset import charset_of

    clone = work / "corpus"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(corpus_bundle()), str(clone)],
                   check=True, capture_output=True)
    texts = {p.name: p.read_bytes() for p in sorted((clone / "docs").glob("*.md"))}
    if not texts:
        raise BenchError("the corpus has no docs/*.md")
    font = font_path()
    with TTFont(str(font), fontNumber=FACE, lazy=True) as ttfont:
        covered = set(map(chr, ttfont.getBestCmap()))

    def issue(name: str) -> int:
        match = re.fullmatch(r"issue-(\d+)\.md", name)
        return int(match.group(1)) if match else -1

    everything = charset_of(texts.values())
    for name in sorted(texts, key=issue, reverse=True):
        old = charset_of(data for other, data in texts.items() if other != name)
        added = (everything - old) & covered
        if added:
            break
    else:
        raise BenchError("no article brings a character of its own")
    old_path, new_path = work / "old.txt", work / "new.txt"
    old_path.write_text("".join(sorted(old)), encoding="utf-8")
    new_path.write_text("".join(sorted(everything)), encoding="utf-8")
    return Workload(font, old_path, new_path, name, "".join(sorted(added)), len(everything))


def _timed(argv: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, cwd=ROOT, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv[:3])}… exited {proc.returncode}: "
                         f"{proc.stderr.decode(errors='replace')[-1500:]}")
    return elapsed, proc.stdout.decode()


def pyftsubset(w: Workload, out: Path) -> float:
    from gitpub.fonts.subset import DEFAULT_PROFILE

    script = Path(python()).with_name("pyftsubset")
    head = [str(script)] if script.exists() else [python(), "-m", "fontTools.subset"]
    argv = [*head, str(w.font), f"--font-number={FACE}", f"--text-file={w.new_chars}",
            "--flavor=woff2", *DEFAULT_PROFILE.pyftsubset_args(), f"--output-file={out}"]
    return _timed(argv)[0]


def gitpub(w: Workload, chars: Path, cache: Path | None, out: Path, profile: str,
           ) -> tuple[float, dict[str, object]]:
    elapsed, stdout = _timed([python(), "-c", CHILD, str(w.font), str(chars),
                              str(cache or ""), str(out), profile, str(FACE)])
    return elapsed, json.loads(stdout.strip().splitlines()[-1])


def warm_cache(w: Workload, directory: Path, profile: str) -> None:
    """A cache as a node has it after publishing the old set: index, glyphs, the old subset."""
    gitpub(w, w.old_chars, directory, directory.parent / f"old-{profile}.woff2", profile)


def woff2_payload(data: bytes) -> bytes:
    """The decompressed font data of a WOFF2 file (to compare files at different qualities)."""
    import io

    import brotli  # type: ignore[import-untyped]
    from fontTools.ttLib.woff2 import WOFF2Reader, woff2DirectorySize

    reader = WOFF2Reader(io.BytesIO(data))
    start = woff2DirectorySize + sum(len(e.toString()) for e in reader.tables.values())
    return bytes(brotli.decompress(data[start : start + reader.totalCompressedSize]))


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _breakdown(samples: list[dict[str, object]]) -> str:
    keys = ("subset", "encode", "assemble", "brotli")
    parts = []
    for key in keys:
        values = [float(s["timings"][key]) for s in samples  # type: ignore[index]
                  if key in s["timings"]]  # type: ignore[operator]
        if values:
            parts.append(f"{key} {_median(values):.2f}")
    inproc = _median([float(s["in_process"]) for s in samples])  # type: ignore[arg-type]
    return f"in-process {inproc:.2f} s ({', '.join(parts)})"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure(runs: int, *, cold: bool = True,
            say: Callable[[str], None] = _say) -> list[dict[str, object]]:
    from gitpub.fonts.subset import DEFAULT_PROFILE

    brotli = f"brotli q{DEFAULT_PROFILE.brotli_quality}, window 2**{DEFAULT_PROFILE.brotli_window}"
    profiles = ("default", "pyftsubset")
    with tempfile.TemporaryDirectory(prefix="gitpub-bench-fonts-") as tmp:
        work = Path(tmp)
        w = prepare(work)
        say(f"fonts: {w.font.name} face {FACE}; {w.total} characters; the new article "
            f"{w.article} adds {len(w.added)} ({w.added})")
        warm = {p: work / f"warm-{p}" / "cache" for p in profiles}
        for p, directory in warm.items():
            directory.parent.mkdir()
            warm_cache(w, directory, p)

        jobs_all = ["baseline", "conflict", "hit", "conflict-q11", *(["cold"] if cold else [])]
        times: dict[str, list[float]] = {k: [] for k in jobs_all}
        samples: dict[str, list[dict[str, object]]] = {k: [] for k in jobs_all}
        base_out = work / "pyftsubset.woff2"
        outs = {p: work / f"gitpub-{p}.woff2" for p in profiles}
        for i in range(runs + 1):  # run 0 is the warm-up: page cache, pyc files
            jobs = jobs_all[i % len(jobs_all):] + jobs_all[: i % len(jobs_all)]  # spread drift
            run_dir = work / f"run-{i}"
            for job in jobs:
                cache = run_dir / job / "cache"
                if job == "baseline":
                    elapsed, sample = pyftsubset(w, base_out), {}
                elif job in ("conflict", "conflict-q11"):
                    p = "default" if job == "conflict" else "pyftsubset"
                    shutil.copytree(warm[p], cache)  # untimed: the state before the conflict
                    elapsed, sample = gitpub(w, w.new_chars, cache, outs[p], p)
                    if sample["cached"]:
                        raise BenchError("the conflict regeneration hit the cache")
                elif job == "hit":
                    shutil.copytree(warm["default"], cache)
                    gitpub(w, w.new_chars, cache, work / "hit-prime.woff2", "default")  # untimed
                    elapsed, sample = gitpub(w, w.new_chars, cache, work / "hit.woff2", "default")
                    if not sample["cached"]:
                        raise BenchError("the repeated regeneration missed the cache")
                else:
                    cache.parent.mkdir(parents=True, exist_ok=True)
                    elapsed, sample = gitpub(w, w.new_chars, cache, work / "cold.woff2", "default")
                if i:
                    times[job].append(elapsed)
                    samples[job].append(sample)
            shutil.rmtree(run_dir, ignore_errors=True)
            say(f"fonts: run {i}/{runs} " + ("(warm-up)" if not i else ", ".join(
                f"{k} {v[-1]:.2f}s" for k, v in times.items() if v)))

        baseline = base_out.read_bytes()
        identical = outs["pyftsubset"].read_bytes() == baseline
        default = outs["default"].read_bytes()
        same_font = woff2_payload(default) == woff2_payload(baseline)
        if not (identical and same_font):
            raise BenchError(f"outputs differ from pyftsubset's: PYFTSUBSET_PROFILE identical="
                             f"{identical}, default decodes to the same font={same_font}")
        size_note = (f"{len(default):,} bytes vs pyftsubset's {len(baseline):,}, the same font "
                     "once decompressed")

    base = _median(times["baseline"])
    pyft = f"pyftsubset --flavor=woff2 {' '.join(DEFAULT_PROFILE.pyftsubset_args())} (process)"
    rows: list[dict[str, object]] = []

    def row(scenario: str, job: str, target: float | None, what: str, notes: str) -> None:
        g = _median(times[job])
        rows.append({"scenario": scenario, "gitpub_median_s": g, "baseline_median_s": base,
                     "ratio": g / base, "runs": runs, "target": target, "gitpub": what,
                     "baseline": pyft, "notes": notes})

    adds = f"{w.total} chars, +{len(w.added)} from {w.article}"
    row("fonts: regenerate after a font-only conflict (WOFF2)", "conflict", 0.5,
        f"subset_font in a new process, cache warm for the old set, {brotli}",
        f"{adds}; {_breakdown(samples['conflict'])}; {size_note}")
    row("fonts: repeated identical regeneration (cache hit)", "hit", 0.05,
        "subset_font in a new process, the same set again",
        _breakdown(samples["hit"]).split(" (")[0])
    row("fonts: conflict regeneration, PYFTSUBSET_PROFILE (info)", "conflict-q11", None,
        "subset_font in a new process, cache warm, brotli q11, window 2**22",
        f"bytes identical to pyftsubset's; {_breakdown(samples['conflict-q11'])}")
    if cold:
        row("fonts: cold subset, empty cache (info)", "cold", None,
            f"subset_font in a new process, empty cache, {brotli}",
            _breakdown(samples["cold"]))
    return rows


def run(runs: int = 5, quick: bool = False) -> list[dict[str, object]]:
    """The rows for ``python -m bench``: medians in seconds, ratios to pyftsubset."""
    return measure(2 if quick else runs, cold=not quick)


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 5
    try:
        rows = measure(runs)
    except BenchError as error:
        print(f"bench.fonts: {error}", file=sys.stderr)
        return 1
    print(f"{'scenario':<54} {'gitpub':>8} {'pyftsubset':>10} {'ratio':>6} {'target':>7}")
    for r in rows:
        target = "" if r["target"] is None else f"<={r['target']}"
        print(f"{r['scenario']:<54} {r['gitpub_median_s']:7.3f}s {r['baseline_median_s']:9.3f}s "
              f"{r['ratio']:6.3f} {target:>7}")
    for r in rows:
        print(f"- {r['scenario']}: {r['notes']}")
    print(f"(median of {runs} runs each, after a warm-up; every run is a new process)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
