"""The job record: the versioned document at ``job.json`` in every state commit of a job.

It holds what the reference design's ``blog_publication`` row held. Reading is total and strict:
whatever the bytes, ``parse_record`` returns the record they describe or raises ``RecordError``
(a ``CorruptStateError``) — truncated, not JSON, an unknown format version, a missing or unknown
field, a value of the wrong type or outside its enum. The checks are derived from the
definitions below, not kept in a second table. Corrupt state is reported with the job's name and
never "repaired" by overwriting it.

The records are ``NamedTuple``s: frozen values, as the git layer's are. The parser reads any
such annotated value type, a dataclass as well.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import json
import math
import types
import typing
from typing import Any, Literal, NamedTuple

from gitpub.core.errors import CorruptStateError
from gitpub.core.states import FailureCode, Kind, Phase, State

#: The record's format: 1, or 2 exactly when the record has a ``review`` (delivery through a
#: pull/merge request): a record without one stays readable by a gitpub that predates reviews,
#: and one with it is refused by such a gitpub as "unknown job record format 2", never misread.
FORMAT_VERSION = 1
FORMAT_WITH_REVIEW = 2

Op = Literal["new", "update", "delete"]


class RecordError(CorruptStateError):
    """A ``job.json`` that is not a valid record; the store adds the job's name."""


class Target(NamedTuple):
    """One file the job writes.

    ``op`` is ``update`` when the path existed in the base snapshot; ``base_sha256`` is then the
    SHA-256 of its content there — the compare-and-swap condition checked at commit time and after
    every rebase. For ``new`` targets the condition is "the path still does not exist".
    ``delete``
    (hand commits delivered by ``sync`` only) removes the file; its condition is the same as an
    update's. ``base_mode``, when set (sync), is part of the condition: a file whose mode changed
    (made executable, turned into a symlink) has changed.
    """

    path: str
    op: Op
    base_sha256: str | None = None
    base_mode: int | None = None


class Lease(NamedTuple):
    """Who works on a job (``store.lease``), and until when."""

    token: str
    owner: str
    expires_at: float


class Review(NamedTuple):
    """A job delivered through a pull/merge request (``delivery.review``): where its commit
    waits for review, and the request, once the forge named it. Never a token."""

    forge: str  # github, gitlab, gitea, or branch (no API: a compare URL is printed)
    branch: str  # the review branch on the remote (``gitpub/<job id>``)
    base: str  # the branch the request merges into
    #: The commit this job last put on the review branch (what the next push of it expects
    #: there: a compare-and-swap); None before the first push.
    head: str | None = None
    number: int | None = None  # the request's number (GitLab: its iid), once known
    url: str | None = None  # its web address (``branch``: the compare URL)

    def public(self) -> dict[str, Any]:
        return {"forge": self.forge, "branch": self.branch, "base": self.base,
                "head": self.head, "number": self.number, "url": self.url}


class JobRecord(NamedTuple):
    """What the store knows of one job, as ``job.json`` holds it."""

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
    sync_after: str | None = None  # sync: the job of the commit before it, which must not be
    # still on its way when this one is delivered (the commits land in their order)
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
    #: The remote's fingerprint (hashed, credentials redacted) at the last failed attempt: a
    #: retry is due at once when the remote's URL has changed since (someone fixed it).
    retry_remote: str | None = None
    last_recheck_head: str | None = None
    recheck_fingerprints: tuple[str, ...] = ()
    failure_code: FailureCode | None = None
    failure_detail: str | None = None
    #: PREPARING sub-step -> outcome. The default is shared: never changed in place (a record
    #: is a value: ``evolve(phases=record.phases | {...})``).
    phases: dict[Phase, str] = {}  # noqa: RUF012 (a NamedTuple field: never changed)
    lease: Lease | None = None
    #: Delivery through review: the review branch and the request (format 2).
    review: Review | None = None
    format: int = FORMAT_VERSION

    @property
    def target_paths(self) -> tuple[str, ...]:
        return tuple(t.path for t in self.targets)

    def evolve(self, **changes: Any) -> JobRecord:
        new = self._replace(**changes)
        return new._replace(format=record_format(new))

    def to_json(self) -> bytes:
        data: dict[str, Any] = _plain(self)
        data["state"] = self.state.value
        data["kind"] = str(self.kind)
        data["failure_code"] = None if self.failure_code is None else str(self.failure_code)
        data["phases"] = {str(k): v for k, v in self.phases.items()}
        data["format"] = record_format(self)
        if self.review is None:
            del data["review"]  # format 1 has no such field
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
            "review": None if self.review is None else self.review.public(),
        }


def record_format(record: JobRecord) -> int:
    """The format ``record`` is written in: 2 exactly when it has a review."""
    return FORMAT_VERSION if record.review is None else FORMAT_WITH_REVIEW


def _plain(value: Any) -> Any:
    """``value`` as JSON-ready data: a record as an object of its fields (as ``asdict`` makes
    of a dataclass), a tuple as a list, recursively."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {name: _plain(getattr(value, name)) for name in value._fields}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# -- reading: a total parser derived from the definitions above ------------------------------

def parse_record(raw: bytes) -> JobRecord:
    """Strictly parse a ``job.json``; any deviation raises ``RecordError`` saying what.

    The rules come from ``JobRecord``'s own definition (its fields and their annotations, and
    those of ``Target`` and ``Lease``): every key must be a field; a field without a default must
    be there, one with a default may be absent (a record written before the field existed) and
    takes the default; every value must have exactly its field's type — an ``int`` is not a
    ``bool``, a number is finite, an enum holds one of its values, a ``Literal`` one of its
    choices, a string is encodable as UTF-8 (the record is written back as UTF-8). A new field
    with an annotation and a default is parsed and checked with no code here.
    """
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        # ValueError covers JSONDecodeError and ints longer than Python converts
        raise RecordError(f"job.json is not valid JSON ({_short(e)})") from None
    if not isinstance(data, dict):
        raise RecordError("job.json is not an object")
    version = data.get("format")
    if type(version) is not int or version not in (FORMAT_VERSION, FORMAT_WITH_REVIEW):
        raise RecordError(f"unknown job record format {_shown(version)}")
    if version == FORMAT_VERSION and "review" in data:
        raise RecordError("a job record of format 1 has no field review")
    record = typing.cast(JobRecord, _decode(JobRecord, data, ""))
    if (record.review is not None) != (version == FORMAT_WITH_REVIEW):
        raise RecordError(f"a job record of format {version} "
                          + ("has no field review" if version == FORMAT_VERSION
                             else "must have a review"))
    return record


def _short(e: BaseException) -> str:
    return str(e)[:120] or type(e).__name__


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bad(where: str, what: str, value: object) -> RecordError:
    name = f"field {where}" if where else "the record"
    return RecordError(f"{name}: expected {what}, got {_shown(value)}")


@functools.cache
def _shape(tp: Any) -> tuple[str, tuple[Any, ...]]:
    """What kind of annotation ``tp`` is, and its arguments: worked out once per annotation
    (every record of every job is parsed by ``_decode``)."""
    if isinstance(tp, type) and (_is_value_type(tp) or hasattr(tp, "__dataclass_fields__")):
        return "value", ()
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        return "union", args
    if origin is typing.Literal:
        return "literal", args
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return "tuple", args
    if origin is dict:
        return "dict", args
    return ("scalar" if isinstance(tp, type) else "unknown"), ()


def _decode(tp: Any, value: object, where: str) -> object:
    """``value`` (from JSON) as the annotated type ``tp``; ``RecordError`` if it is not one."""
    kind, args = _shape(tp)
    if kind == "value":
        return _decode_dataclass(tp, value, where)
    if kind == "union":
        if value is None and type(None) in args:
            return None
        arms = [a for a in args if a is not type(None)]
        if len(arms) == 1:
            return _decode(arms[0], value, where)
        for arm in arms:
            with contextlib.suppress(RecordError):
                return _decode(arm, value, where)
        raise _bad(where, " or ".join(_describe(a) for a in args), value)
    if kind == "literal":
        if any(type(value) is type(a) and value == a for a in args):
            return value
        raise _bad(where, "one of " + ", ".join(repr(a) for a in args), value)
    if kind == "tuple":
        if not isinstance(value, list):
            raise _bad(where, "a list", value)
        return tuple(_decode(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if kind == "dict":
        if not isinstance(value, dict):
            raise _bad(where, "an object", value)
        return {_decode(args[0], k, f"{where} key"): _decode(args[1], v, f"{where}.{k}")
                for k, v in value.items()}
    if kind == "scalar":
        return _decode_scalar(tp, value, where)
    raise TypeError(f"job record field {where}: cannot parse type {tp!r}")  # a bug, not data


def _decode_scalar(tp: type, value: object, where: str) -> object:
    if issubclass(tp, enum.Enum):
        if isinstance(value, str) and value in tp._value2member_map_:
            return tp(value)
        raise _bad(where, f"a {tp.__name__} ({', '.join(str(m.value) for m in tp)})", value)
    if tp is bool:
        if type(value) is bool:
            return value
    elif tp is int:
        if type(value) is int:
            return value
    elif tp is float:
        if type(value) in (int, float):
            number = _finite(typing.cast(float, value))
            if number is not None:
                return number
    elif tp is str:
        if type(value) is str and _utf8(value):
            return value
    else:
        raise TypeError(f"job record field {where}: cannot parse type {tp!r}")  # a bug
    raise _bad(where, _describe(tp), value)


def _finite(value: float) -> float | None:
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, which JSON's \ud800 escapes can make
        return False
    return True


def _describe(tp: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a finite number", str: "a string",
             type(None): "null"}
    return names.get(tp, getattr(tp, "__name__", str(tp)))


def _decode_dataclass(cls: type, value: object, where: str) -> object:
    if not isinstance(value, dict):
        raise _bad(where, "an object", value)
    spec = _fields_of(cls)
    unknown = sorted(k if k.isidentifier() else _shown(k) for k in value if k not in spec)
    if unknown:
        prefix = f"{where}: " if where else ""
        raise RecordError(f"{prefix}unknown fields in job record: {', '.join(unknown)}")
    kwargs: dict[str, object] = {}
    for name, (tp, required) in spec.items():
        path = f"{where}.{name}" if where else name
        if name in value:
            kwargs[name] = _decode(tp, value[name], path)
        elif required:
            raise RecordError(f"missing field in job record: {path}")
    return cls(**kwargs)


def _is_value_type(tp: type) -> bool:
    """Whether ``tp`` is a ``NamedTuple`` (the records' own kind of value)."""
    return issubclass(tp, tuple) and hasattr(tp, "_fields") and hasattr(tp, "_field_defaults")


@functools.cache
def _fields_of(cls: type) -> dict[str, tuple[Any, bool]]:
    """A value type's fields (a ``NamedTuple``'s, or a dataclass's): name -> (resolved
    annotation, whether it is required)."""
    hints = typing.get_type_hints(cls)
    if _is_value_type(cls):
        names, defaults = cls._fields, cls._field_defaults  # type: ignore[attr-defined]
        return {name: (hints[name], name not in defaults) for name in names}
    return {f.name: (hints[f.name],
                     f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
            for f in dataclasses.fields(cls) if f.init}
