"""Recording selection (§2.3, §3.3): what a strict replay takes from its source, from an
agentuse session by agentuse's load rules or from any aioc RunRecord's items."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from recstore.errors import ReplaySourceError
from recstore.formats.agentuse import AgentuseRun, ToolCall
from recstore.records import extract_tool_calls
from recstore.replay.agentuse_match.rules import GATE_TOOL
from recstore.runtime import ABSENT

# problems of the files agentuse reads to load a replay source that make it refuse the source:
# JSON.parse fails (CorruptStorageError) or the value cannot be used; a part holding `null` is
# skipped there (readJSON's null), a session, tool or message file holding `null` is absent
_UNREADABLE = frozenset({"corrupt_json", "salvaged", "not_an_object"})


_UNREADABLE_OR_NULL = _UNREADABLE | {"json_null"}


@dataclass(frozen=True)
class Recording:
    """One recorded tool call: a completed output or a recorded error message."""

    tool: str
    input: Any
    status: str  # completed | error
    output: Any
    error: str | None
    part_id: str
    source_sha256: str | None = None


@dataclass
class RecordingSet:
    """Everything a strict replay takes from its source (§2.3 "recording selection")."""

    source_id: str
    recordings: list[Recording]
    cwd: str | None = None
    source_run_key: str | None = None
    user_prompt: str | None = None
    model: str | None = None
    created_at: int | None = None  # ms epoch; "now" of the replay and temp-store timestamps
    original_text: str = ""
    original_proposal: Any = ABSENT  # the first gate's input (``None`` when it was null)
    tools_snapshot: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class ReferenceFile:
    """A read-only file grant snapshotted before generation: its current content and hash."""

    path: str
    sha256: str
    text: str


@dataclass(frozen=True)
class TapeResult:
    """What the tape answers: ``value`` for the model, or ``is_error`` with the recorded message
    (to be raised as a tool error, not a stop)."""

    value: Any
    is_error: bool = False

    @property
    def error_message(self) -> str | None:
        return self.value if self.is_error else None


def recordings_from_session(run: AgentuseRun) -> RecordingSet:
    """The recordings of an agentuse session, by agentuse's load rules (§2.3, §3.3).

    The primary message is the first message directory (sorted) that has a ``message.json``.
    Superseded parts (a rewound attempt, left out of the model's history) are skipped.

    Raises:
        ReplaySourceError: mock/replay/result-test sessions, sessions still running or
            preparing, sessions without a primary message or tool snapshot, and sessions with a
            file agentuse cannot read (corrupt, salvageable or not an object: agentuse's
            ``CorruptStorageError``). Ingest keeps what it can of such files; replay does not.
    """
    root = run.root
    where = run.run_key
    _refuse_unreadable(run, _session_files(run), where, _UNREADABLE_OR_NULL)
    if root.mock:
        raise ReplaySourceError(
            "is a mock, replay or result-test session (mock:true); its approvals are not human data and it cannot be a replay source",
            source=where,
        )
    if root.status in ("running", "preparing"):
        raise ReplaySourceError(
            f"is still '{root.status}'; only completed, error or suspended sessions can be replayed",
            source=where,
        )
    primary = run.primary_message
    if primary is None or not primary.has_file:
        raise ReplaySourceError("has no primary message (message.json)", source=where)
    if not run.tools_snapshot:
        raise ReplaySourceError("has no tools.json snapshot (or it is empty)", source=where)
    message_json = f"{run.root.dir_name}/{primary.dir_name}/message.json"
    _refuse_unreadable(run, {message_json}, where, _UNREADABLE_OR_NULL)
    _refuse_unreadable(run, _part_files(run, primary), where, _UNREADABLE)
    parts = sorted(
        [c for c in run.tool_calls if c.message_id == primary.message_id]
        + [e for e in run.events if e.message_id == primary.message_id],
        key=lambda p: p.order,
    )
    recordings: list[Recording] = []
    text: list[str] = []
    proposal: Any = ABSENT
    for part in parts:
        if part.superseded:
            continue
        if not isinstance(part, ToolCall):
            if part.type != "text":
                continue
            if part.payload.get("role") == "user":
                break  # a follow-up continuation: excluded with everything after it
            body = part.payload.get("text")
            text.append(body if isinstance(body, str) else "")  # agentuse: "undefined"; see docs
        else:
            if part.tool == GATE_TOOL:
                proposal = copy.deepcopy(part.input) if part.has_input else ABSENT
                break
            if part.raw_status in ("completed", "error"):
                recordings.append(
                    Recording(
                        part.tool,
                        part.input,
                        part.raw_status,
                        part.output,
                        part.error,
                        part.part_id,
                        part.sha256 or None,
                    )
                )
    return RecordingSet(
        source_id=run.session_id,
        source_run_key=run.run_key,
        recordings=recordings,
        cwd=primary.root,
        user_prompt=primary.user_prompt or None,
        model=root.model,
        created_at=root.created,
        original_text="".join(text),
        original_proposal=proposal,
        tools_snapshot=run.tools_snapshot,
    )


def _session_files(run: AgentuseRun) -> set[str]:
    top = run.root.dir_name
    return {f"{top}/session.json", f"{top}/tools.json"}


def _part_files(run: AgentuseRun, message: Any) -> set[str]:
    prefix = f"{run.root.dir_name}/{message.dir_name}/part/"
    return {p.rel_path for p in run.problems if p.rel_path.startswith(prefix)}


def _refuse_unreadable(
    run: AgentuseRun, paths: set[str], where: str, codes: frozenset[str]
) -> None:
    for problem in run.problems:
        if problem.rel_path in paths and problem.code in codes:
            raise ReplaySourceError(
                f"has a file agentuse cannot read (CorruptStorageError), {problem.rel_path}: "
                f"{problem.reason}",
                source=where,
            )


def recordings_from_record(record: dict, *, cwd: str | None = None) -> RecordingSet:
    """The recordings of an aioc RunRecord under agentuse's rules: tool calls with outputs,
    before the first ``await_human`` call or user message after the input scope. Each output is
    served as recorded, envelope included: agentuse hands recorded outputs to the model as they
    are, and an aioc model saw the envelope.

    Raises:
        ReplaySourceError: the record is itself a replay (``metadata.replayOfRunId``) or a mock.
    """
    metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
    run_id = str(record.get("runId", ""))
    if metadata.get("replayOfRunId") or metadata.get("mock") is True:
        raise ReplaySourceError(
            "is a replay or mock run and cannot be a strict replay source", source=f"aioc:{run_id}"
        )
    items = record.get("items") if isinstance(record.get("items"), list) else []
    input_count = record.get("inputItemCount")
    stop_at = len(items)
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        after_input = isinstance(input_count, int) and index >= input_count
        if item.get("type") == "tool_call_item" and item.get("name") == GATE_TOOL:
            stop_at = index
            break
        if after_input and item.get("type") == "message" and item.get("role") == "user":
            stop_at = index
            break
    proposal: Any = ABSENT
    if stop_at < len(items) and items[stop_at].get("type") == "tool_call_item":
        proposal = copy.deepcopy(items[stop_at].get("arguments"))
    recordings = [
        Recording(call["name"], call["arguments"], "completed", call.get("output"), None, call["callId"])
        for call in extract_tool_calls(items[:stop_at])
        if call["hasOutput"] and call["name"]
    ]
    text = [
        item["content"]
        for item in items[:stop_at]
        if isinstance(item, dict)
        and item.get("type") == "message"
        and item.get("role") == "assistant"
        and isinstance(item.get("content"), str)
    ]
    return RecordingSet(
        source_id=run_id,
        source_run_key=f"aioc:{run_id}",
        recordings=recordings,
        cwd=cwd,
        user_prompt=record.get("question") if isinstance(record.get("question"), str) else None,
        model=record.get("model") if isinstance(record.get("model"), str) else None,
        created_at=_iso_to_ms(record.get("startedAt")),
        original_text="".join(text),
        original_proposal=proposal,
    )


def _iso_to_ms(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def source_recordings(store: Any, run_key: str, record: dict) -> RecordingSet:
    """The recordings of a stored run: agentuse sessions by their own rules (§2.3), aioc runs
    from their items (:func:`recordings_from_record`)."""
    if not run_key.startswith("agentuse:"):
        return recordings_from_record(record)
    from recstore.store.agentuse_ingest import stored_run

    with store.reader() as con:
        return recordings_from_session(stored_run(con, run_key))
