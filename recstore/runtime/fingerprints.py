"""Prompt snapshots and request fingerprints with every hash of aioc §3.

``RequestHasher`` keeps the canonical JSON of each history item once (the runtime never mutates
earlier items), so hashing a request costs the new items only, not the whole history again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from recstore.canonical import canonical_json, sha256_text
from recstore.runtime.provider import ModelRequest

__all__ = ["FINGERPRINT_SCHEMA_VERSION", "RequestHasher", "prompt_snapshot"]

FINGERPRINT_SCHEMA_VERSION = "request-fingerprint.v1"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompt_snapshot(
    timestamp: str,
    turn: int,
    agent_name: str,
    model: str | None,
    prompt_version: str | None,
    prompt_text: str,
    include_prompt_text: bool,
) -> dict:
    """A ``promptSnapshots[]`` entry. ``promptHash`` is SHA-256 of the raw text, not JSON."""
    snapshot: dict = {"timestamp": timestamp, "turn": turn, "agentName": agent_name}
    if model is not None:
        snapshot["model"] = model
    if prompt_version is not None:
        snapshot["promptVersion"] = prompt_version
    snapshot["promptHash"] = sha256_text(prompt_text)
    if include_prompt_text:
        snapshot["promptText"] = prompt_text
    return snapshot


_OUTPUT_ITEM_KEYS = ["type", "callId", "output", "rawItem"]
_OUTPUT_RAW_KEYS = ["type", "call_id", "output"]


def _item_json(item: dict) -> str:
    """Canonical JSON of one history item. A runtime-written tool output item holds its envelope
    twice (``output`` and ``rawItem.output`` are one object); serialize that envelope once."""
    raw = item.get("rawItem")
    if (
        item.get("type") == "tool_call_output_item"
        and isinstance(raw, dict)
        and raw.get("output") is item.get("output")
        and list(item) == _OUTPUT_ITEM_KEYS
        and list(raw) == _OUTPUT_RAW_KEYS
        and raw["type"] == "function_call_result"
        and isinstance(item["callId"], str)
        and isinstance(raw["call_id"], str)
    ):
        output = canonical_json(item["output"])
        return (
            f'{{"callId":{canonical_json(item["callId"])},"output":{output},'
            f'"rawItem":{{"call_id":{canonical_json(raw["call_id"])},"output":{output},'
            f'"type":"function_call_result"}},"type":"tool_call_output_item"}}'
        )
    return canonical_json(item)


class RequestHasher:
    """Builds ``requestFingerprints[]`` entries for the requests of one run."""

    def __init__(self, provider_name: str, runtime_version: str):
        self.provider_name = provider_name
        self.runtime_version = runtime_version
        self._item_json: list[str] = []

    def _messages_json(self, messages: Sequence[dict]) -> str:
        parts = self._item_json
        for item in messages[len(parts):]:
            parts.append(_item_json(item))
        return "[" + ",".join(parts[: len(messages)]) + "]"

    def fingerprint(self, timestamp: str, request: ModelRequest, tools_json: str | None = None) -> dict:
        """The fingerprint of ``request``. ``requestHash`` = H({model, systemPrompt, messages,
        tools, modelSettings}); the canonical object is assembled from the parts' canonical JSON
        (keys in canonical order) so each part is serialized once. ``tools_json`` is the
        canonical JSON of ``request.tools`` when the caller already has it."""
        messages = self._messages_json(request.messages)
        system_prompt = canonical_json(request.system_prompt)
        tools = canonical_json(request.tools) if tools_json is None else tools_json
        settings = canonical_json(request.model_settings)
        model = canonical_json(request.model)
        whole = (
            f'{{"messages":{messages},"model":{model},"modelSettings":{settings},'
            f'"systemPrompt":{system_prompt},"tools":{tools}}}'
        )
        return {
            "timestamp": timestamp,
            "turn": request.turn,
            "agentName": request.agent_name,
            "providerName": self.provider_name,
            "model": request.model,
            "runtimeVersion": self.runtime_version,
            "fingerprintSchemaVersion": FINGERPRINT_SCHEMA_VERSION,
            "requestHash": _sha256(whole),
            "systemPromptHash": _sha256(system_prompt),
            "messagesHash": _sha256(messages),
            "toolsHash": _sha256(tools),
            "modelSettingsHash": _sha256(settings),
            "messageCount": len(request.messages),
            "toolCount": len(request.tools),
        }
