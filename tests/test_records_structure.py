"""Record structure (§8.2 visits and intervals, three-valued handoffs, findings), the §10.3/§10.4
extract and compare facts, and hypothesis properties of the record functions."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.canonical import canonical_json, sha256_text
from recstore.records import (
    analyze,
    compare_records,
    extract_tool_calls,
    handoff_transitions,
    input_scope,
    requests,
    visits,
)
from recstore.records.compare import canonical_equal

from .conftest import reverse_key_order


def _visit_summary(record: dict) -> list[tuple]:
    return [(v.agent, v.entered_after_turn, v.via_call_id, v.turns) for v in visits(record)]


def _intervals(record: dict) -> list[tuple]:
    return [(r.turn, r.output_start, r.output_end) for r in requests(record)]


# ---- §8.2 worked results ---------------------------------------------------------------------


def test_handoff_allow_worked_result(aioc_records):
    rec = aioc_records["handoff-allow"]
    assert _visit_summary(rec) == [
        ("Triage Agent", None, None, [1]),
        ("Finance Specialist", 1, "handoff-call-allow-1", [2]),
    ]
    assert _intervals(rec) == [(1, 1, 3), (2, 3, 4)]


def test_handoff_deny_worked_result(aioc_records):
    rec = aioc_records["handoff-deny"]
    assert _visit_summary(rec) == [("Triage Agent", None, None, [1, 2])]
    assert [t.applied for t in handoff_transitions(rec)] == [False]


def test_handoff_cycle_is_not_deduped(aioc_records):
    assert _visit_summary(aioc_records["v-handoff-cycle"]) == [
        ("Alpha", None, None, [1]),
        ("Beta", 1, "h1", [2]),
        ("Alpha", 2, "h2", [3, 4]),
    ]


def test_two_handoffs_in_one_turn_keep_an_empty_visit(aioc_records):
    rec = aioc_records["v-two-handoffs-one-turn"]
    assert _visit_summary(rec) == [
        ("Alpha", None, None, [1]),
        ("Beta", 1, "h1", []),
        ("Gamma", 1, "h2", [2]),
    ]
    assert _intervals(rec)[0] == (1, 1, 7)
    # The lookup call made after the Beta handoff still belongs to Alpha's request (§1.3).
    lookup = next(j for j in analyze(rec).tool_calls if j.call["name"] == "lookup")
    assert (lookup.request_turn, lookup.agent, lookup.visit_index) == (1, "Alpha", 0)
    empty = visits(rec)[1]
    assert (empty.item_start, empty.item_end) == (None, None)


def test_thread_continuation_scope_and_intervals(aioc_records):
    rec = aioc_records["v-thread-continuation"]
    assert input_scope(rec).count == 5 and input_scope(rec).source == "inputItemCount"
    assert _intervals(rec) == [(1, 5, 11), (2, 11, 12)]
    history_call = analyze(rec).tool_calls[0]
    assert history_call.in_input and history_call.request_turn is None


def test_reported_record_has_no_requests_and_one_visit(aioc_records):
    rec = aioc_records["reported-runrecord-1"]
    assert input_scope(rec).count == 1
    assert requests(rec) == []
    assert _visit_summary(rec) == [("explainer", None, None, [])]
    assert "no_requests_recorded" in [f.code for f in analyze(rec).findings]


def test_legacy_scope_falls_back_to_fingerprint(aioc_records):
    scope = input_scope(aioc_records["simple-run"])
    assert (scope.count, scope.source) == (1, "requestFingerprint")


@pytest.mark.parametrize("value", [True, -1, 1.5, "1", 99])
def test_invalid_input_item_count_is_not_used(aioc_records, value):
    rec = dict(aioc_records["tool-allow"], inputItemCount=value)
    assert input_scope(rec).source == "requestFingerprint"


def test_integral_float_input_item_count_counts(aioc_records):
    rec = dict(aioc_records["tool-allow"], inputItemCount=1.0)
    assert input_scope(rec).count == 1 and input_scope(rec).source == "inputItemCount"


# ---- three-valued handoffApplied -------------------------------------------------------------


def _newer(record: dict, status: str = "complete", flags: dict[str, object] | None = None) -> dict:
    """A copy of a legacy record with executionRecordingStatus and per-callId handoffApplied."""
    rec = copy.deepcopy(record)
    rec["executionRecordingStatus"] = status
    for d in rec["policyDecisions"]:
        if flags and d["callId"] in flags:
            d["handoffApplied"] = flags[d["callId"]]
    return rec


def test_legacy_handoffs_are_inferred(aioc_records):
    (t,) = handoff_transitions(aioc_records["handoff-allow"])
    assert (t.applied, t.basis, t.target) == (True, "inferred", "Finance Specialist")
    assert visits(aioc_records["handoff-allow"])[1].transition == "inferred"


def test_recorded_true_opens_a_visit(aioc_records):
    rec = _newer(aioc_records["handoff-allow"], flags={"handoff-call-allow-1": True})
    (t,) = handoff_transitions(rec)
    assert (t.applied, t.basis) == (True, "recorded")
    assert [v.transition for v in visits(rec)] == ["initial", "applied"]


def test_recorded_false_does_not_open_a_visit(aioc_records):
    rec = _newer(aioc_records["handoff-allow"], flags={"handoff-call-allow-1": False})
    assert [v.agent for v in visits(rec)] == ["Triage Agent"]
    # Turn 2 was sent by Finance Specialist, contradicting the recorded flag: a finding, no raise.
    assert "agent_mismatch" in [f.code for f in analyze(rec).findings]


def test_absent_flag_with_recording_status_is_unknown_not_false(aioc_records):
    rec = _newer(aioc_records["handoff-allow"])
    (t,) = handoff_transitions(rec)
    assert (t.applied, t.basis) == (None, "unknown")
    analysis = analyze(rec)
    unknown = [f for f in analysis.findings if f.code == "handoff_applied_unknown"]
    assert [f.path for f in unknown] == ["$.policyDecisions[0]"]
    # An allowed handoff may have switched agent: kept as a visit explicitly marked unknown.
    assert [v.transition for v in analysis.visits] == ["initial", "unknown"]


def test_absent_flag_on_denied_handoff_is_unknown_without_visit(aioc_records):
    rec = _newer(aioc_records["handoff-deny"])
    (t,) = handoff_transitions(rec)
    assert (t.applied, t.basis) == (None, "unknown")
    assert len(visits(rec)) == 1


def test_partial_record_keeps_confirmed_transitions(aioc_records):
    rec = _newer(aioc_records["v-handoff-cycle"], status="partial", flags={"h1": True})
    transitions = handoff_transitions(rec)
    assert [(t.call_id, t.applied, t.basis) for t in transitions] == [
        ("h1", True, "recorded"),
        ("h2", None, "unknown"),
    ]
    assert [(v.agent, v.transition) for v in visits(rec)] == [
        ("Alpha", "initial"),
        ("Beta", "applied"),
        ("Alpha", "unknown"),
    ]


def test_initial_agent_name_wins_over_fingerprints(aioc_records):
    rec = dict(aioc_records["tool-allow"], initialAgentName="Router")
    analysis = analyze(rec)
    assert (analysis.initial_agent, analysis.initial_agent_source) == ("Router", "initialAgentName")
    assert "agent_mismatch" in [f.code for f in analysis.findings]


# ---- findings, never raised ------------------------------------------------------------------


def test_non_monotonic_message_count_is_a_finding(aioc_records):
    rec = copy.deepcopy(aioc_records["v-handoff-cycle"])
    rec["requestFingerprints"][2]["messageCount"] = 2
    analysis = analyze(rec)
    assert ("message_count_non_monotonic", "$.requestFingerprints[2].messageCount") in [
        (f.code, f.path) for f in analysis.findings
    ]
    starts = [r.output_start for r in analysis.requests]
    assert starts == sorted(starts)


def test_message_count_beyond_items_is_a_finding(aioc_records):
    rec = copy.deepcopy(aioc_records["tool-allow"])
    rec["requestFingerprints"][1]["messageCount"] = 40
    analysis = analyze(rec)
    assert "message_count_out_of_range" in [f.code for f in analysis.findings]
    assert analysis.requests[1].output_end <= len(rec["items"])


def test_agent_mismatch_is_a_finding(aioc_records):
    rec = copy.deepcopy(aioc_records["tool-allow"])
    rec["requestFingerprints"][1]["agentName"] = "Someone Else"
    codes = [(f.code, f.path) for f in analyze(rec).findings]
    assert ("agent_mismatch", "$.requestFingerprints[1].agentName") in codes


def test_final_agent_mismatch_is_a_finding(aioc_records):
    rec = dict(aioc_records["handoff-allow"], agentName="Triage Agent")
    assert "final_agent_mismatch" in [f.code for f in analyze(rec).findings]


def test_dangling_call_is_a_finding(aioc_records):
    findings = analyze(aioc_records["v-failed-deny-throw"]).findings
    assert [(f.code, f.path) for f in findings] == [("dangling_call", "$.items[1]")]


def test_clean_runtime_records_have_no_findings(aioc_records):
    for name in (
        "tool-allow",
        "handoff-allow",
        "v-handoff-cycle",
        "v-two-handoffs-one-turn",
        "v-approval-and-soft-deny",
        "v-thread-continuation",
        "v-guardrail-triggered",
    ):
        assert analyze(aioc_records[name]).findings == [], name


def test_decisions_join_by_turn_and_call_id_when_call_ids_repeat():
    # ChatCompletionsProvider restarts call_<index> every request: call_0 exists in both turns.
    def call(cid, name):
        return [
            {"type": "tool_call_item", "callId": cid, "name": name, "arguments": {}},
            {
                "type": "tool_call_output_item",
                "callId": cid,
                "output": {"status": "ok", "code": None, "publicReason": None, "data": 1},
            },
        ]

    items = [
        {"type": "message", "role": "user", "content": "q"},
        *call("call_0", "a"),
        *call("call_0", "b"),
    ]
    fp = {"timestamp": "t", "agentName": "A", "providerName": "p", "model": "m", "requestHash": "h"}
    rec = {
        "agentName": "A",
        "response": "",
        "items": items,
        "inputItemCount": 1,
        "promptSnapshots": [],
        "guardrailDecisions": [
            {"timestamp": "t", "turn": 2, "guardrailName": "g", "decision": "pass"}
        ],
        "requestFingerprints": [dict(fp, turn=1, messageCount=1), dict(fp, turn=2, messageCount=3)],
        "policyDecisions": [
            {
                "timestamp": "t",
                "turn": 2,
                "callId": "call_0",
                "decision": "deny",
                "reason": "r",
                "resource": {"kind": "tool", "name": "b"},
            },
            {
                "timestamp": "t",
                "turn": 1,
                "callId": "call_0",
                "decision": "allow",
                "reason": "r",
                "resource": {"kind": "tool", "name": "a"},
            },
        ],
    }
    analysis = analyze(rec)
    assert [
        (j.call["name"], j.request_turn, j.policy_decision_index, j.decision)
        for j in analysis.tool_calls
    ] == [
        ("a", 1, 1, "allow"),
        ("b", 2, 0, "deny"),
    ]
    assert [(d.index, d.request_index, d.tool_call_index) for d in analysis.policy_decisions] == [
        (0, 1, 1),
        (1, 0, 0),
    ]
    assert [(d.request_index, d.entry["guardrailName"]) for d in analysis.guardrail_decisions] == [
        (1, "g")
    ]


def test_records_without_fingerprints_join_decisions_by_call_id(aioc_records):
    rec = copy.deepcopy(aioc_records["tool-allow"])
    rec["requestFingerprints"], rec["promptSnapshots"] = [], []
    rec["inputItemCount"] = 1
    analysis = analyze(rec)
    (call,) = analysis.tool_calls
    assert (call.request_index, call.policy_decision_index, call.decision) == (None, 0, "allow")
    assert "policy_decision_unjoined" not in [f.code for f in analysis.findings]


def test_envelope_status_and_suspended_proposal_join(aioc_records):
    analysis = analyze(aioc_records["v-approval-and-soft-deny"])
    lookup, handoff = analysis.tool_calls
    assert (lookup.envelope_status, lookup.envelope_code, lookup.suspended_proposal_index) == (
        "approval_required",
        "manager_approval_required",
        0,
    )
    assert (handoff.envelope_status, handoff.is_handoff, handoff.handoff_target) == (
        "denied",
        True,
        "Target",
    )
    assert analysis.suspended_proposals[0].tool_call_index == 0


# ---- §10.3 / §10.4 facts ---------------------------------------------------------------------


def _call(cid, name, args=None, **extra):
    item = {"type": "tool_call_item", "callId": cid, "name": name, **extra}
    if args is not None:
        item["arguments"] = args
    return item


def _out(cid, output):
    return {"type": "tool_call_output_item", "callId": cid, "output": output}


def test_extract_unit_facts():
    calls = extract_tool_calls(
        [
            _call("c1", "lookup", {"b": 2, "a": 1}),
            _out("c1", {"ok": True}),
            _call("c2", "search", {"q": "aioc"}),
        ]
    )
    assert [(c["callId"], c["turn"], c["hasOutput"]) for c in calls] == [
        ("c1", 1, True),
        ("c2", 2, False),
    ]
    assert calls[0]["output"] == {"ok": True} and "output" not in calls[1]
    same = extract_tool_calls([_call("x", "t", {"a": 1, "b": 2})])[0]
    assert (same["argsCanonicalJson"], same["argsHash"]) == (
        calls[0]["argsCanonicalJson"],
        calls[0]["argsHash"],
    )
    assert same["argsHash"] == "43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777"
    id_hash = extract_tool_calls([_call("x", "t", {"id": "1"})])[0]["argsHash"]
    assert id_hash.startswith("5811967f") and id_hash.endswith("a6b27")


def test_extract_missing_args_become_empty_but_null_stays():
    missing, null = extract_tool_calls(
        [_call("a", "t"), _call("b", "t", None) | {"arguments": None}]
    )
    assert (missing["arguments"], missing["argsCanonicalJson"]) == ({}, "{}")
    assert (null["arguments"], null["argsCanonicalJson"]) == (None, "null")


def test_extract_orphans_and_outputs_before_calls():
    calls = extract_tool_calls([_out("c1", 1), _call("c1", "t", {})])
    assert [(c["name"], c.get("turn"), c["hasOutput"]) for c in calls] == [
        ("", None, True),
        ("t", 1, False),
    ]
    assert "turn" not in calls[0] and calls[0]["argsHash"] == sha256_text("{}")


def test_duplicate_call_ids_attach_to_latest_call():
    calls = extract_tool_calls([_call("c", "a", {}), _call("c", "b", {}), _out("c", "x")])
    assert [(c["name"], c["hasOutput"]) for c in calls] == [("a", False), ("b", True)]


def test_output_without_output_key_is_undefined():
    calls = extract_tool_calls(
        [_call("c", "a", {}), {"type": "tool_call_output_item", "callId": "c"}]
    )
    assert calls[0]["hasOutput"] is True and "output" not in calls[0]
    # aioc canonicalizes undefined as the string "[undefined]": equal to that literal output.
    base = {"response": "", "policyDecisions": []}
    undefined_rec = dict(
        base, items=[_call("c", "a", {}), {"type": "tool_call_output_item", "callId": "c"}]
    )
    literal_rec = dict(base, items=[_call("c", "a", {}), _out("c", "[undefined]")])
    assert compare_records(undefined_rec, literal_rec)["equal"]
    diff = compare_records(undefined_rec, dict(base, items=[_call("c", "a", {}), _out("c", 1)]))[
        "differences"
    ]
    assert diff == [{"path": "toolCalls[0].output", "kind": "mismatch", "right": 1}]


def test_compare_unit_facts():
    def rec(response, arg, output, decision):
        return {
            "response": response,
            "items": [_call("c1", "lookup", {"id": arg}), _out("c1", output)],
            "policyDecisions": [{"turn": 1, "callId": "c1", "decision": decision}],
        }

    a = rec("one", "1", {"ok": True}, "allow")
    same = compare_records(a, copy.deepcopy(a))
    assert same["equal"] and all(same["summary"].values()) and same["differences"] == []
    changed = compare_records(a, rec("two", "2", {"ok": False}, "deny"))
    assert not changed["equal"]
    assert [k for k, v in changed["summary"].items() if not v] == [
        "sameFinalResponse",
        "sameToolCallShape",
        "samePolicyDecisions",
    ]
    paths = [d["path"] for d in changed["differences"]]
    assert {"response", "toolCalls[0].argsHash", "policyDecisions[0]"} <= set(paths)


def test_compare_fixture_facts(aioc_records):
    r = compare_records(aioc_records["handoff-allow"], aioc_records["handoff-deny"])
    assert list(r["summary"].values()) == [False, True, False, True]
    assert r["metrics"]["matchedToolCalls"] == 1
    assert [d["path"] for d in r["differences"]] == [
        "response",
        "toolCalls[0].output",
        "policyDecisions[0]",
        "metadata",
    ]
    r = compare_records(aioc_records["simple-run"], aioc_records["reported-runrecord-1"])
    assert (r["metrics"]["responseLengthA"], r["metrics"]["responseLengthB"]) == (5, 1165)
    assert [d["path"] for d in r["differences"]] == ["response", "metadata"]


def test_metadata_absent_null_and_empty_are_equal_but_diff_omits_absent_side():
    base = {"response": "", "items": [], "policyDecisions": []}
    assert compare_records(base, dict(base, metadata={}))["equal"]
    assert compare_records(base, dict(base, metadata=None))["equal"]
    (diff,) = compare_records(base, dict(base, metadata={"k": 1}))["differences"]
    assert diff == {"path": "metadata", "kind": "mismatch", "right": {"k": 1}}


def test_response_length_counts_utf16_units():
    rec = {"response": "x😀", "items": [], "policyDecisions": []}
    assert compare_records(rec, rec)["metrics"]["responseLengthA"] == 3


def test_unknown_sections_are_ignored_and_exclude_applies_after_include(aioc_records):
    a, b = aioc_records["compare-v1"], aioc_records["compare-v2"]
    r = compare_records(a, b, include_sections=["response", "bogus"], exclude_sections=["response"])
    assert r["equal"] and r["metrics"]["toolCallsA"] == 1


# ---- hypothesis properties -------------------------------------------------------------------

_json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
_json = st.recursive(
    _json_scalar,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)
_call_ids = st.sampled_from(["c0", "c1", "c2"])
_names = st.sampled_from(["lookup", "search", "handoff_to_b"])


@st.composite
def _items(draw):
    kind = draw(st.sampled_from(["message", "call", "call_noargs", "output", "output_noout"]))
    if kind == "message":
        return {
            "type": "message",
            "role": draw(st.sampled_from(["user", "assistant"])),
            "content": draw(st.text(max_size=5)),
        }
    if kind.startswith("call"):
        item = {"type": "tool_call_item", "callId": draw(_call_ids), "name": draw(_names)}
        if kind == "call":
            item["arguments"] = draw(_json)
        return item
    item = {"type": "tool_call_output_item", "callId": draw(_call_ids)}
    if kind == "output":
        item["output"] = draw(_json)
    return item


@st.composite
def records(draw):
    items = draw(st.lists(_items(), max_size=8))
    counts = sorted(draw(st.lists(st.integers(0, len(items) + 2), max_size=3)))
    decision = st.fixed_dictionaries(
        {
            "timestamp": st.sampled_from(["t1", "t2"]),
            "turn": st.integers(1, 3),
            "callId": _call_ids,
            "decision": st.sampled_from(["allow", "deny", "require_approval"]),
            "reason": st.just("r"),
            "resource": st.fixed_dictionaries(
                {"kind": st.sampled_from(["tool", "handoff"]), "name": st.sampled_from(["A", "B"])}
            ),
        }
    )
    rec = {
        "runId": "r",
        "status": draw(st.sampled_from(["completed", "failed"])),
        "agentName": draw(st.sampled_from(["A", "B"])),
        "response": draw(st.text(max_size=6)),
        "items": items,
        "promptSnapshots": [],
        "requestFingerprints": [
            {"turn": i + 1, "agentName": draw(st.sampled_from(["A", "B"])), "messageCount": c}
            for i, c in enumerate(counts)
        ],
        "policyDecisions": draw(st.lists(decision, max_size=3)),
    }
    if draw(st.booleans()):
        rec["guardrailDecisions"] = draw(
            st.lists(
                st.fixed_dictionaries(
                    {
                        "turn": st.integers(1, 3),
                        "guardrailName": st.just("g"),
                        "decision": st.sampled_from(["pass", "triggered"]),
                    }
                ),
                max_size=2,
            )
        )
    if draw(st.booleans()):
        rec["metadata"] = draw(st.none() | st.dictionaries(st.text(max_size=3), _json, max_size=2))
    if draw(st.booleans()):
        rec["inputItemCount"] = draw(st.integers(0, len(items)))
    if draw(st.booleans()):
        rec["executionRecordingStatus"] = draw(st.sampled_from(["complete", "partial"]))
    return rec


@settings(max_examples=150, deadline=None)
@given(records())
def test_compare_with_itself_is_equal(rec):
    result = compare_records(rec, copy.deepcopy(rec))
    assert result["equal"] and result["differences"] == [] and all(result["summary"].values())


@settings(max_examples=150, deadline=None)
@given(records(), records())
def test_empty_include_is_always_equal(a, b):
    result = compare_records(a, b, include_sections=[])
    assert result["equal"] and result["differences"] == []
    assert result["metrics"] == compare_records(a, b)["metrics"]


@settings(max_examples=150, deadline=None)
@given(records(), records())
def test_compare_and_extract_ignore_key_order(a, b):
    assert canonical_json(compare_records(a, b)) == canonical_json(
        compare_records(reverse_key_order(a), reverse_key_order(b))
    )
    assert canonical_json(extract_tool_calls(a)) == canonical_json(extract_tool_calls(reverse_key_order(a)))


@settings(max_examples=150, deadline=None)
@given(records(), records())
def test_compare_is_symmetric_in_verdict_and_metrics(a, b):
    ab, ba = compare_records(a, b), compare_records(b, a)
    assert ab["equal"] == ba["equal"] and ab["summary"] == ba["summary"]
    assert ab["metrics"]["missingToolCalls"] == ba["metrics"]["extraToolCalls"]
    assert ab["metrics"]["matchedToolCalls"] <= min(
        ab["metrics"]["toolCallsA"], ab["metrics"]["toolCallsB"]
    )


@settings(max_examples=150, deadline=None)
@given(records())
def test_extract_turns_count_tool_call_items(rec):
    calls = extract_tool_calls(rec)
    n_calls = sum(item["type"] == "tool_call_item" for item in rec["items"])
    assert [c["turn"] for c in calls if "turn" in c] == list(range(1, n_calls + 1))
    assert all(c["name"] == "" and c["hasOutput"] for c in calls if "turn" not in c)


@settings(max_examples=200, deadline=None)
@given(records())
def test_analyze_never_raises_and_intervals_are_consistent(rec):
    analysis = analyze(rec)
    n_items = len(rec["items"])
    previous_end = None
    for r in analysis.requests:
        assert 0 <= r.output_start <= r.output_end <= n_items
        assert previous_end is None or r.output_start == previous_end
        previous_end = r.output_end
    assert previous_end in (None, n_items)
    assigned = [t for v in analysis.visits for t in v.turns]
    assert sorted(assigned) == sorted(r.turn for r in analysis.requests)
    opened = sum(
        t.applied is True or (t.applied is None and t.decision == "allow")
        for t in analysis.transitions
    )
    assert len(analysis.visits) == 1 + opened
    assert len(analysis.tool_calls) == len(extract_tool_calls(rec))
    analysis.to_dict()  # JSON-form structure, no exception


_edge_scalar = st.sampled_from(
    [0, -0.0, 1, 1.0, True, False, None, "1", "", 2**53, 2**53 + 1, 10**400, "__proto__"]
)
_edge_json = st.recursive(
    _edge_scalar | _json_scalar,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "__proto__", "10", "9"]), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def _twins(draw):
    """A value and a look-alike: numbers retyped (1 vs 1.0, big ints), sometimes a real change."""

    def twin(value):
        if isinstance(value, dict):
            return {k: twin(v) for k, v in reversed(list(value.items()))}
        if isinstance(value, list):
            return [twin(v) for v in value]
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return draw(st.sampled_from([value, value, 1 if value is True else None]))
        return draw(
            st.sampled_from([value, float(value) if abs(value) < 1e300 else None, value + 1])
        )

    value = draw(_edge_json)
    return value, twin(value)


@settings(max_examples=400, deadline=None)
@given(_twins())
def test_canonical_equal_agrees_with_canonical_json(pair):
    left, right = pair
    assert canonical_equal(left, right) == (canonical_json(left) == canonical_json(right))
