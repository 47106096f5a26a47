"""Must show #1: strict replay with the from-source harness and the recorded provider reproduces
every fixture record, every corpus-dev baseline record and generated records — equal on the
``response`` and ``toolCalls`` compare sections, tool outputs included (absent ``data`` stays
absent)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.canonical import canonical_json
from recstore.compare import parse_ignore, strip_record
from recstore.records import compare_records, extract_tool_calls
from recstore.replay import harness_from_source, replay_run
from recstore.synth import generate_corpus

from .conftest import AIOC_FIXTURES, AIOC_RECORD_NAMES, CORPUS_DEV, read_ndjson_gz

SECTIONS = ["response", "toolCalls"]


def reproduce(source: dict) -> dict:
    """Replay ``source`` against itself and return the replay record (asserting it reproduced)."""
    before = canonical_json(source)
    outcome = replay_run(source, harness_from_source(source), "strict")
    assert canonical_json(source) == before, "replay modified its source"
    comparison = compare_records(source, outcome.record, include_sections=SECTIONS)
    assert comparison["equal"], (source.get("runId"), comparison["differences"][:3])
    assert outcome.report.status == "completed", outcome.report.reason
    assert outcome.record["status"] == source["status"]
    return outcome.record


@pytest.mark.parametrize("name", AIOC_RECORD_NAMES)
def test_every_fixture_record_reproduces(name):
    source = json.loads((AIOC_FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    replay = reproduce(source)
    assert replay["metadata"]["replayOfRunId"] == source["runId"]
    assert replay["metadata"]["harness"]["descriptorHash"].startswith("sha256:")
    assert replay["runId"] != source["runId"]


def test_every_corpus_dev_baseline_record_reproduces():
    records = read_ndjson_gz(CORPUS_DEV / "corpus-baseline.ndjson.gz")
    assert len(records) == 600
    failed = [r for r in records if r["status"] == "failed"]
    assert {r["errorName"] for r in failed} >= {
        "ToolCallPolicyDeniedError", "HandoffPolicyDeniedError", "OutputGuardrailTripwireTriggered",
        "MaxTurnsExceededError", "ToolCallError", "ZodError", "UpstreamTimeoutError",
    }
    for source in records:
        reproduce(source)


def test_every_corpus_dev_candidate_record_reproduces_too():
    records = read_ndjson_gz(CORPUS_DEV / "corpus-candidate.ndjson.gz")
    assert len(records) == 600  # an empty or truncated read would otherwise pass vacuously
    for source in records:
        reproduce(source)


def test_absent_data_stays_absent_not_null():
    records = read_ndjson_gz(CORPUS_DEV / "corpus-baseline.ndjson.gz")
    checked = 0
    for source in records:
        emitted = source["items"][source["inputItemCount"]:]
        absent = [i for i, it in enumerate(emitted) if it["type"] == "tool_call_output_item"
                  and isinstance(it.get("output"), dict) and it["output"].get("status") == "ok"
                  and "data" not in it["output"]]
        if not absent:
            continue
        replay = reproduce(source)
        outputs = [c["output"] for c in extract_tool_calls(replay) if c["hasOutput"]]
        assert any(o.get("status") == "ok" and "data" not in o for o in outputs if isinstance(o, dict))
        checked += 1
    assert checked >= 10


def test_one_thousand_generated_records_reproduce():
    count = 0
    scenarios = set()
    for source in generate_corpus(1000, seed=11):
        reproduce(source)
        scenarios.add((source.get("metadata") or {}).get("scenario"))
        count += 1
    assert count == 1000
    assert len(scenarios) >= 10  # the generator's scenarios are all exercised


def test_generated_records_reproduce_their_decisions_and_failures_too():
    """Beyond response and tool calls: every policy and guardrail decision (as the semantic
    preset compares them: not their timestamps or call ids) and the error of a failed run. Only
    argument-validation failures cannot be: the record holds no tool schemas."""
    semantic = parse_ignore(preset="semantic")
    checked = 0
    for source in generate_corpus(300, seed=5):
        if source["metadata"]["scenario"] == "validation":
            continue
        replay = replay_run(source, harness_from_source(source), "strict").record
        comparison = compare_records(strip_record(source, semantic), strip_record(replay, semantic),
                                     exclude_sections=sorted(semantic.sections))
        assert comparison["equal"], (source["metadata"], comparison["differences"][:2])
        assert [replay.get(k) for k in ("status", "errorName", "errorMessage")] == [
            source.get(k) for k in ("status", "errorName", "errorMessage")]
        checked += 1
    assert checked > 250


def test_reused_call_ids_get_their_own_decisions():
    """Providers reuse call ids; the decisions of calls sharing a turn and id are told apart by
    position, so a strict self-replay reproduces them instead of stopping REPLAY_INPUT_MISSING."""
    sources = [r for r in generate_corpus(200, seed=13) if r["metadata"]["scenario"] == "reused_call_ids"]
    assert len(sources) == 8
    for source in sources:
        decisions = [(d["turn"], d["callId"], d["decision"]) for d in source["policyDecisions"]]
        first_turn = [d for d in decisions if d[0] == 1]
        assert len({d[1] for d in decisions}) == 1 and len({d[2] for d in first_turn}) == 2
        replay = reproduce(source)
        assert [(d["turn"], d["callId"], d["decision"], d["reason"]) for d in replay["policyDecisions"]] == [
            (d["turn"], d["callId"], d["decision"], d["reason"]) for d in source["policyDecisions"]]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**31 - 1), size=st.integers(min_value=1, max_value=30))
def test_property_generated_records_reproduce(seed, size):
    for source in generate_corpus(size, seed=seed):
        reproduce(source)


@pytest.mark.parametrize("name", ["tool-allow", "v-approval-and-soft-deny", "v-failed-deny-throw",
                                  "v-guardrail-triggered", "v-thread-continuation", "compare-v1"])
def test_records_without_request_fingerprints_reproduce(name):
    # Hand-written and converted records may carry no fingerprints: the recorded provider then
    # takes one request per run of emitted tool calls, plus the final answer.
    source = json.loads((AIOC_FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    source.setdefault("inputItemCount", source["requestFingerprints"][0]["messageCount"])
    source["requestFingerprints"], source["promptSnapshots"] = [], []
    reproduce(source)
