"""Property tests: for generated records (recstore.synth plus hypothesis mutations with odd JSON
values and key orders), ingest -> get_record is canonical-equal and keeps key order, ingesting
twice appends nothing, a change makes a revision, and projections equal the pure functions."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.canonical import canonical_json, sha256_canonical
from recstore.formats.events import events_to_record, record_to_events
from recstore.formats.jsontext import dumps_json, dumps_json_lean, loads_json, parse_json_bytes
from recstore.records import analyze
from recstore.store import Store
from recstore.synth import generate_corpus

from .conftest import stored_events_in_log_order

EDGE_VALUES = [1.0, 1e21, 1e-7, -0.0, 2**70, -(2**64), 0.1, "\ud800", "é😀｡\u2028", "", None]
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(EDGE_VALUES),
)
json_keys = st.one_of(st.text(max_size=6), st.sampled_from(["9", "10", "__proto__", "｡", "😀"]))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(json_keys, inner, max_size=4)
    ),
    max_leaves=12,
)

CORPUS = list(generate_corpus(40, seed=5))


def _insert_at(record: dict, position: int, key: str, value: Any) -> dict:
    items = [(k, v) for k, v in record.items() if k != key]
    items.insert(position % (len(items) + 1), (key, value))
    return dict(items)


@st.composite
def mutated_records(draw) -> dict:
    record = json.loads(json.dumps(draw(st.sampled_from(CORPUS))))  # deep copy
    for _ in range(draw(st.integers(0, 3))):
        taken = set(record)
        key = draw(st.text(min_size=1, max_size=8).filter(lambda k, taken=taken: k not in taken))
        record = _insert_at(record, draw(st.integers(0, 40)), key, draw(json_values))
    if draw(st.booleans()):
        record["metadata"] = {**record.get("metadata", {}), "extra": draw(json_values)}
    if record["items"] and draw(st.booleans()):
        item = record["items"][draw(st.integers(0, len(record["items"]) - 1))]
        item["x-extra"] = draw(json_values)
    if draw(st.booleans()):  # move a known top-level key somewhere else
        key = draw(st.sampled_from(sorted(record)))
        record = _insert_at(record, draw(st.integers(0, 40)), key, record[key])
    return record


@given(st.dictionaries(json_keys, json_values, max_size=6), json_values)
@settings(max_examples=150, deadline=None)
def test_events_round_trip_any_object(fields, item):
    record = {**fields, "items": [item, fields], "policyDecisions": [], "tail": item}
    back = events_to_record(record_to_events(record))
    assert canonical_json(back) == canonical_json(record)
    assert list(back) == list(record)
    assert json.dumps(back) == json.dumps(record)


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_stored_json_text_round_trips_exactly(value):
    assert json.dumps(loads_json(dumps_json(value))) == json.dumps(value)


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_input_is_parsed_exactly(value):
    """orjson's value is kept unless the text holds an integer beyond 64 bits."""
    text = json.dumps(value)
    parsed, error = parse_json_bytes(text.encode())
    assert error is None
    assert repr(parsed) == repr(json.loads(text))


@pytest.mark.parametrize("text", [
    "[18446744073709551616]", "[-9223372036854775809]", "[18446744073709551615]",
    '{"a":"1234567890123456789","b":[0.14285714285714285,123456789012345678901234567890]}',
    "[1.2345678901234568e+29]", "[1234567890123456.5, 9007199254740993]",
])
def test_numbers_orjson_would_round_are_read_exactly(text):
    assert repr(parse_json_bytes(text.encode())[0]) == repr(json.loads(text))


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_lean_json_text_is_the_same_text_in_less_memory(value):
    lean = dumps_json_lean(value)
    text = dumps_json(value)
    assert (lean.decode("utf-8") if isinstance(lean, bytes) else lean) == text
    assert sys.getsizeof(lean) <= sys.getsizeof(text)
    assert json.dumps(loads_json(lean)) == json.dumps(value)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(tmp_path_factory.mktemp("prop") / "prop.duckdb")


def _rows(store: Store, sql: str, key: str) -> list[tuple]:
    with store.reader() as con:
        return con.execute(sql, [key]).fetchall()


def _assert_projections_match(store: Store, key: str, record: dict) -> None:
    a = analyze(record)
    assert _rows(
        store,
        "SELECT agent, entered_after_turn, via_call_id, transition, request_count, item_start, "
        "item_end FROM visits WHERE run_key = ? ORDER BY visit_index",
        key,
    ) == [
        (v.agent, v.entered_after_turn, v.via_call_id, v.transition, len(v.turns), v.item_start,
         v.item_end)
        for v in a.visits
    ]
    assert _rows(
        store,
        "SELECT turn, agent, message_count, output_start, output_end FROM requests "
        "WHERE run_key = ? ORDER BY request_index",
        key,
    ) == [(r.turn, r.agent, r.message_count, r.output_start, r.output_end) for r in a.requests]
    assert _rows(
        store,
        "SELECT call_id, name, args_hash, has_output, envelope_status, request_turn, visit_index, "
        "agent, is_handoff, handoff_target, item_index, output_item_index FROM tool_calls "
        "WHERE run_key = ? ORDER BY call_index",
        key,
    ) == [
        (j.call["callId"], j.call["name"], j.call["argsHash"], j.call["hasOutput"],
         j.envelope_status, j.request_turn, j.visit_index, j.agent, j.is_handoff,
         j.handoff_target, j.call_item_index, j.output_item_index)
        for j in a.tool_calls
    ]
    assert _rows(store, "SELECT code FROM findings WHERE run_key = ? ORDER BY finding_index",
                 key) == [(f.code,) for f in a.findings]


@given(mutated_records())
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_ingest_round_trip_idempotence_and_projections(store, record):
    # the store outlives examples and hypothesis may repeat one: every example is a new run
    record["runId"] = f"prop-{uuid.uuid4()}"
    first = store.ingest_records([record], source_uri="hypothesis")
    assert (first.accepted, first.rejected) == (1, 0), first.rejects
    key = first.run_keys[0]
    back = store.get_record(record["runId"])
    assert canonical_json(back) == canonical_json(record)
    assert json.dumps(back) == json.dumps(record)  # same key order at every depth
    assert _rows(store, "SELECT record_hash FROM runs WHERE run_key = ?", key) == [
        (sha256_canonical(record),)
    ]
    _assert_projections_match(store, key, record)

    seq = store.last_seq()
    again = store.ingest_records([record], source_uri="hypothesis")
    assert (again.accepted, again.duplicate) == (0, 1)
    assert store.last_seq() == seq

    changed = {**record, "response": f"{record['response']} (edited)"}
    revised = store.ingest_records([changed], source_uri="hypothesis")
    assert revised.revised == 1
    assert store.get_record(key) == changed
    assert json.dumps(store.get_record(key, revision=1)) == json.dumps(record)
    _assert_projections_match(store, key, changed)


@given(st.lists(mutated_records(), min_size=2, max_size=5))
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_records_of_one_batch_read_back_exactly_from_the_reordered_log(store, records):
    # a batch stores its events by type and array index, the runs interleaved (chunks.
    # placed_inserts): each record must still read back as given, in seq order
    for record in records:
        record["runId"] = f"prop-{uuid.uuid4()}"
    summary = store.ingest_records(records, source_uri="hypothesis-batch")
    assert (summary.accepted, summary.rejected) == (len(records), 0), summary.rejects
    for record in records:
        assert json.dumps(store.get_record(record["runId"])) == json.dumps(record)
    with store.reader() as con:
        assert stored_events_in_log_order(con)


def test_store_verifies_after_property_runs(store):
    if not store.path.exists():
        pytest.skip("property test did not run")
    report = store.verify()
    assert report.ok, report.problems


def test_lineage_replay_of_caller_rows_and_thread_continuation(tmp_path):
    store = Store(tmp_path / "lineage.duckdb")
    first = json.loads(json.dumps(CORPUS[0]))
    first["runId"] = "thread-1"
    follow_up = {"type": "message", "role": "user", "content": "and one more thing"}
    second = json.loads(json.dumps(CORPUS[1]))
    second.update(
        runId="thread-2",
        items=[*first["items"], follow_up, {"type": "message", "role": "assistant", "content": "ok"}],
        inputItemCount=len(first["items"]) + 1,
        requestFingerprints=[],
        promptSnapshots=[],
        policyDecisions=[],
    )
    replay = json.loads(json.dumps(CORPUS[2]))
    replay.update(runId="replay-1", metadata={"replayOfRunId": "thread-1"})
    provenance = json.loads(json.dumps(CORPUS[3]))
    provenance.update(runId="replay-2", metadata={"replayOfRunId": "thread-1"})

    store.ingest_records([second, replay])  # children first: parents resolve when they arrive
    store.ingest_records(
        [first, provenance],
        lineage=[{"child": "replay-2", "relation": "replay_of", "parent_run_id": "thread-1",
                  "detail": {"mode": "strict"}}],
    )
    with store.reader() as con:
        rows = con.execute(
            "SELECT child_run_key, parent_run_key, relation, detail->>'$.mode' FROM lineage "
            "ORDER BY 1, 3"
        ).fetchall()
    assert rows == [
        ("aioc:replay-1", "aioc:thread-1", "replay_of", None),
        ("aioc:replay-2", "aioc:thread-1", "replay_of", "strict"),
        ("aioc:thread-2", "aioc:thread-1", "thread_continuation", None),
    ]
    assert store.verify().ok
