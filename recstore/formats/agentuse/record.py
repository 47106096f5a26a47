"""Mapping an :class:`AgentuseRun` onto the aioc record model (``to_run_record``), so runs,
items and tool calls read the same for both formats; agentuse-only facts go to
``metadata.agentuse``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from recstore.formats.agentuse.model import AgentuseRun, ItemOrigin, PartEvent, ToolCall, Visit


def iso_ms(ms: int | None) -> str | None:
    """A millisecond epoch as aioc's ISO form (``2026-01-15T10:00:00.000Z``)."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _tool_items(call: ToolCall) -> list[dict]:
    args = call.input if call.input is not None else {}
    items = [
        {"type": "tool_call_item", "callId": call.call_id, "name": call.tool, "arguments": args}
    ]
    if call.raw_status == "completed":
        items.append(
            {"type": "tool_call_output_item", "callId": call.call_id, "output": call.output}
        )
    elif call.raw_status == "error":
        # a failed call's output is what the part file holds (usually none, so NULL); the
        # message stays in the call's error column, never folded into an invented output
        items.append(
            {"type": "tool_call_output_item", "callId": call.call_id, "output": call.output}
        )
    return items


def _part_items(part: ToolCall | PartEvent) -> list[dict]:
    if isinstance(part, ToolCall):
        return _tool_items(part)
    if part.type != "text" or not isinstance(part.payload.get("text"), str):
        return []
    role = "user" if part.payload.get("role") == "user" else "assistant"
    return [{"type": "message", "role": role, "content": part.payload["text"]}]


def to_run_record(run: AgentuseRun) -> tuple[dict, list[ItemOrigin]]:
    """An aioc-shaped RunRecord of ``run`` (so runs, items and tool_calls read the same for both
    formats) and, per item, the part file and visit it came from.

    Items: the user prompt, then each visit's text and tool parts in agentuse order; a child
    visit's items sit right after the ``subagent__*`` call that started it (or at the end when
    no call is linked). agentuse-only facts go to ``metadata.agentuse``.
    """
    index_of = {v.session_id: i for i, v in enumerate(run.visits)}
    parts_of: dict[str, list[ToolCall | PartEvent]] = {v.session_id: [] for v in run.visits}
    for part in [*run.tool_calls, *run.events]:
        parts_of.setdefault(part.session_id, []).append(part)
    primary = run.primary_message
    question = (primary.user_prompt or primary.task or "") if primary else ""
    items: list[dict] = [{"type": "message", "role": "user", "content": question}]
    origins = [ItemOrigin(None, 0)]
    placed: set[str] = set()

    def emit(visit: Visit) -> None:
        placed.add(visit.session_id)
        for part in sorted(parts_of.get(visit.session_id, []), key=lambda p: p.order):
            for k, item in enumerate(_part_items(part)):
                items.append(item)
                origins.append(ItemOrigin(part.rel_path, index_of[visit.session_id]))
                child = run_visit(part.child_session_id) if isinstance(part, ToolCall) else None
                if k == 0 and child is not None and child.session_id not in placed:
                    emit(child)

    def run_visit(session_id: str | None) -> Visit | None:
        return run.visits[index_of[session_id]] if session_id in index_of else None

    emit(run.root)
    for visit in run.visits:
        if visit.session_id not in placed:
            emit(visit)
    return _record_shell(run, question, items), origins


def _final_text(run: AgentuseRun) -> str:
    texts = [e for e in run.events if e.session_id == run.session_id and e.type == "text"]
    texts = [
        e
        for e in texts
        if e.payload.get("role") != "user" and isinstance(e.payload.get("text"), str)
    ]
    return max(texts, key=lambda e: e.order).payload["text"] if texts else ""


def _record_shell(run: AgentuseRun, question: str, items: list[dict]) -> dict:
    root = run.root
    record: dict[str, Any] = {
        "runId": run.session_id,
        "startedAt": iso_ms(root.created),
        "completedAt": iso_ms(root.completed or root.updated),
        "status": root.status,
        "agentName": root.agent_id,
        "providerName": root.model.split(":", 1)[0] if root.model else None,
        "model": root.model,
        "question": question,
        "response": _final_text(run),
        "items": items,
        "inputItemCount": 1,
        "promptSnapshots": [],
        "requestFingerprints": [],
        "policyDecisions": [],
    }
    if root.error_code or root.error_message:
        record["errorName"] = root.error_code or "Error"
        record["errorMessage"] = root.error_message or ""
    record["metadata"] = {"agentuse": agentuse_metadata(run)}
    return {k: v for k, v in record.items() if v is not None}


def agentuse_metadata(run: AgentuseRun) -> dict:
    """agentuse facts without an aioc field: trigger, mock, tokens, lineage, project."""
    root = run.root
    meta: dict[str, Any] = {
        "sessionId": run.session_id,
        "status": root.status,
        "trigger": root.trigger,
        "mock": root.mock,
        "agentId": root.agent_id,
        "version": root.version,
        "projectRoot": root.project_root,
        "tokens": root.tokens,
        "treeTokens": run.tree_tokens(),
        "subagents": len(run.visits) - 1,
        "gates": len(run.gates),
    }
    if root.error_code:
        meta["errorCode"] = root.error_code
    for edge in run.lineage:
        strict = edge.kind == "strict_replay"
        meta["replaySourceSessionId" if strict else "resultSourceSessionId"] = (
            edge.source_session_id
        )
        if edge.report is not None:  # replay.json / result-test.json: status, calls[].partId, ...
            meta["replayReport" if strict else "resultReport"] = edge.report
    return meta
