"""``git pub demo``: the whole flow on a throwaway repository, as a user would type it.

It creates a site repository with a local bare remote in a temporary directory, prepares an
article, publishes it to the remote, announces it on a channel (a command that posts to a local
"platform" file: no network), shows the job with its per-channel state, its event history and
the published commit on the remote, and removes everything unless ``--keep``. Under ``--json``
(``quiet``) each step runs with ``--json`` and the report is one object: every command, its exit
status and its own JSON output.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from gitpub.core.errors import EXIT_ERROR, EXIT_OK, GitpubError
from gitpub.git.run import run_git
from gitpub.runtime.steps import run_program
from gitpub.store.jobs import job_id_for_key

ARTICLE = """---
title: Hello from gitpub
date: 2026-11-30
---

# Hello from gitpub

This article was published by a durable, replayable state machine whose database is git.
这篇文章由 gitpub 发布。
"""

CONFIG = """remote: origin
branch: main
articles: ["posts/**/*.md"]
site:
  url: "https://blog.example.org"
  path: "/posts/{{stem}}/"
channels:
  - name: social
    kind: command
    account: "@news"
    required: true
    send: {send}
    probe: {probe}
"""

#: The demo's channel: a "platform" that is a file of posts, one JSON line each. It speaks the
#: command protocol: the payload on stdin, the intent key in the environment, one JSON outcome.
ANNOUNCE = """import json, os, sys
platform, action = sys.argv[1], sys.argv[2]
key = os.environ["GITPUB_INTENT_KEY"]
posts = [json.loads(line) for line in open(platform)] if os.path.exists(platform) else []
if action == "probe":
    found = [p for p in posts if p["key"] == key]
    print(json.dumps({"outcome": "found", "remote_id": found[0]["id"], "url": found[0]["url"]}
                     if found else {"outcome": "not_found"}))
    sys.exit(0)
payload = json.load(sys.stdin)
post = {"id": str(len(posts) + 1), "key": key, "text": payload["title"] + " " + payload["url"]}
post["url"] = "https://social.example/@news/" + post["id"]
with open(platform, "a") as f:
    f.write(json.dumps(post) + "\\n")
print(json.dumps({"outcome": "sent", "remote_id": post["id"], "url": post["url"]}))
"""


def _git(cwd: Path, *args: str) -> str:
    """``git ARGS`` in ``cwd`` (the demo's own repositories, found from there); its output."""
    proc = run_git(args, cwd=cwd)
    if proc.returncode != 0:
        raise GitpubError(f"demo: git {' '.join(args)} failed: "
                          f"{proc.stderr.decode('utf-8', 'replace').strip()}")
    return proc.stdout.decode("utf-8", "replace")


class _Demo:
    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.steps: list[dict[str, Any]] = []

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, flush=True)

    def pub(self, cwd: Path, *args: str, stdin: str | None = None) -> int:
        self.say(f"\n$ git pub {shlex.join(args)}")
        argv = [sys.executable, "-m", "gitpub", *args, *(["--json"] if self.quiet else [])]
        proc = run_program(argv, cwd=cwd, stdin=None if stdin is None else stdin.encode(),
                           capture=self.quiet)
        if self.quiet:
            try:
                output = json.loads(proc.stdout.decode("utf-8", "replace"))
            except ValueError:
                output = None
            self.steps.append({"command": f"git pub {shlex.join(args)}",
                               "exit": proc.returncode, "output": output})
        return proc.returncode


def run_demo(keep: bool = False, quiet: bool = False) -> tuple[int, dict[str, Any]]:
    """Run the demo; (exit code, the report ``--json`` prints)."""
    demo = _Demo(quiet)
    top = Path(tempfile.mkdtemp(prefix="gitpub-demo-"))
    env_backup = dict(os.environ)
    os.environ.update({"GIT_AUTHOR_NAME": "Demo Writer", "GIT_AUTHOR_EMAIL": "demo@example.com",
                       "GIT_COMMITTER_NAME": "Demo Writer",
                       "GIT_COMMITTER_EMAIL": "demo@example.com"})
    published = None
    try:
        remote, site = top / "remote.git", top / "site"
        demo.say(f"demo directory: {top}")
        _git(top, "init", "-q", "--bare", "-b", "main", str(remote))
        _git(top, "init", "-q", "-b", "main", str(site))
        (site / "posts").mkdir()
        (site / "posts" / "welcome.md").write_text("# Welcome\n\nThe first post.\n")
        (top / "announce.py").write_text(ANNOUNCE)
        tool = [sys.executable, str(top / "announce.py"), str(top / "platform.jsonl")]
        (site / ".gitpub.yaml").write_text(CONFIG.format(
            send=json.dumps([*tool, "send"]), probe=json.dumps([*tool, "probe"])))
        _git(site, "add", ".")
        _git(site, "commit", "-q", "-m", "Start the site")
        _git(site, "remote", "add", "origin", str(remote))
        _git(site, "push", "-q", "origin", "main")
        _git(site, "fetch", "-q", "origin")
        codes = [
            demo.pub(site, "prepare", "--key", "demo-hello", "--to", "posts/hello.md", "-",
                     stdin=ARTICLE),
            demo.pub(site, "prepare", "--key", "demo-hello", "--to", "posts/hello.md", "-",
                     stdin=ARTICLE),
            demo.pub(site, "push"),
            demo.pub(site, "push"),
            demo.pub(site, "status", _job_id("demo-hello")),
            demo.pub(site, "log", _job_id("demo-hello")),
        ]
        demo.say("\n(the second prepare found the same job: same key, same content;"
                 " the second push found nothing left to do: one post on the channel)")
        demo.say("\n$ cat platform.jsonl   (what the channel's platform received)")
        demo.say((top / "platform.jsonl").read_text().rstrip("\n"))
        demo.say("\n$ git log --format='%h %s%n%(trailers:key=Blog-Job-Id)' -1 origin/main "
                 "(in the bare remote)")
        published = _git(remote, "log", "-1", "--format=%h %s%n%(trailers:key=Blog-Job-Id)",
                         "main")
        demo.say(published.rstrip("\n"))
        code = EXIT_OK if all(c == EXIT_OK for c in codes) else EXIT_ERROR
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
        if keep:
            demo.say(f"\nkept {top}")
        else:
            shutil.rmtree(top, ignore_errors=True)
    return code, {"directory": str(top), "kept": keep, "steps": demo.steps,
                  "published": published, "ok": code == EXIT_OK}


def _job_id(key: str) -> str:
    return job_id_for_key(key)
