"""Where a command reports: human lines on stdout and stderr, or one JSON object on stdout.

Progress of long work goes to stderr (never mixed with ``--json``); every text passes the
sanitizer before it is shown, and human text has its control characters but newlines and tabs
escaped (``\x1b``): a record fetched from the remote was written by another clone, and its
texts must not drive the terminal. Errors are one line (``git-pub: error: …``) and a ``hint:``
line on stderr — usage errors from the option parser too — and under ``--json`` also one object
``{"error", "hint", "exit"}`` on stdout. Every JSON object carries ``schema_version``: the
version of the schemas shipped in ``gitpub/cli/schemas/`` that describe it.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from gitpub.core.sanitize import sanitize

#: The version of the ``--json`` output formats (``gitpub/cli/schemas/*.json``). Adding a
#: field keeps it; removing or changing the meaning of one raises it.
SCHEMA_VERSION = 1


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with the control characters a terminal acts on escaped (not ``\n``, ``\t``)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def as_json(data: dict[str, Any]) -> str:
    return json.dumps({**data, "schema_version": SCHEMA_VERSION}, ensure_ascii=False,
                      sort_keys=True)


class Output:
    """Where one command reports: ``json`` or text (a plain class: nothing to build at start)."""

    def __init__(self, json: bool = False) -> None:
        self.json = json

    def emit(self, data: dict[str, Any], human: str) -> None:
        if self.json:
            sys.stdout.write(as_json(data) + "\n")
        elif human:
            sys.stdout.write(printable(human.rstrip("\n")) + "\n")
        sys.stdout.flush()

    def progress(self, message: str) -> None:
        """Progress of long work, on stderr so it never mixes with ``--json``."""
        sys.stderr.write(f"gitpub: {printable(sanitize(message))}\n")
        sys.stderr.flush()


def report_error(message: str, hint: str | None, json_out: bool, exit_code: int) -> None:
    message = printable(sanitize(message))
    hint = None if hint is None else printable(sanitize(hint))
    if json_out:
        print(as_json({"error": message, "hint": hint, "exit": exit_code}))
        sys.stdout.flush()
    print(f"git-pub: error: {message}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
