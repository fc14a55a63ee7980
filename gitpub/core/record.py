"""The job record: the versioned document at ``job.json`` in every state commit of a job.

It holds what the reference design's ``blog_publication`` row held. Reading is strict: a record
that is truncated, not JSON, of an unknown format version or with a field of the wrong type is
corrupt state, reported with the job's name and never "repaired" by overwriting it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from gitpub.core.states import FailureCode, Kind, Phase, State

FORMAT_VERSION = 1

Op = Literal["new", "update", "delete"]


class RecordError(ValueError):
    pass


@dataclass(frozen=True)
class Target:
    """One file the job writes.

    ``op`` is ``update`` when the path existed in the base snapshot; ``base_sha256`` is then the
    SHA-256 of its content there — the compare-and-swap condition checked at commit time and after
    every rebase. For ``new`` targets the condition is "the path still does not exist". ``delete``
    (hand commits delivered by ``sync`` only) removes the file; its condition is the same as an
    update's. ``base_mode``, when set (sync), is part of the condition: a file whose mode changed
    (made executable, turned into a symlink) has changed.
    """

    path: str
    op: Op
    base_sha256: str | None = None
    base_mode: int | None = None


@dataclass(frozen=True)
class Lease:
    token: str
    owner: str
    expires_at: float


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    idempotency_key: str  # sanitized
    request_hash: str  # sha256 over the canonical request (content, targets, operation)
    state: State
    node: str
    created_at: float
    updated_at: float
    source_sha256: str | None = None  # of the sanitized source as stored
    drafted: bool = False  # whether a draft command turns the source into the articles
    kind: Kind = Kind.PUBLISH  # SYNC: content changes made outside gitpub (no draft, no judge)
    requested_base: str | None = None  # snapshot this commit, not the tracking branch (sync)
    sync_commit: str | None = None  # sync: the person's commit this job delivers (kept alive by
    # the job's first state commit; its author, message and changes are the job's)
    sync_after: str | None = None  # sync: the job of the commit before it, which must be
    # PUBLISHED before this one is delivered (the commits land in their order)
    base_ref: str | None = None
    base_commit: str | None = None
    first_base: str | None = None  # the first snapshot's base: probes search from here, even
    # after `resolve --retry` took a newer base (an earlier push may have landed meanwhile)
    targets: tuple[Target, ...] = ()
    manifest_sha256: str | None = None
    commit_time: int | None = None  # fixed when READY, so the content commit is reproducible
    author: str | None = None  # "Name <email>", fixed when READY, for the same reason
    local_commit: str | None = None
    remote_commit: str | None = None
    attempt: int = 0
    max_attempts: int = 5
    next_retry_at: float | None = None
    last_recheck_head: str | None = None
    recheck_fingerprints: tuple[str, ...] = ()
    failure_code: FailureCode | None = None
    failure_detail: str | None = None
    phases: dict[Phase, str] = field(default_factory=dict)  # PREPARING sub-step -> outcome
    lease: Lease | None = None
    format: int = FORMAT_VERSION

    @property
    def target_paths(self) -> tuple[str, ...]:
        return tuple(t.path for t in self.targets)

    def evolve(self, **changes: Any) -> JobRecord:
        return replace(self, **changes)

    def to_json(self) -> bytes:
        data = asdict(self)
        data["state"] = self.state.value
        data["kind"] = str(self.kind)
        data["failure_code"] = None if self.failure_code is None else str(self.failure_code)
        data["phases"] = {str(k): v for k, v in self.phases.items()}
        return (json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n").encode()

    def public(self) -> dict[str, Any]:
        """The ``--json`` view of a job (the contract's fields first)."""
        return {
            "job_id": self.job_id,
            "idempotency_key": self.idempotency_key,
            "state": self.state.value,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "local_commit": self.local_commit,
            "remote_commit": self.remote_commit,
            "failure_code": None if self.failure_code is None else str(self.failure_code),
            "failure_detail": self.failure_detail,
            "target_paths": list(self.target_paths),
            "base_commit": self.base_commit,
            "manifest_sha256": self.manifest_sha256,
            "next_retry_at": self.next_retry_at,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


_SIMPLE: dict[str, tuple[type, ...]] = {
    "job_id": (str,),
    "idempotency_key": (str,),
    "request_hash": (str,),
    "node": (str,),
    "created_at": (int, float),
    "updated_at": (int, float),
    "source_sha256": (str, type(None)),
    "drafted": (bool,),
    "requested_base": (str, type(None)),
    "sync_commit": (str, type(None)),
    "sync_after": (str, type(None)),
    "base_ref": (str, type(None)),
    "base_commit": (str, type(None)),
    "first_base": (str, type(None)),
    "manifest_sha256": (str, type(None)),
    "commit_time": (int, type(None)),
    "author": (str, type(None)),
    "local_commit": (str, type(None)),
    "remote_commit": (str, type(None)),
    "attempt": (int,),
    "max_attempts": (int,),
    "next_retry_at": (int, float, type(None)),
    "last_recheck_head": (str, type(None)),
    "failure_detail": (str, type(None)),
}


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise RecordError(what)


def parse_record(raw: bytes) -> JobRecord:
    """Strictly parse a ``job.json``; any deviation raises ``RecordError`` saying what."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordError(f"job.json is not valid JSON ({e})") from None
    _check(isinstance(data, dict), "job.json is not an object")
    version = data.get("format")
    _check(version == FORMAT_VERSION, f"unknown job record format {version!r}")
    known = {f.name for f in fields(JobRecord)}
    unknown = sorted(set(data) - known)
    _check(not unknown, f"unknown fields in job record: {', '.join(unknown)}")
    missing = sorted(k for k in ("job_id", "state", "request_hash") if k not in data)
    _check(not missing, f"missing fields in job record: {', '.join(missing)}")
    for name, types in _SIMPLE.items():
        if name in data:
            value = data[name]
            ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
            _check(ok, f"field {name} has the wrong type ({type(value).__name__})")
    try:
        state = State(data["state"])
    except ValueError:
        raise RecordError(f"unknown state {data['state']!r}") from None
    try:
        kind = Kind(data.get("kind", Kind.PUBLISH.value))
        code = data.get("failure_code")
        failure_code = None if code is None else FailureCode(code)
    except ValueError as e:
        raise RecordError(f"bad value in job record: {e}") from None
    targets = data.get("targets", [])
    _check(isinstance(targets, list), "field targets is not a list")
    parsed_targets = []
    for t in targets:
        _check(isinstance(t, dict) and {"path", "op", "base_sha256"} <= set(t)
               <= {"path", "op", "base_sha256", "base_mode"}, "bad target")
        _check(isinstance(t["path"], str) and t["op"] in ("new", "update", "delete"),
               "bad target")
        _check(isinstance(t["base_sha256"], (str, type(None))), "bad target")
        mode = t.get("base_mode")
        _check(mode is None or (isinstance(mode, int) and not isinstance(mode, bool)),
               "bad target")
        parsed_targets.append(Target(t["path"], t["op"], t["base_sha256"], mode))
    phases = data.get("phases", {})
    _check(
        isinstance(phases, dict) and all(isinstance(v, str) for v in phases.values())
        and all(k in Phase._value2member_map_ for k in phases),
        "field phases is not a mapping of known phases to strings",
    )
    fps = data.get("recheck_fingerprints", [])
    _check(isinstance(fps, list) and all(isinstance(v, str) for v in fps), "bad fingerprints")
    lease = data.get("lease")
    parsed_lease = None
    if lease is not None:
        _check(isinstance(lease, dict) and set(lease) == {"token", "owner", "expires_at"},
               "bad lease")
        parsed_lease = Lease(str(lease["token"]), str(lease["owner"]), float(lease["expires_at"]))
    simple = {k: data[k] for k in _SIMPLE if k in data}
    return JobRecord(
        state=state,
        kind=kind,
        failure_code=failure_code,
        targets=tuple(parsed_targets),
        phases={Phase(k): v for k, v in phases.items()},
        recheck_fingerprints=tuple(fps),
        lease=parsed_lease,
        **simple,
    )
