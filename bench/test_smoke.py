"""A smoke test of the benchmark runner — by hand only, not part of the test run
(``testpaths`` is ``tests``)::

    .venv/bin/python -m pytest bench/test_smoke.py -q

It runs three scenarios in ``--quick`` mode (about a minute) and checks that the runner builds
its fixtures, verifies its runs and writes a results table.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.common import ROOT, python


def test_quick_run_writes_a_table(tmp_path: Path) -> None:
    out = tmp_path / "results.md"
    proc = subprocess.run(
        [python(), "-m", "bench", "--quick", "--no-fonts", "--no-hooks",
         "--only", "publish-corpus", "--only", "confirm", "--only", "job-store",
         "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    text = out.read_text(encoding="utf-8")
    for row in ("| publish one article, corpus", "| confirm a job on the remote",
                "| job store: `git pub status`"):
        assert row in text
    assert "Machine:" in text
