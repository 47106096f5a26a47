"""Errors that end an agent run, named exactly as aioc names them in ``errorName``.

These are not user errors of recstore (those live in ``recstore.errors``): they are the failures a
recorded run reports. The loop catches them, writes ``status: "failed"`` with
``errorName = error_name_of(exc)`` and ``errorMessage = str(exc)``, and returns the record.
"""

from __future__ import annotations

__all__ = [
    "AgentRunError",
    "ArgumentValidationError",
    "HandoffApprovalRequiredError",
    "HandoffPolicyDeniedError",
    "MaxTurnsExceededError",
    "OutputGuardrailTripwireTriggered",
    "ToolCallApprovalRequiredError",
    "ToolCallError",
    "ToolCallPolicyDeniedError",
    "error_name_of",
]


class AgentRunError(Exception):
    """Base class of the run failures below. ``error_name`` is what the record's ``errorName``
    says (aioc's ``error.name``); it defaults to the class name."""

    error_name: str = "Error"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "error_name" not in cls.__dict__:
            cls.error_name = cls.__name__


class ToolCallError(AgentRunError):
    """The model called a tool the current agent does not have."""

    def __init__(self, tool_name: str):
        super().__init__(f'Tool "{tool_name}" is not registered.')
        self.tool_name = tool_name


class ToolCallPolicyDeniedError(AgentRunError):
    """A tool policy denied a call in ``throw`` result mode."""

    def __init__(self, tool_name: str, reason: str):
        super().__init__(f'Tool "{tool_name}" denied by policy: {reason}')
        self.tool_name = tool_name
        self.reason = reason


class ToolCallApprovalRequiredError(AgentRunError):
    """A tool policy required approval in ``throw`` result mode."""

    def __init__(self, tool_name: str, reason: str):
        super().__init__(f'Tool "{tool_name}" requires approval: {reason}')
        self.tool_name = tool_name
        self.reason = reason


class HandoffPolicyDeniedError(AgentRunError):
    """A handoff policy denied a handoff in ``throw`` result mode."""

    def __init__(self, from_agent: str, to_agent: str, reason: str):
        super().__init__(f'Handoff "{from_agent}" -> "{to_agent}" denied by policy: {reason}')
        self.reason = reason


class HandoffApprovalRequiredError(AgentRunError):
    """A handoff policy required approval in ``throw`` result mode."""

    def __init__(self, from_agent: str, to_agent: str, reason: str):
        super().__init__(f'Handoff "{from_agent}" -> "{to_agent}" requires approval: {reason}')
        self.reason = reason


class OutputGuardrailTripwireTriggered(AgentRunError):
    """An output guardrail triggered on a turn's text."""

    def __init__(self, guardrail_name: str, reason: str | None):
        suffix = f" Reason: {reason}" if reason else ""
        super().__init__(f'Output guardrail "{guardrail_name}" triggered.{suffix}')
        self.guardrail_name = guardrail_name
        self.reason = reason


class MaxTurnsExceededError(AgentRunError):
    """The run used all its model requests without a final answer."""

    def __init__(self, max_turns: int):
        super().__init__(f"Max turns exceeded: {max_turns}")
        self.max_turns = max_turns


class ArgumentValidationError(AgentRunError):
    """Tool arguments failed the tool's parameter schema (after the policy allowed the call).

    aioc validates with zod, so the record says ``ZodError`` and the message is the issue list as
    ``JSON.stringify(issues, null, 2)``.
    """

    error_name = "ZodError"

    def __init__(self, message: str, issues: list[dict]):
        super().__init__(message)
        self.issues = issues


def error_name_of(exc: BaseException) -> str:
    """The ``errorName`` a record gives for ``exc``: its ``error_name`` attribute if it has one
    (runtime errors, scripted provider failures, a caller's own error classes), otherwise the
    class name."""
    name = getattr(exc, "error_name", None)
    return name if isinstance(name, str) and name else type(exc).__name__
