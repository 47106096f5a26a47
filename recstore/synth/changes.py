"""Candidate changes: the one controlled behaviour change (``case_changes``) a fifth of the
candidate cases carry, applied to their plans."""

from __future__ import annotations

import random
from typing import Any

from recstore.synth.cases import _CHANGE_WEIGHTS, CaseChange
from recstore.synth.plans import _Call, _Draw, _entry, _own_tool, _Plan, _plan


def _allowed_tool_calls(plan: _Plan) -> list[tuple[int, int, _Call]]:
    """(turn, position, call) of ordinary tool calls the policy allows, before any failure."""
    out = []
    for t, turn in enumerate(plan.turns):
        if not isinstance(turn, list):
            break
        for c, call in enumerate(turn):
            if call.decision is not None or call.name.startswith("handoff_to_") or call.raw:
                return out
            out.append((t, c, call))
    return out


def _applicable(plan: _Plan) -> set[str]:
    kinds = set()
    allowed = _allowed_tool_calls(plan) if plan.scenario != "validation" else []
    completed = plan.expect == "completed"
    if allowed and isinstance(allowed[0][2].arguments, dict) and allowed[0][2].arguments:
        kinds.add("tool_argument")
    if completed and plan.scenario not in ("guardrail",):
        kinds |= {"final_wording", "add_tool_call"}
    if completed and any(len(plan.turns[t]) == 1 for t, _, _ in allowed):
        kinds.add("drop_tool_call")
    if (completed and allowed and plan.scenario != "guardrail") or (
            plan.scenario == "policy_throw" and plan.policies):
        kinds.add("status_flip")
    return kinds


def _change_kind(seed: int, index: int, plan: _Plan) -> str:
    rng = random.Random(f"recstore-synth:{seed}:{index}:change")
    kinds, weights = zip(*_CHANGE_WEIGHTS, strict=True)
    kind = rng.choices(kinds, weights)[0]
    return kind if kind == "none" or kind in _applicable(plan) else "none"


def _changed_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    return f"{value}-v2"


def _apply_change(plan: _Plan, kind: str, seed: int) -> str:
    """Change the candidate plan in place; return the detail text."""
    draw = _Draw(seed, plan.index, "change")
    if kind == "tool_argument":
        call = _allowed_tool_calls(plan)[0][2]
        key = next(iter(call.arguments))
        old = call.arguments[key]
        call.arguments = {**call.arguments, key: _changed_value(old)}
        return f"{call.name}.{key}: {old!r} -> {call.arguments[key]!r}"
    if kind == "final_wording":
        plan.turns[-1] = f"{plan.turns[-1]} (reviewed)"
        return "final answer reworded"
    if kind == "drop_tool_call":
        t = next(t for t, _, _ in _allowed_tool_calls(plan) if len(plan.turns[t]) == 1)
        dropped = plan.turns.pop(t)[0]
        return f"skipped call to {dropped.name}"
    if kind == "add_tool_call":
        extra = _own_tool(draw, _entry(plan))
        plan.turns.insert(0, [extra])
        return f"extra first call to {extra.name}"
    if plan.expect == "completed":
        call = _allowed_tool_calls(plan)[0][2]
        call.decision = {"decision": "deny", "reason": "candidate_policy_tightened", "policyVersion": "policy.v8"}
        return f"{call.name} now denied (throw): completed -> failed"
    call = next(c for turn in plan.turns if isinstance(turn, list) for c in turn)
    call.decision = {"decision": "allow", "reason": "candidate_policy_relaxed"}
    return f"{call.name} now allowed: failed -> completed"


def case_changes(n: int, seed: int = 0) -> dict[str, CaseChange]:
    """What the candidate variant changes, by caseId, for the first ``n`` cases."""
    out = {}
    for index in range(n):
        plan = _plan(seed, index, "candidate")
        kind = _change_kind(seed, index, plan)
        detail = _apply_change(plan, kind, seed) if kind != "none" else ""
        out[plan.meta["caseId"]] = CaseChange(plan.meta["caseId"], plan.scenario, kind, detail)
    return out
