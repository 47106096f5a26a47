"""Harness files: loading (TOML/YAML), validation errors, descriptor hash, and the declarative
policies, handoff conditions, guardrails and live implementations they describe."""

from __future__ import annotations

import json
import textwrap

import pytest

from recstore.errors import InputError
from recstore.replay import harness_from_source, load_harness, parse_harness, replay_run
from recstore.runtime import ScriptedProvider

from .conftest import AIOC_FIXTURES, REPO_ROOT

EXAMPLE = REPO_ROOT / "docs" / "examples" / "replay-harness.toml"
LIVE_CALLS: list = []


def live_lookup(args, context):
    """A tool implementation the harness names as ``tests.test_replay_harness:live_lookup``."""
    LIVE_CALLS.append(args)
    return {"customerId": args["customerId"], "tier": "gold", "source": "live"}


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_the_documented_example_loads_and_builds():
    harness = load_harness(EXAMPLE)
    doc = harness.materialized()
    assert "instructions_file" not in doc["agents"]["triage"]
    assert doc["agents"]["triage"]["instructions"].startswith("You are the first-line support agent.")
    assert harness.descriptor_hash.startswith("sha256:") and len(harness.descriptor_hash) == 71
    meta = harness.harness_metadata()
    assert meta == {"name": "support-candidate", "version": "2", "descriptorVersion": "aioc.agent_graph.v0",
                    "descriptorHash": harness.descriptor_hash}
    candidate = harness.build()
    assert candidate.entry.name == "Triage" and candidate.max_turns == 8
    assert [t.name for t in candidate.entry.tools] == ["lookup_customer", "search_docs"]
    assert [h.target.name for h in candidate.entry.handoff_rules()] == ["Finance Specialist", "VIP Desk"]


def test_toml_and_yaml_with_the_same_content_hash_the_same(tmp_path):
    toml = write(tmp_path, "h.toml", """
        [runtime]
        entry_agent = "a"
        max_turns = 3
        [agents.a]
        instructions = "Hi."
        model = "m"
        """)
    yaml = write(tmp_path, "h.yaml", """
        runtime: {entry_agent: a, max_turns: 3}
        agents:
          a: {instructions: "Hi.", model: m}
        """)
    assert load_harness(toml).descriptor_hash == load_harness(yaml).descriptor_hash


def test_aioc_descriptor_hash_vector(tmp_path):
    # aioc's examples/self-harness/harness-v1.yaml, materialized (docs §7.3).
    (tmp_path / "explainer.md").write_text(
        "Explain the requested topic accurately and concisely.\nDo not ask for or infer learner profile data.",
        encoding="utf-8")
    path = write(tmp_path, "harness-v1.yaml", """
        runtime:
          entry_agent: explainer
          max_turns: 4
        agents:
          explainer:
            instructions_file: explainer.md
            model: gpt-4.1-mini
        """)
    assert load_harness(path).descriptor_hash == (
        "sha256:c4153043c1045ad47ee17e67467a770cc4d1b63b95955df5224a2a9a51eafe9d")


def test_yaml_uses_yaml_1_2_booleans(tmp_path):
    path = write(tmp_path, "h.yaml", """
        metadata: {name: yes, flag: true}
        runtime: {entry_agent: a}
        agents: {a: {}}
        """)
    assert load_harness(path).materialized()["metadata"] == {"name": "yes", "flag": True}


@pytest.mark.parametrize("text, where, message", [
    ("[runtime]\nentry_agent = 'a'\n[agents.a]\ntools = ['nope']\n", "agents.a.tools", "unknown tool 'nope'"),
    ("[runtime]\nentry_agent = 'b'\n[agents.a]\n", None, "entry_agent 'b' is not an agent"),
    ("[runtime]\nentry_agent = 'a'\n[agents.a]\ncolour = 'red'\n", "agents.a.colour", "Extra inputs are not permitted"),
    ("[runtime]\nentry_agent = 'a'\n[agents.a]\n[policies]\n[[policies.rules]]\ndecision = 'deny'\n",
     "policies.rules.0", "a deny rule needs a reason"),
    ("[runtime]\nentry_agent = 'a'\n[agents.a]\ninstructions_file = 'missing.md'\n", "agents.a", "cannot read instructions_file"),
    ("[runtime\n", None, "not valid TOML"),
])
def test_bad_harness_files_give_one_clear_error(tmp_path, text, where, message):
    path = write(tmp_path, "bad.toml", text)
    with pytest.raises(InputError) as info:
        load_harness(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)
    if where:
        assert where in str(info.value)


def test_unknown_extension_and_missing_file(tmp_path):
    with pytest.raises(InputError, match="must end in .toml, .yaml or .yml"):
        load_harness(write(tmp_path, "h.json", "{}"))
    with pytest.raises(InputError, match="cannot read harness file"):
        load_harness(tmp_path / "absent.toml")


def test_bad_implementation_is_reported_when_built():
    harness = parse_harness({"runtime": {"entry_agent": "a"}, "agents": {"a": {"tools": ["t"]}},
                             "tools": {"t": {"implementation": "no_such_module_xyz:run"}}})
    with pytest.raises(InputError, match="cannot import tool implementation 'no_such_module_xyz:run'"):
        harness.build()


SUPPORT = {
    "runtime": {"entry_agent": "triage"},
    "agents": {
        "triage": {"name": "Triage", "model": "m", "tools": ["lookup_customer", "refund"],
                   "handoffs": [{"agent": "vip", "where": {"context": "flags.vip"}}],
                   "output_guardrails": ["no_cards"]},
        "vip": {"name": "VIP Desk", "model": "m"},
    },
    "tools": {
        "lookup_customer": {"parameters": {"type": "object", "properties": {"customerId": {"type": "string"}},
                                           "required": ["customerId"], "additionalProperties": False},
                            "implementation": "tests.test_replay_harness:live_lookup"},
        "refund": {"parameters": {"type": "object", "properties": {"amount": {"type": "number"}}}},
    },
    "guardrails": {"no_cards": {"regex": r"\b\d{16}\b", "reason": "card number"}},
    "policies": {"version": "p.v3", "rules": [
        {"kind": "tool", "name": "lookup_customer", "decision": "allow", "reason": "read_only"},
        {"name": "refund", "args": {"amount": {"gt": 500}}, "decision": "require_approval",
         "reason": "large_refund", "result_mode": "tool_result", "public_reason": "Ask a manager."},
        {"name": "refund", "args": {"amount": {"lte": 500}}, "decision": "allow", "reason": "small"},
        {"kind": "handoff", "name": "VIP Desk", "decision": "allow", "reason": "routing"},
    ]},
}


def source(context=None):
    return {"runId": "s", "status": "completed", "question": "q", "response": "r",
            "contextSnapshot": context or {}, "items": [{"type": "message", "role": "user", "content": "q"}],
            "inputItemCount": 1, "policyDecisions": []}


def refund_calls(*amounts):
    return {"tool_calls": [{"call_id": f"c{i}", "name": "refund", "arguments": {"amount": a}}
                           for i, a in enumerate(amounts)]}


def test_declarative_policies_decide_by_name_args_and_default():
    harness = parse_harness(SUPPORT)
    provider = ScriptedProvider([refund_calls(900), {"tool_calls": [
        {"call_id": "x", "name": "refund", "arguments": {"note": "no amount"}}]}, "done"])
    outcome = replay_run(source(), harness, "strict", provider=provider)
    decisions = outcome.record["policyDecisions"]
    assert [(d["decision"], d["reason"]) for d in decisions] == [
        ("require_approval", "large_refund"), ("deny", "no_matching_rule")]
    assert decisions[0]["policyVersion"] == "p.v3" and decisions[0]["resultMode"] == "tool_result"
    assert outcome.record["items"][2]["output"] == {"status": "approval_required", "code": "large_refund",
                                                    "publicReason": "Ask a manager.", "data": None}
    assert outcome.record["errorName"] == "ToolCallPolicyDeniedError"  # default deny throws


def test_conditional_handoff_follows_the_replay_context():
    harness = parse_harness(SUPPORT)
    for context, tools in (({"flags": {"vip": True}}, ["lookup_customer", "refund", "handoff_to_vip_desk"]),
                           ({"flags": {"vip": False}}, ["lookup_customer", "refund"])):
        seen = []

        def turn(request, seen=seen):
            seen.append([t["name"] for t in request.tools])
            return "done"

        replay_run(source(context), harness, "strict", provider=ScriptedProvider(turn))
        assert seen == [tools]


def test_guardrail_from_the_harness_trips():
    outcome = replay_run(source(), parse_harness(SUPPORT), "strict",
                         provider=ScriptedProvider(["card 4111111111111111"]))
    assert outcome.record["errorName"] == "OutputGuardrailTripwireTriggered"
    assert outcome.record["guardrailDecisions"][0]["reason"] == "card number"


def test_hybrid_runs_the_named_python_implementation():
    LIVE_CALLS.clear()
    provider = ScriptedProvider([{"tool_calls": [{"call_id": "c1", "name": "lookup_customer",
                                                  "arguments": {"customerId": "C-9"}}]}, "done"])
    outcome = replay_run(source(), parse_harness(SUPPORT), "hybrid", provider=provider)
    assert LIVE_CALLS == [{"customerId": "C-9"}]
    assert outcome.record["items"][2]["output"]["data"]["source"] == "live"
    assert outcome.stats.liveFallbackCalls == 1
    assert outcome.record["metadata"]["harness"]["descriptorHash"] == parse_harness(SUPPORT).descriptor_hash


def test_scripted_provider_from_the_harness(tmp_path):
    (tmp_path / "turns.json").write_text(json.dumps(["scripted answer"]), encoding="utf-8")
    path = write(tmp_path, "h.toml", """
        [runtime]
        entry_agent = "a"
        [agents.a]
        model = "m"
        [provider]
        kind = "scripted"
        script = "turns.json"
        """)
    outcome = replay_run(source(), load_harness(path), "strict")
    assert outcome.record["response"] == "scripted answer"
    assert outcome.record["providerName"] == "ScriptedProvider"


def test_from_source_harness_labels_recorded_rules_and_keeps_handoff_names():
    record = json.loads((AIOC_FIXTURES / "v-approval-and-soft-deny.json").read_text(encoding="utf-8"))
    harness = harness_from_source(record)
    doc = harness.materialized()
    rules = doc["policies"]["rules"]
    assert [r["label"] for r in rules] == ["recorded", "recorded"]
    assert rules[0] == {"decision": "require_approval", "reason": "manager_approval_required",
                        "public_reason": "  ", "result_mode": "tool_result", "policy_version": "p.v1",
                        "expires_at": "2026-03-01T00:00:00Z", "kind": "tool", "turn": 1, "call_id": "t1",
                        "label": "recorded"}
    assert doc["agents"]["Src"]["handoffs"] == [{"agent": "Target", "tool_name": "handoff_to_target"}]
    assert doc["policies"]["default"] == "deny"
    assert doc["replay"] == {"tape": "reproduce"}
    guard = harness_from_source(json.loads((AIOC_FIXTURES / "v-guardrail-triggered.json").read_text()))
    assert guard.materialized()["guardrails"] == {
        "no_secret": {"turns": [1], "label": "recorded", "reason": "leak", "metadata": {"rule": 1}}}
