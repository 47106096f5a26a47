"""aioc parity of extract_tool_calls, compare_records and record hashes, compared as canonical
JSON of the whole result (docs/aioc-runrecord.md §2–§5, fixtures/aioc)."""

from __future__ import annotations

import pytest

from recstore.canonical import canonical_json, sha256_canonical
from recstore.records import compare_records, extract_tool_calls

from .conftest import AIOC_RECORD_NAMES, CORPUS_DEV, read_ndjson_gz


def _options(encoded: dict | None) -> dict:
    """expected-aioc-0.2.8.json stores aioc's options object (or null for none)."""
    encoded = encoded or {}
    return {
        "include_sections": encoded.get("includeSections"),
        "exclude_sections": encoded.get("excludeSections"),
    }


@pytest.mark.parametrize("name", AIOC_RECORD_NAMES)
def test_extract_and_hash_match_aioc(name, aioc_records, expected_aioc):
    record = aioc_records[name]
    assert canonical_json(extract_tool_calls(record)) == canonical_json(
        expected_aioc["extract"][name]
    )
    assert sha256_canonical(record) == expected_aioc["recordCanonicalSha256"][name]


def test_extract_from_items_list_equals_from_record(aioc_records):
    for record in aioc_records.values():
        assert extract_tool_calls(record["items"]) == extract_tool_calls(record)


def test_all_676_compares_match_aioc(aioc_records, expected_aioc):
    cases = expected_aioc["compare"]
    assert len(cases) == 676
    option_sets = {canonical_json(c["options"]) for c in cases}
    assert len(option_sets) == 4  # null, exclude metadata, include toolCalls+policy, include []
    mismatches = [
        (c["left"], c["right"], c["options"])
        for c in cases
        if canonical_json(
            compare_records(
                aioc_records[c["left"]], aioc_records[c["right"]], **_options(c["options"])
            )
        )
        != canonical_json(c["result"])
    ]
    assert mismatches == []


def test_compare_result_keeps_aioc_key_order(aioc_records, expected_aioc):
    # Byte-identical JSON dumps need aioc's key order, not only canonical equality.
    case = next(
        c
        for c in expected_aioc["compare"]
        if c["left"] == "compare-v1" and c["right"] == "compare-v2" and c["options"] is None
    )
    result = compare_records(aioc_records["compare-v1"], aioc_records["compare-v2"])
    assert list(result) == list(case["result"])
    assert [list(d) for d in result["differences"]] == [
        list(d) for d in case["result"]["differences"]
    ]
    call = extract_tool_calls(aioc_records["tool-allow"])[0]
    assert list(call) == list(expected_aioc["extract"]["tool-allow"][0])


@pytest.fixture(scope="module")
def corpus():
    return {
        "baseline": read_ndjson_gz(CORPUS_DEV / "corpus-baseline.ndjson.gz"),
        "candidate": read_ndjson_gz(CORPUS_DEV / "corpus-candidate.ndjson.gz"),
        "replay": [
            r["replayRunRecord"] for r in read_ndjson_gz(CORPUS_DEV / "corpus-replays.ndjson.gz")
        ],
    }


def test_corpus_extract_matches_oracle(corpus):
    oracle = read_ndjson_gz(CORPUS_DEV / "oracle-extract.ndjson.gz")
    by_run = {(r["set"], r["runId"]): r["toolCalls"] for r in oracle}
    checked = 0
    mismatches = []
    for name in ("baseline", "candidate"):
        for record in corpus[name]:
            checked += 1
            if canonical_json(extract_tool_calls(record)) != canonical_json(
                by_run[(name, record["runId"])]
            ):
                mismatches.append((name, record["runId"]))
    assert checked == 1200
    assert mismatches == []


def test_corpus_hashes_match_oracle(corpus):
    oracle = read_ndjson_gz(CORPUS_DEV / "oracle-hashes.ndjson.gz")
    expected = {(r["set"], r["runId"]): r["recordCanonicalSha256"] for r in oracle}
    actual = {
        (name, r["runId"]): sha256_canonical(r) for name, records in corpus.items() for r in records
    }
    assert len(actual) == len(expected) == 1320
    assert actual == expected


def test_corpus_pair_compares_match_oracle(corpus):
    by_case: dict[str, dict] = {}
    for name in ("baseline", "candidate"):
        for record in corpus[name]:
            by_case.setdefault(record["metadata"]["caseId"], {})[name] = record
    oracle = read_ndjson_gz(CORPUS_DEV / "oracle-compare.ndjson.gz")
    assert len(oracle) == 600
    mismatches = []
    for row in oracle:
        pair = by_case[row["caseId"]]
        left, right = pair["baseline"], pair["candidate"]
        assert (left["runId"], right["runId"]) == (row["baselineRunId"], row["candidateRunId"])
        default = compare_records(left, right)
        narrowed = compare_records(
            left, right, exclude_sections=["policy", "guardrails", "metadata"]
        )
        if canonical_json(default) != canonical_json(row["default"]):
            mismatches.append((row["caseId"], "default"))
        if canonical_json(narrowed) != canonical_json(row["excludePolicyGuardrailsMetadata"]):
            mismatches.append((row["caseId"], "excludePolicyGuardrailsMetadata"))
    assert mismatches == []
