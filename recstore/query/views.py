"""The catalogue of public views: what queries may read, with typed columns and descriptions.

Column names and types come from DuckDB itself (the live store, or a scratch in-memory database
built from the shipped ``schema/*.sql``), so the catalogue never drifts from the DDL. The
descriptions live here; a column the DDL gains without a description is shown with an empty one
(and a test flags it for the base views).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import duckdb

from recstore.resources import resource_dir
from recstore.store.db import refresh_views

# Views a query may read, in documentation order. Layers above the store (compare, replay, sweep)
# add the later names; a name is public only when the store actually has it.
PUBLIC_VIEWS: tuple[str, ...] = (
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
    "lineage",
    "sources",
    "batches",
    "rejects",
    "events",
    "comparisons",
    "comparison_pairs",
    "comparison_unpaired",
    "replays",
    "replay_calls",
    "sweeps",
    "sweep_runs",
    "sweep_cases",
)

# The comparison's feature views (schema/010_compare.sql, 011_compare_scopes.sql): not public
# (a query does not read them), but written into a Parquet layout, so that a comparison can run
# over it on Spark.
COMPARE_FEATURE_VIEWS: tuple[str, ...] = (
    "cmp_run_features",
    "cmp_call_features",
    "cmp_entry_features",
    "cmp_input_scopes",
)

_RUN_CHILD = "run_key: the run this row belongs to ('aioc:<runId>' / 'agentuse:<sessionId>' / 'otlp:<runId>')"
_SEQ = "seq of the event this row was projected from"

VIEW_DOCS: dict[str, tuple[str, dict[str, str]]] = {
    "runs": (
        "One row per recorded run (current revision): status, agents, model, timing, counts.",
        {
            "run_key": "store key of the run: 'aioc:<runId>' or 'agentuse:<sessionId>'",
            "run_id": "the record's own id (runId / session id); not necessarily unique",
            "format": "input format: aioc | agentuse | otlp",
            "revision": "revision number of this run's stream (1 = first version seen)",
            "record_hash": "sha256 of the canonical JSON of the whole record",
            "status": "run status as recorded (completed, failed, ...)",
            "agent": "the record's agentName (the agent that finished the run)",
            "initial_agent": "agent of the first visit",
            "final_agent": "agent of the last visit",
            "provider": "model provider name",
            "model": "model name",
            "question": "the user's question",
            "response": "the final response text",
            "started": "start time (UTC)",
            "completed": "completion time (UTC)",
            "started_text": "start time as written in the record",
            "completed_text": "completion time as written in the record",
            "duration_ms": "completed - started in milliseconds",
            "error_name": "error name of a failed run",
            "error_message": "error message of a failed run",
            "input_source": "how the input scope was found: inputItemCount | requestFingerprint",
            "input_item_count": "number of input items (the replay input scope)",
            "item_count": "number of items in the record",
            "request_count": "number of model requests",
            "tool_call_count": "number of extracted tool calls",
            "handoff_count": "number of handoff policy decisions",
            "denial_count": "number of policy decisions 'deny'",
            "approval_count": "number of policy decisions 'require_approval'",
            "guardrail_trip_count": "number of guardrail decisions 'triggered'",
            "visit_count": "number of agent visits",
            "finding_count": "number of consistency findings for the record",
            "execution_recording_status": "how completely the runtime recorded the run",
            "context_redacted": "whether the context snapshot was redacted",
            "metadata": "the record's metadata object (JSON); query keys as metadata.key",
            "tags": "tags given at ingest (JSON object); query keys as tag.key",
            "source_id": "source (file) this revision was read from",
            "source_uri": "URI of that source",
            "source_line": "line in the source (NDJSON inputs)",
            "batch_id": "ingest batch that stored this revision",
            "first_seq": "first event seq of this revision",
            "last_seq": "last event seq of this revision",
            "replay_of_run_id": "metadata.replayOfRunId: the run this one replays",
            "trigger": "agentuse: what started the session (manual, scheduled, api, ...)",
            "mock": "agentuse: a test run (mock, replay, result test)",
            "error_code": "agentuse: session error code",
            "tokens_input": "input tokens over every visit",
            "tokens_output": "output tokens over every visit",
            "tokens_reasoning": "reasoning tokens over every visit",
            "tokens_cache_read": "cache-read tokens over every visit",
            "tokens_cache_write": "cache-write tokens over every visit",
            "result_of_run_id": "agentuse: session whose result this run tests",
            "error_history": "agentuse: errors of earlier attempts (errorHistory, JSON)",
            "verification": "agentuse: the verify judge's final verdict (JSON)",
            "verification_status": "agentuse: passed | failed | error",
            "owner_pid": "agentuse: pid of the process that executed the run",
            "execution": "agentuse: execution intervals across resumes (time.execution, JSON)",
            "execution_ms": "agentuse: total of the closed execution intervals",
            "execution_budget": "agentuse: executionBudget (JSON)",
            "channels": "agentuse: channel anchors, e.g. Slack threads (JSON)",
            "dismissed_at": "agentuse: when a reviewer waved the run off (UTC)",
            "dismissed_at_text": "dismissedAt as ISO text",
            "reviewed_at": "agentuse: when a reviewer opened the run (UTC)",
            "reviewed_at_text": "reviewedAt as ISO text",
        },
    ),
    "items": (
        "Every item of every run, in record order, with the request that produced it.",
        {
            "run_key": _RUN_CHILD,
            "item_index": "0-based position in the record's items",
            "type": "item type (message, tool_call_item, tool_call_output_item, ...)",
            "role": "message role (user, assistant, system)",
            "call_id": "tool call id for tool call and output items",
            "name": "tool name for tool call items",
            "request_turn": "turn of the request whose output holds the item; NULL for input",
            "in_input": "whether the item is part of the run's input scope",
            "content": "message text (JSON text when not a string)",
            "payload": "the whole item (JSON)",
            "event_seq": _SEQ,
        },
    ),
    "tool_calls": (
        "Tool calls as aioc extracts them, joined to request, visit, agent and policy decision.",
        {
            "run_key": _RUN_CHILD,
            "call_index": "0-based position in extraction order",
            "ordinal": "aioc ExtractedToolCall.turn; NULL for orphan outputs",
            "call_id": "tool call id",
            "name": "tool name",
            "item_index": "index of the call item",
            "output_item_index": "index of the output item",
            "arguments": "call arguments (JSON); query keys as args.key",
            "args_hash": "aioc argsHash: sha256 of the canonical arguments",
            "has_output": "whether an output was recorded",
            "output": "the recorded output (JSON)",
            "envelope_status": "status of the output envelope (ok, error, denied, ...)",
            "envelope_code": "code of the output envelope",
            "request_turn": "turn of the request that made the call",
            "visit_index": "agent visit the call happened in",
            "agent": "agent that made the call",
            "is_handoff": "whether the call is a handoff",
            "handoff_target": "target agent of a handoff",
            "policy_decision": "policy decision for the call (allow, deny, ...)",
            "policy_decision_index": "index of that decision in policy_decisions",
            "in_input": "whether the call is part of the input scope",
            "part_id": "agentuse: id of the tool part",
            "status": "agentuse: tool state (completed, error, ...)",
            "error": "agentuse: tool error text",
            "started": "agentuse: call start (UTC)",
            "started_text": "call start as written",
            "ended": "agentuse: call end (UTC)",
            "ended_text": "call end as written",
            "duration_ms": "agentuse: ended - started in milliseconds",
            "arguments_normalised": "arguments without intent/recovery keys (JSON)",
            "artifact_path": "agentuse: file with the full output of a clamped result",
            "child_session_id": "agentuse: subagent session the call started",
            "child_link": "how that link is known: resumePayload | inferred",
            "child_link_confidence": "1.0 recorded, below 1 inferred",
            "superseded": "agentuse: part of a rewound attempt (not in the model's history)",
            "parent_call_id": "agentuse: the Code Mode code_exec call that dispatched it",
            "raw_approved_input": "agentuse: the signed input an approval covered (JSON)",
        },
    ),
    "requests": (
        "Model requests (request fingerprints) with their output item interval.",
        {
            "run_key": _RUN_CHILD,
            "request_index": "0-based request number",
            "turn": "turn of the request",
            "agent": "agent that made the request",
            "provider": "provider name",
            "model": "model name",
            "message_count": "number of messages sent",
            "output_start": "first output item (items[output_start:output_end])",
            "output_end": "end of the output interval (exclusive)",
            "visit_index": "agent visit of the request",
            "request_hash": "fingerprint hash of the whole request",
            "system_prompt_hash": "hash of the system prompt",
            "messages_hash": "hash of the messages",
            "tools_hash": "hash of the tool definitions",
            "model_settings_hash": "hash of the model settings",
            "prompt_hash": "prompt hash from the prompt snapshot of the same turn",
            "prompt_version": "prompt version from that snapshot",
            "tool_count": "number of tools offered",
            "runtime_version": "runtime version that made the request",
            "timestamp": "request time (UTC)",
            "timestamp_text": "request time as written",
            "event_seq": _SEQ,
        },
    ),
    "visits": (
        "Agent visits: each stretch of a run handled by one agent, in order.",
        {
            "run_key": _RUN_CHILD,
            "visit_index": "0-based visit number",
            "agent": "agent of the visit",
            "entered_after_turn": "turn after which the agent took over",
            "via_call_id": "handoff call that led here",
            "transition": "initial | applied | inferred | unknown",
            "request_count": "requests made during the visit",
            "first_turn": "first turn of the visit",
            "last_turn": "last turn of the visit",
            "item_start": "first item of the visit",
            "item_end": "end of the visit's items (exclusive)",
            "session_id": "agentuse: session of the visit",
            "parent_visit_index": "agentuse: visit that started this subagent",
            "parent_link": "agentuse: parentSessionID | nesting",
            "link_confidence": "1.0 recorded, below 1 inferred",
            "depth": "agentuse: subagent nesting depth (0 = top level)",
            "status": "agentuse: session status",
            "model": "agentuse: model of the visit",
            "tokens_input": "input tokens of the visit",
            "tokens_output": "output tokens of the visit",
            "assistant_error": "agentuse: the message's assistant.error (JSON)",
            "assistant_summary": "agentuse: the message's assistant.summary",
        },
    ),
    "policy_decisions": (
        "Policy decisions (allow, deny, require_approval, ...) with policy version and resource.",
        {
            "run_key": _RUN_CHILD,
            "decision_index": "0-based decision number",
            "turn": "turn of the decision",
            "call_id": "tool or handoff call decided on",
            "decision": "allow | deny | require_approval | ...",
            "reason": "reason given by the policy",
            "public_reason": "reason shown to the model",
            "result_mode": "how a denial was returned",
            "policy_version": "version of the policy that decided",
            "resource_kind": "tool | handoff",
            "resource_name": "tool name or handoff target",
            "expires_at": "expiry of an approval (UTC)",
            "expires_at_text": "expiry as written",
            "handoff_applied": "recorded handoffApplied, else NULL",
            "applied_basis": "recorded | inferred | unknown (handoffs only)",
            "timestamp": "decision time (UTC)",
            "timestamp_text": "decision time as written",
            "metadata": "decision metadata (JSON)",
            "payload": "the whole decision (JSON)",
            "event_seq": _SEQ,
        },
    ),
    "guardrail_decisions": (
        "Guardrail verdicts (pass | triggered) per turn.",
        {
            "run_key": _RUN_CHILD,
            "decision_index": "0-based decision number",
            "turn": "turn of the decision",
            "guardrail_name": "guardrail name",
            "decision": "pass | triggered",
            "reason": "reason given",
            "timestamp": "decision time (UTC)",
            "timestamp_text": "decision time as written",
            "metadata": "decision metadata (JSON)",
            "payload": "the whole decision (JSON)",
            "event_seq": _SEQ,
        },
    ),
    "prompt_snapshots": (
        "Prompt snapshots: prompt version and hash per turn and agent.",
        {
            "run_key": _RUN_CHILD,
            "snapshot_index": "0-based snapshot number",
            "turn": "turn of the snapshot",
            "agent": "agent the prompt belongs to",
            "model": "model name",
            "prompt_version": "prompt version",
            "prompt_hash": "prompt hash",
            "has_prompt_text": "whether the prompt text was recorded",
            "timestamp": "snapshot time (UTC)",
            "timestamp_text": "snapshot time as written",
            "payload": "the whole snapshot (JSON)",
            "event_seq": _SEQ,
        },
    ),
    "suspended_proposals": (
        "Tool calls and handoffs suspended for approval.",
        {
            "run_key": _RUN_CHILD,
            "proposal_index": "0-based proposal number",
            "turn": "turn of the proposal",
            "call_id": "call id of the proposal",
            "kind": "tool | handoff",
            "agent": "agent that proposed it",
            "tool_name": "tool name (tool proposals)",
            "from_agent": "handing-off agent (handoff proposals)",
            "to_agent": "target agent (handoff proposals)",
            "proposal_hash": "hash of the proposal",
            "reason": "reason for suspension",
            "public_reason": "reason shown to the model",
            "policy_version": "policy version that suspended it",
            "expires_at": "expiry (UTC)",
            "expires_at_text": "expiry as written",
            "args_canonical": "canonical JSON of the proposed arguments or payload",
            "timestamp": "proposal time (UTC)",
            "timestamp_text": "proposal time as written",
            "metadata": "proposal metadata (JSON)",
            "payload": "the whole proposal (JSON)",
            "event_seq": _SEQ,
        },
    ),
    "findings": (
        "Consistency findings the store noticed in a record (never fatal).",
        {
            "run_key": _RUN_CHILD,
            "finding_index": "0-based finding number",
            "code": "finding code",
            "message": "what was noticed",
            "path": "JSON path in the record",
        },
    ),
    "lineage": (
        "Edges from derived runs to their sources: replays, subagents, sweep cases, threads.",
        {
            "child_run_key": "the derived run",
            "parent_run_key": "the source run (NULL while unknown)",
            "parent_run_id": "the source run's own id",
            "relation": "replay_of | subagent | sweep_case | thread_continuation | ...",
            "detail": "relation details (JSON)",
            "source_id": "source the edge was read from",
        },
    ),
    "sources": (
        "Every input read: URI, SHA-256, size, format, status and counts.",
        {
            "source_id": "source number",
            "uri": "file path or URI",
            "sha256": "sha256 of the bytes read (NULL for in-process records)",
            "size_bytes": "size in bytes",
            "format": "json | ndjson | records | otlp (an OpenTelemetry trace file)",
            "compression": "gzip | NULL",
            "status": "ok | partial | rejected | incomplete (reading it was interrupted)",
            "record_count": "records read",
            "accepted": "new runs",
            "revised": "new revisions of known runs",
            "duplicate": "identical records (nothing appended)",
            "rejected": "records rejected",
            "first_batch_id": "first batch that refers to it (committed with it)",
            "batch_id": "batch that finished reading it (NULL while incomplete)",
            "opened_at": "time reading it began (UTC)",
            "ingested_at": "time it was read whole (UTC)",
        },
    ),
    "batches": (
        "Ingest transactions with their tags and counts.",
        {
            "batch_id": "batch number",
            "ingest_id": "ingest command the batch belongs to",
            "started_at": "start (UTC)",
            "committed_at": "commit (UTC)",
            "tags": "tags given at ingest (JSON object)",
            "pid": "process id of the writer",
            "accepted": "new runs",
            "revised": "new revisions",
            "duplicate": "identical records",
            "rejected": "records rejected",
            "event_count": "events the batch appended",
            "first_seq": "first event seq of the batch (NULL: none)",
            "last_seq": "last event seq of the batch",
            "prev_hash": "hash of the previous batch (the chain `recstore verify` walks)",
            "hash": "sha256 over the previous hash and every event and stream row of the batch",
        },
    ),
    "rejects": (
        "Input that could not be accepted, kept whole with the reason.",
        {
            "reject_id": "reject number",
            "source_id": "source it came from",
            "source_uri": "URI of that source",
            "line": "1-based line (NULL for whole-file inputs)",
            "reason": "why it was rejected",
            "path": "JSON path of the problem when known",
            "raw_text": "the text as read (the first 64 KiB of an input over the size limit)",
            "raw_bytes": "the exact bytes when not valid UTF-8",
            "raw_sha256": "sha256 of the input as read (a reject is kept once per content)",
            "raw_size": "size of the input as read, in bytes",
            "batch_id": "batch that rejected it",
            "rejected_at": "time (UTC)",
        },
    ),
    "events": (
        "The append-only event log (hash-chained per batch: see batches).",
        {
            "seq": "global sequence number (gap-free, commit order)",
            "stream_key": "run key of the stream",
            "stream_pos": "0-based position in the stream across revisions",
            "revision": "revision the event belongs to",
            "type": "event type (run_started, item_appended, policy_decision, tags_changed, ...)",
            "idx": "position in its record array",
            "turn": "the record's turn, where the payload has one",
            "payload": "event payload (JSON, key order as read)",
            "source_id": "source the event was read from",
            "batch_id": "batch that appended it",
        },
    ),
    # Views owned by the compare, replay and sweep layers: their columns are described in those
    # layers' docs (docs/compare.md, docs/replay.md, docs/sweeps.md).
    "comparisons": ("Bulk comparisons: the filters, pairing rule and aggregate result.", {}),
    "comparison_pairs": ("One row per baseline/candidate pair of a comparison.", {}),
    "comparison_unpaired": (
        "Runs a comparison left unpaired (no key, no match) or found duplicated, with the reason.",
        {},
    ),
    "replays": ("Replays written by recstore: source run, mode, harness and tape stats.", {}),
    "replay_calls": ("Each tool execution of a stored replay: recorded, use_output, live or missing, "
                     "with the source item a recorded output came from.", {}),
    "sweeps": ("Sweeps with their latest run and outcome counts.", {}),
    "sweep_runs": ("Each run of a sweep: selection, counts and status.", {}),
    "sweep_cases": ("Each case of a sweep run: source run, replay and signals.", {}),
}


# The columns a DSL query shows when it has no ``fields`` clause (``fields *`` shows all): what a
# person debugging runs wants first. Every run-scoped list starts with run_key, which
# ``select_run_keys`` (compare and sweep selection) reads; a test keeps every name a real column.
DEFAULT_FIELDS: dict[str, tuple[str, ...]] = {
    "runs": ("run_key", "status", "agent", "model", "started", "duration_ms", "tool_call_count",
             "error_name", "question"),
    "items": ("run_key", "item_index", "type", "role", "name", "request_turn", "content"),
    "tool_calls": ("run_key", "call_index", "name", "agent", "args_hash", "envelope_status",
                   "request_turn"),
    "requests": ("run_key", "request_index", "turn", "agent", "model", "message_count",
                 "tool_count", "timestamp"),
    "visits": ("run_key", "visit_index", "agent", "transition", "entered_after_turn",
               "request_count"),
    "policy_decisions": ("run_key", "decision_index", "turn", "decision", "resource_kind",
                         "resource_name", "policy_version", "reason"),
    "guardrail_decisions": ("run_key", "decision_index", "turn", "guardrail_name", "decision",
                            "reason"),
    "prompt_snapshots": ("run_key", "snapshot_index", "turn", "agent", "model", "prompt_version",
                         "prompt_hash"),
    "suspended_proposals": ("run_key", "proposal_index", "turn", "kind", "agent", "tool_name",
                            "to_agent", "reason"),
    "findings": ("run_key", "finding_index", "code", "message", "path"),
    "lineage": ("child_run_key", "parent_run_key", "relation", "parent_run_id"),
    "sources": ("source_id", "uri", "format", "status", "record_count", "accepted", "revised",
                "duplicate", "rejected", "ingested_at"),
    "batches": ("batch_id", "ingest_id", "committed_at", "accepted", "revised", "duplicate",
                "rejected"),
    "rejects": ("reject_id", "source_uri", "line", "reason", "path", "rejected_at"),
    "events": ("seq", "stream_key", "revision", "type", "idx", "turn", "batch_id"),
    "comparisons": ("comparison_id", "created_at", "baseline_filter", "candidate_filter",
                    "pair_by", "pair_count", "failed_pairs", "classification"),
    "comparison_pairs": ("comparison_id", "pair_index", "pair_key", "baseline_run_key",
                         "candidate_run_key", "equal", "difference_count", "classification"),
    "comparison_unpaired": ("run_key", "comparison_id", "side", "pair_key", "reason"),
    "replays": ("replay_run_key", "source_run_key", "mode", "replay_status", "report_status",
                "replayed_from_record", "missing_tool_calls", "live_fallback_calls"),
    "replay_calls": ("replay_run_key", "call_index", "turn", "agent", "tool_name", "resolution"),
    "sweeps": ("sweep_name", "run_count", "last_run_id", "last_started_at", "last_status",
               "last_pass_count", "last_warn_count", "last_fail_count"),
    "sweep_runs": ("sweep_run_id", "sweep_name", "started_at", "status", "case_count",
                   "pass_count", "warn_count", "fail_count", "pending_count"),
    "sweep_cases": ("sweep_run_id", "case_index", "source_run_key", "status", "replay_status",
                    "source_status", "candidate_status", "duration_ms"),
}


@dataclass(frozen=True)
class Column:
    """One typed column of a public view."""

    name: str
    type: str
    description: str


@dataclass(frozen=True)
class View:
    """A public view: name, one-line description and typed columns."""

    name: str
    description: str
    columns: tuple[Column, ...]
    default_fields: tuple[str, ...] = ()  # columns a DSL query shows without ``fields``; () = all

    def column(self, name: str) -> Column | None:
        """The column called ``name`` (case-insensitive), if any."""
        lowered = name.lower()
        return next((c for c in self.columns if c.name.lower() == lowered), None)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


@dataclass(frozen=True)
class Catalog:
    """The public views a query may read, by lower-case name."""

    views: dict[str, View]

    def get(self, name: str) -> View | None:
        return self.views.get(name.lower())

    def names(self) -> list[str]:
        return list(self.views)

    def sqlglot_schema(self) -> dict[str, object]:
        """``{view: {column: type}}`` as sqlglot's ``qualify`` expects."""
        return {v.name: {c.name: c.type for c in v.columns} for v in self.views.values()}

    def run_children(self) -> list[str]:
        """Views other than ``runs`` whose rows belong to one run (they have ``run_key``)."""
        return [n for n, v in self.views.items() if n != "runs" and v.column("run_key")]


def catalog_from_connection(con: duckdb.DuckDBPyConnection,
                            names: tuple[str, ...] = PUBLIC_VIEWS) -> Catalog:
    """The public views (or the views ``names``) present in the database behind ``con``, with
    their real column types."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type, comment FROM duckdb_columns() "
        "WHERE schema_name = 'main' AND database_name = current_database() "
        "ORDER BY table_name, column_index"
    ).fetchall()
    comments = dict(
        con.execute(
            "SELECT table_name, comment FROM duckdb_tables() WHERE schema_name = 'main' "
            "UNION ALL SELECT view_name, comment FROM duckdb_views() WHERE schema_name = 'main'"
        ).fetchall()
    )
    columns: dict[str, list[Column]] = {}
    for table, column, data_type, comment in rows:
        if table in names:
            described = VIEW_DOCS.get(table, ("", {}))[1].get(column) or comment or ""
            columns.setdefault(table, []).append(Column(column, data_type, described))
    views = {
        name: View(name, VIEW_DOCS.get(name, ("",))[0] or comments.get(name) or "",
                   tuple(columns[name]), DEFAULT_FIELDS.get(name, ()))
        for name in names
        if name in columns
    }
    return Catalog(views)


def layout_catalog(con: duckdb.DuckDBPyConnection) -> Catalog:
    """The views a Parquet layout holds (what ``recstore export`` and ``recstore spark build``
    write): the public views and the comparison features (:data:`COMPARE_FEATURE_VIEWS`)."""
    return catalog_from_connection(con, PUBLIC_VIEWS + COMPARE_FEATURE_VIEWS)


@contextlib.contextmanager
def schema_connection() -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB database holding the shipped schema (tables, macros, views) and no
    rows: what the definitions of a store are read from without a store file."""
    con = duckdb.connect(":memory:")
    try:
        for path in sorted(resource_dir("schema").glob("*.sql")):
            con.execute(path.read_text(encoding="utf-8"))
        refresh_views(con)
        yield con
    finally:
        con.close()


@functools.lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    """The catalogue of a store built from the shipped schema files (no store file needed)."""
    with schema_connection() as con:
        return catalog_from_connection(con)


def schema_text(catalog: Catalog) -> str:
    """The views reference as plain text: the output of ``recstore schema`` and the block that
    ``docs/queries.md`` carries (a test keeps them equal)."""
    lines: list[str] = []
    for view in catalog.views.values():
        lines.append(f"{view.name}: {view.description}".rstrip())
        width = max(len(c.name) for c in view.columns)
        type_width = max(len(c.type) for c in view.columns)
        for c in view.columns:
            lines.append(f"  {c.name:<{width}}  {c.type:<{type_width}}  {c.description}".rstrip())
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def schema_json(catalog: Catalog) -> list[dict[str, Any]]:
    """The views reference as JSON-ready data (``recstore schema --json``)."""
    return [
        {
            "name": v.name,
            "description": v.description,
            "columns": [{"name": c.name, "type": c.type, "description": c.description}
                        for c in v.columns],
        }
        for v in catalog.views.values()
    ]
