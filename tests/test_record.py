"""The job record parser is total: any bytes give the record they describe or a RecordError.

The checks are derived from ``JobRecord``'s dataclass definition; these tests mutate valid records
(every field, nested ``Target``/``Lease`` shapes, enum values) and require "the record the
document says, or a ``CorruptStateError``" — never a ``TypeError``, ``ValueError`` or a record
that silently differs from its document.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitpub.core.errors import CorruptStateError
from gitpub.core.record import (
    FORMAT_VERSION,
    FORMAT_WITH_REVIEW,
    JobRecord,
    Lease,
    RecordError,
    Review,
    Target,
    parse_record,
)
from gitpub.core.states import FailureCode, Kind, Phase, State


def sample() -> JobRecord:
    return JobRecord(job_id="j", idempotency_key="k", request_hash="h" * 64,
                     state=State.PREPARING, node="n", created_at=1.0, updated_at=2.0,
                     targets=(Target("posts/a.md", "update", "0" * 64),),
                     phases={Phase.DRAFT: "ok"})


def full() -> JobRecord:
    """A record with every field away from its default (so every annotation is exercised)."""
    return JobRecord(
        job_id="j", idempotency_key="k", request_hash="h" * 64, state=State.PUSHING,
        node="n", created_at=1.5, updated_at=2.5, source_sha256="s" * 64, drafted=True,
        kind=Kind.SYNC, requested_base="b" * 40, sync_commit="9" * 40, sync_after="j0",
        base_ref="refs/remotes/origin/main", base_commit="c" * 40, first_base="d" * 40,
        targets=(Target("posts/a.md", "update", "0" * 64, 0o100755), Target("posts/b.md", "new"),
                 Target("posts/c.md", "delete", "1" * 64, 0o120000)),
        manifest_sha256="m" * 64, commit_time=1234, author="A <a@b>", local_commit="e" * 40,
        remote_commit="f" * 40, attempt=2, max_attempts=7, next_retry_at=99.0,
        retry_remote="0123456789abcdef",
        last_recheck_head="a" * 40, recheck_fingerprints=("fp1", "fp2"),
        failure_code=FailureCode.DELIVERY_UNCONFIRMED, failure_detail="why",
        phases={Phase.DRAFT: "ok", Phase.GATES: "passed"},
        lease=Lease("tok", "host:1:2", 123.0),
        review=Review("gitlab", "gitpub/j", "main", "e" * 40, 7, "https://forge/mr/7"),
        format=FORMAT_WITH_REVIEW)


REQUIRED = [name for name in JobRecord._fields if name not in JobRecord._field_defaults]


def doc(record: JobRecord) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(record.to_json())
    return data


def parse_doc(data: object) -> JobRecord:
    return parse_record(json.dumps(data).encode())  # ASCII: a lone surrogate stays escaped


def test_round_trip() -> None:
    for r in (sample(), full()):
        assert parse_record(r.to_json()) == r


def test_every_field_is_away_from_its_default_in_full() -> None:
    """Guards the test above: a field added to JobRecord must be given a value in ``full``."""
    minimal = JobRecord(**{n: getattr(full(), n) for n in REQUIRED})
    same = [name for name in JobRecord._fields
            if name not in (*REQUIRED, "format")
            and getattr(full(), name) == getattr(minimal, name)]
    assert same == []


def test_the_format_is_2_exactly_when_the_record_has_a_review() -> None:
    """A record without a review stays readable by a gitpub from before reviews (format 1); one
    with a review is refused there by its format, never misread."""
    assert doc(sample())["format"] == FORMAT_VERSION and "review" not in doc(sample())
    assert doc(full())["format"] == 2
    moved = parse_record(full().to_json()).evolve(review=None)
    assert doc(moved)["format"] == FORMAT_VERSION and "review" not in doc(moved)


def test_a_record_error_is_corrupt_state() -> None:
    assert issubclass(RecordError, CorruptStateError)


@pytest.mark.parametrize("name", REQUIRED)
def test_a_missing_required_field_is_named(name: str) -> None:
    data = doc(full())
    del data[name]
    with pytest.raises(RecordError, match=f"missing field in job record: {name}"):
        parse_doc(data)


@pytest.mark.parametrize("name", [name for name in JobRecord._fields
                                  if name not in REQUIRED and name != "format"])
def test_an_absent_field_with_a_default_takes_it(name: str) -> None:
    """A record written before a field existed: the field's default, nothing else changed."""
    data = doc(full())
    del data[name]
    if name == "review":
        data["format"] = FORMAT_VERSION  # a record without a review is of format 1
    fresh = JobRecord(**{n: getattr(full(), n) for n in REQUIRED})
    assert parse_doc(data) == full().evolve(**{name: getattr(fresh, name)},
                                            format=data["format"])


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda d: d.pop("format"), "unknown job record format None"),
    (lambda d: d.update(format=3), "unknown job record format 3"),
    (lambda d: d.update(format=1), "a job record of format 1 has no field review"),
    (lambda d: d.update(review=None), "a job record of format 2 must have a review"),
    (lambda d: d["review"].pop("branch"), "missing field in job record: review.branch"),
    (lambda d: d["review"].update(number="7"), "field review.number: expected an integer"),
    (lambda d: d["review"].update(token="x"), "review: unknown fields in job record: token"),
    (lambda d: d.update(format="1"), "unknown job record format '1'"),
    (lambda d: d.update(format=True), "unknown job record format True"),
    (lambda d: d.update(format=1.0), "unknown job record format 1.0"),
    (lambda d: d.update(extra=1), "unknown fields in job record: extra"),
    (lambda d: d.update(node=None), "field node: expected a string, got None"),
    (lambda d: d.update(attempt=True), "field attempt: expected an integer, got True"),
    (lambda d: d.update(attempt=1.0), "field attempt: expected an integer"),
    (lambda d: d.update(drafted=1), "field drafted: expected a boolean"),
    (lambda d: d.update(created_at="now"), "field created_at: expected a finite number"),
    (lambda d: d.update(created_at=10 ** 400), "field created_at: expected a finite number"),
    (lambda d: d.update(state="BOGUS"), "field state: expected a State"),
    (lambda d: d.update(state="received"), "field state: expected a State"),
    (lambda d: d.update(kind="other"), "field kind: expected a Kind"),
    (lambda d: d.update(failure_code="oops"), "field failure_code: expected"),
    (lambda d: d.update(phases={"bogus": "x"}), "field phases key: expected a Phase"),
    (lambda d: d.update(phases={"draft": 1}), "field phases.draft: expected a string"),
    (lambda d: d.update(phases=[]), "field phases: expected an object"),
    (lambda d: d.update(targets={}), "field targets: expected a list"),
    (lambda d: d["targets"][0].update(op="remove"), "field targets[0].op: expected one of"),
    (lambda d: d["targets"][0].update(x=1), "targets[0]: unknown fields in job record: x"),
    (lambda d: d["targets"][1].pop("path"), "missing field in job record: targets[1].path"),
    (lambda d: d["targets"].append("posts/c.md"), "field targets[3]: expected an object"),
    (lambda d: d["lease"].update(expires_at="soon"), "field lease.expires_at: expected a fin"),
    (lambda d: d["lease"].pop("token"), "missing field in job record: lease.token"),
    (lambda d: d["lease"].update(token=5), "field lease.token: expected a string, got 5"),
    (lambda d: d.update(lease=[]), "field lease: expected"),
    (lambda d: d.update(recheck_fingerprints=["a", 1]), "recheck_fingerprints[1]: expected a"),
    (lambda d: d.update(author="\ud800"), "field author: expected a string"),
])
def test_malformed_fields_are_named(mutate: Any, needle: str) -> None:
    data = doc(full())
    mutate(data)
    with pytest.raises(RecordError) as info:
        parse_doc(data)
    assert needle in info.value.message


@pytest.mark.parametrize("raw", [
    b"", b"{", b"[]", b"null", b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000,
    b'{"format": 1, "a": ' + b"9" * 5000 + b"}", b'{"format": NaN}',
])
def test_garbage_is_a_record_error(raw: bytes) -> None:
    with pytest.raises(RecordError):
        parse_record(raw)


def test_non_finite_numbers_are_refused() -> None:
    raw = full().to_json().replace(b'"created_at": 1.5', b'"created_at": NaN')
    with pytest.raises(RecordError, match="created_at"):
        parse_record(raw)


def test_a_new_field_with_a_default_needs_no_parser_code() -> None:
    """What another change adding a field relies on: annotation + default = parsed, checked."""
    import gitpub.core.record as module

    @dataclasses.dataclass(frozen=True)
    class Grown:
        a: str
        channel_state: dict[str, int] = dataclasses.field(default_factory=dict)
        tries: tuple[Phase, ...] = ()
        note: str | None = None

    decode = module._decode
    assert decode(Grown, {"a": "x"}, "") == Grown("x")
    assert decode(Grown, {"a": "x", "channel_state": {"c": 1}, "tries": ["draft"]}, "") == \
        Grown("x", {"c": 1}, (Phase.DRAFT,))
    with pytest.raises(RecordError, match=r"channel_state\.c: expected an integer"):
        decode(Grown, {"a": "x", "channel_state": {"c": "1"}}, "")
    with pytest.raises(RecordError, match=r"tries\[0\]: expected a Phase"):
        decode(Grown, {"a": "x", "tries": ["nope"]}, "")


# -- property: mutate a valid record anywhere ------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=5) | st.sampled_from([s.value for s in State] + [k.value for k in Kind]
                                            + [c.value for c in FailureCode] + ["new", "update"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place inside a JSON document (as key/index tuples), the root included."""
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += paths(v, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    data = doc(draw(st.sampled_from([sample(), full()])))
    where = draw(st.sampled_from(paths(data)))
    how = draw(st.sampled_from(["set", "delete", "add"]))
    if not where:
        return draw(json_values), "root"
    parent: Any = data
    for step in where[:-1]:
        parent = parent[step]
    last = where[-1]
    if how == "set":
        parent[last] = draw(json_values)
    elif how == "delete":
        del parent[last]
    elif isinstance(parent, dict):
        parent[draw(st.text(max_size=8))] = draw(json_values)
    else:
        parent.insert(last, draw(json_values))
    return data, how


DEFAULTS = JobRecord._field_defaults


def assert_describes(result: Any, document: Any, top: bool = True) -> None:
    """``result`` (a parsed record, serialized) says exactly what ``document`` says; a key the
    document lacks holds its field's default."""
    if isinstance(document, dict):
        assert isinstance(result, dict)
        for k, v in document.items():
            assert_describes(result[k], v, top=False)
        for k in set(result) - set(document):
            if top:
                assert result[k] == json.loads(json.dumps(DEFAULTS[k])), k
            else:
                assert k in ("base_sha256", "base_mode", "head", "number", "url") \
                    and result[k] is None, k  # defaults of Target and Review
    elif isinstance(document, list):
        assert isinstance(result, list) and len(result) == len(document)
        for r, d in zip(result, document, strict=True):
            assert_describes(r, d, top=False)
    else:
        assert result == document and isinstance(result, bool) == isinstance(document, bool)


@settings(max_examples=600, deadline=None)
@given(mutated())
def test_any_mutation_parses_to_what_it_says_or_is_corrupt(case: tuple[Any, str]) -> None:
    data, _how = case
    try:
        record = parse_doc(data)
    except CorruptStateError:
        return
    assert_describes(json.loads(record.to_json()), data)
    assert parse_record(record.to_json()) == record


@given(st.binary(max_size=400))
def test_any_bytes_parse_or_are_corrupt(data: bytes) -> None:
    with contextlib.suppress(CorruptStateError):
        parse_record(data)


# -- the same property through the store: the error names the job ---------------------------

@pytest.fixture(scope="module")
def store_repo(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from gitpub.git.repo import Repository
    from gitpub.store.jobs import JobStore

    path: Path = tmp_path_factory.mktemp("records") / "repo"
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    repo = Repository.discover(path)
    store = JobStore(repo)
    job = store.create(full().evolve(job_id="job-under-test", lease=None), {}, "test")
    yield repo, store, job
    repo.close()
    proc = subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=path,
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutated())
def test_store_load_of_a_mutated_record(store_repo: Any, case: tuple[Any, str]) -> None:
    from gitpub.git.repo import MODE_FILE, Entry

    repo, store, job = store_repo
    data, _ = case
    if isinstance(data, dict) and "job_id" in data:
        data["job_id"] = "job-under-test"
    raw = json.dumps(data).encode()
    tree = repo.write_tree(job.tree, {"job.json": Entry(MODE_FILE, repo.write_blob(raw))})
    commit = repo.write_commit(tree, [job.commit], b"mutated\n")
    ref = store.ref_name("job-under-test")
    assert repo.cas_ref(ref, repo.read_ref(ref), commit)
    try:
        loaded = store.load("job-under-test")
    except CorruptStateError as e:
        assert "job job-under-test" in e.message and "\n" not in e.message
        return
    assert loaded is not None and loaded.record == parse_record(raw)


def test_format_version_is_one() -> None:
    assert FORMAT_VERSION == 1
