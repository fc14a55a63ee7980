"""The ``git-pub`` executable's entry point: answers ``--version`` before anything is imported.

An agent may start gitpub hundreds of times, and every start pays for what it imports before
it looks at its arguments: click alone costs about as much as the interpreter's own start, the
commands and the git layer (dulwich) several times that. So this module imports nothing of
gitpub but its version, and nothing of the standard library that a bare ``python3 -c pass``
has not already imported: ``git pub --version`` (with ``--json`` or ``--debug``, in any order)
is answered here, exactly as the click command would answer it (a test compares the two);
the plain forms of ``status``, ``log`` and ``confirm`` go to ``gitpub.cli.quick`` (no click);
everything else goes to ``gitpub.cli.main``, whose commands in turn import their work only
when they run (``-h`` loads click and the option definitions, not the commands).
"""

from __future__ import annotations

import sys

from gitpub import __version__

TYPE_CHECKING = False  # typing costs ~1.5 ms to import; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Sequence

#: ``gitpub.cli.output.SCHEMA_VERSION``, not imported (it loads the sanitizer); a test keeps
#: the two equal.
SCHEMA_VERSION = 1
_VERSION_ONLY = frozenset({"--version", "--json", "--debug"})


def version_text(as_json: bool) -> str:
    """What ``git pub --version`` prints: the same bytes as ``output.as_json`` would write."""
    if as_json:
        return f'{{"schema_version": {SCHEMA_VERSION}, "version": "{__version__}"}}'
    return f"git-pub {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--version" in args and _VERSION_ONLY.issuperset(args):
        sys.stdout.write(version_text("--json" in args) + "\n")
        sys.stdout.flush()
        return 0
    from gitpub.cli import quick

    request = quick.parse(args)
    if request is not None:
        return quick.run(request, args)
    from gitpub.cli.main import run_click

    return run_click(args)
