"""Per-record comparison features: the canonical-JSON keys the set-based engine joins on.

Each stored revision is reduced once to rows of the ``cmp_*_features`` tables
(schema/010_compare.sql); comparisons then run as SQL over those rows. Every ``*_key`` is the
first 64 bits of the sha256 of ``recstore.canonical.canonical_json`` text (BIGINT, so the joins
and comparisons are integer work): two values get equal keys exactly when aioc's
``compareRunRecords`` sees them as equal, up to a 2**-64 chance per compared pair of distinct
values. ``args_key`` is the same prefix of aioc's ``argsHash``.

Example:
    >>> f = record_features({"response": "ok", "items": [], "policyDecisions": []})
    >>> f.run["response_length"], f.run["tool_call_count"], f.run["metadata_key"] == key_of({})
    (2, 0, True)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from recstore.canonical import canonical_json
from recstore.records import extract_tool_calls, utf16_length
from recstore.records.toolcalls import UNDEFINED

__all__ = [
    "RecordFeatures",
    "key_of",
    "missing_revisions",
    "record_features",
    "record_fields",
    "store_features",
    "store_fields",
]

_SIGN = 1 << 63


def _text_key(text: str) -> int:
    """Signed 64-bit prefix of sha256(text) (fits DuckDB BIGINT)."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big", signed=True)


def _hex_key(hex_digest: str) -> int:
    """The same 64-bit prefix of a sha256 already in hex (aioc's argsHash)."""
    value = int(hex_digest[:16], 16)
    return value - (1 << 64) if value >= _SIGN else value


def key_of(value: Any) -> int:
    """Comparison key of a JSON value: 64-bit prefix of sha256 of its canonical JSON."""
    return _text_key(canonical_json(value))


def _output_key(call: dict) -> int:
    """As ``records.toolcalls.output_canonical``: a missing output compares as "[undefined]"."""
    return key_of(call["output"] if "output" in call else UNDEFINED)


def _text(value: Any) -> str | None:
    """A value as storable text: strings as they are (lone surrogates escaped), else its JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return canonical_json(value)[1:-1]
    return canonical_json(value)


def _or_empty(value: Any, empty: Any) -> Any:
    return empty if value is None else value


@dataclass
class RecordFeatures:
    """Feature rows of one record (``feature_id`` is filled when stored)."""

    run: dict[str, Any]
    calls: list[tuple] = field(default_factory=list)
    entries: list[tuple] = field(default_factory=list)
    fields: list[tuple] = field(default_factory=list)


def _object_fields(section: str, index: int, value: Any, out: list[tuple]) -> None:
    # aioc drops "__proto__" from canonical objects, so it never takes part in equality.
    for key, item in value.items():
        if key != "__proto__":
            out.append((section, index, canonical_json(key), key_of(item)))


def _entries(section: str, entries: list, out: RecordFeatures) -> None:
    for index, entry in enumerate(entries):
        is_object = isinstance(entry, dict)
        resource = entry.get("resource") if is_object else None
        resource = resource if isinstance(resource, dict) else {}
        out.entries.append(
            (
                section,
                index,
                key_of(entry),
                is_object,
                _text(entry.get("decision")) if is_object else None,
                _text(entry.get("reason")) if is_object else None,
                _text(resource.get("kind")),
                _text(resource.get("name")),
            )
        )


def record_fields(record: dict) -> list[tuple]:
    """``(section, entry_index, field, value_key)`` of every top-level field of the policy and
    guardrail entries and of the metadata: only ``--ignore`` of a field needs them."""
    out: list[tuple] = []
    for section, key in (("policy", "policyDecisions"), ("guardrails", "guardrailDecisions")):
        for index, entry in enumerate(_or_empty(record.get(key), [])):
            if isinstance(entry, dict):
                _object_fields(section, index, entry, out)
    metadata = record.get("metadata")
    if isinstance(metadata, dict):
        _object_fields("metadata", 0, metadata, out)
    return out


def record_features(
    record: dict, *, run_key: str = "", record_hash: str = "", with_fields: bool = True
) -> RecordFeatures:
    """Reduce one JSON-form RunRecord to its comparison features (pure; no I/O).

    ``with_fields=False`` leaves out the per-field rows (about half the work); they can be added
    later with :func:`record_fields` when a comparison ignores fields."""
    metadata = _or_empty(record.get("metadata"), {})
    policy = _or_empty(record.get("policyDecisions"), [])
    guardrails = _or_empty(record.get("guardrailDecisions"), [])
    calls = extract_tool_calls(record)
    out = RecordFeatures(
        run={
            "run_key": run_key,
            "record_hash": record_hash,
            "run_id": _text(record.get("runId")),
            "status": _text(record.get("status")),
            "response_key": key_of(record["response"]),
            "response_length": utf16_length(record["response"]),
            "metadata_key": key_of(metadata),
            "metadata_is_object": isinstance(metadata, dict),
            "has_fields": with_fields,
            "tool_call_count": len(calls),
            "policy_count": len(policy),
            "guardrail_count": len(guardrails),
        }
    )
    for index, call in enumerate(calls):
        out.calls.append(
            (
                index,
                _text(call["name"]),
                _hex_key(call["argsHash"]),
                call["hasOutput"],
                _output_key(call) if call["hasOutput"] else None,
            )
        )
    _entries("policy", policy, out)
    _entries("guardrails", guardrails, out)
    if with_fields:
        out.fields = record_fields(record)
    # A whole-sequence key (calls) and key arrays (entries): pairs whose sequences are equal
    # skip the positional comparison.
    out.run["calls_full_key"] = _text_key(repr([row[1:5] for row in out.calls]))
    for section in ("policy", "guardrails"):
        keys = [row[2] for row in out.entries if row[0] == section]
        out.run[f"{section}_keys"] = keys
        out.run[f"{section}_seq_key"] = _text_key(repr(keys))
    return out


_RUN_COLUMNS = [
    "feature_id",
    "run_key",
    "record_hash",
    "run_id",
    "status",
    "response_key",
    "response_length",
    "metadata_key",
    "metadata_is_object",
    "has_fields",
    "tool_call_count",
    "policy_count",
    "guardrail_count",
    "calls_full_key",
    "policy_keys",
    "guardrails_keys",
    "policy_seq_key",
    "guardrails_seq_key",
]
_CALL_COLUMNS = ["feature_id", "call_index", "name", "args_key", "has_output", "output_key"]
_ENTRY_COLUMNS = [
    "feature_id",
    "section",
    "entry_index",
    "entry_key",
    "is_object",
    "decision",
    "reason",
    "resource_kind",
    "resource_name",
]
_FIELD_COLUMNS = ["feature_id", "section", "entry_index", "field", "value_key"]


def _append(con: Any, table: str, columns: list[str], rows: list[tuple]) -> None:
    if not rows:
        return
    arrow = pa.table({name: [r[i] for r in rows] for i, name in enumerate(columns)})
    con.register("_cmp_append", arrow)
    try:
        con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM _cmp_append")
    finally:
        con.unregister("_cmp_append")


def store_features(con: Any, features: Iterable[RecordFeatures]) -> dict[tuple[str, str], int]:
    """Insert feature rows (one Arrow append per table); returns ``{(run_key, hash): id}``."""
    features = list(features)
    if not features:
        return {}
    ids = [
        row[0]
        for row in con.execute(
            "SELECT nextval('cmp_feature_seq') FROM range(?)", [len(features)]
        ).fetchall()
    ]
    runs, calls, entries, fields = [], [], [], []
    for fid, feat in zip(ids, features, strict=True):
        runs.append((fid, *(feat.run[c] for c in _RUN_COLUMNS[1:])))
        calls.extend((fid, *row) for row in feat.calls)
        entries.extend((fid, *row) for row in feat.entries)
        fields.extend((fid, *row) for row in feat.fields)
    _append(con, "cmp_run_features", _RUN_COLUMNS, runs)
    _append(con, "cmp_call_features", _CALL_COLUMNS, calls)
    _append(con, "cmp_entry_features", _ENTRY_COLUMNS, entries)
    _append(con, "cmp_field_features", _FIELD_COLUMNS, fields)
    return {
        (f.run["run_key"], f.run["record_hash"]): fid for fid, f in zip(ids, features, strict=True)
    }


def store_fields(con: Any, rows: list[tuple], feature_ids: list[int]) -> None:
    """Append field rows ``(feature_id, section, entry_index, field, value_key)`` and mark
    ``feature_ids`` (including those without any field) as having them."""
    _append(con, "cmp_field_features", _FIELD_COLUMNS, rows)
    con.execute(
        "UPDATE cmp_run_features SET has_fields = TRUE WHERE list_contains(?, feature_id)",
        [feature_ids],
    )


def missing_revisions(con: Any, revisions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ``(run_key, record_hash)`` revisions that have no feature rows yet."""
    if not revisions:
        return []
    con.register(
        "_cmp_wanted",
        pa.table({"run_key": [r[0] for r in revisions], "record_hash": [r[1] for r in revisions]}),
    )
    try:
        return con.execute(
            "SELECT DISTINCT w.run_key, w.record_hash FROM _cmp_wanted w "
            "ANTI JOIN cmp_run_features f USING (run_key, record_hash) ORDER BY ALL"
        ).fetchall()
    finally:
        con.unregister("_cmp_wanted")
