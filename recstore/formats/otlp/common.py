"""What reading and writing OTLP share: content policies, OTLP enums, GenAI attribute names, the
error type, ids derived from run keys, nanosecond times and OTLP/JSON ``AnyValue`` values."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from recstore.formats.jsontext import dumps_json

CONTENT_POLICIES = ("none", "metadata", "full")
SCOPE_NAME = "recstore"

# OTLP enums (integers in OTLP/JSON)
KIND_INTERNAL, KIND_CLIENT = 1, 3
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
_KIND_NAMES = {"SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
               "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5, "SPAN_KIND_UNSPECIFIED": 0}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}

# operation names by role; OpenInference span kinds map onto them
INVOKE_AGENT, CHAT, EXECUTE_TOOL = "invoke_agent", "chat", "execute_tool"
_MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_OPENINFERENCE_KINDS = {"AGENT": INVOKE_AGENT, "LLM": CHAT, "TOOL": EXECUTE_TOOL, "CHAIN": "chain"}

_POLICY_EVENTS = {"allow": "aioc.policy.allowed", "deny": "aioc.policy.denied",
                  "require_approval": "aioc.approval.required"}
# policy decision field -> event attribute (aioc's governance-event names, §9)
_POLICY_FIELDS = (("decision", "aioc.policy.decision"), ("reason", "aioc.policy.reason"),
                  ("publicReason", "aioc.policy.public_reason"),
                  ("resultMode", "aioc.policy.result_mode"),
                  ("policyVersion", "aioc.policy.version"),
                  ("expiresAt", "aioc.policy.expires_at"),
                  ("handoffApplied", "aioc.policy.handoff_applied"))
# request fingerprint fields with no GenAI attribute -> chat span attribute (timestamp, turn,
# agent, provider and model are written separately)
_FINGERPRINT_FIELDS = (("runtimeVersion", "aioc.runtime_version"),
                       ("fingerprintSchemaVersion", "aioc.trace.fingerprint_schema_version"),
                       ("requestHash", "aioc.trace.request_hash"),
                       ("systemPromptHash", "aioc.trace.system_prompt_hash"),
                       ("messagesHash", "aioc.trace.messages_hash"),
                       ("toolsHash", "aioc.trace.tools_hash"),
                       ("modelSettingsHash", "aioc.trace.model_settings_hash"),
                       ("messageCount", "aioc.request.message_count"),
                       ("toolCount", "aioc.request.tool_count"))
# token usage key in the fingerprint -> GenAI attribute, OpenInference attribute
_USAGE = (("input_tokens", "gen_ai.usage.input_tokens", "llm.token_count.prompt"),
          ("output_tokens", "gen_ai.usage.output_tokens", "llm.token_count.completion"))
_PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
_MODEL_KEYS = ("gen_ai.request.model", "gen_ai.response.model", "llm.model_name")


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(("recstore.otlp", *parts)).encode("utf-8")).digest()


def _nonzero_hex(data: bytes) -> str:
    # all-zero ids are invalid in OTLP; a sha256 prefix of zeros is astronomically unlikely
    return data.hex() if any(data) else "01" + data[1:].hex()


def trace_id_for(run_key: str) -> str:
    """The 32-hex-digit trace id of a run's export (stable per run key)."""
    return _nonzero_hex(_digest("trace", run_key)[:16])


def span_id_for(run_key: str, *position: object) -> str:
    """A 16-hex-digit span id from the run key and the span's position in the run."""
    return _nonzero_hex(_digest("span", run_key, *map(str, position))[:8])


def _nanos(text: Any) -> int | None:
    """Unix nanoseconds of an ISO-8601 timestamp, or None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _iso(nanos: int | None) -> str | None:
    """aioc's timestamp form (``2026-01-15T10:00:00.000Z``) of Unix nanoseconds."""
    if not nanos:
        return None
    moment = datetime.fromtimestamp(nanos // 1_000_000 / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _any_value(value: Any) -> dict:
    """A JSON value as an OTLP AnyValue; objects and arrays stay structured (kvlist, array)."""
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": _any_value(v)}
                                           for k, v in value.items()]}}
    return {"stringValue": value if isinstance(value, str) else dumps_json(value)}


def _attributes(pairs: Iterable[tuple[str, Any]]) -> list[dict]:
    """OTLP key/value list of ``pairs``, skipping ``None`` values."""
    return [{"key": key, "value": _any_value(v)} for key, v in pairs if v is not None]


def _from_any_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return None
    if "arrayValue" in value:
        return [_from_any_value(v) for v in (value["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in value:
        return {kv.get("key"): _from_any_value(kv.get("value"))
                for kv in (value["kvlistValue"] or {}).get("values") or [] if isinstance(kv, dict)}
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _attribute_map(attributes: Any) -> dict[str, Any]:
    if not isinstance(attributes, list):
        return {}
    return {kv["key"]: _from_any_value(kv.get("value"))
            for kv in attributes if isinstance(kv, dict) and isinstance(kv.get("key"), str)}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
