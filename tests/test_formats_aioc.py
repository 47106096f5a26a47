"""RunRecord validation: lenient on real variation, strict on §8.1 plus per-entry types, with
errors that name the JSON path and the problem."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.errors import InputError
from recstore.formats.aioc import RunRecord, load_record_file, validate_run_record
from recstore.records import analyze, compare_records

from .conftest import AIOC_FIXTURES, AIOC_RECORD_NAMES, CORPUS_DEV, read_ndjson_gz


def test_every_fixture_and_corpus_record_validates(aioc_records):
    records = list(aioc_records.values())
    for name in ("corpus-baseline", "corpus-candidate"):
        records += read_ndjson_gz(CORPUS_DEV / f"{name}.ndjson.gz")
    records += [
        r["replayRunRecord"] for r in read_ndjson_gz(CORPUS_DEV / "corpus-replays.ndjson.gz")
    ]
    assert len(records) == len(AIOC_RECORD_NAMES) + 1320
    for record in records:
        assert isinstance(validate_run_record(record), RunRecord)


def test_newer_and_legacy_fields_and_extras_are_kept(aioc_records):
    rec = copy.deepcopy(aioc_records["handoff-deny"])
    rec["initialAgentName"] = "Triage Agent"
    rec["executionRecordingStatus"] = "partial"
    rec["policyDecisions"][0]["handoffApplied"] = False
    rec["policyDecisions"][0]["denyMode"] = "tool_result"  # pre-0.1.0 spelling
    rec["x-tenant"] = {"ref": "t-1"}
    rec["items"][0]["x-note"] = 1
    model = validate_run_record(rec)
    assert model.initialAgentName == "Triage Agent" and model.executionRecordingStatus == "partial"
    assert model.policyDecisions[0]["handoffApplied"] is False
    assert model.model_extra == {"x-tenant": {"ref": "t-1"}}
    assert model.items[0]["x-note"] == 1


def test_legacy_record_without_input_item_count_or_result_mode(aioc_records):
    rec = aioc_records["simple-run"]
    assert "inputItemCount" not in rec
    assert validate_run_record(rec).inputItemCount is None


def _set(path: list, value):
    def mutate(rec):
        target = rec
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _delete(path: list):
    def mutate(rec):
        target = rec
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


BAD = [
    (_delete(["items"]), "$.items", "required field missing"),
    (_set(["items"], {}), "$.items", "expected array, got object"),
    (_set(["runId"], 5), "$.runId", "expected string, got number"),
    (_set(["response"], None), "$.response", "expected string, got null"),
    (_set(["items", 1, "callId"], 3), "$.items[1].callId", "expected string, got number"),
    (_delete(["items", 1, "name"]), "$.items[1].name", "required field missing"),
    (_set(["items", 1], "call"), "$.items[1]", "expected object, got string"),
    (_set(["items", 1, "type"], "reasoning"), "$.items[1]", "unknown item type 'reasoning'"),
    (_set(["items", 0, "content"], ["a"]), "$.items[0].content", "expected string, got array"),
    (
        _set(["policyDecisions", 0, "turn"], "1"),
        "$.policyDecisions[0].turn",
        "expected number, got string",
    ),
    (
        _set(["policyDecisions", 0, "turn"], True),
        "$.policyDecisions[0].turn",
        "expected number, got boolean",
    ),
    (
        _delete(["policyDecisions", 0, "resource", "name"]),
        "$.policyDecisions[0].resource.name",
        "required field missing",
    ),
    (
        _set(["policyDecisions", 0, "handoffApplied"], "yes"),
        "$.policyDecisions[0].handoffApplied",
        "expected boolean, got string",
    ),
    (
        _set(["requestFingerprints", 1, "messageCount"], "3"),
        "$.requestFingerprints[1].messageCount",
        "expected number, got string",
    ),
    (_set(["metadata"], ["a"]), "$.metadata", "expected object, got array"),
    (
        _set(["guardrailDecisions"], [{"turn": 1}]),
        "$.guardrailDecisions[0].timestamp",
        "required field missing",
    ),
    (_set(["contextRedacted"], "no"), "$.contextRedacted", "expected boolean, got string"),
]


@pytest.mark.parametrize(("mutate", "path", "problem"), BAD, ids=[b[1] + " " + b[2] for b in BAD])
def test_bad_records_name_path_and_problem(aioc_records, mutate, path, problem):
    rec = copy.deepcopy(aioc_records["tool-allow"])
    mutate(rec)
    with pytest.raises(InputError) as info:
        validate_run_record(rec, source="run.json")
    assert info.value.path == path and info.value.source == "run.json"
    assert str(info.value).startswith(f"run.json at {path}: {problem}")


@pytest.mark.parametrize("value", [[], "x", 1, None])
def test_non_object_is_rejected(value):
    with pytest.raises(InputError, match="expected a JSON object"):
        validate_run_record(value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a": 1,\n "b": }', "invalid JSON: Expecting value (line 2, column 7)"),
        (
            b'{"s": "NaN", "x": [Infinity]}',
            "Infinity is not valid JSON (JSON.parse rejects it) (line 1, column 20)",
        ),
        (b'{"a": "\xff"}', "invalid UTF-8 at byte 7"),
    ],
)
def test_load_record_file_reports_parse_errors(tmp_path, data, message):
    path = tmp_path / "r.json"
    path.write_bytes(data)
    with pytest.raises(InputError) as info:
        load_record_file(path)
    assert str(info.value) == f"{path}: {message}"


def test_load_record_file_returns_the_json_dict_in_key_order():
    path = AIOC_FIXTURES / "tool-allow.json"
    assert list(load_record_file(path)) == list(json.loads(path.read_text(encoding="utf-8")))


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=10,
)


def _keys(container: dict | list) -> list:
    return list(range(len(container))) if isinstance(container, list) else list(container)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(AIOC_RECORD_NAMES), st.data())
def test_any_damage_is_an_input_error_or_analyzable(name, data):
    rec = json.loads((AIOC_FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    # Replace one value at a random depth with arbitrary JSON.
    target = rec
    for _ in range(data.draw(st.integers(0, 3))):
        key = data.draw(st.sampled_from(_keys(target)))
        if not isinstance(target[key], (dict, list)) or not target[key]:
            break
        target = target[key]
    target[data.draw(st.sampled_from(_keys(target)))] = data.draw(_json)
    try:
        validate_run_record(rec)
    except InputError as exc:
        assert exc.path is not None and exc.path.startswith("$")
        assert exc.problem
        return
    # Whatever validation lets through, the record functions handle without raising.
    analyze(rec)
    assert compare_records(rec, rec)["equal"]
