"""What ``confirm`` needs of a ``.gitpub.yaml``, vouched for by the authenticated ledger.

``confirm`` reads four values of a configuration: the ``remote`` and ``branch`` it fetches, the
``trailer_prefix`` whose claims it checks and ``confirm_unrecorded`` (``ConfigFacts``). Getting
them the full way means PyYAML, the configuration's definitions and its validator (~60-100 ms
of a CI run that otherwise costs one push's commits). But the file is the same one run after
run, and the run that last checked it held CI's key: so each authenticated run writes, in its
ledger (under the ledger's one MAC, ``verify.ledger``), the facts of the ``.gitpub.yaml`` at
the point it checked through — keyed by that file's *blob id* and by a digest of the
validator's own source (``config.source.validator_digest``). A later run believes them only
when all three hold: the ledger is authentic, the blob at the commit (or the working tree's
file, hashed here) has exactly that id, and this gitpub's validator has exactly that digest.
Anything else — no key, a forged or missing line, another file, another validator — and the
file is parsed and validated as before (``Resolver.facts``). So nothing unauthenticated can
change what is checked: a facts line is a memo of the validator's answer, written by CI.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from gitpub.git.objects import ObjectFormat, is_object_id
from gitpub.git.repo import Repository

CONFIG_FILE = ".gitpub.yaml"  # config.model's, not imported: its definitions cost ~20 ms
_UNRECORDED = ("bad", "report")


class ConfigFacts(NamedTuple):
    remote: str
    branch: str
    trailer_prefix: str
    confirm_unrecorded: str


class Bad(NamedTuple):
    """A configuration that does not validate (the error is raised where it is used)."""

    error: Exception


def facts_of(config: object) -> ConfigFacts:
    return ConfigFacts(str(getattr(config, "remote")), str(getattr(config, "branch")),  # noqa: B009
                       str(getattr(config, "trailer_prefix")),  # noqa: B009
                       str(getattr(config, "confirm_unrecorded")))  # noqa: B009


def blob_id(data: bytes, fmt: ObjectFormat) -> str:
    """The id of a blob holding ``data``, in the repository's hash."""
    return fmt.object_id(b"blob", data)


def facts_line(blob: str, validator: str, facts: ConfigFacts) -> str:
    """The ledger's line for ``facts`` of blob ``blob`` (one line of JSON, sorted keys)."""
    return json.dumps({"blob": blob, "validator": validator, **facts._asdict()},
                      sort_keys=True, ensure_ascii=True)


def parse_facts_line(text: str) -> tuple[str, str, ConfigFacts] | None:
    """(blob, validator, facts) of a well-formed facts line, else None."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    keys = {"blob", "validator", *ConfigFacts._fields}
    if not isinstance(data, dict) or set(data) != keys or \
            not all(isinstance(v, str) for v in data.values()):
        return None
    if not is_object_id(data["blob"]) or data["confirm_unrecorded"] not in _UNRECORDED:
        return None
    return data["blob"], data["validator"], ConfigFacts(
        *(data[k] for k in ConfigFacts._fields))


def vouched(lines: tuple[str, ...], validator: str | None) -> dict[str, ConfigFacts]:
    """blob id → facts, from the facts lines of an *authentic* ledger, for this validator."""
    out: dict[str, ConfigFacts] = {}
    if validator is None:
        return out
    for line in lines:
        found = parse_facts_line(line)
        if found is not None and found[1] == validator:
            out.setdefault(found[0], found[2])
    return out


def parse_facts(data: bytes, source: str) -> ConfigFacts | Bad:
    """The full way: the file's bytes parsed and validated (PyYAML, the validator)."""
    from gitpub.config.load import config_from_text
    from gitpub.config.model import ConfigError

    try:  # decoded as confirm always decoded a committed file
        return facts_of(config_from_text(data.decode("utf-8-sig", "replace"), source))
    except ConfigError as e:
        return Bad(e)


class Resolver:
    """The facts of ``.gitpub.yaml`` at commits, by blob id: vouched for by the authentic
    ledger when it can be, parsed and validated otherwise (each blob once)."""

    def __init__(self, repo: Repository, vouched_for: dict[str, ConfigFacts]) -> None:
        self.repo = repo
        self.vouched = vouched_for
        self.known: dict[str, ConfigFacts | Bad] = {}
        self.parsed = 0  # how many files had to be parsed (a test counts them)

    def blob_at(self, commit: str) -> str | None:
        """The blob id of ``.gitpub.yaml`` at ``commit`` (None: it has none)."""
        entry = self.repo.lookup(self.repo.commit(commit).tree, CONFIG_FILE)
        return None if entry is None else entry.sha

    def at(self, commit: str) -> ConfigFacts | Bad:
        blob = self.blob_at(commit)
        return self.of_blob(blob, f"{CONFIG_FILE} at {commit[:12]}")

    def of_blob(self, blob: str | None, source: str) -> ConfigFacts | Bad:
        if blob is None:
            return defaults()
        if blob in self.vouched:
            return self.vouched[blob]
        if blob not in self.known:
            self.parsed += 1
            self.known[blob] = parse_facts(self.repo.blob(blob), source)
        return self.known[blob]


def defaults() -> ConfigFacts:
    """The facts of no ``.gitpub.yaml`` at all: ``Config()``'s (a test keeps them equal)."""
    return DEFAULTS


DEFAULTS = ConfigFacts("origin", "main", "Blog", "bad")
