"""Projection rows of one stored record, built from :func:`recstore.records.analyze`.

Ingest and rebuild both call :func:`project_record`, so the projections a rebuild produces are
by construction the ones ingest wrote. Rows are plain dicts keyed by column name; the tables are
declared in ``schema/002_projections.sql``. A TIMESTAMP column ``x`` is filled from its ``x_text``
column in SQL (see :mod:`recstore.store.tables`), so only the original strings appear here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from recstore.canonical import canonical_json
from recstore.formats.events import ARRAY_EVENT_TYPES, Event
from recstore.formats.jsontext import dumps_json
from recstore.records import RecordAnalysis, analyze

__all__ = ["PROJECTION_TABLES", "RunContext", "project_record"]

# Tables holding one run's projection rows; each has a run_key column.
PROJECTION_TABLES = (
    "runs",
    "items",
    "tool_calls",
    "requests",
    "visits",
    "policy_decisions",
    "guardrail_decisions",
    "prompt_snapshots",
    "suspended_proposals",
    "findings",
    "run_input_prefixes",
)

_INT32 = 2**31
# (event type, array index) -> (seq, payload text) of that element's event
_EventIndex = dict[tuple[str, int], tuple[int, str]]


@dataclass(frozen=True, slots=True)
class RunContext:
    """Where a stored revision came from: its stream, hashes, source and event range."""

    run_key: str
    run_id: str
    format: str
    revision: int
    record_hash: str
    tags_json: str
    source_id: int
    source_uri: str | None
    source_line: int | None
    batch_id: int
    first_seq: int
    last_seq: int


def _int(value: Any) -> int | None:
    """An integral JSON number that fits INTEGER, else None (the payload keeps the original)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and -_INT32 <= value < _INT32:
        return value
    return None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _json(value: Any) -> str | None:
    return None if value is None else dumps_json(value)


def _text(value: Any) -> str | None:
    """Text of a value for a VARCHAR column: strings as they are, anything else as JSON."""
    if value is None or isinstance(value, str):
        return value
    return dumps_json(value)


def _ts(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(record: dict, key: str) -> list:
    value = record.get(key)
    return value if isinstance(value, list) else []


def _prefix_hashes(item_canons: list[str], count: int | None) -> tuple[str, list[tuple[int, str]]]:
    """sha256 of canonical ``items`` and of ``items[:k]`` for every k in 1..count, given each
    item's canonical JSON.

    One pass: canonical JSON of a list is ``[`` + elements joined by ``,`` + ``]``, so each prefix
    hash is a copy of the running hasher closed with ``]``."""
    running = hashlib.sha256(b"[")
    prefixes: list[tuple[int, str]] = []
    limit = count or 0
    for k, canon in enumerate(item_canons, start=1):
        if k > 1:
            running.update(b",")
        running.update(canon.encode("utf-8"))
        if k <= limit:
            closed = running.copy()
            closed.update(b"]")
            prefixes.append((k, closed.hexdigest()))
    running.update(b"]")
    return running.hexdigest(), prefixes


def project_record(
    record: dict, ctx: RunContext, events: list[Event], item_canons: list[str] | None = None
) -> dict[str, list[dict]]:
    """All projection rows of one record: ``{table: [row, ...]}``.

    ``events`` are the record's events as stored (seq ``ctx.first_seq + position``); rows that
    come from one event carry its seq and reuse its payload text. ``item_canons`` (the canonical
    JSON of each item) saves recomputing it when the caller already has it.
    """
    seq_of = {
        (e.type, e.idx): (ctx.first_seq + j, e.payload_text)
        for j, e in enumerate(events)
        if e.idx is not None
    }
    analysis = analyze(record)
    items = record["items"]
    if item_canons is None:
        item_canons = [canonical_json(item) for item in items]
    items_hash, prefixes = _prefix_hashes(item_canons, analysis.scope.count)
    rows: dict[str, list[dict]] = {
        "runs": [_run_row(record, analysis, ctx, items_hash)],
        "items": _item_rows(record, analysis, ctx, seq_of),
        "tool_calls": _tool_call_rows(analysis, ctx),
        "requests": _request_rows(record, analysis, ctx, seq_of),
        "visits": _visit_rows(analysis, ctx),
        "policy_decisions": _policy_rows(record, analysis, ctx, seq_of),
        "guardrail_decisions": _element_rows(
            record, "guardrailDecisions", ctx, seq_of, "decision_index", _guardrail_columns
        ),
        "prompt_snapshots": _element_rows(
            record, "promptSnapshots", ctx, seq_of, "snapshot_index", _snapshot_columns
        ),
        "suspended_proposals": _element_rows(
            record, "suspendedProposals", ctx, seq_of, "proposal_index", _proposal_columns
        ),
        "findings": [
            {
                "run_key": ctx.run_key,
                "finding_index": i,
                "code": f.code,
                "message": f.message,
                "path": f.path,
            }
            for i, f in enumerate(analysis.findings)
        ],
        "run_input_prefixes": [
            {"run_key": ctx.run_key, "prefix_len": k, "prefix_hash": h} for k, h in prefixes
        ],
    }
    return rows


def _run_row(record: dict, a: RecordAnalysis, ctx: RunContext, items_hash: str) -> dict:
    decisions = [d for d in _list(record, "policyDecisions") if isinstance(d, dict)]
    guardrails = [g for g in _list(record, "guardrailDecisions") if isinstance(g, dict)]
    metadata = record.get("metadata")
    return {
        "run_key": ctx.run_key,
        "run_id": ctx.run_id,
        "format": ctx.format,
        "revision": ctx.revision,
        "record_hash": ctx.record_hash,
        "status": _text(record.get("status")),
        "agent": _text(record.get("agentName")),
        "initial_agent": _text(a.initial_agent),
        "final_agent": _text(a.visits[-1].agent) if a.visits else None,
        "provider": _text(record.get("providerName")),
        "model": _text(record.get("model")),
        "question": _text(record.get("question")),
        "response": _text(record.get("response")),
        "started_text": _ts(record.get("startedAt")),
        "completed_text": _ts(record.get("completedAt")),
        "error_name": _text(record.get("errorName")),
        "error_message": _text(record.get("errorMessage")),
        "input_source": a.scope.source,
        "input_item_count": _int(a.scope.count),
        "item_count": len(record["items"]),
        "request_count": len(a.requests),
        "tool_call_count": len(a.tool_calls),
        "handoff_count": len(a.transitions),
        "denial_count": sum(d.get("decision") == "deny" for d in decisions),
        "approval_count": sum(d.get("decision") == "require_approval" for d in decisions),
        "guardrail_trip_count": sum(g.get("decision") == "triggered" for g in guardrails),
        "visit_count": len(a.visits),
        "finding_count": len(a.findings),
        "execution_recording_status": _text(record.get("executionRecordingStatus")),
        "context_redacted": (
            record.get("contextRedacted")
            if isinstance(record.get("contextRedacted"), bool)
            else None
        ),
        "metadata": _json(metadata),
        "tags": ctx.tags_json,
        "items_hash": items_hash,
        "source_id": ctx.source_id,
        "source_uri": ctx.source_uri,
        "source_line": ctx.source_line,
        "batch_id": ctx.batch_id,
        "first_seq": ctx.first_seq,
        "last_seq": ctx.last_seq,
        "replay_of_run_id": _text(_dict(metadata).get("replayOfRunId")),
    }


def _item_rows(record: dict, a: RecordAnalysis, ctx: RunContext, seq_of: _EventIndex) -> list[dict]:
    turn_of_item: dict[int, Any] = {}
    for req in a.requests:
        for k in range(req.output_start, req.output_end):
            turn_of_item[k] = req.turn
    input_end = (
        a.scope.count
        if a.scope.count is not None
        else (a.requests[0].output_start if a.requests else 0)
    )
    rows = []
    for i, item in enumerate(record["items"]):
        it = _dict(item)
        rows.append(
            {
                "run_key": ctx.run_key,
                "item_index": i,
                "type": _text(it.get("type")),
                "role": _text(it.get("role")),
                "call_id": _text(it.get("callId")),
                "name": _text(it.get("name")),
                "request_turn": _int(turn_of_item.get(i)),
                "in_input": i < input_end,
                "content": _text(it.get("content")),
                "payload": seq_of[("item_appended", i)][1],
                "event_seq": seq_of[("item_appended", i)][0],
            }
        )
    return rows


def _tool_call_rows(a: RecordAnalysis, ctx: RunContext) -> list[dict]:
    rows = []
    for join in a.tool_calls:
        call = join.call
        rows.append(
            {
                "run_key": ctx.run_key,
                "call_index": join.index,
                "ordinal": _int(call.get("turn")),
                "call_id": _text(call.get("callId")),
                "name": _text(call.get("name")),
                "item_index": join.call_item_index,
                "output_item_index": join.output_item_index,
                "arguments": _json(call.get("arguments")),
                "args_canonical": call.get("argsCanonicalJson"),
                "args_hash": call.get("argsHash"),
                "has_output": bool(call.get("hasOutput")),
                "output": _json(call.get("output")) if call.get("hasOutput") else None,
                "envelope_status": join.envelope_status,
                "envelope_code": _text(join.envelope_code),
                "request_turn": _int(join.request_turn),
                "visit_index": join.visit_index,
                "agent": _text(join.agent),
                "is_handoff": join.is_handoff,
                "handoff_target": _text(join.handoff_target),
                "policy_decision": _text(join.decision),
                "policy_decision_index": join.policy_decision_index,
                "in_input": join.in_input,
            }
        )
    return rows


def _request_rows(
    record: dict, a: RecordAnalysis, ctx: RunContext, seq_of: _EventIndex
) -> list[dict]:
    visit_of_turn: dict[Any, int] = {}
    for visit in a.visits:
        for turn in visit.turns:
            visit_of_turn.setdefault(turn, visit.index)
    snapshot_of_turn: dict[Any, dict] = {}
    for snap in _list(record, "promptSnapshots"):
        if isinstance(snap, dict):
            snapshot_of_turn.setdefault(_int(snap.get("turn")), snap)
    rows = []
    for req in a.requests:
        fp = _dict(req.fingerprint)
        snap = snapshot_of_turn.get(_int(req.turn), {})
        rows.append(
            {
                "run_key": ctx.run_key,
                "request_index": req.index,
                "turn": _int(req.turn),
                "agent": _text(req.agent),
                "provider": _text(req.provider),
                "model": _text(req.model),
                "message_count": _int(req.message_count),
                "output_start": req.output_start,
                "output_end": req.output_end,
                "visit_index": visit_of_turn.get(req.turn) if _int(req.turn) is not None else 0,
                "request_hash": _text(fp.get("requestHash")),
                "system_prompt_hash": _text(fp.get("systemPromptHash")),
                "messages_hash": _text(fp.get("messagesHash")),
                "tools_hash": _text(fp.get("toolsHash")),
                "model_settings_hash": _text(fp.get("modelSettingsHash")),
                "prompt_hash": _text(snap.get("promptHash")),
                "prompt_version": _text(snap.get("promptVersion")),
                "tool_count": _int(fp.get("toolCount")),
                "runtime_version": _text(fp.get("runtimeVersion")),
                "timestamp_text": _ts(fp.get("timestamp")),
                "event_seq": seq_of[("request_fingerprint", req.index)][0],
            }
        )
    return rows


def _visit_rows(a: RecordAnalysis, ctx: RunContext) -> list[dict]:
    turns_of = [[t for t in v.turns if _int(t) is not None] for v in a.visits]
    return [
        {
            "run_key": ctx.run_key,
            "visit_index": v.index,
            "agent": _text(v.agent),
            "entered_after_turn": _int(v.entered_after_turn),
            "via_call_id": _text(v.via_call_id),
            "transition": v.transition,
            "request_count": len(v.turns),
            "first_turn": _int(min(turns)) if turns else None,
            "last_turn": _int(max(turns)) if turns else None,
            "item_start": v.item_start,
            "item_end": v.item_end,
        }
        for v, turns in zip(a.visits, turns_of, strict=True)
    ]


def _element_rows(
    record: dict,
    key: str,
    ctx: RunContext,
    seq_of: _EventIndex,
    index_column: str,
    columns: Callable[[dict, int], dict],
) -> list[dict]:
    """Rows of one record array whose elements each came from one event: the shared columns
    (run_key, index, turn, timestamp, payload, event_seq) plus ``columns(element, index)``."""
    etype = ARRAY_EVENT_TYPES[key]
    rows = []
    for i, element in enumerate(_list(record, key)):
        fields = _dict(element)
        seq, payload = seq_of[(etype, i)]
        rows.append(
            {
                "run_key": ctx.run_key,
                index_column: i,
                "turn": _int(fields.get("turn")),
                "timestamp_text": _ts(fields.get("timestamp")),
                "payload": payload,
                "event_seq": seq,
                **columns(fields, i),
            }
        )
    return rows


def _policy_rows(
    record: dict, a: RecordAnalysis, ctx: RunContext, seq_of: _EventIndex
) -> list[dict]:
    transition_of = {t.decision_index: t for t in a.transitions}

    def columns(d: dict, i: int) -> dict:
        resource = _dict(d.get("resource"))
        transition = transition_of.get(i)
        flag = d.get("handoffApplied")
        return {
            "call_id": _text(d.get("callId")),
            "decision": _text(d.get("decision")),
            "reason": _text(d.get("reason")),
            "public_reason": _text(d.get("publicReason")),
            "result_mode": _text(d.get("resultMode")),
            "policy_version": _text(d.get("policyVersion")),
            "resource_kind": _text(resource.get("kind")),
            "resource_name": _text(resource.get("name")),
            "expires_at_text": _ts(d.get("expiresAt")),
            "handoff_applied": flag if isinstance(flag, bool) else None,
            "applied_basis": transition.basis if transition else None,
            "metadata": _json(d.get("metadata")),
        }

    return _element_rows(record, "policyDecisions", ctx, seq_of, "decision_index", columns)


def _guardrail_columns(g: dict, _i: int) -> dict:
    return {
        "guardrail_name": _text(g.get("guardrailName")),
        "decision": _text(g.get("decision")),
        "reason": _text(g.get("reason")),
        "metadata": _json(g.get("metadata")),
    }


def _snapshot_columns(s: dict, _i: int) -> dict:
    return {
        "agent": _text(s.get("agentName")),
        "model": _text(s.get("model")),
        "prompt_version": _text(s.get("promptVersion")),
        "prompt_hash": _text(s.get("promptHash")),
        "has_prompt_text": "promptText" in s,
    }


def _proposal_columns(p: dict, _i: int) -> dict:
    return {
        "call_id": _text(p.get("callId")),
        "kind": _text(p.get("kind")),
        "agent": _text(p.get("agentName")),
        "tool_name": _text(p.get("toolName")),
        "from_agent": _text(p.get("fromAgentName")),
        "to_agent": _text(p.get("toAgentName")),
        "proposal_hash": _text(p.get("proposalHash")),
        "reason": _text(p.get("reason")),
        "public_reason": _text(p.get("publicReason")),
        "policy_version": _text(p.get("policyVersion")),
        "expires_at_text": _ts(p.get("expiresAt")),
        "args_canonical": _text(p.get("argsCanonicalJson", p.get("payloadCanonicalJson"))),
        "metadata": _json(p.get("metadata")),
    }
