"""Reading values out of agentuse's JSON files: tolerant getters, the JSON type every field
should have (``wrong_typed_fields``), part order, token counts and tool kinds.

Shared by scanning and by every assembling step; pure functions of parsed JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from recstore.canonical import JSONParseError, json_type_name, loads_strict
from recstore.formats.agentuse.model import RUNTIME_INPUT_KEYS


def parse_json(text: str) -> tuple[Any, str | None]:
    """(value, problem): strict parse; a complete object followed by garbage is salvaged (§4.2.1)."""
    try:
        return loads_strict(text), None
    except JSONParseError as exc:
        stripped = text.lstrip()
        try:
            _, end = json.JSONDecoder().raw_decode(stripped)
            # the salvaged object obeys the strict rules too (numbers, depth); ValueError
            # covers an integer past Python's digit limit
            value = loads_strict(stripped[:end]) if stripped[end:].strip() else None
        except (ValueError, RecursionError):
            value = None
        if value is None:
            return None, f"corrupt JSON ({exc}); skipped"
        trailing = len(stripped) - end
        return (
            value,
            f"valid JSON object followed by {trailing} byte(s) of garbage; first object salvaged",
        )


def as_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value)


def dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def as_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# part types agentuse orders by their own ``time.start``; every other type (declared but never
# written, or newer than this code) sorts last, as in agentuse's getPartOrder
_TIMED_PART_TYPES = frozenset(
    {"text", "reasoning", "compaction", "corrections", "learning", "error", "log", "verify"}
)


def part_sort_key(part: dict) -> tuple[float, str]:
    """agentuse's part order (§1.9): own start time (pending tools: ``suspendedAt``), +inf when
    unknown or for part types agentuse does not time, ties broken by part ID."""
    ptype = part.get("type")
    if ptype == "tool":
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        t = (
            as_int(state.get("suspendedAt"))
            if state.get("status") == "pending"
            else as_int(dig(state, "time", "start"))
        )
    elif isinstance(ptype, str) and ptype in _TIMED_PART_TYPES:
        t = as_int(dig(part, "time", "start"))
    else:
        t = None
    return (math.inf if t is None else float(t), str(part.get("id", "")))


def normalised_input(value: Any, strip: Iterable[str] = RUNTIME_INPUT_KEYS) -> Any:
    """A tool input without the runtime-injected top-level narration keys (``intent``,
    ``recovers``); non-object inputs are returned unchanged."""
    if isinstance(value, dict):
        drop = set(strip)
        return {k: v for k, v in value.items() if k not in drop}
    return value


def token_counts(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {
        "input": as_int(raw.get("input")) or 0,
        "output": as_int(raw.get("output")) or 0,
        "reasoning": as_int(raw.get("reasoning")) or 0,
        "cache_read": as_int(dig(raw, "cache", "read")) or 0,
        "cache_write": as_int(dig(raw, "cache", "write")) or 0,
    }


def tool_kind(name: str) -> str:
    if name == "await_human":
        return "gate"
    if name.startswith("subagent__"):
        return "subagent"
    if name.startswith("store_"):
        return "store"
    if name.startswith("mcp__"):
        return "mcp"
    return "tool"


# The JSON type of every field agentuse's writers give a type (src/session/types.ts), by file
# kind and part type. A present field of another type is an input error: the field is ignored
# and the file is reported (``invalid_field``), instead of silently reading as absent. ``null``
# counts as absent. "number" excludes booleans, as in JSON.
_FIELD_TYPES: dict[str, dict[str, str]] = {
    "session": {
        "id": "string", "parentSessionID": "string", "status": "string", "trigger": "string",
        "agent": "object", "agent.id": "string", "agent.name": "string",
        "agent.filePath": "string", "agent.description": "string", "agent.isSubAgent": "boolean",
        "model": "string", "version": "string", "mock": "boolean", "config": "object",
        "config.replaySourceSessionId": "string", "config.resultSourceSessionId": "string",
        "project": "object", "project.root": "string", "project.cwd": "string",
        "time": "object", "time.created": "number", "time.updated": "number",
        "time.execution": "array", "owner": "object", "owner.pid": "number",
        "error": "object", "error.message": "string", "error.code": "string",
        "errorHistory": "array", "dismissedAt": "number", "reviewedAt": "number",
        "verification": "object", "verification.status": "string",
        "verification.redoCount": "number", "executionBudget": "object", "channels": "object",
    },
    "message": {
        "id": "string", "time": "object", "time.created": "number", "time.completed": "number",
        "user": "object", "user.prompt": "object", "user.prompt.task": "string",
        "user.prompt.user": "string", "assistant": "object", "assistant.modelID": "string",
        "assistant.path": "object", "assistant.path.cwd": "string",
        "assistant.path.root": "string", "assistant.tokens": "object",
        "assistant.tokens.input": "number", "assistant.tokens.output": "number",
        "assistant.tokens.reasoning": "number", "assistant.tokens.cache": "object",
        "assistant.tokens.cache.read": "number", "assistant.tokens.cache.write": "number",
        "assistant.context": "object", "assistant.error": "object",
        "assistant.summary": "boolean",
    },
    "tools": {"tools": "array"},
    "part": {"id": "string", "type": "string", "superseded": "boolean"},
    "part:text": {
        "text": "string", "role": "string", "synthetic": "boolean", "time": "object",
        "time.start": "number", "time.end": "number",
    },
    "part:tool": {
        "callID": "string", "tool": "string", "parentCallID": "string", "state": "object",
        "state.status": "string", "state.time": "object", "state.time.start": "number",
        "state.time.end": "number", "state.error": "string", "state.metadata": "object",
        "state.suspendedAt": "number", "state.resumePayload": "object",
    },
    "part:timed": {"time": "object", "time.start": "number"},
}


_JSON_TYPES = {
    "string": str, "boolean": bool, "object": dict, "array": list, "number": (int, float),
}


def _a(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


def wrong_typed_fields(value: dict, spec: str) -> list[str]:
    """``"<field> is a <type> (expected a <type>)"`` for each present, non-null field of
    ``value`` whose JSON type differs from :data:`_FIELD_TYPES` ``[spec]``."""
    wrong = []
    for path, expected in _FIELD_TYPES[spec].items():
        field_value = dig(value, *path.split("."))
        if field_value is None:
            continue
        is_bool = isinstance(field_value, bool)
        ok = isinstance(field_value, _JSON_TYPES[expected]) and (expected != "number" or not is_bool)
        if not ok:
            actual = json_type_name(field_value)
            wrong.append(f"{path} is {_a(actual)} (expected {_a(expected)})")
    return wrong


# session.json fields of newer agentuse builds, kept per visit as they are (well-typed only)
SESSION_EXTRAS = {
    "errorHistory": ("errorHistory",),
    "verification": ("verification",),
    "owner": ("owner",),
    "execution": ("time", "execution"),
    "executionBudget": ("executionBudget",),
    "channels": ("channels",),
    "dismissedAt": ("dismissedAt",),
    "reviewedAt": ("reviewedAt",),
    "observability": ("observability",),
}


_EXTRA_TYPES = {"dismissedAt": "number", "reviewedAt": "number", "errorHistory": "array",
                "execution": "array"}


def session_extras(info: dict) -> dict:
    """The newer ``session.json`` fields present in ``info`` (``time.execution`` as
    ``execution``); a field of the wrong JSON type is left out (and reported by the builder)."""
    out = {}
    for name, path in SESSION_EXTRAS.items():
        value = dig(info, *path)
        expected = _JSON_TYPES[_EXTRA_TYPES.get(name, "object")]
        if isinstance(value, expected) and not isinstance(value, bool):
            out[name] = value
    return out


def part_specs(part: dict) -> tuple[str, ...]:
    ptype = part.get("type")
    if ptype in ("text", "reasoning"):
        return ("part", "part:text")
    if ptype == "tool":
        return ("part", "part:tool")
    if isinstance(ptype, str) and ptype in _TIMED_PART_TYPES:
        return ("part", "part:timed")
    return ("part",)
