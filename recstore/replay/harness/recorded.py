"""A harness derived from a recorded run (``--from-source``): its agents, tools and handoffs,
and every recorded policy and guardrail decision re-applied as a rule labelled ``recorded``."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from recstore.records import analyze
from recstore.replay.harness.loading import parse_harness
from recstore.replay.harness.spec import RECORDED, Harness
from recstore.replay.providers import RecordedRequest, recorded_requests


def _recorded_rule(decision: dict, call: dict) -> dict:
    resource = decision.get("resource") if isinstance(decision.get("resource"), dict) else {}
    reason = decision.get("reason")
    rule: dict = {"decision": decision.get("decision"), "reason": reason if isinstance(reason, str) and reason.strip() else "recorded_decision"}
    has_output = call["hasOutput"]
    output = call.get("output")
    if "publicReason" in decision:
        rule["public_reason"] = decision["publicReason"]
    elif "resultMode" not in decision and isinstance(output, dict) and isinstance(output.get("publicReason"), str):
        # Legacy decisions (no resultMode) did not record publicReason; the envelope kept the
        # text shown. A newer decision without one had none: the runtime fills its default.
        rule["public_reason"] = output["publicReason"]
    if decision.get("decision") != "allow":
        # Legacy decisions lack resultMode; an output item shows it was tool_result.
        rule["result_mode"] = decision.get("resultMode") or ("tool_result" if has_output else "throw")
    for key, name in (("policyVersion", "policy_version"), ("expiresAt", "expires_at"), ("metadata", "metadata")):
        if key in decision:
            rule[name] = decision[key]
    if resource.get("kind") in ("tool", "handoff"):
        rule["kind"] = resource["kind"]
    rule.update(turn=decision.get("turn"), call_id=decision.get("callId"), label=RECORDED)
    return rule


def _inferred_rule(join: Any, turn: Any) -> dict:
    """A rule for a call that has an output but no recorded decision (records before decisions)."""
    status, code = join.envelope_status, join.envelope_code
    rule: dict = {"turn": turn, "call_id": join.call.get("callId"), "label": "inferred"}
    if status in ("denied", "approval_required"):
        decision = "deny" if status == "denied" else "require_approval"
        rule.update(decision=decision, reason=code or "recorded", result_mode="tool_result")
    else:
        rule.update(decision="allow", reason="recorded_output")
    return rule


def _number_shared_call_ids(rules: list[dict]) -> None:
    """Rules for calls that share a turn and call id (providers reuse ids) get their position
    among them: the n-th policy request with that key gets the n-th call's decision, not the
    first one's for all."""
    shared = Counter((rule["turn"], rule["call_id"]) for rule in rules)
    position: Counter = Counter()
    for rule in rules:
        key = (rule["turn"], rule["call_id"])
        if shared[key] > 1:
            position[key] += 1
            rule["occurrence"] = position[key]


def _recorded_guardrails(source: dict, turn_agents: dict[Any, str]
                         ) -> tuple[dict[str, dict], dict[str, list[str]] | None]:
    """The recorded guardrails as specs (tripping on their recorded turns), and which agent ran
    each: an agent's guardrails run on its own turns only, so they belong to the agent of the
    turns they were recorded on (``None`` when a decision's turn has no recorded request: then
    every agent gets every guardrail)."""
    guardrails: dict[str, dict] = {}
    guarded: dict[str, list[str]] | None = {}
    for decision in source.get("guardrailDecisions") or []:
        if not isinstance(decision, dict) or not isinstance(decision.get("guardrailName"), str):
            continue
        name = decision["guardrailName"]
        spec = guardrails.setdefault(name, {"turns": [], "label": RECORDED})
        if decision.get("decision") == "triggered" and isinstance(decision.get("turn"), int):
            spec["turns"].append(decision["turn"])
            for key in ("reason", "metadata"):
                if key in decision:
                    spec[key] = decision[key]
        owner = turn_agents.get(decision.get("turn"))
        if owner is None:
            guarded = None
        elif guarded is not None and name not in guarded.setdefault(owner, []):
            guarded[owner].append(name)
    return guardrails, guarded


def _max_turns(source: dict, request_count: int) -> int:
    """The source's own limit when it ran out of turns, else room for every recorded request."""
    if source.get("errorName") == "MaxTurnsExceededError":
        match = re.search(r"(\d+)\s*$", source.get("errorMessage") or "")
        if match:
            return max(int(match.group(1)), 1)
    return max(request_count, 1)


def harness_from_source(source: dict) -> Harness:
    """A harness that reproduces ``source`` (see the module docstring)."""
    analysis = analyze(source)
    decisions = source.get("policyDecisions") or []
    agents: dict[str, dict] = {}

    def agent(name: Any) -> dict:
        key = str(name)
        return agents.setdefault(key, {"tools": [], "handoffs": []})

    entry = analysis.initial_agent if isinstance(analysis.initial_agent, str) else str(source.get("agentName") or "agent")
    agent(entry)
    snapshots = {s.get("turn"): s for s in source.get("promptSnapshots") or [] if isinstance(s, dict)}
    reqs = recorded_requests(source)
    request_of_item: dict[int, RecordedRequest] = {}
    for req in reqs:
        request_of_item.update(dict.fromkeys(range(req.start, req.end), req))
        spec = agent(req.agent)
        snapshot = snapshots.get(req.turn) or {}
        if "model" not in spec and isinstance(req.model, str):
            spec["model"] = req.model
        if "instructions" not in spec and isinstance(snapshot.get("promptText"), str):
            spec["instructions"] = snapshot["promptText"]
        if "promptVersion" not in spec and isinstance(snapshot.get("promptVersion"), str):
            spec["promptVersion"] = snapshot["promptVersion"]

    tools: dict[str, dict] = {}
    rules: list[dict] = []
    for join in analysis.tool_calls:
        req = request_of_item.get(join.call_item_index) if join.call_item_index is not None else None
        if join.in_input or req is None:
            continue
        name = join.call.get("name")
        owner = agent(req.agent)
        known = join.policy_decision_index is not None or join.call["hasOutput"]
        if join.is_handoff and join.handoff_target is not None:
            target = str(join.handoff_target)
            agent(target)
            if not any(h["tool_name"] == name for h in owner["handoffs"]):
                owner["handoffs"].append({"agent": target, "tool_name": name})
        elif known and not join.is_handoff and isinstance(name, str):
            tools.setdefault(name, {"description": "Recorded tool.", "parameters": {}})
            if name not in owner["tools"]:
                owner["tools"].append(name)
        # A call with neither decision nor output named a tool the agent did not have.
        if join.policy_decision_index is not None:
            rules.append(_recorded_rule(decisions[join.policy_decision_index], join.call))
        elif join.call["hasOutput"]:
            rules.append(_inferred_rule(join, req.turn))
    _number_shared_call_ids(rules)

    guardrails, guarded = _recorded_guardrails(source, {req.turn: str(req.agent) for req in reqs})
    for name, spec in agents.items():
        spec["output_guardrails"] = guarded.get(name, []) if guarded is not None else list(guardrails)
        if not spec["handoffs"]:
            del spec["handoffs"]

    document = {
        "metadata": {"name": f"from-source:{source.get('runId')}", "source": RECORDED},
        "runtime": {
            "entry_agent": entry,
            "max_turns": _max_turns(source, len(reqs) + 1),
            "include_prompt_text": any("promptText" in s for s in snapshots.values()),
        },
        "agents": {name: {"name": name, **spec} for name, spec in agents.items()},
        "tools": tools,
        "guardrails": guardrails,
        "policies": {"default": "deny", "default_reason": "no_recorded_decision", "rules": rules},
        "provider": {"kind": "recorded"},
        "replay": {"tape": "reproduce"},
    }
    return parse_harness(document, source=f"from-source harness of {source.get('runId')}")
