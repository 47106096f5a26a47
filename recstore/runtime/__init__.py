"""A small agent runtime that writes aioc-format RunRecords (docs/aioc-runrecord.md §1, §3).

Example:
    >>> from recstore.runtime import Agent, Tool, Policies, ScriptedProvider, run
    >>> lookup = Tool("lookup", "Find a record.", {"type": "object",
    ...     "properties": {"id": {"type": "string"}}, "required": ["id"],
    ...     "additionalProperties": False}, func=lambda args, ctx: {"id": args["id"]})
    >>> agent = Agent("Support", "Be brief.", model="m", tools=[lookup])
    >>> provider = ScriptedProvider([
    ...     {"tool_calls": [{"call_id": "c1", "name": "lookup", "arguments": {"id": "7"}}]},
    ...     {"text": "Found 7."}])
    >>> allow = Policies(tool=lambda p: {"decision": "allow", "reason": "ok"})
    >>> result = run(agent, "find 7", provider=provider, policies=allow)
    >>> result.record["status"], result.output, len(result.record["items"])
    ('completed', 'Found 7.', 4)

The public surface is re-exported here; replay serves recorded outputs through ``run``'s
``tool_executor`` hook and returns ``ABSENT`` for outputs that had no ``data``.
"""

from recstore.runtime.agents import (
    ABSENT,
    DEFAULT_TOOL_PARAMETERS,
    HANDOFF_TOOL_PARAMETERS,
    Agent,
    Handoff,
    OutputGuardrail,
    Policies,
    PolicyInput,
    Tool,
)
from recstore.runtime.errors import (
    AgentRunError,
    ArgumentValidationError,
    HandoffApprovalRequiredError,
    HandoffPolicyDeniedError,
    MaxTurnsExceededError,
    OutputGuardrailTripwireTriggered,
    ToolCallApprovalRequiredError,
    ToolCallError,
    ToolCallPolicyDeniedError,
    error_name_of,
)
from recstore.runtime.loop import (
    RUNTIME_VERSION,
    Halt,
    RunHalted,
    RunResult,
    ToolExecutor,
    handoff_tool_name,
    parse_tool_arguments,
    question_of,
    run,
    utc_now,
)
from recstore.runtime.policy import blocked_envelope, ok_envelope, proposal_hash
from recstore.runtime.provider import (
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderFailure,
    ProviderToolCall,
    ScriptedProvider,
    ScriptedProviderError,
    ScriptExhaustedError,
)
from recstore.runtime.schema import validate_arguments

__all__ = [
    "ABSENT",
    "DEFAULT_TOOL_PARAMETERS",
    "HANDOFF_TOOL_PARAMETERS",
    "RUNTIME_VERSION",
    "Agent",
    "AgentRunError",
    "ArgumentValidationError",
    "Handoff",
    "HandoffApprovalRequiredError",
    "HandoffPolicyDeniedError",
    "Halt",
    "MaxTurnsExceededError",
    "ModelRequest",
    "ModelResponse",
    "OutputGuardrail",
    "OutputGuardrailTripwireTriggered",
    "Policies",
    "PolicyInput",
    "Provider",
    "ProviderFailure",
    "ProviderToolCall",
    "RunHalted",
    "RunResult",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "ScriptedProviderError",
    "Tool",
    "ToolCallApprovalRequiredError",
    "ToolCallError",
    "ToolCallPolicyDeniedError",
    "ToolExecutor",
    "blocked_envelope",
    "error_name_of",
    "handoff_tool_name",
    "ok_envelope",
    "parse_tool_arguments",
    "proposal_hash",
    "question_of",
    "run",
    "utc_now",
    "validate_arguments",
]
