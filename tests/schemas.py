"""The shipped JSON Schemas of every ``--json`` output (``gitpub/cli/schemas/``), and which one
describes the output of a command line. ``conftest.Result.json`` validates with them, so every
test that reads a command's JSON also checks it against its schema."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parent.parent / "gitpub" / "cli" / "schemas"
_TAKES_VALUE = {"-C", "--key", "--to", "--from", "--range"}
_BY_COMMAND = {"prepare": "job.json", "log": "history.json", "push": "jobs.json",
               "sync": "jobs.json", "reconcile": "jobs.json", "resolve": "jobs.json",
               "init": "init.json", "confirm": "confirm.json", "hooks": "hooks.json",
               "demo": "demo.json", "doctor": "doctor.json", "metrics": "metrics.json",
               "secrets": "secrets.json"}


@cache
def registry() -> Registry:  # type: ignore[type-arg]
    # each resource under its own ``$id`` (the file's name), as any user would build it
    return [Resource.from_contents(json.loads(p.read_text()))
            for p in sorted(SCHEMAS.glob("*.json"))] @ Registry()


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SCHEMAS / name).read_text())
    return data


@cache
def validator(name: str) -> Draft202012Validator:
    """The validator of schema ``name``, the schema itself checked against its meta-schema
    first: once per test process (the files do not change during a run; the check costs
    1-25 ms, more than the validation, at every one of thousands of ``Result.json`` calls)."""
    schema = load(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=registry(),
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def validate(name: str, data: Any) -> None:
    validator(name).validate(data)


def positionals(args: Sequence[str]) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in _TAKES_VALUE:
            skip = True
        elif not a.startswith("-"):
            out.append(a)
    return out


def schema_for(args: Sequence[str], data: Any) -> str | None:
    """The schema of what ``git pub ARGS --json`` printed (None: not a gitpub output)."""
    if isinstance(data, dict) and "error" in data:
        return "error.json"
    if isinstance(data, dict) and "help" in data and ("-h" in args or "--help" in args):
        return "help.json"
    words = positionals(args)
    if not words:
        return "version.json" if "--version" in args else None
    command = words[0]
    if command in ("push", "sync") and "--dry-run" in args:
        return "plan.json"
    if command == "status":
        return "job.json" if len(words) > 1 else "jobs.json"
    return _BY_COMMAND.get(command)
