"""Projection rows of one stored record, built from :func:`recstore.records.analyze`.

Ingest and rebuild both call :func:`project_record`, so the projections a rebuild produces are
by construction the ones ingest wrote. It is pure (no DuckDB), so any engine that can run Python
over records gets the same rows. Rows are tuples in the column order of :data:`COLUMNS` (the
``proj_*`` tables of ``schema/002_projections.sql`` minus what the insert computes in SQL: a
TIMESTAMP ``x`` from its ``x_text`` column, ``duration_ms``). Texts the event log holds (item
JSON, outputs, hashes written in the record, whole entries) are not copied: the public views
read them from the event a row points at (``event_seq``). A format whose events are not its
record's own (agentuse: one event per file) gives :class:`OwnRows`, and the rows are made with
them: its items' events, the texts its events do not hold as JSON, and the columns only it has.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from recstore.canonical import canonical_bytes
from recstore.formats.events import ARRAY_EVENT_TYPES
from recstore.formats.jsontext import dumps_json
from recstore.formats.jsontext import int32 as _int
from recstore.records import RecordAnalysis, analyze
from recstore.records.keys import (
    RunKeys,
    call_keys,
    calls_key,
    digest_key,
    entry_keys,
    sequence_key,
)

__all__ = [
    "COLUMNS",
    "EXTRA_COLUMNS",
    "ItemsKeys",
    "OwnRows",
    "PROJECTION_TABLES",
    "SEQ_COLUMNS",
    "Projection",
    "RunContext",
    "columns_for",
    "event_offsets",
    "fold_tags",
    "items_keys",
    "policy_outcome",
    "project_record",
    "rows_from_dicts",
]

# Staged columns of every projection table, in DDL order (a test checks them against the DDL).
COLUMNS: dict[str, tuple[str, ...]] = {
    "proj_runs": (
        "run_key", "format", "revision", "status", "agent", "initial_agent",
        "final_agent", "provider", "model", "question", "response", "started_text",
        "completed_text", "error_name", "error_message", "input_source", "input_item_count",
        "item_count", "request_count", "tool_call_count", "handoff_count", "denial_count",
        "approval_count", "guardrail_trip_count", "visit_count", "finding_count",
        "execution_recording_status", "context_redacted", "metadata", "tags", "items_key",
        "source_id", "source_line", "batch_id", "first_seq", "last_seq", "replay_of_run_id",
        "response_key", "response_length", "metadata_key", "metadata_is_object", "policy_count",
        "guardrail_count", "calls_full_key", "policy_seq_key", "guardrails_seq_key",
    ),
    "proj_items": (
        "run_seq", "item_index", "type", "role", "request_turn", "in_input", "event_seq",
        "payload",
    ),
    "proj_tool_calls": (
        "run_seq", "call_index", "ordinal", "call_id", "name", "item_index", "output_item_index",
        "arguments", "args_hash", "has_output", "output_key", "envelope_status", "envelope_code",
        "request_turn", "visit_index", "agent", "is_handoff", "handoff_target", "policy_decision",
        "policy_decision_index", "in_input", "output_seq", "output",
    ),
    "proj_requests": (
        "run_seq", "request_index", "message_count", "output_start", "output_end", "visit_index",
        "event_seq", "snapshot_seq",
    ),
    "proj_visits": (
        "run_seq", "visit_index", "agent", "entered_after_turn", "via_call_id", "transition",
        "request_count", "first_turn", "last_turn", "item_start", "item_end",
    ),
    "proj_policy_decisions": (
        "run_seq", "decision_index", "decision", "reason", "resource_kind",
        "resource_name", "policy_version", "applied_basis", "event_seq", "entry_key", "is_object",
    ),
    "proj_guardrail_decisions": (
        "run_seq", "decision_index", "guardrail_name", "decision", "event_seq",
        "entry_key", "is_object",
    ),
    "proj_suspended_proposals": (
        "run_seq", "proposal_index", "turn", "call_id", "kind", "agent", "tool_name",
        "from_agent", "to_agent", "reason", "public_reason", "policy_version", "expires_at_text",
        "timestamp_text", "event_seq", "args_canonical", "metadata", "payload",
    ),
    "proj_findings": ("run_seq", "finding_index", "code", "message", "path"),
    "proj_input_prefixes": ("run_seq", "prefix_len", "prefix_key"),
}
# Tables holding one run's projection rows: proj_runs has its run_key and first_seq, the others
# its first_seq as run_seq (an integer costs a byte or two a row where the key cost ~4).
PROJECTION_TABLES = tuple(COLUMNS)
# Columns holding event seqs (besides proj_runs' first/last): a record prepared on its own
# counts them from 0 and the writer adds the revision's first seq when it stages the rows.
SEQ_COLUMNS: dict[str, tuple[str, ...]] = {
    "proj_items": ("run_seq", "event_seq"),
    "proj_tool_calls": ("run_seq", "output_seq"),
    "proj_requests": ("run_seq", "event_seq", "snapshot_seq"),
    "proj_visits": ("run_seq",),
    "proj_policy_decisions": ("run_seq", "event_seq"),
    "proj_guardrail_decisions": ("run_seq", "event_seq"),
    "proj_suspended_proposals": ("run_seq", "event_seq"),
    "proj_findings": ("run_seq",),
    "proj_input_prefixes": ("run_seq",),
}
# Columns only agentuse runs fill (schema/030_agentuse.sql); their rows have COLUMNS + these.
EXTRA_COLUMNS: dict[str, tuple[str, ...]] = {
    "proj_runs": (
        "trigger", "mock", "error_code", "tokens_input", "tokens_output", "tokens_reasoning",
        "tokens_cache_read", "tokens_cache_write", "result_of_run_id", "error_history",
        "verification", "verification_status", "owner_pid", "execution", "execution_ms",
        "execution_budget", "channels", "dismissed_at_text", "reviewed_at_text",
    ),
    "proj_visits": (
        "session_id", "parent_visit_index", "parent_link", "link_confidence", "depth", "status",
        "model", "tokens_input", "tokens_output", "assistant_error", "assistant_summary",
    ),
    "proj_tool_calls": (
        "part_id", "status", "error", "started_text", "ended_text", "duration_ms",
        "arguments_normalised", "artifact_path", "child_session_id", "child_link",
        "child_link_confidence", "superseded", "parent_call_id", "raw_approved_input",
    ),
}


def columns_for(table: str, width: int) -> tuple[str, ...]:
    """The column list of a ``table`` row with ``width`` values (base, or base + agentuse)."""
    base = COLUMNS[table]
    if width == len(base):
        return base
    full = base + EXTRA_COLUMNS.get(table, ())
    if width != len(full):
        raise ValueError(f"{table}: a row of {width} values fits no column list")
    return full

_GETTERS = {table: itemgetter(*columns) for table, columns in COLUMNS.items()}


@dataclass(frozen=True, slots=True)
class RunContext:
    """Where a stored revision came from: its stream, tags, source and event range."""

    run_key: str
    run_id: str
    format: str
    revision: int
    tags_json: str
    source_id: int
    source_line: int | None
    batch_id: int
    first_seq: int
    last_seq: int


# {table: [row tuple, ...]} for one run; tables without rows may be absent.
Projection = dict[str, list[tuple]]


@dataclass(frozen=True, slots=True)
class OwnRows:
    """What a format whose events are not its record's own (agentuse) knows of a run beyond its
    aioc record; :func:`project_record` makes the run's rows with it. Its rows have the
    :data:`EXTRA_COLUMNS` too."""

    item_seqs: Sequence[int]  # seq of the event each item is read from (item and output JSON kept)
    run: dict[str, Any]  # proj_runs columns the format has, or knows better than the record
    calls: dict[int, dict[str, Any]]  # proj_tool_calls columns, by the call's item index
    findings: list[dict[str, Any]]  # findings after the record's own (code, message, path)
    visits: list[dict[str, Any]]  # proj_visits rows, in place of the record's
    proposals: list[dict[str, Any]]  # proj_suspended_proposals rows


def rows_from_dicts(table: str, rows: list[dict], extra: bool = False) -> list[tuple]:
    """Row dicts (missing columns are NULL) as tuples in :data:`COLUMNS` order, followed by the
    agentuse columns when ``extra``."""
    columns = COLUMNS[table] + (EXTRA_COLUMNS.get(table, ()) if extra else ())
    return [tuple(row.get(c) for c in columns) for row in rows]


def fold_tags(changes: list[dict]) -> dict[str, str]:
    """A run's tags: its ``tags_changed`` payloads (``{"set": {...}, "remove": [...]}``) applied
    in order."""
    tags: dict[str, str] = {}
    for change in changes:
        tags.update(change.get("set") or {})
        for key in change.get("remove") or ():
            tags.pop(key, None)
    return tags


class ItemsKeys:
    """Key of canonical ``items`` and of ``items[:k]`` for every k in 1..count, fed each item's
    canonical JSON in order and keeping none of it: canonical JSON of a list is ``[`` +
    elements joined by ``,`` + ``]``, so each prefix's key is the running digest closed with
    ``]``."""

    def __init__(self, count: int | None) -> None:
        self._digest = hashlib.sha256(b"[")
        self._count = count or 0
        self._seen = 0
        self.prefixes: list[tuple[int, int]] = []

    def add(self, canon: bytes) -> bytes:
        """Take the next item's canonical JSON (returned, so a caller can hash it too)."""
        if self._seen:
            self._digest.update(b",")
        self._digest.update(canon)
        self._seen += 1
        if self._seen <= self._count:
            self.prefixes.append((self._seen, self._closed()))
        return canon

    def keys(self) -> tuple[int, list[tuple[int, int]]]:
        """``(key of the items, [(k, key of items[:k]), ...])``."""
        return self._closed(), self.prefixes

    def _closed(self) -> int:
        closed = self._digest.copy()
        closed.update(b"]")
        return digest_key(closed)


def items_keys(item_canons: Iterable[bytes], count: int | None) -> tuple[int, list[tuple[int, int]]]:
    """:class:`ItemsKeys` of each item's canonical JSON."""
    keys = ItemsKeys(count)
    for canon in item_canons:
        keys.add(canon)
    return keys.keys()


def _text(value: Any) -> str | None:
    """Text of a value for a VARCHAR column: strings as they are, anything else as JSON."""
    if value is None or type(value) is str:
        return value
    return dumps_json(value)


def _ts(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(record: dict, key: str) -> list:
    value = record.get(key)
    return value if isinstance(value, list) else []


def event_offsets(record: dict) -> dict[str, int]:
    """Offset from the revision's first seq of element 0 of each record array, in the order
    :func:`recstore.formats.events.record_to_events` writes them (``run_started`` is 0)."""
    offsets = {}
    position = 1
    for key, value in record.items():
        etype = ARRAY_EVENT_TYPES.get(key)
        if etype is not None and isinstance(value, list):
            offsets[etype] = position
            position += len(value)
    return offsets


def project_record(
    record: dict, ctx: RunContext, item_keys: tuple[int, list[tuple[int, int]]] | None = None,
    own: OwnRows | None = None,
) -> Projection:
    """All projection rows of one record.

    Rows that come from one event carry its seq (``ctx.first_seq`` + its position in
    :func:`~recstore.formats.events.record_to_events`, or where ``own`` places it). ``item_keys``
    (:meth:`ItemsKeys.keys` of the record's items) saves printing every item again when the
    caller already has it.
    """
    offsets = event_offsets(record)
    base = {etype: ctx.first_seq + offset for etype, offset in offsets.items()}
    analysis = analyze(record)
    items = record["items"]
    if item_keys is None:
        item_keys = items_keys(map(canonical_bytes, items), analysis.scope.count)
    items_key, prefixes = item_keys
    first_item = base.get("item_appended", 0)
    item_seqs = range(first_item, first_item + len(items)) if own is None else own.item_seqs
    keys_of_calls = [call_keys(join.call) for join in analysis.tool_calls]
    calls = _tool_call_rows(analysis, keys_of_calls, ctx, item_seqs, items, own)
    policy_keys = entry_keys(_list(record, "policyDecisions"))
    guardrail_keys = entry_keys(_list(record, "guardrailDecisions"))
    policy = _policy_rows(record, policy_keys, ctx, base, _policy_basis(analysis))
    guardrails = _guardrail_rows(record, guardrail_keys, ctx, base)
    run = _run_row(record, analysis, ctx, items_key, RunKeys.of(record))
    run["calls_full_key"] = calls_key(analysis, [keys[2] for keys in keys_of_calls])
    run["policy_seq_key"] = sequence_key([key for key, _ in policy_keys])
    run["guardrails_seq_key"] = sequence_key([key for key, _ in guardrail_keys])
    findings = [(f.code, f.message, f.path) for f in analysis.findings]
    if own is None:
        tables = {"proj_runs": [_GETTERS["proj_runs"](run)], "proj_visits": _visit_rows(analysis, ctx)}
    else:  # the format knows the run's visits and gates, and more columns and findings
        findings += [(f["code"], f["message"], f["path"]) for f in own.findings]
        tables = {
            "proj_runs": rows_from_dicts(
                "proj_runs", [{**run, **own.run, "finding_count": len(findings)}], extra=True
            ),
            "proj_visits": rows_from_dicts("proj_visits", own.visits, extra=True),
            "proj_suspended_proposals": rows_from_dicts("proj_suspended_proposals", own.proposals),
        }
    return {
        **tables,
        "proj_items": _item_rows(record, analysis, ctx, item_seqs, own is not None),
        "proj_tool_calls": calls,
        "proj_requests": _request_rows(record, analysis, ctx, base),
        "proj_policy_decisions": policy,
        "proj_guardrail_decisions": guardrails,
        "proj_findings": [(ctx.first_seq, i, *finding) for i, finding in enumerate(findings)],
        "proj_input_prefixes": [(ctx.first_seq, k, key) for k, key in prefixes],
    }


def _run_row(
    record: dict, a: RecordAnalysis, ctx: RunContext, items_key: int, keys: RunKeys
) -> dict:
    decisions = [d for d in _list(record, "policyDecisions") if isinstance(d, dict)]
    guardrails = [g for g in _list(record, "guardrailDecisions") if isinstance(g, dict)]
    metadata = record.get("metadata")
    redacted = record.get("contextRedacted")
    return {
        "run_key": ctx.run_key,
        "format": ctx.format,
        "revision": ctx.revision,
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
        "context_redacted": redacted if isinstance(redacted, bool) else None,
        "metadata": None if metadata is None else dumps_json(metadata),
        "tags": ctx.tags_json,
        "items_key": items_key,
        "source_id": ctx.source_id,
        "source_line": ctx.source_line,
        "batch_id": ctx.batch_id,
        "first_seq": ctx.first_seq,
        "last_seq": ctx.last_seq,
        "replay_of_run_id": _text(_dict(metadata).get("replayOfRunId")),
        "response_key": keys.response_key,
        "response_length": keys.response_length,
        "metadata_key": keys.metadata_key,
        "metadata_is_object": keys.metadata_is_object,
        "policy_count": keys.policy_count,
        "guardrail_count": keys.guardrail_count,
    }


def _item_rows(
    record: dict, a: RecordAnalysis, ctx: RunContext, seqs: Sequence[int], keep_json: bool
) -> list[tuple]:
    items = record["items"]
    turns: list[int | None] = [None] * len(items)  # each item's request turn (output intervals)
    for req in a.requests:
        turns[req.output_start:req.output_end] = [_int(req.turn)] * (
            req.output_end - req.output_start)
    input_end = (
        a.scope.count
        if a.scope.count is not None
        else (a.requests[0].output_start if a.requests else 0)
    )
    first_seq = ctx.first_seq
    rows = []
    for i, item in enumerate(items):
        it = _dict(item)
        rows.append((
            first_seq, i, _text(it.get("type")), _text(it.get("role")), turns[i], i < input_end,
            seqs[i], dumps_json(item) if keep_json else None,
        ))
    return rows


def _tool_call_rows(
    a: RecordAnalysis, keys_of_calls: list[tuple], ctx: RunContext, item_seqs: Sequence[int],
    items: list[Any], own: OwnRows | None,
) -> list[tuple]:
    """Rows of the extracted calls (``keys_of_calls``: :func:`call_keys` of each); with ``own``
    each keeps its output JSON (from ``items``) and has the format's columns."""
    rows = []
    for join, keys in zip(a.tool_calls, keys_of_calls, strict=True):
        call = join.call
        arguments = call.get("arguments")
        out = join.output_item_index
        output = None
        if own is not None and keys[1]:  # hasOutput: the output item's event is a whole file
            value = items[out].get("output")
            output = None if value is None else dumps_json(value)
        row = (
            ctx.first_seq,
            join.index,
            _int(call.get("turn")),
            _text(call.get("callId")),
            _text(call.get("name")),
            join.call_item_index,
            out,
            None if arguments is None else dumps_json(arguments),
            *keys,
            join.envelope_status,
            _text(join.envelope_code),
            _int(join.request_turn),
            join.visit_index,
            _text(join.agent),
            join.is_handoff,
            _text(join.handoff_target),
            _text(join.decision),
            join.policy_decision_index,
            join.in_input,
            None if out is None else item_seqs[out],
            output,
        )
        if own is not None:
            made = dict(zip(COLUMNS["proj_tool_calls"], row, strict=True))
            row = rows_from_dicts(
                "proj_tool_calls", [{**made, **own.calls.get(join.call_item_index, {})}], extra=True
            )[0]
        rows.append(row)
    return rows


def _request_rows(
    record: dict, a: RecordAnalysis, ctx: RunContext, base: dict[str, int]
) -> list[tuple]:
    visit_of_turn: dict[Any, int] = {}
    for visit in a.visits:
        for turn in visit.turns:
            visit_of_turn.setdefault(turn, visit.index)
    snapshot_of_turn: dict[Any, int] = {}
    for i, snap in enumerate(_list(record, "promptSnapshots")):
        if isinstance(snap, dict):
            snapshot_of_turn.setdefault(_int(snap.get("turn")), i)
    first = base.get("request_fingerprint", 0)
    first_snapshot = base.get("prompt_snapshot", 0)
    rows = []
    for req in a.requests:
        snapshot = snapshot_of_turn.get(_int(req.turn))
        rows.append(
            (
                ctx.first_seq,
                req.index,
                _int(req.message_count),
                req.output_start,
                req.output_end,
                visit_of_turn.get(req.turn) if _int(req.turn) is not None else 0,
                first + req.index,
                None if snapshot is None else first_snapshot + snapshot,
            )
        )
    return rows


def _visit_rows(a: RecordAnalysis, ctx: RunContext) -> list[tuple]:
    rows = []
    for v in a.visits:
        turns = [t for t in v.turns if _int(t) is not None]
        rows.append(
            (
                ctx.first_seq,
                v.index,
                _text(v.agent),
                _int(v.entered_after_turn),
                _text(v.via_call_id),
                v.transition,
                len(v.turns),
                _int(min(turns)) if turns else None,
                _int(max(turns)) if turns else None,
                v.item_start,
                v.item_end,
            )
        )
    return rows


def _policy_basis(a: RecordAnalysis) -> dict[int, str]:
    """How each handoff decision's application is known (recorded | inferred | unknown)."""
    return {t.decision_index: t.basis for t in a.transitions}


def policy_outcome(entry: Any) -> tuple[str | None, str | None, str | None, str | None]:
    """``(decision, reason, resource_kind, resource_name)`` of a policy decision entry: what bulk
    compare reports of an entry that changed."""
    entry = _dict(entry)
    resource = _dict(entry.get("resource"))
    return (
        _text(entry.get("decision")),
        _text(entry.get("reason")),
        _text(resource.get("kind")),
        _text(resource.get("name")),
    )


def _policy_rows(
    record: dict,
    keys: list[tuple[int, bool]],
    ctx: RunContext,
    base: dict[str, int],
    basis: dict[int, str],
) -> list[tuple]:
    """Rows of the policy decisions: the fields queries filter on or compare reports, and what
    the events do not say (each entry's comparison key, how a handoff's application is known);
    ``keys``: :func:`~recstore.records.keys.entry_keys` of the entries."""
    first = base.get(ARRAY_EVENT_TYPES["policyDecisions"], 0)
    entries = _list(record, "policyDecisions")
    rows = []
    for i, (key, is_object) in enumerate(keys):
        decision, reason, kind, name = policy_outcome(entries[i])
        version = _text(_dict(entries[i]).get("policyVersion"))
        rows.append(
            (
                ctx.first_seq, i, decision, reason, kind, name, version,
                basis.get(i), first + i, key, is_object,
            )
        )
    return rows


def _guardrail_rows(
    record: dict, keys: list[tuple[int, bool]], ctx: RunContext, base: dict[str, int]
) -> list[tuple]:
    """Rows of the guardrail decisions: the fields queries filter on and each entry's
    comparison key."""
    first = base.get(ARRAY_EVENT_TYPES["guardrailDecisions"], 0)
    entries = _list(record, "guardrailDecisions")
    rows = []
    for i, (key, is_object) in enumerate(keys):
        entry = _dict(entries[i])
        rows.append(
            (
                ctx.first_seq, i, _text(entry.get("guardrailName")),
                _text(entry.get("decision")), first + i, key, is_object,
            )
        )
    return rows
