"""The shipped JSON Schemas, used as anyone would use them: a plain ``jsonschema`` validator
with a ``referencing`` registry made of the shipped files and nothing else — each resource
under its own ``$id``, no retrieval (no network), no resolver of our own.

Every ``$id`` is the file's own name (a relative URI-reference: a tool that reads the files from
disk resolves a ``$ref`` to a sibling next to it), every ``$ref`` resolves in that registry, and
the real outputs of a few commands validate.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any
from urllib.parse import urljoin

from conftest import Site
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable


def shipped() -> dict[str, dict[str, Any]]:
    """The schemas as the installed package holds them."""
    folder = files("gitpub.cli") / "schemas"
    return {f.name: json.loads(f.read_text(encoding="utf-8")) for f in folder.iterdir()
            if f.name.endswith(".json")}


def registry() -> Registry:  # type: ignore[type-arg]
    return [Resource.from_contents(s) for s in shipped().values()] @ Registry()


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        here = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return here + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


def test_every_id_is_its_file_and_every_ref_resolves() -> None:
    schemas = shipped()
    assert len(schemas) >= 10
    resolver = registry().resolver()
    for name, schema in schemas.items():
        Draft202012Validator.check_schema(schema)
        assert schema["$id"] == name, name
        for ref in refs(schema):
            try:
                resolver.lookup(urljoin(schema["$id"], ref))
            except Unresolvable as e:
                raise AssertionError(f"{name}: $ref {ref!r} does not resolve: {e}") from None


def check(name: str, text: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text)
    Draft202012Validator(shipped()[name], registry=registry(),
                         format_checker=Draft202012Validator.FORMAT_CHECKER).validate(data)
    return data


def test_real_outputs_validate_with_a_plain_validator(site: Site) -> None:
    r = site.call("prepare", "--json", "--key", "k", "--to", "posts/a.md", "-",
                  input="# A\n\nText.\n")
    job = check("job.json", r.out)
    check("jobs.json", site.call("status", "--json").out)
    check("job.json", site.call("status", "--json", job["job_id"]).out)
    (site.path / "posts/hand.md").write_text("# Hand\n")
    plan = check("plan.json", site.call("sync", "--dry-run", "--json").out)
    assert plan["hand_edits"]["commits"][0]["changes"] == [
        {"path": "posts/hand.md", "change": "added"}]
    pushed = check("jobs.json", site.call("push", "--json").out)
    assert pushed["jobs"][0]["state"] == "PUBLISHED"
    check("history.json", site.call("log", "--json", job["job_id"]).out)
    check("doctor.json", site.call("doctor", "--json").out)
    check("confirm.json", site.call("confirm", "--json").out)
    error = site.call("log", "--json", "no-such-job")
    assert error.code == 2
    check("error.json", error.out)
    check("version.json", site.call("--version", "--json").out)
