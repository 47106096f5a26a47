"""Properties of ``project_record``'s rows against the definitions they reuse work from: the
run's call-sequence key printed afresh, each item's request turn from the request intervals,
each call's argsHash as aioc defines it (sha256 of the canonical JSON text). Each holds with the
C canonical printer and with the pure-Python one (``RECSTORE_PURE_PYTHON=1``)."""

from __future__ import annotations

from hypothesis import given, settings

from recstore.canonical import canonical_json, sha256_text
from recstore.formats.jsontext import int32
from recstore.records import analyze, extract_tool_calls, requests
from recstore.records.keys import calls_key
from recstore.store.projection import COLUMNS, RunContext, project_record

from .test_records_structure import records

_CTX = RunContext("aioc:r", "r", "aioc", 1, "{}", 0, None, 0, 10, 40)


def _column(rows: list[tuple], table: str, name: str) -> list:
    at = COLUMNS[table].index(name)
    return [row[at] for row in rows]


@settings(max_examples=200, deadline=None)
@given(records())
def test_calls_full_key_is_the_key_of_the_calls_printed_afresh(record):
    rows = project_record(record, _CTX)["proj_runs"]
    assert _column(rows, "proj_runs", "calls_full_key") == [calls_key(extract_tool_calls(record))]
    assert _column(rows, "proj_runs", "tool_call_count") == [len(analyze(record).tool_calls)]


@settings(max_examples=200, deadline=None)
@given(records())
def test_each_item_has_the_turn_of_the_request_whose_output_holds_it(record):
    expected = [None] * len(record["items"])
    for req in requests(record):
        for k in range(req.output_start, req.output_end):
            expected[k] = int32(req.turn)
    rows = project_record(record, _CTX)["proj_items"]
    assert _column(rows, "proj_items", "request_turn") == expected
    assert _column(rows, "proj_items", "item_index") == list(range(len(record["items"])))


@settings(max_examples=200, deadline=None)
@given(records())
def test_args_hash_is_sha256_of_the_canonical_arguments_text(record):
    for call, item in zip(extract_tool_calls(record), _call_items(record), strict=True):
        arguments = item.get("arguments", {}) if item is not None else {}
        assert call["argsCanonicalJson"] == canonical_json(arguments)
        assert call["argsHash"] == sha256_text(canonical_json(arguments))


def test_args_hash_of_a_lone_surrogate_is_of_its_escape():
    """Canonical JSON escapes a lone surrogate, so hashing its UTF-8 is hashing Node's text."""
    items = [{"type": "tool_call_item", "callId": "c", "name": "n", "arguments": {"a": "\ud800"}}]
    call = extract_tool_calls(items)[0]
    assert call["argsCanonicalJson"] == '{"a":"\\ud800"}'
    assert call["argsHash"] == sha256_text('{"a":"\\ud800"}')


def _call_items(record: dict) -> list[dict | None]:
    """The item each extracted call was made from (None for an orphan output's call)."""
    calls, positions = [], {}
    for item in record["items"]:
        if item["type"] == "tool_call_item":
            positions[item["callId"]] = len(calls)
            calls.append(item)
        elif item["type"] == "tool_call_output_item" and item["callId"] not in positions:
            positions[item["callId"]] = len(calls)
            calls.append(None)
    return calls
