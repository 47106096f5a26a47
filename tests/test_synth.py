"""The corpus generator: determinism, scenario coverage, §1.11 invariants on every record, and
candidate changes that are exactly what ``case_changes`` declares."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.canonical import canonical_json
from recstore.formats.aioc import validate_run_record
from recstore.records import compare_records, extract_tool_calls, visits
from recstore.store import Store
from recstore.synth import (
    EDGE_ARGUMENTS,
    SCENARIOS,
    case_changes,
    generate_corpus,
    ndjson_line,
    write_corpus,
)

from .runtime_invariants import record_problems

N = 96  # four passes of the 24-case schedule: every scenario at least 4 times
SEED = 11


@pytest.fixture(scope="module")
def baseline() -> list[dict]:
    return list(generate_corpus(N, seed=SEED))


@pytest.fixture(scope="module")
def candidate() -> list[dict]:
    return list(generate_corpus(N, seed=SEED, variant="candidate"))


@pytest.fixture(scope="module")
def changes() -> dict:
    return case_changes(N, seed=SEED)


def by_scenario(records: list[dict], scenario: str) -> list[dict]:
    return [r for r in records if r["metadata"]["scenario"] == scenario]


def outputs(record: dict) -> list[dict]:
    return [i["output"] for i in record["items"] if i["type"] == "tool_call_output_item"]


# --- determinism ----------------------------------------------------------------------------

def test_same_seed_same_bytes(tmp_path):
    for name in ("a.ndjson", "b.ndjson", "a.ndjson.gz", "b.ndjson.gz"):
        write_corpus(tmp_path / name, 40, seed=5, variant="candidate")
    assert (tmp_path / "a.ndjson").read_bytes() == (tmp_path / "b.ndjson").read_bytes()
    assert (tmp_path / "a.ndjson.gz").read_bytes() == (tmp_path / "b.ndjson.gz").read_bytes()
    assert gzip.decompress((tmp_path / "a.ndjson.gz").read_bytes()) == (tmp_path / "a.ndjson").read_bytes()


def test_ndjson_lines_parse_back_to_the_records(tmp_path):
    path = write_corpus(tmp_path / "c.ndjson", 48, seed=2)
    lines = path.read_text(encoding="utf-8").splitlines()  # splitlines also breaks on U+2028
    records = list(generate_corpus(48, seed=2))
    assert len(lines) == len(records)
    for line, record in zip(lines, records, strict=True):
        assert json.loads(line) == record
        assert ndjson_line(record) == (line + "\n").encode("utf-8")


def test_different_seeds_differ(baseline):
    other = list(generate_corpus(24, seed=SEED + 1))
    assert [r["question"] for r in other] != [r["question"] for r in baseline[:24]]
    assert {r["runId"] for r in other}.isdisjoint(r["runId"] for r in baseline)


def test_prefix_is_stable(baseline):
    """Case i does not depend on n: a shorter corpus is a prefix of a longer one."""
    assert [json.dumps(r) for r in generate_corpus(10, seed=SEED)] == [json.dumps(r) for r in baseline[:10]]


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32), variant=st.sampled_from(["baseline", "candidate"]))
def test_any_seed_is_deterministic_and_sound(seed, variant):
    first = list(generate_corpus(24, seed=seed, variant=variant))
    second = list(generate_corpus(24, seed=seed, variant=variant))
    assert [json.dumps(r) for r in first] == [json.dumps(r) for r in second]
    for record in first:
        assert record_problems(record) == [], record["metadata"]


# --- coverage -------------------------------------------------------------------------------

def test_every_scenario_and_metadata(baseline):
    assert {r["metadata"]["scenario"] for r in baseline[: len(SCENARIOS)]} == set(SCENARIOS)
    for i, record in enumerate(baseline):
        meta = record["metadata"]
        assert meta["caseId"] == f"case-{i + 1:05d}"
        assert meta["suite"] in {"support", "research", "finance"}
        assert re.fullmatch(r"2026\.3\.\d+\+build\.\d{3}", meta["appBuildVersion"])
        assert list(meta)[:4] == ["caseId", "suite", "appBuildVersion", "scenario"]


def test_invariants_hold_for_every_record(baseline, candidate):
    for record in baseline + candidate:
        assert record_problems(record) == [], record["metadata"]["caseId"]
        validate_run_record(record, source=record["metadata"]["caseId"])  # the ingest model accepts it


def test_envelopes_ok_denied_and_approval(baseline):
    statuses = {o["status"] for r in baseline for o in outputs(r) if isinstance(o, dict)}
    assert statuses == {"ok", "denied", "approval_required"}
    soft = by_scenario(baseline, "policy_soft")[0]
    assert soft["status"] == "completed" and len(soft["suspendedProposals"]) == 1
    assert {o["publicReason"] for r in by_scenario(baseline, "policy_soft") for o in outputs(r)} >= {
        "Not available on your plan.", "Action not allowed.", "Manager approval is required."}


def test_handoff_cycles_and_two_in_one_turn(baseline):
    cycle = by_scenario(baseline, "cycle")[0]
    agents = [v.agent for v in visits(cycle)]
    assert len(agents) == 3 and agents[0] == agents[2] != agents[1]
    two = by_scenario(baseline, "two_handoffs")[0]
    handoffs = [d for d in two["policyDecisions"] if d["resource"]["kind"] == "handoff"]
    assert len(handoffs) == 2 and {d["turn"] for d in handoffs} == {1}
    assert any(len(v.turns) == 0 for v in visits(two))  # the skipped-over agent: an empty visit
    denied = [r for r in by_scenario(baseline, "handoff")
              if any(o.get("status") == "denied" for o in outputs(r))]
    applied = [r for r in by_scenario(baseline, "handoff") if r not in denied]
    assert denied and applied
    assert all(r["agentName"] == r["requestFingerprints"][0]["agentName"] for r in denied)


def test_conditional_handoffs_enabled_and_disabled(baseline):
    exposed = set()
    for record in by_scenario(baseline, "conditional"):
        calls = [c["name"] for c in extract_tool_calls(record)]
        exposed.add(any(name.startswith("handoff_to_") for name in calls))
    assert exposed == {True, False}


def test_guardrails_pass_and_trip(baseline):
    decisions = [d for r in baseline for d in r.get("guardrailDecisions", [])]
    assert {d["decision"] for d in decisions} == {"pass", "triggered"}
    tripped = [r for r in by_scenario(baseline, "guardrail") if r["status"] == "failed"]
    assert tripped and all(r["errorName"] == "OutputGuardrailTripwireTriggered" for r in tripped)
    assert all(r["response"] == "" for r in tripped)


def test_failures_with_dangling_calls(baseline):
    names = {r.get("errorName") for r in baseline}
    assert {"ToolCallPolicyDeniedError", "ToolCallError", "MaxTurnsExceededError", "ZodError",
            "OutputGuardrailTripwireTriggered", "UpstreamTimeoutError"} <= names
    for record in by_scenario(baseline, "policy_throw") + by_scenario(baseline, "unknown_tool"):
        assert record["status"] == "failed" and record["items"][-1]["type"] == "tool_call_item"
    unknown = by_scenario(baseline, "unknown_tool")[0]
    assert unknown["policyDecisions"] == []
    reasons = {d["reason"] for r in by_scenario(baseline, "policy_throw") for d in r["policyDecisions"]}
    assert "policy_not_configured" in reasons or len(reasons) >= 2


def test_provider_errors_leave_an_empty_last_interval(baseline):
    for record in by_scenario(baseline, "provider_error"):
        assert record["errorName"] == "UpstreamTimeoutError"
        assert len(record["items"]) == record["requestFingerprints"][-1]["messageCount"]


def test_max_turns(baseline):
    for record in by_scenario(baseline, "maxturns"):
        n = len(record["requestFingerprints"])
        assert record["errorMessage"] == f"Max turns exceeded: {n}" and 3 <= n <= 6


def test_thread_continuations_carry_earlier_tool_calls(baseline):
    for record in by_scenario(baseline, "thread"):
        count = record["inputItemCount"]
        assert count > 1 and record["requestFingerprints"][0]["messageCount"] == count
        history = record["items"][:count]
        assert [i["type"] for i in history[1:3]] == ["tool_call_item", "tool_call_output_item"]
        assert "\n\n" in record["question"]


def test_edge_case_arguments(baseline):
    """Every edge-case argument string is used, kept verbatim in rawItem, and parsed like aioc."""
    calls = [i for r in by_scenario(baseline, "edge_args") for i in r["items"] if i["type"] == "tool_call_item"]
    assert {c["rawItem"]["arguments"] for c in calls} == set(EDGE_ARGUMENTS)
    parsed = {c["rawItem"]["arguments"]: c["arguments"] for c in calls}
    assert parsed["not json at all"] == {"__raw": "not json at all"}
    assert parsed["   "] == {} and parsed["null"] is None
    numbers = parsed[EDGE_ARGUMENTS[0]]
    assert list(numbers)[:2] == ["9", "10"]  # JSON.parse key order: array indexes first
    assert numbers["a"] == [1e21, 1e-7, 0.000001, -0.0, 12345678901234567890]
    assert parsed[EDGE_ARGUMENTS[1]]["k"] == "\u2028\ud800x"


def test_large_outputs(baseline):
    sizes = [len(json.dumps(o)) for r in by_scenario(baseline, "large_output") for o in outputs(r)]
    assert sizes and min(sizes) > 10_000


# --- candidate variant ----------------------------------------------------------------------

def test_candidate_runs_the_same_cases(baseline, candidate):
    for base, cand in zip(baseline, candidate, strict=True):
        assert base["metadata"] == cand["metadata"]
        assert base["question"] == cand["question"]
        assert base["items"][: base["inputItemCount"]] == cand["items"][: cand["inputItemCount"]]
        assert base["runId"] != cand["runId"]
        assert base["promptSnapshots"][0]["promptVersion"] != cand["promptSnapshots"][0]["promptVersion"]


def test_declared_changes_cover_every_kind(changes):
    kinds = {c.kind for c in changes.values()}
    assert kinds == {"none", "tool_argument", "final_wording", "drop_tool_call", "add_tool_call",
                     "status_flip"}
    assert list(changes) == [f"case-{i + 1:05d}" for i in range(N)]


def assert_change_as_declared(base: dict, cand: dict, change) -> None:
    result = compare_records(base, cand)
    summary, metrics = result["summary"], result["metrics"]
    paths = [d["path"] for d in result["differences"]]
    where = (change, paths)
    if change.kind == "none":
        assert result["equal"], where
        assert json.dumps(base["policyDecisions"]) == json.dumps(cand["policyDecisions"])
    elif change.kind == "final_wording":
        assert paths == ["response"], where
    elif change.kind == "tool_argument":
        assert not summary["sameToolCallShape"] and summary["sameFinalResponse"], where
        assert any(p.endswith(".argsHash") for p in paths), where
        assert metrics["toolCallsA"] == metrics["toolCallsB"], where
    elif change.kind == "drop_tool_call":
        assert metrics["toolCallsB"] == metrics["toolCallsA"] - 1, where
        assert len(cand["policyDecisions"]) == len(base["policyDecisions"]) - 1, where
        assert summary["sameFinalResponse"], where
    elif change.kind == "add_tool_call":
        assert metrics["toolCallsB"] == metrics["toolCallsA"] + 1, where
        assert len(cand["policyDecisions"]) == len(base["policyDecisions"]) + 1, where
        assert summary["sameFinalResponse"], where
    else:
        assert change.kind == "status_flip"
        assert {base["status"], cand["status"]} == {"completed", "failed"}, where
        direction = "completed -> failed" if base["status"] == "completed" else "failed -> completed"
        assert direction in change.detail and not summary["samePolicyDecisions"], where


def test_candidate_changes_are_exactly_as_declared(baseline, candidate, changes):
    for base, cand in zip(baseline, candidate, strict=True):
        assert_change_as_declared(base, cand, changes[base["metadata"]["caseId"]])


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_candidate_changes_as_declared_for_any_seed(seed):
    changes = case_changes(24, seed)
    pairs = zip(generate_corpus(24, seed), generate_corpus(24, seed, "candidate"), strict=True)
    for base, cand in pairs:
        assert_change_as_declared(base, cand, changes[base["metadata"]["caseId"]])


def test_generated_records_store_and_come_back_unchanged(tmp_path):
    """A real DuckDB store accepts every generated record and gives it back canonical-equal."""
    store = Store(tmp_path / "synth.duckdb")
    records = list(generate_corpus(24, seed=4))
    summary = store.ingest_records(records, source_uri="synth:seed-4")
    assert summary.accepted == 24 and summary.rejected == 0
    for record in records:
        assert canonical_json(store.get_record(f"aioc:{record['runId']}")) == canonical_json(record)
