"""Helpers for the channel tests: configuring channels on a test site, publishing, reading the
channel records back, counting posts on a file "platform"."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from conftest import Site, git

TOOL = Path(__file__).resolve().parent / "channel_tool.py"
FAST_RETRY = "{max_attempts: 3, backoff_base: 0.05, backoff_max: 0.2, jitter: 0}"


def article(n: int | str) -> str:
    return (f"---\ntitle: Post {n}\n---\n\n# Post {n}\n\nThe text of post {n}, with a "
            f"picture.\n\n![a picture](images/p{n}.png)\n")


def command_channel(platform: Path, *, name: str = "social", required: bool = True,
                    probe: bool = True, timeout: float = 5, lease: float | None = None,
                    retry: str = FAST_RETRY, extra: str = "",
                    send: list[str] | None = None) -> str:
    tool = [sys.executable, str(TOOL)]
    lines = [f"  - name: {name}", "    kind: command", "    account: news",
             f"    required: {json.dumps(required)}", f"    timeout: {timeout}",
             f"    retry: {retry}",
             f"    send: {json.dumps(send or [*tool, 'send', str(platform)])}"]
    if probe:
        lines.append(f"    probe: {json.dumps([*tool, 'probe', str(platform)])}")
    if lease is not None:
        lines.append(f"    lease: {lease}")
    return "\n".join(lines) + "\n" + extra


def webhook_channel(url: str, *, name: str = "hook", required: bool = True,
                    timeout: float = 2, retry: str = FAST_RETRY, extra: str = "") -> str:
    return "\n".join([f"  - name: {name}", "    kind: webhook", "    account: hook-account",
                      f"    required: {json.dumps(required)}", f"    timeout: {timeout}",
                      f"    retry: {retry}", f"    url: {json.dumps(url)}"]) + "\n" + extra


def configure(site: Site, *channels: str, site_url: str = "https://blog.example",
              live: str | None = None) -> None:
    text = f"site:\n  url: {json.dumps(site_url)}\n  path: \"/{{stem}}/\"\n"
    if live is not None:
        text += f"  live: {live}\n"
    if channels:
        text += "channels:\n" + "".join(channels)
    site.write_config(text)


def prepare(site: Site, key: str = "k1", path: str = "posts/hello.md",
            text: str | None = None) -> str:
    r = site.call("prepare", "--json", "--key", key, "--to", path, "-",
                  input=text or article(key))
    assert r.code == 0, r.err
    job_id: str = r.json()["job_id"]
    return job_id


def posts(platform: Path) -> list[dict[str, Any]]:
    if not platform.exists():
        return []
    return [json.loads(line) for line in platform.read_text().splitlines() if line.strip()]


def status(site: Site, job_id: str) -> dict[str, Any]:
    r = site.call("status", "--json", job_id)
    assert r.code == 0, r.err
    data: dict[str, Any] = r.json()
    return data


def channel(site: Site, job_id: str, name: str = "social") -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in status(site, job_id)["channels"]
                                 if c["channel"] == name)
    return found


def events(site: Site, job_id: str) -> list[dict[str, Any]]:
    r = site.call("log", "--json", job_id)
    assert r.code == 0, r.err
    rows: list[dict[str, Any]] = r.json()["events"]
    return rows


def settled_intents(site: Site, ledger: str) -> list[str]:
    """The intents a ledger (on the remote) lists as settled (its commit's tree)."""
    out = git(site.remote, "ls-tree", "-r", "--name-only", ledger, "settled/")
    return sorted(path.rsplit("/", 1)[1] for path in out.split())
