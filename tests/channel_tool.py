"""A ``command`` channel for the tests: a local "platform" that is a file, one JSON line a post.

    python channel_tool.py send PLATFORM     # post: append a line, print the sent outcome
    python channel_tool.py probe PLATFORM    # look for the intent key: found / not_found

``CHANNEL_TOOL_MODE`` changes ``send``: ``ok`` (default); ``unknown`` (post, then say unknown);
``not_sent`` (post nothing, say not_sent retryable); ``fail`` (post nothing, not retryable);
``crash`` (post, then exit 1 without output); ``sleep:S`` (post, then sleep S seconds before
answering). ``CHANNEL_TOOL_READY=FILE`` is created right after the post is written.
It speaks exactly the protocol of ``gitpub.channels.adapters``.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time


def _posts(platform: str) -> list[dict[str, str]]:
    try:
        with open(platform, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def send(platform: str) -> int:
    payload = json.loads(sys.stdin.read())
    mode = os.environ.get("CHANNEL_TOOL_MODE", "ok")
    if mode == "not_sent":
        print(json.dumps({"outcome": "not_sent", "retryable": True, "code": "busy"}))
        return 0
    if mode == "fail":
        print(json.dumps({"outcome": "not_sent", "retryable": False, "code": "rejected"}))
        return 0
    with open(platform, "a", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        number = len(_posts(platform)) + 1
        post = {"id": f"post-{number}", "key": os.environ["GITPUB_INTENT_KEY"],
                "channel": os.environ["GITPUB_CHANNEL"], "account": os.environ["GITPUB_ACCOUNT"],
                "job": os.environ["GITPUB_JOB_ID"], "title": payload["title"],
                "url": payload["url"]}
        f.write(json.dumps(post) + "\n")
        f.flush()
        os.fsync(f.fileno())
    ready = os.environ.get("CHANNEL_TOOL_READY")
    if ready:
        open(ready, "w").close()
    if mode == "crash":
        return 1
    if mode.startswith("sleep:"):
        time.sleep(float(mode.split(":", 1)[1]))
    if mode == "unknown":
        print(json.dumps({"outcome": "unknown", "code": "timeout"}))
        return 0
    print(json.dumps({"outcome": "sent", "remote_id": post["id"],
                      "url": f"https://social.example/{post['id']}"}))
    return 0


def probe(platform: str) -> int:
    key = os.environ["GITPUB_INTENT_KEY"]
    for post in _posts(platform):
        if post["key"] == key:
            print(json.dumps({"outcome": "found", "remote_id": post["id"],
                              "url": f"https://social.example/{post['id']}"}))
            return 0
    print(json.dumps({"outcome": "not_found"}))
    return 0


if __name__ == "__main__":
    action, platform = sys.argv[1], sys.argv[2]
    sys.exit(send(platform) if action == "send" else probe(platform))
