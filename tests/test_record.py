from __future__ import annotations

import contextlib
import json

from hypothesis import given
from hypothesis import strategies as st

from gitpub.core.record import JobRecord, RecordError, Target, parse_record
from gitpub.core.states import State


def sample() -> JobRecord:
    return JobRecord(job_id="j", idempotency_key="k", request_hash="h" * 64,
                     state=State.PREPARING, node="n", created_at=1.0, updated_at=2.0,
                     targets=(Target("posts/a.md", "update", "0" * 64),),
                     phases={"draft": "ok"})


def test_round_trip() -> None:
    r = sample()
    assert parse_record(r.to_json()) == r


@given(st.binary(max_size=400))
def test_garbage_is_a_record_error(data: bytes) -> None:
    with contextlib.suppress(RecordError):
        parse_record(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8)


@given(st.sampled_from(sorted(json.loads(sample().to_json()))), json_values)
def test_any_field_mutation_parses_or_is_a_record_error(name: str, value: object) -> None:
    data = json.loads(sample().to_json())
    data[name] = value
    with contextlib.suppress(RecordError):
        parse_record(json.dumps(data).encode())
