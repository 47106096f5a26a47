"""The agent runtime against aioc: exact reproduction of aioc's runtime-written vectors, the unit-test
facts of §10.4, the §1.3 naming rules, failure shapes (§1.10) and §1.11 invariants."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.canonical import canonical_json, sha256_canonical, sha256_text
from recstore.records import extract_tool_calls
from recstore.runtime import (
    ABSENT,
    Agent,
    ArgumentValidationError,
    Handoff,
    ModelResponse,
    OutputGuardrail,
    Policies,
    ProviderToolCall,
    RunHalted,
    ScriptedProvider,
    Tool,
    handoff_tool_name,
    parse_tool_arguments,
    proposal_hash,
    run,
    validate_arguments,
)

from .conftest import AIOC_FIXTURES
from .runtime_invariants import record_problems

ALLOW = {"decision": "allow", "reason": "ok"}
ID_SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"],
             "additionalProperties": False}


def allow_all(reason: str = "ok", handoff_reason: str | None = None) -> Policies:
    return Policies(tool=lambda p: {"decision": "allow", "reason": reason},
                    handoff=lambda p: {"decision": "allow", "reason": handoff_reason or reason})


def lookup_tool() -> Tool:
    # The tool aioc's vector generator used: description and schema recovered from toolsHash.
    return Tool("lookup", "Lookup", ID_SCHEMA, func=lambda args, ctx: {"id": args["id"], "found": True})


def calls(*specs: tuple[str, str, str]) -> dict:
    return {"tool_calls": [{"call_id": c, "name": n, "arguments": a} for c, n, a in specs]}


def ping_tool(executed: list | None = None) -> Tool:
    def ping(args, ctx):
        if executed is not None:
            executed.append(args)
        return "pong"
    return Tool("ping", "Ping", func=ping)


# --- exact reproduction of aioc 0.2.8's runtime-written vectors -------------------------------

def _normalize_timestamps(record: dict, base: str) -> dict:
    """The fixtures' timestamps were rewritten after the run, one block of seconds per kind."""
    def stamp(second: int) -> str:
        return f"{base}:{second:02d}.000Z"
    record["startedAt"], record["completedAt"] = stamp(0), stamp(30)
    for key, start in (("promptSnapshots", 5), ("requestFingerprints", 10), ("policyDecisions", 15),
                       ("guardrailDecisions", 20), ("suspendedProposals", 25)):
        for i, entry in enumerate(record.get(key, [])):
            entry["timestamp"] = stamp(start + i)
    for fp in record["requestFingerprints"]:
        fp["runtimeVersion"] = "0.2.8"
    return record


def _key_orders(value, path="$"):
    """Every object's key order, so key-order equality is checked apart from number formatting."""
    if isinstance(value, dict):
        yield path, list(value)
        for k, v in value.items():
            yield from _key_orders(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _key_orders(v, f"{path}[{i}]")


def _vector_handoff_cycle():
    alpha = Agent("Alpha", "alpha", model="m", tools=[lookup_tool()])
    beta = Agent("Beta", "beta", model="m", handoffs=[alpha])
    alpha.handoffs.append(beta)
    script = [calls(("h1", "handoff_to_beta", '{"why":"x"}')), calls(("h2", "handoff_to_alpha", "")),
              calls(("t1", "lookup", '{"id":"7"}')), "back in alpha"]
    return alpha, "go", script, allow_all("ok_tool", "ok_handoff")


def _vector_two_handoffs_one_turn():
    gamma = Agent("Gamma", model="m")
    beta = Agent("Beta", model="m")
    alpha = Agent("Alpha", model="m", tools=[lookup_tool()], handoffs=[beta, gamma])
    script = [calls(("h1", "handoff_to_beta", "{}"), ("t1", "lookup", '{"id":"1"}'),
                    ("h2", "handoff_to_gamma", "{}")), "gamma done"]
    return alpha, "go", script, allow_all()


def _vector_approval_and_soft_deny():
    src = Agent("Src", model="m", tools=[lookup_tool()], handoffs=[Agent("Target", model="m")])
    policies = Policies(
        tool=lambda p: {"decision": "require_approval", "reason": "manager_approval_required",
                        "publicReason": "  ", "resultMode": "tool_result", "policyVersion": "p.v1",
                        "expiresAt": "2026-03-01T00:00:00Z"},
        handoff=lambda p: {"decision": "deny", "reason": "not_allowed", "resultMode": "tool_result"})
    script = [calls(("t1", "lookup", '{"id":"42"}'), ("h1", "handoff_to_target", '{"reason":"escalate"}')),
              "need approval"]
    return src, "go", script, policies


def _vector_failed_deny_throw():
    return Agent("A", model="m", tools=[lookup_tool()]), "go", [calls(("t1", "lookup", '{"id":"1"}'))], None


def _vector_thread_continuation():
    free = Tool("free", "Free-form", {}, func=lambda args, ctx: args)
    agent = Agent("A", model="m", model_settings={"temperature": 0.5, "seed": 7},
                  tools=[lookup_tool(), free])
    fixture = json.loads((AIOC_FIXTURES / "v-thread-continuation.json").read_text(encoding="utf-8"))
    history = fixture["items"][: fixture["inputItemCount"]]
    new_call = fixture["items"][5]["rawItem"]["arguments"]
    script = [calls(("n1", "free", new_call), ("n2", "free", "not json"), ("n3", "free", "   ")),
              "second answer \U0001F600"]
    return agent, history, script, allow_all()


def _vector_guardrail_triggered():
    no_secret = OutputGuardrail("no_secret", lambda text, ctx: (True, "leak", {"rule": 1}))
    return Agent("G", model="m", output_guardrails=[no_secret]), "tell", ["secret"], None


VECTORS = {
    "v-handoff-cycle": (_vector_handoff_cycle, "2026-02-01T10:00"),
    "v-two-handoffs-one-turn": (_vector_two_handoffs_one_turn, "2026-02-01T11:00"),
    "v-approval-and-soft-deny": (_vector_approval_and_soft_deny, "2026-02-01T12:00"),
    "v-failed-deny-throw": (_vector_failed_deny_throw, "2026-02-01T13:00"),
    "v-thread-continuation": (_vector_thread_continuation, "2026-02-01T14:00"),
    "v-guardrail-triggered": (_vector_guardrail_triggered, "2026-02-01T15:00"),
}


@pytest.mark.parametrize("name", sorted(VECTORS))
def test_reproduces_aioc_vector_exactly(name):
    """Same agents, script and policies as aioc's generator → the same record: every item, hash,
    decision, proposal and error, in aioc's key order (timestamps normalized as the fixture was)."""
    build, base = VECTORS[name]
    agent, given_input, script, policies = build()
    result = run(agent, given_input, provider=ScriptedProvider(script), policies=policies,
                 run_id=name, metadata={"vector": name}, include_prompt_text=True)
    record = _normalize_timestamps(result.record, base)
    expected = json.loads((AIOC_FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    for got, want in zip(record["requestFingerprints"], expected["requestFingerprints"], strict=True):
        assert got == want
    assert canonical_json(record) == canonical_json(expected)
    assert list(_key_orders(record)) == list(_key_orders(expected))
    assert record_problems(record) == []


def test_simple_run_prompt_and_fingerprint_hashes():
    """§10.2: promptHash = raw text hash, systemPromptHash = hash of the JSON string, and the whole
    fingerprint of the inspect sample simple-run."""
    expected = json.loads((AIOC_FIXTURES / "simple-run.json").read_text(encoding="utf-8"))
    agent = Agent("Simple Assistant", "Answer in one short sentence.", model="fake-model",
                  prompt_version="simple-assistant.v1")
    record = run(agent, "What does AIOC record?", provider=ScriptedProvider(["AIOC "]),
                 include_prompt_text=True).record
    snap, fp = record["promptSnapshots"][0], record["requestFingerprints"][0]
    assert snap["promptHash"] == "46d83aa9a8e71e4339fd7717be3a7e4edb2fc4ec9a49dddf1b7d78ff2d0b710f"
    assert fp["systemPromptHash"] == "228ed221735b979d54863e568731ff3b21bcea134047424a7a8e7a66e3272393"
    want = dict(expected["requestFingerprints"][0])
    for key in ("timestamp", "runtimeVersion"):
        want.pop(key)
        fp.pop(key)
    assert fp == want
    assert {k: v for k, v in snap.items() if k != "timestamp"} == \
        {k: v for k, v in expected["promptSnapshots"][0].items() if k != "timestamp"}
    assert record["items"] == expected["items"]


# --- §10.4 unit-test facts ------------------------------------------------------------------

def test_completed_run_basics():
    agent = Agent("Basic", "Be nice.", model="fake-model", prompt_version="basic.v1")
    record = run(agent, "hello", provider=ScriptedProvider(["hi"]), include_prompt_text=True).record
    assert record["status"] == "completed" and record["inputItemCount"] == 1
    snap = record["promptSnapshots"][0]
    assert (snap["turn"], snap["agentName"], snap["model"], snap["promptVersion"], snap["promptText"]) \
        == (1, "Basic", "fake-model", "basic.v1", "Be nice.")
    fp = record["requestFingerprints"][0]
    assert fp["fingerprintSchemaVersion"] == "request-fingerprint.v1"
    assert fp["runtimeVersion"].startswith("recstore-")
    for key in ("requestHash", "systemPromptHash", "messagesHash", "toolsHash", "modelSettingsHash"):
        assert re.fullmatch(r"[a-f0-9]{64}", fp[key])
    assert re.fullmatch(r"[a-f0-9]{64}", snap["promptHash"])
    assert fp["modelSettingsHash"] == sha256_canonical({})
    assert "metadata" not in record and "suspendedProposals" not in record
    assert "guardrailDecisions" not in record and "errorName" not in record


def test_history_input_of_three_items():
    history = [{"type": "message", "role": "user", "content": "a"},
               {"type": "message", "role": "assistant", "content": "b"},
               {"type": "message", "role": "user", "content": "  c "}]
    seen = []
    provider = ScriptedProvider(lambda req: seen.append(list(req.messages)) or "done")
    record = run(Agent("H", model="m"), history, provider=provider).record
    assert record["inputItemCount"] == 3 and record["requestFingerprints"][0]["messageCount"] == 3
    assert len(record["items"]) == 4 and record["items"][:3] == history
    assert seen == [history]
    assert record["question"] == "a\n\nc"


def test_string_question_is_not_trimmed():
    record = run(Agent("Q", model="m"), "  spaced  ", provider=ScriptedProvider(["x"])).record
    assert record["question"] == "  spaced  "


def test_default_deny_without_policies():
    executed = []
    agent = Agent("Run record default deny", model="m", tools=[ping_tool(executed)])
    result = run(agent, "go", provider=ScriptedProvider([calls(("c1", "ping", "{}")), "never"]))
    record = result.record
    assert record["status"] == "failed" and record["errorName"] == "ToolCallPolicyDeniedError"
    assert record["errorMessage"] == 'Tool "ping" denied by policy: policy_not_configured'
    decision = record["policyDecisions"][0]
    assert (decision["decision"], decision["reason"], decision["resultMode"]) == \
        ("deny", "policy_not_configured", "throw")
    assert decision["resource"] == {"kind": "tool", "name": "ping"}
    assert "promptText" not in record["promptSnapshots"][0]
    assert record["requestFingerprints"][0]["toolCount"] == 1
    assert record["items"][-1]["type"] == "tool_call_item"  # dangling call
    assert executed == [] and result.output == "" and record["response"] == ""
    assert record_problems(record) == []


def test_require_approval_tool_result():
    executed = []
    agent = Agent("Run record approval required", model="m", tools=[ping_tool(executed)])
    policies = Policies(tool=lambda p: {
        "decision": "require_approval", "reason": "manager_approval_required",
        "publicReason": "Manager approval is required.", "resultMode": "tool_result",
        "policyVersion": "approval.v1", "expiresAt": "2026-04-01T00:00:00Z"})
    record = run(agent, "go", provider=ScriptedProvider([calls(("c1", "ping", "{}")), "waiting"]),
                 policies=policies).record
    assert record["status"] == "completed" and executed == []
    decision = record["policyDecisions"][0]
    assert decision["publicReason"] == "Manager approval is required."
    assert decision["resultMode"] == "tool_result" and decision["policyVersion"] == "approval.v1"
    assert decision["expiresAt"] == "2026-04-01T00:00:00Z"
    [proposal] = record["suspendedProposals"]
    assert proposal["rawArguments"] == "{}" and proposal["parsedArguments"] == {}
    assert proposal["argsCanonicalJson"] == "{}" and proposal["runId"] == record["runId"]
    assert proposal["proposalHash"] == "333f98a1d057ca4aedddc398edbfb2aa28d3c0f6b5a074c49f32beb7f696bdc7"
    assert record["items"][2]["output"] == {"status": "approval_required",
                                            "code": "manager_approval_required",
                                            "publicReason": "Manager approval is required.",
                                            "data": None}
    assert record_problems(record) == []


def test_require_approval_throw_mode_fails_with_proposal():
    agent = Agent("Approver", model="m", tools=[ping_tool()])
    policies = Policies(tool=lambda p: {"decision": "require_approval", "reason": "high_value"})
    record = run(agent, "go", provider=ScriptedProvider([calls(("c1", "ping", "{}"))]),
                 policies=policies).record
    assert record["errorName"] == "ToolCallApprovalRequiredError"
    assert record["errorMessage"] == 'Tool "ping" requires approval: high_value'
    assert record["policyDecisions"][0]["resultMode"] == "throw"
    assert len(record["suspendedProposals"]) == 1 and record["items"][-1]["type"] == "tool_call_item"


def test_proposal_hash_vectors():
    assert proposal_hash("tool", "Run record approval required", "ping", {}) == \
        "333f98a1d057ca4aedddc398edbfb2aa28d3c0f6b5a074c49f32beb7f696bdc7"
    assert proposal_hash("tool", "Run record proposal hash stability", "ping",
                         {"accountId": "acct-1", "amount": 10}) == \
        "aff77bc9f61a77813106bb4493fd8d8ad5342879f5de9ec6461f461bed2e717b"
    assert proposal_hash("handoff", "Run record approval handoff source",
                         "Run record approval handoff target", {"reason": "route"}) == \
        "9b6f66024b90c031a4dfca6dec94f5789a86ea6860f17d1d083e9c9c6aa87a8c"


def test_proposal_hash_stable_across_runs():
    agent = Agent("Run record proposal hash stability", model="m", tools=[ping_tool()])
    policies = Policies(tool=lambda p: {"decision": "require_approval", "reason": "r",
                                        "resultMode": "tool_result"})
    proposals = []
    for call_id in ("a1", "b2"):
        script = [calls((call_id, "ping", '{"amount":10,"accountId":"acct-1"}')), "ok"]
        proposals.append(run(agent, "go", provider=ScriptedProvider(script),
                             policies=policies).record["suspendedProposals"][0])
    first, second = proposals
    assert first["proposalHash"] == second["proposalHash"] == \
        "aff77bc9f61a77813106bb4493fd8d8ad5342879f5de9ec6461f461bed2e717b"
    assert first["runId"] != second["runId"] and first["callId"] != second["callId"]


def test_handoff_deny_tool_result():
    target = Agent("Finance Specialist", "finance", model="m")
    source = Agent("Triage", "triage", model="m", handoffs=[target])
    policies = Policies(handoff=lambda p: {"decision": "deny", "reason": "missing_finance_approval",
                                           "resultMode": "tool_result"})
    script = [calls(("h1", "handoff_to_finance_specialist", '{"reason":"invoice_dispute"}')), "staying"]
    record = run(source, "help", provider=ScriptedProvider(script), policies=policies).record
    snaps, fps = record["promptSnapshots"], record["requestFingerprints"]
    assert len(snaps) == len(fps) == 2 and fps[0]["requestHash"] != fps[1]["requestHash"]
    assert [fp["agentName"] for fp in fps] == ["Triage", "Triage"] and record["agentName"] == "Triage"
    assert record["policyDecisions"][0]["resource"] == {"kind": "handoff", "name": "Finance Specialist"}
    assert record["items"][2]["output"] == {"status": "denied", "code": "missing_finance_approval",
                                            "publicReason": "Action not allowed.", "data": None}
    assert record_problems(record) == []


def test_handoff_approval_proposal():
    target = Agent("Run record approval handoff target", model="m")
    source = Agent("Run record approval handoff source", model="m", handoffs=[target])
    policies = Policies(handoff=lambda p: {"decision": "require_approval", "reason": "needs_ok",
                                           "resultMode": "tool_result"})
    script = [calls(("h1", "handoff_to_run_record_approval_handoff_target", '{"reason":"route"}')), "wait"]
    record = run(source, "go", provider=ScriptedProvider(script), policies=policies).record
    [proposal] = record["suspendedProposals"]
    assert proposal["kind"] == "handoff" and proposal["payloadCanonicalJson"] == '{"reason":"route"}'
    assert proposal["fromAgentName"] == proposal["agentName"] == source.name
    assert proposal["toAgentName"] == target.name and proposal["handoffPayload"] == {"reason": "route"}
    assert proposal["proposalHash"] == "9b6f66024b90c031a4dfca6dec94f5789a86ea6860f17d1d083e9c9c6aa87a8c"
    assert list(proposal)[-4:] == ["fromAgentName", "toAgentName", "handoffPayload", "payloadCanonicalJson"]


def test_handoff_throw_mode_messages():
    target = Agent("Compliance Officer", model="m")
    source = Agent("Trader", model="m", handoffs=[target])
    script = [calls(("h1", "handoff_to_compliance_officer", "{}"))]
    denied = run(source, "go", provider=ScriptedProvider(script)).record
    assert denied["errorName"] == "HandoffPolicyDeniedError"
    assert denied["errorMessage"] == 'Handoff "Trader" -> "Compliance Officer" denied by policy: policy_not_configured'
    approval = run(source, "go", provider=ScriptedProvider(script), policies=Policies(
        handoff=lambda p: {"decision": "require_approval", "reason": "handoff_needs_approval"})).record
    assert approval["errorName"] == "HandoffApprovalRequiredError"
    assert approval["errorMessage"] == \
        'Handoff "Trader" -> "Compliance Officer" requires approval: handoff_needs_approval'
    assert approval["agentName"] == "Trader"


def test_handoff_switches_immediately_but_batch_runs_as_old_agent():
    seen = []
    def tool_policy(p):
        seen.append((p.agent_name, p.name))
        return ALLOW
    beta = Agent("Beta", model="m")
    alpha = Agent("Alpha", model="m", tools=[lookup_tool()], handoffs=[beta])
    script = [calls(("h1", "handoff_to_beta", "{}"), ("t1", "lookup", '{"id":"1"}')), "done"]
    record = run(alpha, "go", provider=ScriptedProvider(script),
                 policies=Policies(tool=tool_policy, handoff=lambda p: ALLOW)).record
    assert seen == [("Alpha", "lookup")]
    assert [fp["agentName"] for fp in record["requestFingerprints"]] == ["Alpha", "Beta"]
    assert record["agentName"] == "Beta" and record_problems(record) == []


def test_guardrail_trip_and_pass_on_every_turn():
    seen = []
    def no_secret(text, ctx):
        seen.append(text)
        return ("secret" in text, "leak" if "secret" in text else None, None)
    agent = Agent("G", model="m", tools=[ping_tool()], output_guardrails=[
        OutputGuardrail("no_secret", no_secret)])
    script = [calls(("c1", "ping", "{}")), "the secret"]
    record = run(agent, "tell", provider=ScriptedProvider(script), policies=allow_all()).record
    assert seen == ["", "the secret"]
    assert record["status"] == "failed" and record["errorName"] == "OutputGuardrailTripwireTriggered"
    assert record["errorMessage"] == 'Output guardrail "no_secret" triggered. Reason: leak'
    assert record["guardrailDecisions"][0] == {
        "timestamp": record["guardrailDecisions"][0]["timestamp"], "turn": 1,
        "guardrailName": "no_secret", "decision": "pass"}
    tripped = record["guardrailDecisions"][1]
    assert (tripped["turn"], tripped["decision"], tripped["reason"]) == (2, "triggered", "leak")
    assert "metadata" not in tripped and record["response"] == ""
    assert len(record["items"]) == record["requestFingerprints"][-1]["messageCount"]  # empty interval
    assert record_problems(record) == []


def test_guardrail_without_reason_message():
    agent = Agent("G", model="m", output_guardrails=[OutputGuardrail("blocklist", lambda t, c: (True, None, None))])
    record = run(agent, "x", provider=ScriptedProvider(["bad"])).record
    assert record["errorMessage"] == 'Output guardrail "blocklist" triggered.'
    assert list(record["guardrailDecisions"][0]) == ["timestamp", "turn", "guardrailName", "decision"]


def test_max_turns():
    agent = Agent("Loop", model="m", tools=[ping_tool()])
    provider = ScriptedProvider(lambda req: calls((f"c{req.turn}", "ping", "{}")))
    record = run(agent, "go", provider=provider, policies=allow_all(), max_turns=3).record
    assert record["errorName"] == "MaxTurnsExceededError"
    assert record["errorMessage"] == "Max turns exceeded: 3"
    assert len(record["requestFingerprints"]) == 3
    last = record["items"][record["requestFingerprints"][-1]["messageCount"]:]
    assert [i["type"] for i in last] == ["tool_call_item", "tool_call_output_item"]
    assert record_problems(record) == []


def test_max_turns_default_is_ten():
    agent = Agent("Loop", model="m", tools=[ping_tool()])
    provider = ScriptedProvider(lambda req: calls(("c", "ping", "")))
    record = run(agent, "go", provider=provider, policies=allow_all()).record
    assert record["errorMessage"] == "Max turns exceeded: 10"


def test_unknown_tool_fails_before_policy():
    called = []
    policies = Policies(tool=lambda p: called.append(p) or ALLOW)
    agent = Agent("A", model="m", tools=[ping_tool()])
    record = run(agent, "go", provider=ScriptedProvider([calls(("c1", "python", "{}"))]),
                 policies=policies).record
    assert record["errorName"] == "ToolCallError"
    assert record["errorMessage"] == 'Tool "python" is not registered.'
    assert record["policyDecisions"] == [] and called == []
    assert record["items"][-1]["name"] == "python" and record_problems(record) == []


def test_argument_validation_after_allow():
    agent = Agent("A", model="m", tools=[Tool("search", "Search", {
        "type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "number"}},
        "required": ["query"], "additionalProperties": False}, func=lambda a, c: a)])
    record = run(agent, "go", provider=ScriptedProvider([calls(("c1", "search", '{"query":["x"],"limit":"5"}'))]),
                 policies=allow_all()).record
    assert record["errorName"] == "ZodError"
    assert json.loads(record["errorMessage"]) == [
        {"code": "invalid_type", "expected": "string", "received": "array", "path": ["query"],
         "message": "Expected string, received array"},
        {"code": "invalid_type", "expected": "number", "received": "string", "path": ["limit"],
         "message": "Expected number, received string"}]
    assert record["errorMessage"].startswith('[\n  {\n    "code": "invalid_type",')
    assert record["policyDecisions"][0]["decision"] == "allow"
    assert record["items"][-1]["type"] == "tool_call_item" and record_problems(record) == []


def test_missing_required_argument():
    agent = Agent("A", model="m", tools=[lookup_tool()])
    record = run(agent, "go", provider=ScriptedProvider([calls(("c1", "lookup", "{}"))]),
                 policies=allow_all()).record
    assert json.loads(record["errorMessage"]) == [{"code": "invalid_type", "expected": "string",
                                                   "received": "undefined", "path": ["id"],
                                                   "message": "Required"}]


def test_unknown_keys_stripped_only_when_additional_properties_false():
    received = []
    strict = Tool("strict", "", ID_SCHEMA, func=lambda a, c: received.append(a) or a)
    loose = Tool("loose", "", {"type": "object", "properties": {"id": {"type": "string"}}},
                 func=lambda a, c: received.append(a) or a)
    agent = Agent("A", model="m", tools=[strict, loose])
    script = [calls(("c1", "strict", '{"id":"1","extra":2}'), ("c2", "loose", '{"id":"1","extra":2}')), "ok"]
    record = run(agent, "go", provider=ScriptedProvider(script), policies=allow_all()).record
    assert received == [{"id": "1"}, {"id": "1", "extra": 2}]
    assert record["items"][1]["arguments"] == {"id": "1", "extra": 2}  # the call item keeps raw args


def test_runtime_deny_reasons():
    def boom(p):
        raise RuntimeError("policy backend unavailable (503)")
    cases = {
        "policy_error": (boom, {"errorName": "RuntimeError",
                                "errorMessage": "policy backend unavailable (503)"}),
        "invalid_policy_result": (lambda p: {"decision": "allow", "reason": "  "}, None),
        "deprecated_policy_field_denyMode": (
            lambda p: {"decision": "deny", "reason": "x", "denyMode": "tool_result"},
            {"deprecatedField": "denyMode", "replacementField": "resultMode",
             "receivedValue": "tool_result"}),
    }
    for reason, (policy, metadata) in cases.items():
        agent = Agent("A", model="m", tools=[ping_tool()])
        record = run(agent, "go", provider=ScriptedProvider([calls(("c1", "ping", "{}"))]),
                     policies=Policies(tool=policy)).record
        decision = record["policyDecisions"][0]
        assert (decision["decision"], decision["reason"], decision["resultMode"]) == ("deny", reason, "throw")
        assert decision.get("metadata") == metadata
        assert record["errorMessage"] == f'Tool "ping" denied by policy: {reason}'
    for bad in (None, "allow", {"decision": "maybe", "reason": "r"}, {"decision": "deny"},
                {"decision": "deny", "reason": "r", "resultMode": "soft"}):
        record = run(Agent("A", model="m", tools=[ping_tool()]), "go",
                     provider=ScriptedProvider([calls(("c1", "ping", "{}"))]),
                     policies=Policies(tool=lambda p, bad=bad: bad)).record
        assert record["policyDecisions"][0]["reason"] == "invalid_policy_result"


def test_envelope_public_reason_trimmed_and_defaulted():
    for given_reason, envelope_reason in (("  Needs manager  ", "Needs manager"), ("  ", "Action not allowed."),
                                          (None, "Action not allowed.")):
        result = {"decision": "deny", "reason": "no", "resultMode": "tool_result"}
        if given_reason is not None:
            result["publicReason"] = given_reason
        record = run(Agent("A", model="m", tools=[ping_tool()]), "go",
                     provider=ScriptedProvider([calls(("c1", "ping", "{}")), "ok"]),
                     policies=Policies(tool=lambda p, r=result: r)).record
        assert record["items"][2]["output"]["publicReason"] == envelope_reason
        assert record["policyDecisions"][0].get("publicReason") == given_reason


def test_handoff_tool_naming_vectors():
    """§1.3: sanitize, then `_2`, `_3`… on clashes with real tools and earlier handoff tools."""
    assert handoff_tool_name("Support Team!", set()) == "handoff_to_support_team"
    assert handoff_tool_name("support team", {"handoff_to_support_team"}) == "handoff_to_support_team_2"
    assert handoff_tool_name("***", {"handoff_to_agent"}) == "handoff_to_agent_2"
    assert handoff_tool_name("  Übersetzer--Bot  ", set()) == "handoff_to_bersetzer_bot"
    seen = []
    real = Tool("handoff_to_agent", "real")
    agent = Agent("Hub", model="m", tools=[real], handoffs=[
        Agent("Support Team!"), Agent("support team"), Agent("***"), Agent("Finance", handoff_description="Money.")])
    run(agent, "go", provider=ScriptedProvider(lambda req: seen.append(req.tools) or "ok"))
    assert [t["name"] for t in seen[0]] == ["handoff_to_agent", "handoff_to_support_team",
                                            "handoff_to_support_team_2", "handoff_to_agent_2",
                                            "handoff_to_finance"]
    assert seen[0][1]["description"] == 'Handoff to agent "Support Team!".'
    assert seen[0][4]["description"] == 'Handoff to agent "Finance". Money.'
    assert seen[0][1]["parameters"] == {"type": "object", "properties": {}, "additionalProperties": True}


def test_explicit_handoff_tool_name_is_reserved_first():
    seen = []
    agent = Agent("Hub", model="m", handoffs=[
        Agent("Researcher"), Handoff(Agent("Other"), tool_name="handoff_to_researcher")])
    run(agent, "go", provider=ScriptedProvider(lambda req: seen.append(req.tools) or "ok"))
    assert [t["name"] for t in seen[0]] == ["handoff_to_researcher_2", "handoff_to_researcher"]


def test_conditional_handoff_follows_context():
    target = Agent("Replay Target", model="m")
    rule = Handoff(target, enabled=lambda ctx: ctx.get("actorId") == "u-1")
    agent = Agent("Src", model="m", handoffs=[rule])
    for context, names in (({"actorId": "u-1"}, ["handoff_to_replay_target"]), ({"actorId": "x"}, [])):
        seen = []
        record = run(agent, "go", provider=ScriptedProvider(lambda req, s=seen: s.append(req.tools) or "ok"),
                     context=context).record
        assert [t["name"] for t in seen[0]] == names
        assert record["requestFingerprints"][0]["toolCount"] == len(names)
        assert record["contextSnapshot"] == context


def test_absent_output_has_no_data_key_and_none_is_null():
    agent = Agent("A", model="m", tools=[Tool("void", func=lambda a, c: ABSENT),
                                         Tool("nothing", func=lambda a, c: None)])
    script = [calls(("c1", "void", ""), ("c2", "nothing", "")), "ok"]
    record = run(agent, "go", provider=ScriptedProvider(script), policies=allow_all()).record
    assert record["items"][2]["output"] == {"status": "ok", "code": None, "publicReason": None}
    assert record["items"][2]["rawItem"]["output"] == record["items"][2]["output"]
    assert record["items"][4]["output"]["data"] is None
    assert json.loads(json.dumps(record)) == record  # JSON form: nothing Python-only inside
    extracted = extract_tool_calls(record)
    assert "data" not in extracted[0]["output"]


def test_tool_executor_runs_only_after_allow_and_validation():
    served = []
    def executor(tool, args, call):
        served.append((tool.name, args, call.agent_name, call.call_id, call.turn))
        return ABSENT if tool.name == "void" else {"recorded": args}
    def policy(p):
        return ALLOW if p.name != "blocked" else {"decision": "deny", "reason": "no",
                                                 "resultMode": "tool_result"}
    tools = [lookup_tool(), Tool("blocked"), Tool("void")]
    agent = Agent("A", model="m", tools=tools)
    script = [calls(("c1", "lookup", '{"id":"1","extra":true}'), ("c2", "blocked", "{}"), ("c3", "void", "")), "ok"]
    record = run(agent, "go", provider=ScriptedProvider(script), policies=Policies(tool=policy),
                 tool_executor=executor).record
    assert served == [("lookup", {"id": "1"}, "A", "c1", 1), ("void", {}, "A", "c3", 1)]
    assert record["items"][2]["output"]["data"] == {"recorded": {"id": "1"}}
    assert record["items"][4]["output"]["status"] == "denied"
    assert "data" not in record["items"][6]["output"]


def test_tool_executor_error_fails_run_with_its_name():
    class ReplayInputMissing(Exception):
        error_name = "ReplayInputMissingError"
    def executor(tool, args, call):
        raise ReplayInputMissing('Missing recorded tool output for "lookup"')
    agent = Agent("A", model="m", tools=[lookup_tool()])
    result = run(agent, "go", provider=ScriptedProvider([calls(("c1", "lookup", '{"id":"1"}'))]),
                 policies=allow_all(), tool_executor=executor)
    assert isinstance(result.error, ReplayInputMissing)
    assert result.record["errorName"] == "ReplayInputMissingError"
    assert result.record["errorMessage"] == 'Missing recorded tool output for "lookup"'
    assert result.record["items"][-1]["type"] == "tool_call_item"


@pytest.mark.parametrize(("stop", "status"), [(RunHalted(), "completed"), (KeyError("x"), "failed")])
def test_unwrapped_outputs_and_a_halt_after_the_turn(stop, status):
    """envelope_outputs=False writes outputs as they are; halt ends the run after the turn, once
    every sibling call has its output (the agentuse replay stops this way)."""
    def executor(tool, args, call):
        return {"served": call.call_id}
    asked = []
    def halt():
        asked.append(True)
        return stop
    agent = Agent("A", model="m", tools=[lookup_tool()])
    script = [calls(("c1", "lookup", '{"id":"1"}'), ("c2", "lookup", '{"id":"2"}')), "never sent"]
    result = run(agent, "go", provider=ScriptedProvider(script), policies=allow_all(),
                 tool_executor=executor, envelope_outputs=False, halt=halt)
    outputs = [i["output"] for i in result.record["items"] if i["type"] == "tool_call_output_item"]
    assert outputs == [{"served": "c1"}, {"served": "c2"}]
    assert (result.record["status"], result.record["response"], asked) == (status, "", [True])
    assert len(result.record["requestFingerprints"]) == 1


def test_provider_error_leaves_empty_interval():
    def failing(req):
        if req.turn == 2:
            raise TimeoutError("upstream timed out")
        return calls(("c1", "ping", ""))
    record = run(Agent("A", model="m", tools=[ping_tool()]), "go", provider=ScriptedProvider(failing),
                 policies=allow_all()).record
    assert record["errorName"] == "TimeoutError" and record["errorMessage"] == "upstream timed out"
    assert len(record["items"]) == record["requestFingerprints"][-1]["messageCount"]


def test_scripted_provider_failure_turn(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"tool_calls": [{"id": "c1", "name": "ping", "arguments": ""}]},
                                {"error": {"name": "UpstreamTimeoutError", "message": "timed out"}}]),
                    encoding="utf-8")
    record = run(Agent("A", model="m", tools=[ping_tool()]), "go",
                 provider=ScriptedProvider.from_json(path), policies=allow_all()).record
    assert (record["errorName"], record["errorMessage"]) == ("UpstreamTimeoutError", "timed out")
    assert len(record["requestFingerprints"]) == 2
    assert len(record["items"]) == record["requestFingerprints"][-1]["messageCount"]
    assert record_problems(record) == []


def test_text_with_tool_calls_is_discarded():
    agent = Agent("A", model="m", tools=[ping_tool()])
    script = [ModelResponse(text="thinking", tool_calls=[ProviderToolCall("c1", "ping", "")]), "final"]
    record = run(agent, "go", provider=ScriptedProvider(script), policies=allow_all()).record
    assert [i.get("content") for i in record["items"] if i["type"] == "message"] == ["go", "final"]


def test_parse_tool_arguments_like_aioc():
    assert parse_tool_arguments("") == {} and parse_tool_arguments(" \n ") == {}
    assert parse_tool_arguments("not json") == {"__raw": "not json"}
    assert parse_tool_arguments("NaN") == {"__raw": "NaN"}
    assert parse_tool_arguments(" null ") is None and parse_tool_arguments("[1]") == [1]
    assert parse_tool_arguments("2.5") == 2.5
    assert parse_tool_arguments('{"x":1e400,"y":-1e999}') == {"x": None, "y": None}  # JSON form of ±Infinity
    assert list(parse_tool_arguments('{"b":1,"10":2,"9":3,"01":4}')) == ["9", "10", "b", "01"]


def test_clock_and_id_factory_make_runs_deterministic():
    def build():
        ticks = iter(range(1000))
        clock = lambda: f"2026-01-01T00:00:{next(ticks):02d}.000Z"  # noqa: E731
        agent = Agent("A", "x", model="m", tools=[lookup_tool()])
        script = [calls(("c1", "lookup", '{"id":"1"}')), "done"]
        return run(agent, "go", provider=ScriptedProvider(script), policies=allow_all(), clock=clock,
                   id_factory=lambda: "run-1").record
    first, second = build(), build()
    assert json.dumps(first) == json.dumps(second)
    assert first["runId"] == "run-1" and first["startedAt"] == "2026-01-01T00:00:00.000Z"


def test_scripted_provider_from_json(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"tool_calls": [{"id": "c1", "name": "ping", "arguments": {"x": 1}}]},
                                {"text": "done"}]), encoding="utf-8")
    record = run(Agent("A", model="m", tools=[ping_tool()]), "go",
                 provider=ScriptedProvider.from_json(path), policies=allow_all()).record
    assert record["items"][1]["rawItem"]["arguments"] == '{"x":1}' and record["response"] == "done"
    exhausted = run(Agent("A", model="m"), "go", provider=ScriptedProvider([])).record
    assert exhausted["errorName"] == "ScriptExhaustedError"


def test_scripted_provider_rejects_bad_json(tmp_path):
    from recstore.errors import InputError
    path = tmp_path / "bad.json"
    path.write_text('{"text": NaN}', encoding="utf-8")
    with pytest.raises(InputError, match="bad.json"):
        ScriptedProvider.from_json(path)
    path.write_text('{"text": "x"}', encoding="utf-8")
    with pytest.raises(InputError, match="JSON array"):
        ScriptedProvider.from_json(path)


def test_prompt_hash_of_lone_surrogate_uses_replacement_char():
    agent = Agent("A", "bad \ud800 text", model="m")
    snap = run(agent, "go", provider=ScriptedProvider(["ok"])).record["promptSnapshots"][0]
    assert snap["promptHash"] == sha256_text("bad \ufffd text")


# --- property: random scripted runs always produce sound records -----------------------------

_DECISIONS = st.sampled_from([
    {"decision": "allow", "reason": "ok"},
    {"decision": "deny", "reason": "no", "resultMode": "tool_result", "publicReason": " x "},
    {"decision": "deny", "reason": "no"},
    {"decision": "require_approval", "reason": "ask", "resultMode": "tool_result"},
    {"decision": "require_approval", "reason": "ask", "policyVersion": "v"},
    "not a result",
])
_CALL = st.tuples(st.sampled_from(["lookup", "ping", "handoff_to_a", "handoff_to_b", "nope"]),
                  st.sampled_from(['{"id":"1"}', "", "{}", "oops", '{"id":2}', "[1]"]), _DECISIONS)
_TURN = st.one_of(st.text(max_size=8), st.lists(_CALL, min_size=1, max_size=3))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=st.lists(_TURN, min_size=1, max_size=6), max_turns=st.integers(1, 6),
       guard=st.booleans())
def test_random_runs_satisfy_invariants(turns, max_turns, guard):
    decisions = {}
    script = []
    for t, turn in enumerate(turns):
        if isinstance(turn, str):
            script.append(turn)
            continue
        batch = []
        for c, (name, raw, decision) in enumerate(turn):
            call_id = f"c{t}_{c}"
            decisions[call_id] = decision
            batch.append((call_id, name, raw))
        script.append(calls(*batch))
    guardrails = [OutputGuardrail("no_z", lambda text, ctx: ("z" in text, "z", {"n": 1}))] if guard else []
    a = Agent("A", "a", model="m", tools=[lookup_tool(), ping_tool()], output_guardrails=guardrails)
    b = Agent("B", "b", model="m2", tools=[ping_tool()], handoffs=[a], output_guardrails=guardrails)
    a.handoffs.append(b)
    b.handoffs.append(Handoff(Agent("Never"), enabled=lambda ctx: False))
    policy = lambda p: decisions[p.call_id]  # noqa: E731
    result = run(a, "go", provider=ScriptedProvider(script), policies=Policies(policy, policy),
                 max_turns=max_turns)
    record = result.record
    assert record_problems(record) == []
    assert json.loads(json.dumps(record)) == record
    assert (result.error is None) == (record["status"] == "completed")


@settings(max_examples=200, deadline=None)
@given(names=st.lists(st.text(max_size=12), min_size=1, max_size=6),
       real=st.lists(st.sampled_from(["handoff_to_agent", "handoff_to_a", "lookup"]), max_size=2))
def test_handoff_names_are_sanitized_and_unique(names, real):
    taken = set(real)
    generated = []
    for name in names:
        tool_name = handoff_tool_name(name, taken)
        taken.add(tool_name)
        generated.append(tool_name)
        base = "handoff_to_" + (re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_") or "agent")
        assert tool_name == base or re.fullmatch(re.escape(base) + r"_[2-9]\d*", tool_name)
    assert len(set(generated)) == len(generated) and not set(generated) & set(real)


_JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                          st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5))


@settings(max_examples=200, deadline=None)
@given(id_value=_JSON_SCALARS, extra=st.dictionaries(st.text(max_size=4), _JSON_SCALARS, max_size=3))
def test_validation_accepts_exactly_well_typed_arguments(id_value, extra):
    arguments = {**extra, "id": id_value}
    try:
        validated = validate_arguments(ID_SCHEMA, arguments)
    except ArgumentValidationError as exc:
        assert not isinstance(id_value, str)
        assert exc.issues[0]["path"] == ["id"] and exc.issues[0]["code"] == "invalid_type"
    else:
        assert isinstance(id_value, str) and validated == {"id": id_value}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=4_102_444_799_999_999_999), min_size=1,
                max_size=4))
def test_utc_now_is_javascripts_to_iso_string_at_any_instant(instants):
    """utc_now formats each second once and reuses it; whatever the instants (and whatever
    second it formatted before), its text is ``new Date(ms).toISOString()``, as datetime
    writes it."""
    import time as time_module
    from datetime import UTC, datetime, timedelta

    from recstore.runtime import loop

    with pytest.MonkeyPatch.context() as patch:  # a hypothesis test: no function fixture
        for nanos in instants:
            patch.setattr(time_module, "time_ns", lambda nanos=nanos: nanos)
            got = loop.utc_now()
            seconds, rest = divmod(nanos, 1_000_000_000)
            expected = (datetime.fromtimestamp(seconds, UTC)
                        + timedelta(milliseconds=rest // 1_000_000))
            assert got == expected.isoformat(timespec="milliseconds").replace("+00:00", "Z")
