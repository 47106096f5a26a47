"""Comparison keys: 64-bit stand-ins for canonical JSON values, so equality is integer work.

A key is the first 64 bits (signed, to fit a DuckDB BIGINT) of the sha256 of aioc's canonical
JSON of a value: two values get equal keys exactly when aioc's ``compareRunRecords`` sees them as
equal, up to a 2**-64 chance per compared pair of distinct values. The store computes them at
ingest (projections) and bulk compare joins on them; both use these functions, so the keys of a
projection and of a record compared in Python always agree.

Example:
    >>> key_of({"b": 1, "a": 2.0}) == key_of({"a": 2, "b": 1})
    True
    >>> RunKeys.of({"response": "ok", "items": []}).response_length
    2
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from recstore.canonical import canonical_bytes, canonical_json
from recstore.records.compare import utf16_length
from recstore.records.toolcalls import UNDEFINED

__all__ = [
    "RunKeys",
    "call_keys",
    "call_output_key",
    "calls_key",
    "digest_key",
    "entry_keys",
    "field_keys",
    "key_of",
    "sequence_key",
    "text_key",
]


def text_key(data: bytes) -> int:
    """Signed 64-bit prefix of sha256(data)."""
    return digest_key(hashlib.sha256(data))


def digest_key(digest: hashlib._Hash) -> int:
    """Signed 64-bit prefix of a sha256 ``digest`` of text fed piece by piece."""
    return int.from_bytes(digest.digest()[:8], "big", signed=True)


def key_of(value: Any) -> int:
    """Comparison key of a JSON value."""
    return text_key(canonical_bytes(value))


def call_output_key(call: dict[str, Any]) -> int | None:
    """Key of an extracted call's output: None without one; a missing ``output`` key compares as
    aioc's "[undefined]" (``records.toolcalls.output_canonical``)."""
    if not call["hasOutput"]:
        return None
    return key_of(call["output"] if "output" in call else UNDEFINED)


def call_keys(call: dict[str, Any]) -> tuple[bytes, bool, int | None]:
    """``(args_hash, has_output, output_key)`` of an extracted call: aioc's argsHash as its 32
    bytes, whether an output was recorded, and the output's key (:func:`call_output_key`)."""
    return bytes.fromhex(call["argsHash"]), bool(call["hasOutput"]), call_output_key(call)


def entry_keys(entries: list[Any] | None) -> list[tuple[int, bool]]:
    """``(key, is_object)`` of every element of a record array (policy or guardrail decisions);
    ``None`` (an absent or null array) has none. aioc compares these entries whole."""
    return [(key_of(entry), isinstance(entry, dict)) for entry in entries or ()]


def field_keys(value: dict[str, Any]) -> list[tuple[str, int]]:
    """``(field, key)`` of every top-level field of an object (an entry, or metadata), the field
    as canonical JSON: what ``--ignore policy.timestamp`` / ``metadata.<key>`` compares by.
    aioc drops ``"__proto__"`` from canonical objects, so it never takes part in equality."""
    return [(canonical_json(k), key_of(v)) for k, v in value.items() if k != "__proto__"]


def calls_key(analysis: Any, output_keys: list[int | None] | None = None) -> int:
    """Key of a record's whole tool-call sequence (name, argsHash, hasOutput, output key of
    every extracted call): runs with equal keys skip the positional call comparison. Takes a
    :class:`~recstore.records.RecordAnalysis` or the list :func:`extract_tool_calls` returns;
    ``output_keys``: each call's :func:`call_output_key`, when the caller has them (printing
    the outputs again was a tenth of a projection's CPU on real records)."""
    calls = [j.call for j in analysis.tool_calls] if hasattr(analysis, "tool_calls") else analysis
    if output_keys is None:
        output_keys = [call_output_key(c) for c in calls]
    return sequence_key([
        (c["name"], c["argsHash"], c["hasOutput"], key)
        for c, key in zip(calls, output_keys, strict=True)
    ])


def sequence_key(parts: list[Any]) -> int:
    """Key of a sequence of keys or key tuples (a cheap whole-sequence equality test)."""
    return text_key(repr(parts).encode("utf-8"))


def _or_empty(value: Any, empty: Any) -> Any:
    return empty if value is None else value


@dataclass(frozen=True, slots=True)
class RunKeys:
    """The run-level comparison keys of one record."""

    response_key: int
    response_length: int
    metadata_key: int
    metadata_is_object: bool
    policy_count: int
    guardrail_count: int

    @classmethod
    def of(cls, record: dict[str, Any]) -> RunKeys:
        metadata = _or_empty(record.get("metadata"), {})
        response = record.get("response", "")
        return cls(
            response_key=key_of(response),
            response_length=utf16_length(response) if isinstance(response, str) else 0,
            metadata_key=key_of(metadata),
            metadata_is_object=isinstance(metadata, dict),
            policy_count=len(_or_empty(record.get("policyDecisions"), [])),
            guardrail_count=len(_or_empty(record.get("guardrailDecisions"), [])),
        )
