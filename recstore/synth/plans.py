"""Case plans: for case ``i`` of a seed, the scenario, the scripted model turns, tool calls,
policy decisions and context the run will follow."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from recstore.runtime import (
    Agent,
    ProviderFailure,
)
from recstore.synth.agents import _SUITES, _handoff_name, _Suite
from recstore.synth.cases import _SCHEDULE


@dataclass
class _Call:
    name: str
    arguments: Any          # a JSON value, or a raw string (kept verbatim)
    call_id: str
    decision: Any = None    # a policy result, "raise", or None for allow
    raw: bool = False


@dataclass
class _Plan:
    index: int
    scenario: str
    suite: _Suite
    input: str | list[dict]
    turns: list[list[_Call] | str | ProviderFailure] = field(default_factory=list)
    context: dict = field(default_factory=dict)
    policies: bool = True
    max_turns: int = 10
    expect: str = "completed"
    meta: dict = field(default_factory=dict)


_QUESTIONS = {
    "support": ["My invoice {inv} looks wrong, can you check?", "Internet drops every evening at {host}.",
                "Can I get a refund for order {inv}?", "¿Por qué me cobraron dos veces la factura {inv}?",
                "Mon compte {cid} est bloqué depuis hier.", "Warum ist die Verbindung zu {host} so langsam?"],
    "research": ["Find sources about the Treaty of Westphalia (1648).", "Summarize recent work on {topic}.",
                 "研究 {topic} 的最新进展", "Who first described {topic}? Cite primary sources."],
    "finance": ["What was Q{q} revenue for {rep}?", "Quote {sym} and compare with last quarter.",
                "Is a trade in {sym} compliant for an EU client?", "Margen del informe {rep}, por favor."],
}


_TOPICS = ["retrieval-augmented generation", "CRDTs", "protein folding", "the Antikythera mechanism",
           "zero-knowledge proofs", "Ωmega-3 metabolism"]


_ANSWERS = ["Done — {x}.", "Here is what I found: {x}.", "Resolved: {x}. Anything else?",
            "¡Listo! {x}.", "C'est fait : {x}.", "完成：{x}。"]


class _Fields(dict):
    """Placeholder values for question and answer templates, drawn on first use."""

    def __init__(self, rng: random.Random):
        super().__init__()
        self.rng = rng

    def __missing__(self, key: str) -> str:
        r = self.rng
        value = {
            "inv": lambda: f"INV-{r.randint(1000, 9999)}",
            "host": lambda: f"edge-{r.randint(1, 40)}.example.net",
            "cid": lambda: f"C-{r.randint(1, 999)}",
            "topic": lambda: r.choice(_TOPICS),
            "q": lambda: str(r.randint(1, 4)),
            "rep": lambda: f"Q{r.randint(1, 4)}-202{r.randint(4, 6)}",
            "sym": lambda: r.choice(["ACME", "GLOBX", "ÆON", "ZEN"]),
            "x": lambda: r.choice(["the invoice is corrected", "3 sources cited", "no issue found",
                                   "refund issued", "report attached"]),
        }[key]()
        self[key] = value
        return value


class _Draw:
    """The random choices of one case, from a generator seeded by (seed, case)."""

    def __init__(self, seed: int, index: int, salt: str = "plan"):
        self.rng = random.Random(f"recstore-synth:{seed}:{index}:{salt}")
        self.calls = 0

    def pick(self, options: Any) -> Any:
        return self.rng.choice(options)

    def call_id(self) -> str:
        self.calls += 1
        if self.rng.random() < 0.3:
            return f"call_{self.calls - 1}"
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
        return "call_" + "".join(self.rng.choices(alphabet, k=24))

    def fill(self, template: str) -> str:
        """``template`` with its placeholders drawn (only the ones it uses)."""
        return template.format_map(_Fields(self.rng))

    def answer(self) -> str:
        return self.fill(self.pick(_ANSWERS))


# Realistic arguments per tool, drawn from the case's generator.
_ARGUMENTS: dict[str, Callable[[random.Random], dict]] = {
    "lookup_customer": lambda r: {"customerId": f"C-{r.randint(1, 999)}"},
    "search_docs": lambda r: {"query": r.choice(["reset password", "billing cycle", "vpn setup", "sla"]),
                              "limit": r.randint(1, 5)},
    "get_invoice": lambda r: {"invoiceId": f"INV-{r.randint(1000, 9999)}"},
    "refund": lambda r: {"customerId": f"C-{r.randint(1, 999)}", "amount": r.randint(100, 99999) / 100},
    "run_diagnostic": lambda r: {"target": f"edge-{r.randint(1, 40)}.example.net"},
    "web_search": lambda r: {"q": r.choice(_TOPICS)},
    "fetch_document": lambda r: {"url": f"https://example.org/doc/{r.randint(1, 500)}", "maxRows": r.randint(2, 12)},
    "get_finance_report": lambda r: {"reportId": f"Q{r.randint(1, 4)}-202{r.randint(4, 6)}"},
    "get_stock_quote": lambda r: {"symbol": r.choice(["ACME", "GLOBX", "ÆON", "ZEN"])},
    "get_time": lambda r: {"tz": r.choice(["UTC", "Europe/Rome", "Asia/Tokyo"])},
}


def _own_tool(draw: _Draw, agent: Agent) -> _Call:
    """A call to one of ``agent``'s tools (not ``echo``) with realistic arguments."""
    name = draw.pick([t.name for t in agent.tools if t.name != "echo"])
    return _Call(name, _ARGUMENTS[name](draw.rng), draw.call_id())


def _new_plan(draw: _Draw, index: int, scenario: str, suite: _Suite) -> _Plan:
    question = draw.fill(draw.pick(_QUESTIONS[suite.name]))
    context = {"tenantRef": f"tenant-{draw.rng.randrange(16**6):06x}",
               "tier": draw.pick(["free", "pro", "enterprise"]), "region": draw.pick(["EU", "US"]),
               "strict": draw.rng.random() < 0.5}
    return _Plan(index, scenario, suite, question, context=context)


def _entry(plan: _Plan) -> Agent:
    return plan.suite.agents[plan.suite.entry]


def _plan_qa(plan: _Plan, draw: _Draw) -> None:
    plan.turns = [draw.answer()]


def _plan_tools(plan: _Plan, draw: _Draw) -> None:
    agent = _entry(plan)
    plan.turns = [[_own_tool(draw, agent)] for _ in range(draw.rng.randint(1, 3))]
    if draw.rng.random() < 0.4:
        plan.turns.append([_own_tool(draw, agent), _own_tool(draw, agent)])
    plan.turns.append(draw.answer())


def _plan_policy_soft(plan: _Plan, draw: _Draw) -> None:
    agent = _entry(plan)
    first, second = _own_tool(draw, agent), _own_tool(draw, agent)
    first.decision = {"decision": "deny", "reason": draw.pick(["tenant_restricted", "not_allowed"]),
                      "publicReason": draw.pick(["  Not available on your plan. ", "", "  "]),
                      "resultMode": "tool_result", "policyVersion": "policy.v7"}
    second.decision = {"decision": "require_approval", "reason": "manager_approval_required",
                       "publicReason": "Manager approval is required.", "resultMode": "tool_result",
                       "expiresAt": "2026-04-01T00:00:00Z", "metadata": {"approver": "team-lead"}}
    plan.turns = [[first], [second], draw.answer()]


_THROW_DECISIONS = (
    None,  # no policies at all: policy_not_configured
    {"decision": "deny", "reason": "outside_business_hours", "policyVersion": "policy.v7"},
    {"decision": "require_approval", "reason": "high_value"},
    "raise",
    {"decision": "allow", "reason": "  "},
    {"decision": "deny", "reason": "legacy", "denyMode": "tool_result"},
)


def _plan_policy_throw(plan: _Plan, draw: _Draw) -> None:
    agent = _entry(plan)
    call = _own_tool(draw, agent)
    choice = draw.rng.randrange(len(_THROW_DECISIONS))
    if choice == 0:
        plan.policies = False
    else:
        call.decision = _THROW_DECISIONS[choice]
    plan.turns = [[call], draw.answer()]
    plan.expect = "failed"


def _plan_unknown_tool(plan: _Plan, draw: _Draw) -> None:
    plan.turns = [[_Call(draw.pick(["python", "web_browse", "delete_account"]), {"cmd": "ls"}, draw.call_id())],
                  draw.answer()]
    plan.expect = "failed"


def _handoff(draw: _Draw, plan: _Plan, source: str, target: str, decision: Any = None) -> _Call:
    agent = plan.suite.agents[source]
    payload = draw.pick([{}, {"reason": "escalate"}, {"reason": "billing", "priority": "high"}])
    return _Call(_handoff_name(agent, target), payload, draw.call_id(), decision)


def _first_target(plan: _Plan) -> str:
    """The entry agent's first handoff target, with every handoff condition made true."""
    plan.context.update({"tier": "pro", "strict": True, "region": "EU"})
    return _entry(plan).handoff_rules()[0].target.name


def _plan_handoff(plan: _Plan, draw: _Draw) -> None:
    target = _first_target(plan)
    if draw.rng.random() < 0.3:  # a soft-denied handoff: the agent stays
        deny = {"decision": "deny", "reason": "missing_finance_approval", "resultMode": "tool_result"}
        plan.turns = [[_handoff(draw, plan, plan.suite.entry, target, deny)], draw.answer()]
        return
    plan.turns = [[_handoff(draw, plan, plan.suite.entry, target)],
                  [_own_tool(draw, plan.suite.agents[target])], draw.answer()]


def _plan_cycle(plan: _Plan, draw: _Draw) -> None:
    target = _first_target(plan)
    plan.turns = [[_handoff(draw, plan, plan.suite.entry, target)],
                  [_handoff(draw, plan, target, plan.suite.entry)],
                  [_own_tool(draw, _entry(plan))], draw.answer()]


def _plan_two_handoffs(plan: _Plan, draw: _Draw) -> None:
    target = _first_target(plan)
    # Both handoffs of the batch run as the entry agent; the second one decides the next agent.
    rules = _entry(plan).handoff_rules()
    second = rules[1].target.name if len(rules) > 1 else target
    plan.turns = [[_handoff(draw, plan, plan.suite.entry, target), _own_tool(draw, _entry(plan)),
                   _handoff(draw, plan, plan.suite.entry, second)],
                  [_own_tool(draw, plan.suite.agents[second])], draw.answer()]


# Per suite: the context key of the entry agent's conditional handoff, its enabling value and
# its disabling value.
_CONDITION_CONTEXT = {"support": ("tier", "pro", "free"), "research": ("strict", True, False),
                      "finance": ("region", "EU", "US")}


def _plan_conditional(plan: _Plan, draw: _Draw) -> None:
    """Alternating passes of the schedule enable and disable the entry agent's conditional
    handoff through the context; the model uses the handoff only when it is offered."""
    rule = next(r for r in _entry(plan).handoff_rules() if r.enabled is not None)
    key, on, off = _CONDITION_CONTEXT[plan.suite.name]
    enabled = (plan.index // len(_SCHEDULE)) % 2 == 0
    plan.context[key] = on if enabled else off
    if enabled:
        plan.turns = [[_handoff(draw, plan, plan.suite.entry, rule.target.name)], draw.answer()]
    else:
        plan.turns = [[_own_tool(draw, _entry(plan))], draw.answer()]


def _plan_guardrail(plan: _Plan, draw: _Draw) -> None:
    if draw.rng.random() < 0.5:  # passes on every turn
        plan.turns = [[_own_tool(draw, _entry(plan))], draw.answer()]
        return
    leak = draw.pick(["Your password is hunter2.", "SSN on file: 078-05-1120.",
                      "Long answer: " + "details " * draw.rng.randint(80, 120)])
    plan.turns = [[_own_tool(draw, _entry(plan))], leak]
    plan.expect = "failed"


def _plan_maxturns(plan: _Plan, draw: _Draw) -> None:
    plan.max_turns = draw.rng.randint(3, 6)
    agent = _entry(plan)
    plan.turns = [[_own_tool(draw, agent)] for _ in range(plan.max_turns)] + [draw.answer()]
    plan.expect = "failed"


def _plan_thread(plan: _Plan, draw: _Draw) -> None:
    agent = _entry(plan)
    earlier = _own_tool(draw, agent)
    tool = agent.tools[[t.name for t in agent.tools].index(earlier.name)]
    raw = json.dumps(earlier.arguments, ensure_ascii=False, separators=(",", ":"))
    envelope = {"status": "ok", "code": None, "publicReason": None, "data": tool.func(earlier.arguments, {})}
    first_question = plan.input
    plan.input = [
        {"type": "message", "role": "user", "content": first_question},
        {"type": "tool_call_item", "callId": earlier.call_id, "name": earlier.name,
         "arguments": earlier.arguments,
         "rawItem": {"type": "function_call", "id": earlier.call_id, "name": earlier.name, "arguments": raw}},
        {"type": "tool_call_output_item", "callId": earlier.call_id, "output": envelope,
         "rawItem": {"type": "function_call_result", "call_id": earlier.call_id, "output": envelope}},
        {"type": "message", "role": "assistant", "content": draw.answer()},
        {"type": "message", "role": "user", "content": draw.pick(["  And what about last month?  ",
                                                                   "Thanks! One more thing.", "¿Y ahora?"])},
    ]
    plan.turns = [[_own_tool(draw, agent)], draw.answer()]


# Raw provider argument strings the edge_args scenario sends (numbers, key order, unicode, lone
# surrogates, invalid JSON, blank, non-object JSON).
EDGE_ARGUMENTS = (
    '{"b":1.0,"a":[1e21,1e-7,0.000001,-0.0,12345678901234567890],"10":"ten","9":"nine"}',
    '{"é":"e","😀":"smile","｡":"half","k":"\\u2028\\ud800x"}',
    '{"text":"Grüße, 世界! 🚀","n":-1.5e-300,"big":9007199254740993}',
    "not json at all",
    "   ",
    '[1,"two",null,{"three":3}]',
    'null',
    '  {"nested":{"deep":{"deeper":[[],{}]}},"emoji":"👩‍💻"}\n',
)


def _plan_edge_args(plan: _Plan, draw: _Draw) -> None:
    # Successive passes of the schedule rotate through the edge cases: 3 passes cover all 8.
    first = 3 * (plan.index // len(_SCHEDULE))
    picks = [(first + k) % len(EDGE_ARGUMENTS) for k in range(3)]
    plan.turns = [[_Call("echo", EDGE_ARGUMENTS[i], draw.call_id(), raw=True) for i in picks],
                  draw.answer()]


def _plan_large_output(plan: _Plan, draw: _Draw) -> None:
    call = _Call("fetch_document", {"url": f"https://example.org/export/{draw.rng.randint(1, 99)}",
                                    "maxRows": draw.rng.randint(20, 60), "full": True}, draw.call_id())
    plan.turns = [[call], draw.answer()]


def _plan_validation(plan: _Plan, draw: _Draw) -> None:
    """The policy allows the call, then its arguments fail the schema: a ZodError run."""
    call = _own_tool(draw, _entry(plan))
    tool = next(t for t in _entry(plan).tools if t.name == call.name)
    key = next(iter(call.arguments))
    wrong = draw.pick([42, None, ["x"]]) if tool.parameters["properties"][key]["type"] == "string" else "5"
    call.arguments = {**call.arguments, key: wrong}
    plan.turns = [[call], draw.answer()]
    plan.expect = "failed"


_SOFT_BLOCKS = (
    {"decision": "require_approval", "reason": "manager_approval_required",
     "publicReason": "Manager approval is required.", "resultMode": "tool_result"},
    {"decision": "deny", "reason": "tenant_restricted", "resultMode": "tool_result"},
)


def _plan_reused_call_ids(plan: _Plan, draw: _Draw) -> None:
    """A provider that reuses one call id: two parallel calls of a turn share it and get
    different decisions (one allowed, one soft-blocked), and the next turn's call reuses it
    again. aioc records the ids as they are; only their positions tell the calls apart."""
    agent = _entry(plan)
    shared = draw.pick(["call_0", "call_1", "toolu_01", "0"])
    calls = [_own_tool(draw, agent) for _ in range(3)]
    for call in calls:
        call.call_id = shared
    calls[draw.rng.randrange(2)].decision = draw.pick(_SOFT_BLOCKS)
    plan.turns = [calls[:2], [calls[2]], draw.answer()]


_UPSTREAM_TIMEOUT = ProviderFailure("UpstreamTimeoutError", "upstream timed out after 30000ms (op=timeout)")


def _plan_provider_error(plan: _Plan, draw: _Draw) -> None:
    """The model call of the second turn times out: the last request's interval is empty."""
    plan.turns = [[_own_tool(draw, _entry(plan))], _UPSTREAM_TIMEOUT, draw.answer()]
    plan.expect = "failed"


_PLANNERS: dict[str, Callable[[_Plan, _Draw], None]] = {
    "qa": _plan_qa, "tools": _plan_tools, "policy_soft": _plan_policy_soft,
    "policy_throw": _plan_policy_throw, "unknown_tool": _plan_unknown_tool, "handoff": _plan_handoff,
    "cycle": _plan_cycle, "two_handoffs": _plan_two_handoffs, "conditional": _plan_conditional,
    "guardrail": _plan_guardrail, "maxturns": _plan_maxturns, "thread": _plan_thread,
    "edge_args": _plan_edge_args, "large_output": _plan_large_output, "validation": _plan_validation,
    "provider_error": _plan_provider_error, "reused_call_ids": _plan_reused_call_ids,
}


# Scenarios that need one suite's agents (its guardrails, its echo and document tools).
_SCENARIO_SUITE = {"guardrail": "support", "edge_args": "research", "large_output": "research"}


def _plan(seed: int, index: int, variant: str) -> _Plan:
    draw = _Draw(seed, index)
    scenario = _SCHEDULE[index % len(_SCHEDULE)]
    suites = _SUITES[variant]
    suite = suites[draw.rng.randrange(len(suites))]
    if scenario in _SCENARIO_SUITE:
        suite = next(s for s in suites if s.name == _SCENARIO_SUITE[scenario])
    plan = _new_plan(draw, index, scenario, suite)
    _PLANNERS[scenario](plan, draw)
    plan.meta = {"caseId": f"case-{index + 1:05d}", "suite": plan.suite.name,
                 "appBuildVersion": f"2026.3.{draw.rng.randint(1, 28)}+build.{draw.rng.randint(100, 999)}",
                 "scenario": scenario}
    if draw.rng.random() < 0.3:
        plan.meta["traceClass"] = draw.pick(["public", "internal", "restricted"])
    return plan
