"""Where a command reports: human lines on stdout and stderr, or one JSON object on stdout.

Progress of long work goes to stderr (never mixed with ``--json``); every text passes the
sanitizer before it is shown. Errors are one line (``git-pub: error: …``) and a ``hint:`` line.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from gitpub.core.sanitize import sanitize


@dataclass
class Output:
    json: bool = False

    def emit(self, data: dict[str, Any], human: str) -> None:
        if self.json:
            sys.stdout.write(json.dumps(data, ensure_ascii=False, sort_keys=True) + "\n")
        elif human:
            sys.stdout.write(human.rstrip("\n") + "\n")
        sys.stdout.flush()

    def progress(self, message: str) -> None:
        """Progress of long work, on stderr so it never mixes with ``--json``."""
        sys.stderr.write(f"gitpub: {sanitize(message)}\n")
        sys.stderr.flush()


def report_error(message: str, hint: str | None, as_json: bool) -> None:
    message = sanitize(message)
    hint = None if hint is None else sanitize(hint)
    if as_json:
        print(json.dumps({"error": message, "hint": hint}, ensure_ascii=False))
    print(f"git-pub: error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
