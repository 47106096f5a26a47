"""What an agent is made of: tools, handoffs, output guardrails, and the policies that gate them.

Agents may reference each other in cycles (A hands off to B, B back to A): build them first, then
append to ``handoffs``. Equality is identity and ``repr`` does not follow handoffs, so cycles are
safe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from recstore.canonical import canonical_json

__all__ = [
    "ABSENT",
    "DEFAULT_TOOL_PARAMETERS",
    "HANDOFF_TOOL_PARAMETERS",
    "Agent",
    "Handoff",
    "OutputGuardrail",
    "Policies",
    "PolicyInput",
    "Tool",
]


class _Absent:
    """Type of ``ABSENT``."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"""A tool output that has no value at all: the ``ok`` envelope is written **without** a ``data``
key, as aioc writes it when a JavaScript tool returned ``undefined``. ``None`` means JSON ``null``.
Replays return it to reproduce such a recorded output faithfully."""

# aioc's `tool()` without parameters, and its handoff tools (zod passthrough object).
DEFAULT_TOOL_PARAMETERS: dict = {"type": "object", "properties": {}, "additionalProperties": False}
HANDOFF_TOOL_PARAMETERS: dict = {"type": "object", "properties": {}, "additionalProperties": True}


@dataclass(frozen=True, eq=False)
class Tool:
    """A function the model may call.

    ``parameters`` is a JSON Schema object; it is what the model sees, what ``toolsHash`` covers,
    and what arguments are validated against after the policy allows a call. Treat it as
    immutable: its canonical form is computed once per tool. ``func(args, context)`` returns any
    JSON value, or ``ABSENT``; raising fails the run with that error.
    """

    name: str
    description: str = ""
    parameters: dict = field(default_factory=lambda: dict(DEFAULT_TOOL_PARAMETERS))
    func: Callable[[Any, Any], Any] | None = None

    def spec(self) -> dict:
        """The provider-facing description, in the form ``toolsHash`` hashes."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    @cached_property
    def spec_json(self) -> str:
        """Canonical JSON of ``spec()``, computed once (every request fingerprint needs it)."""
        return canonical_json(self.spec())


@dataclass(eq=False)
class Handoff:
    """A rule letting the owning agent hand the conversation to ``target``.

    ``enabled(context) -> bool`` is evaluated at every turn (``None`` = always enabled); a disabled
    rule exposes no tool that turn. ``description`` overrides ``target.handoff_description`` in
    the tool description. ``tool_name`` exposes the tool under exactly that name instead of the
    generated ``handoff_to_*`` one (replays of records whose names do not follow the rule).
    """

    target: Agent
    enabled: Callable[[Any], bool] | None = None
    description: str | None = None
    tool_name: str | None = None

    def __repr__(self) -> str:
        return f"Handoff(target={self.target.name!r})"


@dataclass(eq=False)
class OutputGuardrail:
    """A check on every turn's model text. ``check(text, context)`` returns
    ``(triggered, reason, metadata)``; ``reason``/``metadata`` may be ``None`` (then absent)."""

    name: str
    check: Callable[[str, Any], tuple[bool, str | None, dict | None]]


@dataclass(eq=False)
class Agent:
    """An agent: instructions (text, or ``callable(context) -> str``), a model, tools, handoffs.

    ``handoffs`` holds ``Handoff`` rules or bare ``Agent`` targets (always enabled).
    """

    name: str
    instructions: str | Callable[[Any], str] = ""
    model: str | None = None
    model_settings: dict | None = None
    prompt_version: str | None = None
    tools: list[Tool] = field(default_factory=list)
    handoffs: list[Handoff | Agent] = field(default_factory=list, repr=False)
    output_guardrails: list[OutputGuardrail] = field(default_factory=list)
    handoff_description: str | None = None

    def resolve_instructions(self, context: Any) -> str:
        """The system prompt for one request."""
        text = self.instructions(context) if callable(self.instructions) else self.instructions
        return text or ""

    def handoff_rules(self) -> list[Handoff]:
        """``handoffs`` with bare agents wrapped as always-enabled rules."""
        return [h if isinstance(h, Handoff) else Handoff(h) for h in self.handoffs]


@dataclass(frozen=True)
class PolicyInput:
    """What a policy decides on.

    For tools ``name`` is the tool name and ``arguments`` the parsed arguments; for handoffs
    ``name`` is the **target agent name** and ``arguments`` the handoff payload. ``agent_name`` is
    the acting agent (the handoff's source).
    """

    kind: Literal["tool", "handoff"]
    agent_name: str
    name: str
    arguments: Any
    raw_arguments: str
    turn: int
    call_id: str
    context: Any


PolicyFn = Callable[[PolicyInput], Any]


@dataclass(frozen=True)
class Policies:
    """Tool and handoff policies. Each returns a dict like aioc's policy result:
    ``{decision: allow|deny|require_approval, reason, publicReason?, resultMode?: throw|tool_result,
    policyVersion?, expiresAt?, metadata?}``. A missing policy denies (``policy_not_configured``)."""

    tool: PolicyFn | None = None
    handoff: PolicyFn | None = None
