"""Case classification: tool drift per tool, signals, rules, judge verdicts and judge commands."""

from __future__ import annotations

import copy
import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.errors import InputError
from recstore.records import compare_records, extract_tool_calls
from recstore.sweep.classify import case_signals, classify, judge_input, tool_drift
from recstore.sweep.judge import JudgeError, parse_verdict, run_judge
from recstore.sweep.spec import JudgeSpec, parse_spec

from .conftest import AIOC_FIXTURES


def spec_with(**sections):
    data = {"name": "t", "select": {"query": "status = 'completed'"}, "candidate": {"from_source": True}}
    return parse_spec(data | sections, source="mem")


@pytest.fixture
def source() -> dict:
    return json.loads((AIOC_FIXTURES / "tool-allow.json").read_text(encoding="utf-8"))


def with_args(record: dict, tool: str, args: dict) -> dict:
    out = copy.deepcopy(record)
    for item in out["items"]:
        if item.get("type") == "tool_call_item" and item.get("name") == tool:
            item["arguments"] = args
    return out


def test_identical_replay_raises_nothing_and_passes(source):
    spec = spec_with()
    comparison = compare_records(source, source)
    signals, drift = case_signals(spec, source, copy.deepcopy(source), comparison, None)
    assert signals == [] and drift == {}
    assert classify(spec, signals) == "pass"


def test_changed_arguments_are_drift_on_that_tool(source):
    replay = with_args(source, "get_finance_report", {"reportId": "Q2-2026"})
    drift = tool_drift(source, replay)
    assert drift == {"get_finance_report": {"source_calls": 1, "replay_calls": 1, "added": 1,
                                            "removed": 1, "changed_args": 1, "unrecorded": 0}}
    spec = spec_with(classify={"fail_on": ["tool_drift"], "tools": ["get_finance_report"]})
    signals, _ = case_signals(spec, source, replay, compare_records(source, replay), None)
    assert "tool_drift" in signals and "tool_calls_changed" in signals and "not_equal" in signals
    assert classify(spec, signals) == "fail"
    # drift on a tool nobody watches is not tool_drift
    unwatched = spec_with(classify={"fail_on": ["tool_drift"], "tools": ["refund"]})
    signals, _ = case_signals(unwatched, source, replay, compare_records(source, replay), None)
    assert "tool_drift" not in signals
    assert classify(unwatched, signals) == "warn"  # still not equal (default warn rule)


def test_aioc_default_rule_fail_on_failed_candidate_warn_on_difference(source):
    spec = spec_with()
    failed = copy.deepcopy(source) | {"status": "failed", "response": ""}
    signals, _ = case_signals(spec, source, failed, compare_records(source, failed), None)
    assert {"candidate_failed", "status_changed", "response_changed"} <= set(signals)
    assert classify(spec, signals) == "fail"
    different = copy.deepcopy(source) | {"response": "something else"}
    signals, _ = case_signals(spec, source, different, compare_records(source, different), None)
    assert classify(spec, signals) == "warn"


def test_calls_without_recording_are_drift_even_with_identical_records(source):
    # a changed tool schema: the record keeps the model's raw arguments, but the validated
    # arguments found no recording (strict miss or live fallback)
    calls = [{"name": "get_finance_report", "argsHash": "h-new", "resolution": "missing"}]
    drift = tool_drift(source, source, calls)
    assert drift["get_finance_report"]["unrecorded"] == 1
    assert drift["get_finance_report"]["added"] == 0
    spec = spec_with(classify={"warn_on": ["tool_drift"], "tools": ["get_finance_report"]})
    signals, _ = case_signals(spec, source, source, compare_records(source, source), None, calls)
    assert signals == ["tool_drift"] and classify(spec, signals) == "warn"


def test_a_call_the_source_also_left_without_output_is_not_drift(source):
    dangling = copy.deepcopy(source)
    dangling["items"] = [i for i in dangling["items"] if i.get("type") != "tool_call_output_item"]
    [call] = [c for c in extract_tool_calls(dangling)]
    served = [{"name": call["name"], "argsHash": call["argsHash"], "resolution": "missing"}]
    assert tool_drift(dangling, dangling, served) == {}
    assert tool_drift(dangling, dangling, served * 2)[call["name"]]["unrecorded"] == 1


def test_replay_error_without_record(source):
    spec = spec_with()
    signals, drift = case_signals(spec, source, None, None, "REPLAY_INPUT_MISSING: tool x")
    assert signals == ["replay_error"] and drift == {}
    assert classify(spec, signals) == "fail"


def test_expectation_signals(source):
    spec = spec_with(expectation={"should_avoid_tools": ["get_finance_report"],
                                  "should_use_tools": ["send_email"]},
                     classify={"warn_on": ["uses_avoided_tool", "misses_expected_tool"]})
    signals, _ = case_signals(spec, source, source, compare_records(source, source), None)
    assert {"uses_avoided_tool", "misses_expected_tool"} <= set(signals)
    assert classify(spec, signals) == "warn"


@settings(max_examples=50, deadline=None)
@given(rule=st.sampled_from(["pass", "warn", "fail"]), verdict=st.sampled_from([None, "pass", "warn", "fail"]))
def test_judge_verdict_only_ever_raises_the_outcome(rule, verdict):
    spec = spec_with(classify={"fail_on": ["replay_error"], "warn_on": ["not_equal"]})
    signals = {"pass": [], "warn": ["not_equal"], "fail": ["replay_error"]}[rule]
    rank = {"pass": 0, "warn": 1, "fail": 2}
    outcome = classify(spec, signals, {"verdict": verdict} if verdict else None)
    assert rank[outcome] == max(rank[rule], rank.get(verdict, 0))


def test_judge_input_has_aioc_keys(source):
    spec = spec_with(expectation={"intent": "same report"})
    payload = judge_input(spec, source, source, {"equal": True})
    assert list(payload) == ["baseline", "candidate", "comparison", "expectation"]
    assert payload["expectation"] == {"intent": "same report"}
    assert "expectation" not in judge_input(spec_with(), source, source, {})


def test_parse_verdict_accepts_fenced_json_and_rejects_bad_shapes():
    text = '```json\n{"verdict": "warn", "summary": "tone changed", "findings": []}\n```'
    assert parse_verdict(text) == {"verdict": "warn", "summary": "tone changed", "findings": []}
    with pytest.raises(JudgeError, match="verdict"):
        parse_verdict('{"verdict": "maybe", "summary": "?"}')
    with pytest.raises(JudgeError, match="not JSON"):
        parse_verdict("looks fine to me")


def test_run_judge_command_reads_the_case_on_stdin(tmp_path):
    script = tmp_path / "judge.py"
    script.write_text(
        "import json, sys\n"
        "case = json.load(sys.stdin)\n"
        "bad = case['candidate']['response'] != case['baseline']['response']\n"
        "print(json.dumps({'verdict': 'fail' if bad else 'pass', 'summary': 'checked',\n"
        "                  'findings': [{'severity': 'info', 'reason': case['expectation']['intent']}]}))\n",
        encoding="utf-8",
    )
    judge = JudgeSpec(command=[sys.executable, str(script)])
    verdict = run_judge(judge, {"baseline": {"response": "a"}, "candidate": {"response": "b"},
                                "expectation": {"intent": "same"}})
    assert verdict["verdict"] == "fail" and verdict["findings"][0]["reason"] == "same"
    crash = JudgeSpec(command=[sys.executable, "-c", "import sys; sys.exit('judge broke')"])
    with pytest.raises(JudgeError, match="exited with 1: judge broke"):
        run_judge(crash, {})
    slow = JudgeSpec(command=[sys.executable, "-c", "import time; time.sleep(5)"], timeout=0.5)
    with pytest.raises(JudgeError, match="timed out"):
        run_judge(slow, {})
    with pytest.raises(JudgeError, match="not found"):
        run_judge(JudgeSpec(command=["/nonexistent/judge"]), {})


def _record(calls: list[tuple[str, int]]) -> dict:
    items = []
    for i, (name, arg) in enumerate(calls):
        items.append({"type": "tool_call_item", "callId": f"c{i}", "name": name, "arguments": {"x": arg}})
        items.append({"type": "tool_call_output_item", "callId": f"c{i}", "output": "ok"})
    return {"runId": "r", "status": "completed", "response": "", "items": items, "policyDecisions": []}


calls_strategy = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 2)), max_size=8)


@settings(max_examples=150, deadline=None)
@given(before=calls_strategy, after=calls_strategy)
def test_tool_drift_is_the_per_tool_multiset_difference(before, after):
    from collections import Counter

    drift = tool_drift(_record(before), _record(after))
    for tool in {"a", "b", "c"}:
        a = Counter(arg for name, arg in before if name == tool)
        b = Counter(arg for name, arg in after if name == tool)
        if a == b:
            assert tool not in drift
            continue
        d = drift[tool]
        assert (d["removed"], d["added"]) == (sum((a - b).values()), sum((b - a).values()))
        assert (d["source_calls"], d["replay_calls"]) == (sum(a.values()), sum(b.values()))
        assert d["changed_args"] == min(d["added"], d["removed"]) and d["unrecorded"] == 0
    assert tool_drift(_record(after), _record(after)) == {}


def test_a_failure_reproduced_the_same_way_is_not_candidate_failed():
    source = json.loads((AIOC_FIXTURES / "v-failed-deny-throw.json").read_text(encoding="utf-8"))
    spec = spec_with()
    same = copy.deepcopy(source)
    signals, _ = case_signals(spec, source, same, compare_records(source, same), None)
    assert "candidate_failed" not in signals and classify(spec, signals) == "pass"
    other = copy.deepcopy(source)
    other["errorName"], other["errorMessage"] = "REPLAY_INPUT_MISSING", "Missing recorded tool output"
    signals, _ = case_signals(spec, source, other, compare_records(source, other), None)
    assert "candidate_failed" in signals and classify(spec, signals) == "fail"
    completed = json.loads((AIOC_FIXTURES / "tool-allow.json").read_text(encoding="utf-8"))
    broken = dict(copy.deepcopy(completed), status="failed", errorName="X", errorMessage="y")
    signals, _ = case_signals(spec, completed, broken, compare_records(completed, broken), None)
    assert {"candidate_failed", "status_changed"} <= set(signals)


def test_compare_defaults_to_what_a_replay_reproduces_and_says_so():
    assert spec_with().compare.compared() == {
        "preset": "semantic",
        "sections": ["response", "toolCalls", "policy", "guardrails"],
        "ignored": ["guardrails.timestamp", "policy.callId", "policy.expiresAt", "policy.timestamp"],
    }
    exact = spec_with(compare={"preset": "exact"}).compare.compared()
    assert exact["sections"] == ["response", "toolCalls", "policy", "guardrails", "metadata"]
    assert exact["ignored"] == []
    for bad in ({"ignore": ["policy.timestmap"]}, {"preset": "semantics"},
                {"include_sections": ["toolcalls"]}):
        with pytest.raises(InputError, match="mem at compare"):
            spec_with(compare=bad)
