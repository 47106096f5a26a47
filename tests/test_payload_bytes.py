"""Payloads travel as UTF-8 bytes (issue 28): from orjson (``dumps_json_bytes``) through the
line digests (``line_digests``, one call a record) to the chunk's Arrow payload column, and
every step gives what the text path gave: the same text, the same digests (and DuckDB's SQL
computes them again), the same column."""

from __future__ import annotations

import hashlib

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.formats.events import record_to_events
from recstore.formats.jsontext import dumps_json, dumps_json_bytes
from recstore.store.chain import EVENT_LINE_SQL, line_digests
from recstore.store.chunks import _payload_column

from .test_store_properties import json_values

texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40) | \
    st.sampled_from(["", "é😀｡\u2028", "plain", "{\"a\":[1,2]}", "fox \U0001f98a" * 50])
maybe_int = st.none() | st.integers(min_value=-(2**31), max_value=2**31 - 1)
events = st.lists(st.tuples(
    st.sampled_from(["run_started", "item_appended", "policy_decision"]), maybe_int, maybe_int,
    texts, st.booleans()), max_size=8)


@given(json_values)
@settings(max_examples=300, deadline=None)
def test_payload_bytes_are_the_utf8_of_the_json_text(value):
    # lone surrogates and ints beyond 64 bits take the stdlib path: ASCII text, as bytes
    data = dumps_json_bytes(value)
    assert type(data) is bytes
    assert data == dumps_json(value).encode("utf-8")


def test_record_events_carry_bytes_unless_a_big_record_is_consumed():
    record = {"runId": "r", "items": [{"content": "é"}, {"content": "\ud800"}, {"n": 2**70}],
              "status": "ok"}
    assert [type(e.payload_text) for e in record_to_events(record)] == [bytes] * 5
    consumed = record_to_events({**record, "items": list(record["items"])}, consume=True)
    # the leaner form: ASCII text as str, a short non-ASCII one as its UTF-8
    assert [type(e.payload_text) for e in consumed] == [str, bytes, str, str, str]


@given(events, st.integers(0, 10**6), st.integers(1, 5), st.text(min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_line_digests_of_a_record_are_its_events_line_digests_joined(evs, first_pos, revision,
                                                                     key):
    rows = [(etype, idx, turn, text.encode("utf-8") if as_bytes else text)
            for etype, idx, turn, text, as_bytes in evs]
    # the line as EVENT_LINE_SQL defines it (fields joined by U+001F, ended by U+001E),
    # written out here rather than through recstore's own code
    def line(pos: int, etype: str, idx, turn, payload) -> bytes:
        text = payload.decode("utf-8") if isinstance(payload, bytes) else payload
        fields = [key, str(pos), str(revision), etype, "" if idx is None else str(idx),
                  "" if turn is None else str(turn), text]
        return ("\x1f".join(fields) + "\x1e").encode("utf-8")

    expected = "".join(hashlib.sha256(line(first_pos + i, *row)).hexdigest()
                       for i, row in enumerate(rows))
    assert line_digests(key, revision, rows, first_pos) == expected


@given(events, st.integers(0, 1000), st.text(min_size=1, max_size=12))
@settings(max_examples=60, deadline=None)
def test_line_digests_are_what_duckdb_computes_from_the_stored_columns(evs, first_pos, key):
    # what `recstore verify` recomputes in SQL: a digest that only Python agrees with breaks it
    rows = [(etype, idx, turn, text.encode("utf-8") if as_bytes else text)
            for etype, idx, turn, text, as_bytes in evs]
    if not rows:
        return
    table = pa.table({
        "stream_key": [key] * len(rows), "stream_pos": list(range(first_pos, first_pos + len(rows))),
        "revision": [3] * len(rows), "type": [r[0] for r in rows],
        "idx": pa.array([r[1] for r in rows], pa.int32()),
        "turn": pa.array([r[2] for r in rows], pa.int32()),
        "payload": _payload_column([r[3] for r in rows]),
    })
    con = duckdb.connect()
    con.register("events", table)
    sql = con.execute(f"SELECT string_agg(sha256({EVENT_LINE_SQL}), '' ORDER BY stream_pos) "
                      "FROM events").fetchone()[0]
    assert line_digests(key, 3, rows, first_pos) == sql


@given(st.lists(st.tuples(texts, st.booleans()), max_size=30))
@settings(max_examples=200, deadline=None)
def test_payload_column_holds_the_texts_given_as_bytes_or_str(payloads):
    values = [text.encode("utf-8") if as_bytes else text for text, as_bytes in payloads]
    column = _payload_column(values)
    assert column.type == pa.string()
    column.validate(full=True)
    assert column.to_pylist() == [text for text, _ in payloads]


def test_payload_column_refuses_bytes_that_are_not_utf8():
    # pa.array refused them for a string column; the cast of the joined buffer must too
    with pytest.raises(pa.ArrowInvalid):
        _payload_column([b"{}", b"\"\xff\""])
