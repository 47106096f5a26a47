"""Judging one sweep case: what changed between a source run and its replay, and pass/warn/fail.

Pure functions over JSON-form records and a comparison result (``compare_records`` output).
A case raises *signals* (names in :data:`recstore.sweep.spec.SIGNALS`); the spec's rules map
signals to ``fail``/``warn``; a judge verdict raises the outcome to at least its own level, as
aioc's default classification does (docs/aioc-runrecord.md §7.1).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from recstore.records import extract_tool_calls
from recstore.sweep.spec import SweepSpec

OUTCOME_RANK = {"pass": 0, "warn": 1, "fail": 2}


def tool_drift(source: dict, replay: dict, calls: list[dict] = ()) -> dict[str, dict[str, int]]:
    """Per tool name whose calls differ: how they differ.

    ``added``/``removed`` count calls whose (name, argsHash) is in one record and not the other,
    so a call with changed arguments counts once in each; ``changed_args`` is the part of that
    which is a pure argument change. ``unrecorded`` counts the replay's tool executions (its
    report's ``calls``) whose *validated* arguments had no recording — a changed tool schema
    shows up there even when the model's raw arguments, and so the record, are unchanged.
    A call the source itself made without an output (it failed there too) is not drift.
    """
    before = _calls_by_tool(source)
    after = _calls_by_tool(replay)
    unrecorded = _unrecorded(source, calls)
    drift: dict[str, dict[str, int]] = {}
    for tool in sorted(before.keys() | after.keys() | unrecorded.keys()):
        a, b = before.get(tool, Counter()), after.get(tool, Counter())
        if a == b and not unrecorded[tool]:
            continue
        removed = sum((a - b).values())
        added = sum((b - a).values())
        drift[tool] = {
            "source_calls": sum(a.values()),
            "replay_calls": sum(b.values()),
            "added": added,
            "removed": removed,
            "changed_args": min(added, removed),
            "unrecorded": unrecorded[tool],
        }
    return drift


def _unrecorded(source: dict, calls: list[dict]) -> Counter:
    """Tool executions without a recording, minus those the source also made without output."""
    dangling = Counter((c["name"], c["argsHash"]) for c in extract_tool_calls(source)
                       if not c["hasOutput"])
    out: Counter = Counter()
    for call in calls:
        if call.get("resolution") == "recorded":
            continue
        key = (call.get("name"), call.get("argsHash"))
        if dangling[key]:
            dangling[key] -= 1
        else:
            out[call.get("name")] += 1
    return out


def _calls_by_tool(record: dict) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for call in extract_tool_calls(record):
        out.setdefault(call["name"], Counter())[call["argsHash"]] += 1
    return out


def failed_alike(source: dict, replay: dict) -> bool:
    """Both runs failed with the same error (``errorName`` and ``errorMessage``): the replay
    reproduced the source's failure, which is not a regression."""
    return (source.get("status") == replay.get("status") == "failed"
            and source.get("errorName") == replay.get("errorName")
            and source.get("errorMessage") == replay.get("errorMessage"))


def case_signals(spec: SweepSpec, source: dict, replay: dict | None, comparison: dict | None,
                 replay_error: str | None, calls: list[dict] = ()
                 ) -> tuple[list[str], dict[str, dict[str, int]]]:
    """The signals a case raises, and its tool drift (empty when there is no replay record).

    ``calls`` are the replay report's tool executions with their resolution (see
    :func:`tool_drift`)."""
    signals: list[str] = []
    if replay_error:
        signals.append("replay_error")
    if replay is None or comparison is None:
        return signals, {}
    drift = tool_drift(source, replay, calls)
    summary = comparison["summary"]
    watched = set(spec.classify.tools)
    called = {call["name"] for call in extract_tool_calls(replay)}
    alike = failed_alike(source, replay)
    checks = {
        "candidate_failed": replay.get("status") == "failed" and not alike,
        "still_failing": alike,
        "status_changed": source.get("status") != replay.get("status"),
        "tool_drift": any(not watched or tool in watched for tool in drift),
        "tool_calls_changed": not summary["sameToolCallShape"],
        "response_changed": not summary["sameFinalResponse"],
        "policy_changed": not summary["samePolicyDecisions"],
        "guardrails_changed": not summary["sameGuardrailDecisions"],
        "not_equal": not comparison["equal"],
    }
    if spec.expectation is not None:
        checks["uses_avoided_tool"] = bool(called & set(spec.expectation.should_avoid_tools))
        checks["misses_expected_tool"] = bool(set(spec.expectation.should_use_tools) - called)
    signals.extend(name for name, raised in checks.items() if raised)
    return signals, drift


def classify(spec: SweepSpec, signals: list[str], judge: dict | None = None) -> str:
    """``fail``/``warn``/``pass`` from the spec's rules, raised to the judge's verdict if worse."""
    outcome = "pass"
    if any(s in spec.classify.fail_on for s in signals) or "judge_error" in signals:
        outcome = "fail"
    elif any(s in spec.classify.warn_on for s in signals):
        outcome = "warn"
    verdict = (judge or {}).get("verdict")
    if verdict in OUTCOME_RANK and OUTCOME_RANK[verdict] > OUTCOME_RANK[outcome]:
        outcome = verdict
    return outcome


def judge_input(spec: SweepSpec, source: dict, replay: dict, comparison: dict,
                candidate_descriptor: Any = None) -> dict:
    """What a judge command reads on stdin: aioc's judge input (``baseline``, ``candidate``,
    ``comparison``, ``expectation?``, ``candidateDescriptor?``; keys omitted when undefined)."""
    payload: dict[str, Any] = {"baseline": source, "candidate": replay, "comparison": comparison}
    if spec.expectation is not None:
        payload["expectation"] = spec.expectation.to_aioc()
    if candidate_descriptor is not None:
        payload["candidateDescriptor"] = candidate_descriptor
    return payload
