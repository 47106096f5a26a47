"""Runtime objects from a harness: tools with their implementations, declarative policies and
guardrails as functions, the agent graph, as one :class:`Candidate` per replay."""

from __future__ import annotations

import importlib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from recstore.errors import InputError
from recstore.replay.harness.spec import (
    POLICY_OPERATORS,
    GuardrailSpec,
    HandoffSpec,
    Harness,
    PolicyRule,
    PolicySpec,
    ProviderSpec,
    ToolSpec,
)
from recstore.replay.tape import AIOC, REPRODUCE, TapeRules
from recstore.runtime import (
    DEFAULT_TOOL_PARAMETERS,
    Agent,
    Handoff,
    OutputGuardrail,
    Policies,
    PolicyInput,
    Tool,
)


@dataclass
class TurnState:
    """The current request's turn, set by the replay before each model request (guardrails
    re-applied from a recording trigger on a turn number)."""

    turn: int = 0


@dataclass
class Candidate:
    """The agent graph and settings one replay runs (the Python-object form of a candidate)."""

    entry: Agent
    policies: Policies | None = None
    max_turns: int = 10
    include_prompt_text: bool = False
    tape_rules: TapeRules = AIOC
    harness: dict = field(default_factory=dict)  # metadata.harness of the replay record
    turn_state: TurnState = field(default_factory=TurnState)
    provider: ProviderSpec | None = None


def _context_path(context: Any, path: str) -> Any:
    value = context
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


_MISSING = object()


def _args_path(arguments: Any, path: str) -> Any:
    value = arguments
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return _MISSING
    return value


def _compare(op: str, value: Any, expected: Any) -> bool:
    if op == "exists":
        return (value is not _MISSING) == bool(expected)
    if value is _MISSING:
        return False
    if op == "eq":
        return value == expected
    if op == "ne":
        return value != expected
    if op == "in":
        return isinstance(expected, list) and value in expected
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not numeric or not isinstance(expected, (int, float)):
        return False
    return {"gt": value > expected, "gte": value >= expected, "lt": value < expected, "lte": value <= expected}[op]


def _args_match(conditions: dict[str, Any], arguments: Any) -> bool:
    for path, expected in conditions.items():
        value = _args_path(arguments, path)
        if isinstance(expected, dict) and expected and set(expected) <= POLICY_OPERATORS:
            if not all(_compare(op, value, want) for op, want in expected.items()):
                return False
        elif not _compare("eq", value, expected):
            return False
    return True


def _one_of(selector: str | list[str] | None, value: str) -> bool:
    if selector is None:
        return True
    return value in selector if isinstance(selector, list) else value == selector


def _rule_matches(rule: PolicyRule, request: PolicyInput, occurrence: int) -> bool:
    return (
        (rule.kind is None or rule.kind == request.kind)
        and _one_of(rule.name, request.name)
        and _one_of(rule.agent, request.agent_name)
        and (rule.turn is None or rule.turn == request.turn)
        and (rule.call_id is None or rule.call_id == request.call_id)
        and (rule.occurrence is None or rule.occurrence == occurrence)
        and (rule.args is None or _args_match(rule.args, request.arguments))
    )


def _rule_result(rule: PolicyRule, default_version: str | None) -> dict:
    result: dict = {"decision": rule.decision, "reason": rule.reason or "allowed_by_rule"}
    optional = {
        "publicReason": rule.public_reason,
        "resultMode": rule.result_mode,
        "policyVersion": rule.policy_version or default_version,
        "expiresAt": rule.expires_at,
        "metadata": rule.metadata,
    }
    result.update({key: value for key, value in optional.items() if value is not None})
    return result


def _policy_function(spec: PolicySpec) -> Callable[[PolicyInput], dict]:
    # Policy requests seen per (turn, call id); one function per built candidate, i.e. per run.
    seen: Counter = Counter()

    def decide(request: PolicyInput) -> dict:
        seen[request.turn, request.call_id] += 1
        occurrence = seen[request.turn, request.call_id]
        for rule in spec.rules:
            if _rule_matches(rule, request, occurrence):
                return _rule_result(rule, spec.version)
        result = {"decision": spec.default, "reason": spec.default_reason}
        if spec.version is not None:
            result["policyVersion"] = spec.version
        return result

    return decide


def _guardrail_check(spec: GuardrailSpec, state: TurnState) -> Callable[[str, Any], tuple]:
    pattern = re.compile(spec.regex) if spec.regex is not None else None

    def check(text: str, _context: Any) -> tuple[bool, str | None, dict | None]:
        if spec.turns is not None and state.turn not in spec.turns:
            return False, None, None
        if spec.contains or pattern is not None:
            hit = any(needle in text for needle in spec.contains) or bool(pattern and pattern.search(text))
        else:
            hit = True
        return (True, spec.reason, spec.metadata) if hit else (False, None, None)

    return check


def import_implementation(target: str) -> Callable[[Any, Any], Any]:
    """Resolve ``module:function`` to the callable, with a clear error when it does not exist."""
    module_name, _, attr = target.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"cannot import tool implementation {target!r}: {exc}") from None
    if not callable(value):
        raise InputError(f"tool implementation {target!r} is not callable")
    return value


class _Builder:
    def __init__(self, harness: Harness):
        self.harness = harness
        self.state = TurnState()
        self.tools = {name: self._tool(name, spec) for name, spec in harness.tools.items()}
        self.guardrails = {
            name: OutputGuardrail(name, _guardrail_check(spec, self.state))
            for name, spec in harness.guardrails.items()
        }

    def _tool(self, name: str, spec: ToolSpec) -> Tool:
        func = import_implementation(spec.implementation) if spec.implementation else None
        parameters = spec.parameters if spec.parameters is not None else dict(DEFAULT_TOOL_PARAMETERS)
        return Tool(name, spec.description, parameters, func=func)

    def candidate(self) -> Candidate:
        h = self.harness
        agents = {
            agent_id: Agent(
                name=spec.name or agent_id,
                instructions=spec.instructions or "",
                model=spec.model,
                model_settings=spec.modelSettings,
                prompt_version=spec.promptVersion,
                tools=[self.tools[name] for name in spec.tools],
                output_guardrails=[self.guardrails[name] for name in spec.output_guardrails],
                handoff_description=spec.handoffDescription,
            )
            for agent_id, spec in h.agents.items()
        }
        for agent_id, spec in h.agents.items():
            agents[agent_id].handoffs = [self._handoff(entry, agents) for entry in spec.handoffs]
        policies = None
        if h.policies is not None:
            decide = _policy_function(h.policies)
            policies = Policies(tool=decide, handoff=decide)
        return Candidate(
            entry=agents[h.runtime.entry_agent],
            policies=policies,
            max_turns=h.runtime.max_turns,
            include_prompt_text=h.runtime.include_prompt_text,
            tape_rules=REPRODUCE if h.replay.tape == "reproduce" else AIOC,
            harness=h.harness_metadata(),
            turn_state=self.state,
            provider=h.provider,
        )

    @staticmethod
    def _handoff(entry: str | HandoffSpec, agents: dict[str, Agent]) -> Handoff:
        if isinstance(entry, str):
            return Handoff(agents[entry])
        enabled = None
        if entry.where is not None:
            path = entry.where.context

            def enabled(context: Any, _path: str = path) -> bool:
                return bool(_context_path(context, _path))

        return Handoff(agents[entry.agent], enabled=enabled, description=entry.description, tool_name=entry.tool_name)


def build_candidate(harness: Harness) -> Candidate:
    """Fresh runtime objects for one replay of ``harness``."""
    return _Builder(harness).candidate()
