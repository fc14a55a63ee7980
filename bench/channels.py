"""What a channel send costs: gitpub's durable send against the bare side effect.

For each kind, published jobs are set up whose channel is recorded ``pending`` (a ``push``
killed right after the payload was frozen: untimed). Then, alternating:

- gitpub: the job's channels driven in process (``Driver.drive_all``), as ``push`` drives
  them: the job store fetched, then one atomic compare-and-swap push to the remote of the
  account's ledger (the lease taken, the send counted in the rate window), the SENDING record
  (a job-state commit) and the intent's claim; the send; one more atomic push of the outcome,
  the lease given back and the claim folded into the ledger;
- baseline: the same side effect alone — the same command through the same step runner, or
  the same POST with httpx to the same local server.

So the ratio is the price of "never twice, never maybe" on top of the send itself. Run
``python -m bench.channels [RUNS]``; ``run()`` returns the rows for the suite's report.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.common import hermetic_env, median, python

SENT = '{"outcome":"sent","remote_id":"1","url":"https://social.example/1"}'


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b'{"id": "1", "url": "https://social.example/1"}'
        self.send_response(201)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _git(cwd: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _site(top: Path, env: dict[str, str], channel: str) -> Path:
    remote, site = top / "remote.git", top / "site"
    _git(top, env, "init", "-q", "--bare", "-b", "main", str(remote))
    _git(top, env, "init", "-q", "-b", "main", str(site))
    (site / "posts").mkdir()
    (site / "posts" / "welcome.md").write_text("# Welcome\n")
    (site / ".gitpub.yaml").write_text(
        'remote: origin\nbranch: main\narticles: ["posts/**/*.md"]\nnode: bench\n'
        'site: {url: "https://blog.example"}\nchannels:\n' + channel)
    _git(site, env, "add", ".")
    _git(site, env, "commit", "-q", "-m", "Start")
    _git(site, env, "remote", "add", "origin", str(remote))
    _git(site, env, "push", "-q", "origin", "main")
    _git(site, env, "fetch", "-q", "origin")
    return site


def _pending_jobs(site: Path, env: dict[str, str], n: int) -> list[str]:
    ids = []
    for i in range(n):
        text = f"---\ntitle: Bench {i}\n---\n\n# Bench {i}\n\nText {i}.\n"
        p = subprocess.run([python(), "-m", "gitpub", "-C", str(site), "prepare", "--json",
                            "--key", f"b{i}", "--to", f"posts/b{i}.md", "-"],
                           input=text.encode(), env=env, capture_output=True, check=True)
        ids.append(json.loads(p.stdout)["job_id"])
        subprocess.run([python(), "-m", "gitpub", "-C", str(site), "push"],
                       env={**env, "GITPUB_CRASH_AT": "channels.initialized"},
                       capture_output=True, check=False)
    return ids


def _measure(site: Path, ids: list[str], baseline: Any) -> tuple[list[float], list[float]]:
    from gitpub.app.distribution import driver_for
    from gitpub.runtime.session import open_session

    ours: list[float] = []
    theirs: list[float] = []
    with open_session(site, lambda _m: None) as ctx:
        for n, job_id in enumerate(ids):
            job = ctx.store.load(job_id)
            assert job is not None

            def send(job: Any = job) -> None:
                reports, errors = driver_for(ctx).drive_all([job], only_named=True)
                assert not errors and [r.exit_code for r in reports] == [0], (reports, errors)

            pair = [(send, ours), (baseline, theirs)]
            for fn, bucket in (pair if n % 2 == 0 else pair[::-1]):
                t0 = time.perf_counter()
                fn()
                bucket.append(time.perf_counter() - t0)
    return ours[1:], theirs[1:]  # the first pair is the warm-up


def command_row(runs: int, env: dict[str, str]) -> dict[str, object]:
    from gitpub.config.model import Command
    from gitpub.runtime.steps import Scratch, run

    with tempfile.TemporaryDirectory(prefix="gitpub-bench-channels-") as tmp:
        argv = ["sh", "-c", f"cat >/dev/null; echo '{SENT}'"]
        channel = (f"  - {{name: social, kind: command, account: news, required: true, "
                   f"send: {json.dumps(argv)}}}\n")
        site = _site(Path(tmp), env, channel)
        ids = _pending_jobs(site, env, runs + 1)
        scratch_root = site / ".git" / "pub" / "scratch"

        def baseline() -> None:
            with Scratch(scratch_root, "bench") as scratch:
                result = run(Command("bench", tuple(argv), 30.0), scratch, stdin=b"{}")
            assert result.returncode == 0

        ours, theirs = _measure(site, ids, baseline)
    return _row("channel send, command (`sh -c echo`)", ours, theirs,
                "the same command through the same step runner")


def webhook_row(runs: int, env: dict[str, str]) -> dict[str, object]:
    import httpx

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/posts"
    try:
        with tempfile.TemporaryDirectory(prefix="gitpub-bench-channels-") as tmp:
            channel = (f"  - {{name: hook, kind: webhook, account: a, required: true, "
                       f"url: {json.dumps(url)}}}\n")
            site = _site(Path(tmp), env, channel)
            ids = _pending_jobs(site, env, runs + 1)

            def baseline() -> None:
                with httpx.Client(timeout=30) as client:
                    r = client.post(url, content=b"{}", headers={"Idempotency-Key": "k"})
                assert r.status_code == 201

            ours, theirs = _measure(site, ids, baseline)
    finally:
        server.shutdown()
        server.server_close()
    return _row("channel send, webhook (local HTTP server)", ours, theirs,
                "the same POST with httpx")


def _row(scenario: str, ours: list[float], theirs: list[float],
         baseline: str) -> dict[str, object]:
    return {"scenario": scenario, "gitpub_median_s": median(ours),
            "baseline_median_s": median(theirs), "runs": len(ours),
            "gitpub": "`Driver.drive_all`: fetch, lease+SENDING+claim, send, outcome "
                      "(in process)",
            "baseline": baseline,
            "notes": f"gitpub adds {1000 * (median(ours) - median(theirs)):.0f} ms per send: "
                     "a fetch and 2 atomic pushes to the remote (ledger, job state, claim)"}


def run(runs: int = 9) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="gitpub-bench-home-") as home:
        env = hermetic_env(Path(home))
        return [command_row(runs, env), webhook_row(runs, env)]


if __name__ == "__main__":
    for row in run(int(sys.argv[1]) if len(sys.argv) > 1 else 9):
        print(json.dumps(row))
