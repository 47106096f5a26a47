"""The agent loop: one model request per turn, tool calls gated by policies, one RunRecord out.

It follows aioc 0.2.8's ``run`` (docs/aioc-runrecord.md §1): per turn it snapshots the prompt,
fingerprints the request, asks the provider, runs the current agent's output guardrails on the
text, then either processes the tool calls in provider order (call item, policy, execution,
output item) or appends the final answer. Failures end the run with a record all the same.
"""

from __future__ import annotations

import copy
import json
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from recstore import __version__
from recstore.canonical import canonical_json
from recstore.runtime.agents import HANDOFF_TOOL_PARAMETERS, Agent, Policies, PolicyInput, Tool
from recstore.runtime.errors import (
    AgentRunError,
    HandoffApprovalRequiredError,
    HandoffPolicyDeniedError,
    MaxTurnsExceededError,
    OutputGuardrailTripwireTriggered,
    ToolCallApprovalRequiredError,
    ToolCallError,
    ToolCallPolicyDeniedError,
    error_name_of,
)
from recstore.runtime.fingerprints import RequestHasher, prompt_snapshot
from recstore.runtime.policy import (
    blocked_envelope,
    decision_record,
    evaluate_policy,
    ok_envelope,
    result_mode,
    suspended_proposal,
)
from recstore.runtime.provider import ModelRequest, Provider, ProviderToolCall
from recstore.runtime.schema import validate_arguments

__all__ = [
    "RUNTIME_VERSION",
    "Halt",
    "RunHalted",
    "RunResult",
    "ToolExecutor",
    "handoff_tool_name",
    "parse_tool_arguments",
    "question_of",
    "run",
    "utc_now",
]

RUNTIME_VERSION = f"recstore-{__version__}"

ToolExecutor = Callable[[Tool, Any, PolicyInput], Any]


class RunHalted(Exception):
    """What a :data:`Halt` hook returns to end a run cleanly (``completed``, no final answer)."""


Halt = Callable[[], Exception | None]
"""Asked after each turn's tool calls: ``None`` to go on, :class:`RunHalted` to end the run
cleanly, any other exception to fail it. Sibling calls of the turn have all run by then."""


@dataclass(frozen=True)
class RunResult:
    """What ``run`` returns. ``record`` is always present (JSON-form dict, aioc key order);
    ``error`` is the exception that failed the run, else ``None``; ``output`` is the response."""

    output: str
    record: dict
    error: Exception | None = None

    @property
    def status(self) -> str:
        """``completed`` or ``failed``, as in the record."""
        return self.record["status"]


# The last whole second utc_now formatted, and its text: a replay asks the time a dozen times
# a run, mostly within one second, and formatting it whole cost 4.3 us a call (3-5 % of a
# replay worker's CPU); one tuple, swapped whole, so threads never see half of it.
_SECOND: tuple[int, str] = (-1, "")


def utc_now() -> str:
    """``new Date().toISOString()``: UTC, milliseconds, ``Z``."""
    global _SECOND
    second, nanos = divmod(time.time_ns(), 1_000_000_000)
    cached = _SECOND
    if cached[0] != second:
        cached = _SECOND = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{cached[1]}.{nanos // 1_000_000:03d}Z"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _is_array_index(key: str) -> bool:
    return key.isdigit() and (key == "0" or key[0] != "0") and int(key) <= 4294967294


def _js_object(pairs: list[tuple[str, Any]]) -> dict:
    """An object in the key order ``JSON.parse`` gives it: array-index keys first, ascending."""
    obj = dict(pairs)
    if any(_is_array_index(k) for k in obj):
        index_keys = sorted((k for k in obj if _is_array_index(k)), key=int)
        obj = {**{k: obj[k] for k in index_keys}, **{k: v for k, v in obj.items() if not _is_array_index(k)}}
    return obj


def parse_tool_arguments(raw: str) -> Any:
    """aioc's argument parsing: blank → ``{}``, JSON → its value (objects in JavaScript key
    order), otherwise ``{"__raw": raw}``."""
    trimmed = raw.strip()
    if not trimmed:
        return {}
    try:
        return _ARGUMENT_DECODER.decode(trimmed)
    except (ValueError, RecursionError):
        return {"__raw": raw}


def _js_float(text: str) -> float | None:
    """A JSON number literal as ``JSON.parse`` reads it: ``1e400`` is Infinity, which becomes
    ``null`` in the record's JSON form (keeping ``inf`` would make the record invalid JSON)."""
    value = float(text)
    return None if value in (math.inf, -math.inf) else value


_ARGUMENT_DECODER = json.JSONDecoder(
    object_pairs_hook=_js_object, parse_constant=_reject_constant, parse_float=_js_float
)


def question_of(input_items: str | Sequence[dict]) -> str:
    """The record's ``question``: a string input as is; for items, the trimmed non-empty contents
    of user messages joined by a blank line."""
    if isinstance(input_items, str):
        return input_items
    texts = []
    for item in input_items:
        if item.get("type") == "message" and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str) and content.strip():
                texts.append(content.strip())
    return "\n\n".join(texts)


@lru_cache(maxsize=4096)
def _sanitize(name: str) -> str:
    out = []
    pending_sep = False
    for ch in name.strip().lower():
        if "a" <= ch <= "z" or "0" <= ch <= "9":
            if pending_sep and out:
                out.append("_")
            pending_sep = False
            out.append(ch)
        else:
            pending_sep = True
    return "".join(out) or "agent"


def handoff_tool_name(target_name: str, taken: set[str]) -> str:
    """``handoff_to_<sanitized name>``, suffixed ``_2``, ``_3``… while it clashes with ``taken``
    (real tool names and earlier handoff tool names). Does not modify ``taken``."""
    base = f"handoff_to_{_sanitize(target_name)}"
    name, suffix = base, 2
    while name in taken:
        name, suffix = f"{base}_{suffix}", suffix + 1
    return name


@dataclass(frozen=True)
class _TurnTools:
    specs: list[dict]
    specs_json: str  # canonical JSON of `specs`, for toolsHash
    tools: dict[str, Tool]
    handoffs: dict[str, Agent]


@lru_cache(maxsize=4096)
def _handoff_spec_json(name: str, description: str) -> str:
    return canonical_json({"name": name, "description": description, "parameters": HANDOFF_TOOL_PARAMETERS})


def _turn_tools(agent: Agent, context: Any) -> _TurnTools:
    tools = {t.name: t for t in agent.tools}
    rules = [r for r in agent.handoff_rules() if r.enabled is None or r.enabled(context)]
    taken = set(tools) | {r.tool_name for r in rules if r.tool_name}
    handoffs: dict[str, Agent] = {}
    specs = [t.spec() for t in agent.tools]
    specs_json = [t.spec_json for t in agent.tools]
    for rule in rules:
        name = rule.tool_name or handoff_tool_name(rule.target.name, taken)
        taken.add(name)
        handoffs[name] = rule.target
        description = f'Handoff to agent "{rule.target.name}".'
        extra = rule.description or rule.target.handoff_description
        if extra:
            description = f"{description} {extra}"
        specs.append({"name": name, "description": description, "parameters": HANDOFF_TOOL_PARAMETERS})
        specs_json.append(_handoff_spec_json(name, description))
    return _TurnTools(specs, "[" + ",".join(specs_json) + "]", tools, handoffs)


class _Run:
    """State of one run; methods mirror the steps of aioc's loop."""

    def __init__(self, agent: Agent, input_items: list[dict], *, provider: Provider, context: Any,
                 policies: Policies, run_id: str, clock: Callable[[], str],
                 include_prompt_text: bool, tool_executor: ToolExecutor | None,
                 envelope_outputs: bool = True, halt: Halt | None = None):
        self.agent = agent
        self.history = input_items
        self.provider = provider
        self.context = context
        self.policies = policies
        self.run_id = run_id
        self.clock = clock
        self.include_prompt_text = include_prompt_text
        self.tool_executor = tool_executor
        self.envelope_outputs = envelope_outputs
        self.halt = halt
        self.response = ""
        self.prompt_snapshots: list[dict] = []
        self.fingerprints: list[dict] = []
        self.policy_decisions: list[dict] = []
        self.proposals: list[dict] = []
        self.guardrail_decisions: list[dict] = []
        self.hasher = RequestHasher(provider.name, RUNTIME_VERSION)

    def loop(self, max_turns: int) -> None:
        for index in range(max_turns):
            if self.turn(index + 1):
                return
            stop = self.halt() if self.halt is not None else None
            if isinstance(stop, RunHalted):
                return
            if stop is not None:
                raise stop
        raise MaxTurnsExceededError(max_turns)

    def turn(self, turn: int) -> bool:
        """One request; True when the run produced its final answer."""
        agent = self.agent
        tools = _turn_tools(agent, self.context)
        system_prompt = agent.resolve_instructions(self.context)
        model = (agent.model or "").strip()
        self.prompt_snapshots.append(prompt_snapshot(
            self.clock(), turn, agent.name, model if agent.model is not None else None,
            agent.prompt_version, system_prompt, self.include_prompt_text))
        request = ModelRequest(agent.name, model, system_prompt, list(self.history), tools.specs,
                               agent.model_settings or {}, turn)
        self.fingerprints.append(self.hasher.fingerprint(self.clock(), request, tools.specs_json))
        response = self.provider.complete(request)
        self.check_guardrails(agent, response.text or "", turn)
        if response.tool_calls:
            for call in response.tool_calls:
                self.tool_call(agent, tools, call, turn)
            return False
        self.response = response.text or ""
        self.history.append({"type": "message", "role": "assistant", "content": self.response})
        return True

    def check_guardrails(self, agent: Agent, text: str, turn: int) -> None:
        for guardrail in agent.output_guardrails:
            triggered, reason, metadata = guardrail.check(text, self.context)
            decision: dict = {"timestamp": self.clock(), "turn": turn,
                              "guardrailName": guardrail.name,
                              "decision": "triggered" if triggered else "pass"}
            if triggered:
                if reason is not None:
                    decision["reason"] = reason
                if metadata is not None:
                    decision["metadata"] = metadata
            self.guardrail_decisions.append(decision)
            if triggered:
                raise OutputGuardrailTripwireTriggered(guardrail.name, reason)

    def tool_call(self, agent: Agent, tools: _TurnTools, call: ProviderToolCall, turn: int) -> None:
        """Record the call, gate it, execute it, record its output. ``agent`` is the agent that
        made the request, even after a handoff earlier in the same batch."""
        arguments = parse_tool_arguments(call.arguments)
        self.history.append({
            "type": "tool_call_item", "callId": call.call_id, "name": call.name,
            "arguments": arguments,
            "rawItem": {"type": "function_call", "id": call.call_id, "name": call.name,
                        "arguments": call.arguments},
        })
        target = tools.handoffs.get(call.name)
        if target is not None:
            output = self.handoff(agent, target, call, arguments, turn)
        elif call.name in tools.tools:
            output = self.execute_tool(agent, tools.tools[call.name], call, arguments, turn)
        else:
            raise ToolCallError(call.name)
        self.history.append({
            "type": "tool_call_output_item", "callId": call.call_id, "output": output,
            "rawItem": {"type": "function_call_result", "call_id": call.call_id, "output": output},
        })

    def gate(self, policy_input: PolicyInput, turn: int) -> dict:
        """Evaluate the policy and record the decision (and a proposal for require_approval)."""
        policy = self.policies.tool if policy_input.kind == "tool" else self.policies.handoff
        result = evaluate_policy(policy, policy_input)
        self.policy_decisions.append(decision_record(
            self.clock(), turn, policy_input.call_id, result, policy_input.kind, policy_input.name))
        if result["decision"] == "require_approval":
            self.proposals.append(suspended_proposal(
                self.clock(), self.run_id, turn, policy_input.call_id, result, policy_input))
        return result

    def handoff(self, agent: Agent, target: Agent, call: ProviderToolCall, payload: Any,
                turn: int) -> dict:
        policy_input = PolicyInput("handoff", agent.name, target.name, payload, call.arguments,
                                   turn, call.call_id, self.context)
        result = self.gate(policy_input, turn)
        if result["decision"] == "allow":
            self.agent = target  # later calls of this batch still run as `agent`
            return ok_envelope({"handoffTo": target.name, "accepted": True, "payload": payload})
        if result_mode(result) == "tool_result":
            return blocked_envelope(result)
        if result["decision"] == "require_approval":
            raise HandoffApprovalRequiredError(agent.name, target.name, result["reason"])
        raise HandoffPolicyDeniedError(agent.name, target.name, result["reason"])

    def execute_tool(self, agent: Agent, tool: Tool, call: ProviderToolCall, arguments: Any,
                     turn: int) -> dict:
        policy_input = PolicyInput("tool", agent.name, tool.name, arguments, call.arguments,
                                   turn, call.call_id, self.context)
        result = self.gate(policy_input, turn)
        if result["decision"] != "allow":
            if result_mode(result) == "tool_result":
                return blocked_envelope(result)
            if result["decision"] == "require_approval":
                raise ToolCallApprovalRequiredError(tool.name, result["reason"])
            raise ToolCallPolicyDeniedError(tool.name, result["reason"])
        validated = validate_arguments(tool.parameters, arguments)
        if self.tool_executor is not None:
            output = self.tool_executor(tool, validated, policy_input)
            return ok_envelope(output) if self.envelope_outputs else output
        if tool.func is None:
            raise AgentRunError(f'Tool "{tool.name}" has no implementation.')
        return ok_envelope(tool.func(validated, self.context))

    def record(self, status: str, error: Exception | None, input_count: int, question: str,
               started_at: str, metadata: dict | None) -> dict:
        """The RunRecord in aioc's key order; optional keys absent exactly when aioc omits them."""
        record: dict = {
            "runId": self.run_id, "startedAt": started_at, "completedAt": self.clock(),
            "status": status, "agentName": self.agent.name, "providerName": self.provider.name,
        }
        if self.agent.model is not None:
            record["model"] = self.agent.model
        record.update({
            "question": question, "response": self.response,
            "contextSnapshot": copy.deepcopy(self.context), "contextRedacted": False,
            "items": list(self.history), "inputItemCount": input_count,
            "promptSnapshots": self.prompt_snapshots, "requestFingerprints": self.fingerprints,
            "policyDecisions": self.policy_decisions,
        })
        if self.proposals:
            record["suspendedProposals"] = self.proposals
        if self.guardrail_decisions:
            record["guardrailDecisions"] = self.guardrail_decisions
        if error is not None:
            record["errorName"] = error_name_of(error)
            record["errorMessage"] = str(error)
        if metadata is not None:
            record["metadata"] = metadata
        return record


def run(
    agent: Agent,
    input: str | Sequence[dict],
    *,
    provider: Provider,
    context: Any = None,
    max_turns: int = 10,
    policies: Policies | None = None,
    run_id: str | None = None,
    metadata: dict | None = None,
    include_prompt_text: bool = False,
    clock: Callable[[], str] | None = None,
    id_factory: Callable[[], str] | None = None,
    tool_executor: ToolExecutor | None = None,
    envelope_outputs: bool = True,
    halt: Halt | None = None,
) -> RunResult:
    """Run ``agent`` on ``input`` (a user message, or history items) and record it like aioc.

    Args:
        provider: the model (``provider.name`` is recorded as ``providerName``).
        context: the run context given to tools, policies, guardrails, instructions and handoff
            conditions; default ``{}``. The record's ``contextSnapshot`` is its end-of-run state.
        max_turns: model requests allowed before ``MaxTurnsExceededError``.
        policies: tool and handoff policies; without them every call is denied
            (``policy_not_configured``), as in aioc.
        run_id: the record's ``runId``; otherwise ``id_factory()`` or a random UUID.
        metadata: recorded as ``metadata`` (absent when ``None``).
        include_prompt_text: add ``promptText`` to prompt snapshots.
        clock: returns ISO timestamps; called once per recorded timestamp, in record order.
        tool_executor: ``(tool, validated_args, call) -> output`` replaces ``tool.func``; it
            runs only after a policy allow and argument validation. ``call`` is the
            ``PolicyInput`` the policy saw (agent, call id, turn, raw arguments, context). Return
            ``ABSENT`` for an output without ``data``; raise to fail the run (the record names
            the exception).
        envelope_outputs: wrap ``tool_executor`` outputs in aioc's ``ok`` envelope (default);
            ``False`` hands them to the model as they are (agentuse's runtime does no wrapping).
        halt: a :data:`Halt` hook asked after every turn that ended in tool calls.

    Returns:
        ``RunResult(output, record, error)``. Run failures never raise: the record has
        ``status: "failed"``, ``errorName`` and ``errorMessage``, and items end as aioc's do.
    """
    clock = clock or utc_now
    started_at = clock()
    input_items = [{"type": "message", "role": "user", "content": input}] if isinstance(input, str) else list(input)
    state = _Run(
        agent, list(input_items), provider=provider, context={} if context is None else context,
        policies=policies or Policies(), run_id=run_id or (id_factory or _uuid)(), clock=clock,
        include_prompt_text=include_prompt_text, tool_executor=tool_executor,
        envelope_outputs=envelope_outputs, halt=halt,
    )
    error: Exception | None = None
    try:
        state.loop(max_turns)
    except Exception as exc:  # every run failure is recorded, as aioc does before rethrowing
        error = exc
    record = state.record("failed" if error else "completed", error, len(input_items),
                          question_of(input), started_at, metadata)
    return RunResult(state.response, record, error)


def _uuid() -> str:
    return str(uuid.uuid4())
