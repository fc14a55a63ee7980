"""What ``confirm`` needs of a ``.gitpub.yaml``, vouched for by the authenticated ledger.

``confirm`` reads four values of a configuration: the ``remote`` and ``branch`` it fetches, the
``trailer_prefix`` whose claims it checks and ``confirm_unrecorded`` (``ConfigFacts``). Getting
them the full way means parsing and validating the file at a commit (PyYAML and the
configuration's validator). But the file is the same one run after run, and the run that last
checked it held CI's key: so each authenticated run writes, in its ledger (under the ledger's
one MAC, ``verify.ledger``), the facts of the ``.gitpub.yaml`` at the point it checked through
— keyed by that file's *blob id* and by a digest of the code that read it
(``validator_digest``). A later run believes them only when all three hold: the
ledger is authentic, the blob at the commit (or the working tree's file, hashed here) has
exactly that id, and this gitpub's code has exactly that digest. Anything else — no key, a
forged or missing line, another file, another gitpub — and the file is parsed and validated as
before (``Resolver.facts``). So nothing unauthenticated can change what is checked: a facts
line is a memo of the validator's answer, written by CI.

Before the ledger is read, ``confirm`` fetches with a *guess* of the remote and branch
(``guess_remote_branch``), checked against the facts once they are known (``app.confirm``).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import NamedTuple

import gitpub
from gitpub.config.load import parse_config
from gitpub.config.model import Config
from gitpub.core.errors import CONFIG_FILE, ConfigError
from gitpub.git.objects import ObjectFormat, is_object_id
from gitpub.git.repo import Repository

_UNRECORDED = ("bad", "report")


class ConfigFacts(NamedTuple):
    remote: str
    branch: str
    trailer_prefix: str
    confirm_unrecorded: str


class Bad(NamedTuple):
    """A configuration that does not validate (the error is raised where it is used)."""

    error: Exception


def facts_of(config: Config) -> ConfigFacts:
    return ConfigFacts(config.remote, config.branch, config.trailer_prefix,
                       config.confirm_unrecorded)


def blob_id(data: bytes, fmt: ObjectFormat) -> str:
    """The id of a blob holding ``data``, in the repository's hash."""
    return fmt.object_id(b"blob", data)


@functools.cache
def validator_digest() -> str:
    """What identifies the code that turns a ``.gitpub.yaml`` into facts: the SHA-256 of
    every Python source of the installed gitpub (its path and content), so that facts vouched
    for by any other gitpub — another validator, another reading of the file — are not
    believed (``vouched``). Conservative: any change of gitpub invalidates the memos, and the
    next run parses the file once."""
    package = Path(gitpub.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        source = hashlib.sha256(path.read_bytes()).hexdigest()
        digest.update(b"%s\0%s\n" % (path.relative_to(package).as_posix().encode(),
                                      source.encode()))
    return digest.hexdigest()


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


def vouched(lines: tuple[str, ...], validator: str) -> dict[str, ConfigFacts]:
    """blob id → facts, from the facts lines of an *authentic* ledger, for this validator."""
    out: dict[str, ConfigFacts] = {}
    for line in lines:
        found = parse_facts_line(line)
        if found is not None and found[1] == validator:
            out.setdefault(found[0], found[2])
    return out


def parse_facts(data: bytes, source: str) -> ConfigFacts | Bad:
    """The full way: the file's bytes parsed and validated (PyYAML, the validator)."""
    try:  # decoded as confirm always decoded a committed file
        return facts_of(parse_config(data.decode("utf-8-sig", "replace"), source))
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


def guess_remote_branch(text: str) -> tuple[str, str] | None:
    """A *guess* of the ``remote`` and ``branch`` a ``.gitpub.yaml`` names, without PyYAML:
    plain top-level ``key: value`` lines only, anything else None. Never believed: ``confirm``
    fetches with it, then checks it against the file's facts (vouched for, or validated) and
    fetches again if it was wrong."""
    found = {"remote": "origin", "branch": "main"}
    seen: set[str] = set()
    for line in text.splitlines():
        if not line or line[0] in " #":
            continue
        if not (line[0].isascii() and (line[0].isalpha() or line[0] == "_")):
            return None  # a document marker, a flow mapping, an alias, a tab, a directive
        key, sep, value = line.partition(":")
        if key not in found:
            continue
        value = value.split(" #", 1)[0].strip()
        if not sep or key in seen or not _plain_name(value, slash=key == "branch"):
            return None
        seen.add(key)
        found[key] = value
    return found["remote"], found["branch"]


def _plain_name(value: str, *, slash: bool) -> bool:
    """A name no git command could take for an option, a path or a revision expression: a
    letter or digit, then letters, digits and ``._-`` (and ``/`` in a branch), no ``..``."""
    allowed = "._-/" if slash else "._-"
    return bool(value) and value[0].isascii() and value[0].isalnum() and \
        all(c.isascii() and (c.isalnum() or c in allowed) for c in value) and \
        ".." not in value and "//" not in value and not value.endswith(("/", ".", ".lock"))
