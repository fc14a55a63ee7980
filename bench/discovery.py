"""Finding the repository: what gitpub's discovery costs next to asking git.

Every command starts by finding its repository (``gitpub.git.locate``). With none of git's
locating variables set, dulwich answers in-process; with ``GIT_DIR`` and friends set, gitpub asks
``git rev-parse``. Both are measured against the baseline a tool would otherwise pay — one
``git rev-parse --git-dir --show-toplevel`` process — in a subdirectory of a checkout and of a
linked worktree, in-process, alternating, after a warm-up.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from bench.common import Harness, fresh_dir, median
from bench.scenarios import Row, Sizes, alternate

LOOPS = 50  # calls per sample: one call is well under the timer's useful resolution


def _layout(h: Harness) -> tuple[Path, Path]:
    base = fresh_dir(h.sites / "discovery")
    repo = base / "repo"
    h.git(base, "init", "-q", "-b", "main", str(repo))
    (repo / "posts").mkdir()
    (repo / "posts/a.md").write_text("# a\n")
    h.git(repo, "add", ".")
    h.git(repo, "commit", "-q", "-m", "start")
    h.git(repo, "worktree", "add", "-q", "-b", "side", str(base / "wt"))
    return repo / "posts", base / "wt" / "posts"


def _loop(fn: object) -> float:
    assert callable(fn)
    t0 = time.perf_counter()
    for _ in range(LOOPS):
        fn()
    return (time.perf_counter() - t0) / LOOPS


def discovery(h: Harness, s: Sizes) -> list[Row]:
    from gitpub.git.locate import locate, locate_with_git

    checkout, linked = _layout(h)
    env = {k: v for k, v in h.env.items() if not k.startswith("GIT_DIR")}

    def rev_parse(where: Path) -> None:
        subprocess.run(["git", "rev-parse", "--git-dir", "--show-toplevel"], cwd=where, env=env,
                       capture_output=True, check=True)

    def pair(where: Path) -> tuple[list[float], list[float]]:
        assert locate(where) == locate_with_git(where)
        return alternate(s.runs, lambda: _loop(lambda: locate(where)),
                         lambda: _loop(lambda: rev_parse(where)))

    rows = []
    for name, where in (("a checkout", checkout), ("a linked worktree", linked)):
        xs, ys = pair(where)
        rows.append(Row(f"discovery in {name}", median(xs), median(ys), None, str(s.runs),
                        f"`locate()` in a subdirectory of {name}: dulwich, in-process",
                        "`git rev-parse --git-dir --show-toplevel` process",
                        f"per call, {LOOPS} per sample", xs, ys))
    saved = os.environ.get("GIT_DIR")
    os.environ["GIT_DIR"] = str(checkout.parent / ".git")
    try:
        xs, ys = pair(checkout)
    finally:
        if saved is None:
            del os.environ["GIT_DIR"]
        else:
            os.environ["GIT_DIR"] = saved
    rows.append(Row("discovery with GIT_DIR set", median(xs), median(ys), None, str(s.runs),
                    "`locate()` with GIT_DIR set: one `git rev-parse` with the variables",
                    "`git rev-parse --git-dir --show-toplevel` process",
                    f"per call, {LOOPS} per sample", xs, ys))
    return rows
