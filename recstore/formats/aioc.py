"""The aioc RunRecord JSON format: a pydantic model of every field (docs/aioc-runrecord.md §1),
validation with JSON-path error messages, and reading one record file.

Validation is strict where aioc's own inspector is (§8.1 minimal validity plus per-entry types)
and lenient where real records vary: legacy records without ``inputItemCount``, ``resultMode``
or ``publicReason`` (or with the old ``denyMode``), hand-written records with empty snapshot and
fingerprint arrays, tool calls without ``arguments``, outputs without ``output``, and newer fields
(``initialAgentName``, ``executionRecordingStatus``, ``handoffApplied``). Unknown fields are kept.

Example:
    >>> rec = validate_run_record({"runId": "r", "startedAt": "t", "completedAt": "t",
    ...     "status": "completed", "agentName": "A", "question": "q", "response": "",
    ...     "items": [], "promptSnapshots": [], "requestFingerprints": [], "policyDecisions": [],
    ...     "x-custom": 1})
    >>> rec.agentName, rec.model_extra
    ('A', {'x-custom': 1})
    >>> validate_run_record({"runId": 1})
    Traceback (most recent call last):
    ...
    recstore.errors.InputError: at $.runId: expected string, got number (and 10 more problems)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, ValidationError, with_config
from typing_extensions import TypedDict

from recstore.canonical import JSONParseError, json_type_name, loads_strict
from recstore.errors import InputError
from recstore.records import compare_records

__all__ = [
    "GuardrailDecision",
    "MessageItem",
    "PolicyDecision",
    "PolicyResource",
    "PromptSnapshot",
    "RequestFingerprint",
    "RunRecord",
    "SuspendedProposal",
    "ToolCallItem",
    "ToolCallOutputItem",
    "compare_files",
    "load_record_file",
    "validate_run_record",
]

# JS numbers: int or float (a float is accepted for an int in JSON, e.g. `2.0`); never bool.
Number = float


# strict: no coercion ("1" is not a number); extra="allow": unknown fields are kept.
_CONFIG = ConfigDict(strict=True, extra="allow")


@with_config(_CONFIG)
class MessageItem(TypedDict):
    """``{"type":"message","role":…,"content":…}`` — user, assistant or system text."""

    type: Literal["message"]
    role: str
    content: str
    rawItem: NotRequired[Any]


@with_config(_CONFIG)
class ToolCallItem(TypedDict):
    """A tool (or ``handoff_to_*``) call; ``arguments`` may be absent or any JSON value."""

    type: Literal["tool_call_item"]
    callId: str
    name: str
    arguments: NotRequired[Any]
    rawItem: NotRequired[Any]


@with_config(_CONFIG)
class ToolCallOutputItem(TypedDict):
    """A tool result; ``output`` is normally an envelope ``{status, code, publicReason, data}``."""

    type: Literal["tool_call_output_item"]
    callId: str
    output: NotRequired[Any]
    rawItem: NotRequired[Any]


Item = Annotated[MessageItem | ToolCallItem | ToolCallOutputItem, Field(discriminator="type")]


@with_config(_CONFIG)
class PromptSnapshot(TypedDict):
    """One per model request (§1.4)."""

    timestamp: str
    turn: Number
    agentName: str
    model: NotRequired[str | None]
    promptVersion: NotRequired[str | None]
    promptHash: str
    promptText: NotRequired[str | None]


@with_config(_CONFIG)
class RequestFingerprint(TypedDict):
    """One per model request (§1.5). aioc always writes every field; agent, provider, model and
    the hashes are optional for records rebuilt from traces, which record no more than that."""

    timestamp: str
    turn: Number
    agentName: NotRequired[str | None]
    providerName: NotRequired[str | None]
    model: NotRequired[str | None]
    runtimeVersion: NotRequired[str | None]
    fingerprintSchemaVersion: NotRequired[str | None]
    requestHash: NotRequired[str | None]
    systemPromptHash: NotRequired[str | None]
    messagesHash: NotRequired[str | None]
    toolsHash: NotRequired[str | None]
    modelSettingsHash: NotRequired[str | None]
    messageCount: NotRequired[Number | None]
    toolCount: NotRequired[Number | None]


@with_config(_CONFIG)
class PolicyResource(TypedDict):
    """What a policy decision was about: a tool name or a handoff's target agent name."""

    kind: str
    name: str
    action: NotRequired[str | None]
    resourceId: NotRequired[str | None]


@with_config(_CONFIG)
class PolicyDecision(TypedDict):
    """One tool or handoff policy evaluation (§1.6). ``publicReason``/``resultMode`` are absent in
    legacy records, ``denyMode`` is the pre-0.1.0 name, ``handoffApplied`` is newer than 0.2.8."""

    timestamp: str
    turn: Number
    callId: str
    decision: str
    reason: str
    publicReason: NotRequired[str | None]
    resultMode: NotRequired[str | None]
    denyMode: NotRequired[str | None]
    policyVersion: NotRequired[str | None]
    resource: PolicyResource
    expiresAt: NotRequired[str | None]
    metadata: NotRequired[Any]
    handoffApplied: NotRequired[bool | None]


@with_config(_CONFIG)
class SuspendedProposal(TypedDict):
    """One per ``require_approval`` outcome (§1.7); tool or handoff specific fields are extra."""

    timestamp: NotRequired[str | None]
    kind: str
    runId: NotRequired[str | None]
    turn: Number
    callId: str
    agentName: NotRequired[str | None]
    proposalHash: NotRequired[str | None]
    reason: NotRequired[str | None]


@with_config(_CONFIG)
class GuardrailDecision(TypedDict):
    """One output-guardrail evaluation (§1.8)."""

    timestamp: str
    turn: Number
    guardrailName: str
    decision: str
    reason: NotRequired[str | None]
    metadata: NotRequired[Any]


class RunRecord(BaseModel):
    """An aioc RunRecord (0.2.x, legacy and newer fields). Unknown fields are kept in
    ``model_extra``. Use the validated JSON dict, not this model, for hashing and comparison:
    the model normalizes numbers to floats and cannot tell an absent key from ``null``. Entries
    (items, decisions, …) are validated typed dicts, which keeps validating every ingested record
    cheap: one model object per record."""

    model_config = _CONFIG

    runId: str
    startedAt: str
    completedAt: str
    status: str
    agentName: str
    providerName: str | None = None
    model: str | None = None
    question: str
    response: str
    contextSnapshot: Any = None
    contextRedacted: bool | None = None
    items: list[Item]
    inputItemCount: Number | None = None
    promptSnapshots: list[PromptSnapshot]
    requestFingerprints: list[RequestFingerprint]
    policyDecisions: list[PolicyDecision]
    suspendedProposals: list[SuspendedProposal] | None = None
    guardrailDecisions: list[GuardrailDecision] | None = None
    errorName: str | None = None
    errorMessage: str | None = None
    metadata: dict[str, Any] | None = None
    initialAgentName: str | None = None
    executionRecordingStatus: str | None = None


_TYPE_NAMES = {
    "string_type": "string",
    "float_type": "number",
    "int_type": "number",
    "bool_type": "boolean",
    "list_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
}


def _json_path(obj: Any, loc: tuple) -> str:
    """``$.items[3].callId`` from a pydantic location. Discriminated unions put the member's tag
    (e.g. ``"tool_call_item"``) into the location; it is not a key of the data, so it is skipped."""
    path = "$"
    current = obj
    for i, part in enumerate(loc):
        if isinstance(current, list) and isinstance(part, int) and part < len(current):
            path += f"[{part}]"
            current = current[part]
        elif isinstance(current, dict) and part in current:
            path += f".{part}"
            current = current[part]
        elif isinstance(current, dict) and i == len(loc) - 1:
            path += f".{part}"  # a required field that is missing
    return path


def _problem(error: dict) -> str:
    kind = error["type"]
    if kind == "missing":
        return "required field missing"
    if kind in _TYPE_NAMES:
        return f"expected {_TYPE_NAMES[kind]}, got {json_type_name(error['input'])}"
    if kind == "union_tag_invalid":
        return (
            f"unknown item type {error['ctx']['tag']!r} "
            "(expected message, tool_call_item or tool_call_output_item)"
        )
    if kind == "union_tag_not_found":
        return 'item has no "type" field'
    if kind == "literal_error":
        return f"expected {error['ctx']['expected']}, got {error['input']!r}"
    return error["msg"]


def validate_run_record(obj: Any, source: str | None = None) -> RunRecord:
    """Validate a parsed JSON value as a RunRecord.

    Raises:
        InputError: naming ``source``, the JSON path (``$.items[3].callId``) and the first
            problem; ``problems`` lists them all when there are several.
    """
    if not isinstance(obj, dict):
        raise InputError(
            f"expected a JSON object (a RunRecord), got {json_type_name(obj)}",
            source=source,
            path="$",
        )
    try:
        return RunRecord.model_validate(obj)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        # every problem, for the rejects table (the message names the first)
        problems = [{"path": _json_path(obj, e["loc"]), "problem": _problem(e)} for e in errors]
        raise InputError(
            _problem(first) + more, source=source, path=_json_path(obj, first["loc"]),
            problems=problems if len(problems) > 1 else None,
        ) from None


# A JSON string token, or a bare NaN/Infinity literal outside strings.
_STRING_OR_CONSTANT = re.compile(rb'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def _constant_position(data: bytes) -> tuple[int, int] | None:
    """Line and column of the first NaN/Infinity literal (the stdlib parser does not say)."""
    for match in _STRING_OR_CONSTANT.finditer(data):
        if match.group(1):
            before = data[: match.start(1)]
            line = before.count(b"\n") + 1
            line_start = before.rfind(b"\n") + 1
            return line, len(before[line_start:].decode("utf-8", "replace")) + 1
    return None


def load_record_file(path: str | Path) -> dict:
    """Read one ``.json`` RunRecord file strictly (NaN/Infinity rejected) and validate it.

    Returns the parsed JSON dict (key order kept), which is what the record functions take.

    Raises:
        InputError: naming the file, and the line/column or JSON path of the problem.
    """
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", source=source) from None
    try:
        value = loads_strict(data)
    except JSONParseError as exc:
        message = str(exc)
        if exc.line is None and (where := _constant_position(data)) is not None:
            message += f" (line {where[0]}, column {where[1]})"
        raise InputError(message, source=source) from None
    validate_run_record(value, source=source)
    return value


def compare_files(
    left: str | Path,
    right: str | Path,
    include_sections: list[str] | None = None,
    exclude_sections: list[str] | None = None,
) -> dict:
    """aioc-parity comparison of two record files (see :func:`recstore.records.compare_records`)."""
    return compare_records(
        load_record_file(left),
        load_record_file(right),
        include_sections=include_sections,
        exclude_sections=exclude_sections,
    )
