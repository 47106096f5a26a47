"""What an agentuse run adds to the projection its aioc record gets (schema 030; NULL for aioc
runs): columns per run, per tool call and per visit, the visit and gate rows, and the kept
problems as findings. Pure functions of an assembled run; ``recstore.store.agentuse_prepare``
hands them, with their events' seqs, to the projection that makes the run's rows."""

from __future__ import annotations

from typing import Any

from recstore.canonical import canonical_json
from recstore.formats.agentuse.fields import as_int, as_str, dig
from recstore.formats.agentuse.model import AgentuseRun, ItemOrigin, Visit
from recstore.formats.agentuse.record import iso_ms
from recstore.formats.jsontext import dumps_json

# resumePayload keys that would let a reader act on a pending gate; never projected.
_SECRET_KEYS = frozenset({"resumeToken", "approvalUrl", "signature"})


def run_columns(run: AgentuseRun) -> dict:
    """The ``runs`` columns agentuse knows and an aioc record does not carry: visits and gates,
    trigger, mock, error code, token totals of the whole tree, lineage and
    :func:`session_columns`."""
    root = run.root
    tokens = run.tree_tokens()
    lineage = {e.kind: e.source_session_id for e in run.lineage}
    return {
        "visit_count": len(run.visits),
        "final_agent": run.visits[-1].agent_id,
        "approval_count": len(run.gates),
        "trigger": root.trigger,
        "mock": root.mock,
        "error_code": root.error_code,
        "tokens_input": tokens.get("input"),
        "tokens_output": tokens.get("output"),
        "tokens_reasoning": tokens.get("reasoning"),
        "tokens_cache_read": tokens.get("cache_read"),
        "tokens_cache_write": tokens.get("cache_write"),
        "replay_of_run_id": lineage.get("strict_replay"),
        "result_of_run_id": lineage.get("result_test"),
        **session_columns(root),
    }


def tool_call_columns(run: AgentuseRun, origins: list[ItemOrigin]) -> dict[int, dict]:
    """Per item index of a tool call in the aioc record: its visit and agent (by the item's
    origin), and status, error, timing, child links and inputs from its part file."""
    by_path = {c.rel_path: c for c in run.tool_calls}
    columns: dict[int, dict] = {}
    for index, origin in enumerate(origins):
        row = {"visit_index": origin.visit_index, "agent": run.visits[origin.visit_index].agent_id}
        call = by_path.get(origin.rel_path or "")
        if call is not None:
            row.update(
                part_id=call.part_id,
                status=call.status,
                error=call.error,
                started_text=iso_ms(call.t_start),
                ended_text=iso_ms(call.t_end),
                duration_ms=(call.t_end - call.t_start)
                if call.t_start is not None and call.t_end is not None else None,
                arguments_normalised=_json_text(call.input_norm),
                artifact_path=call.artifact_path,
                child_session_id=call.child_session_id,
                child_link=call.child_link,
                child_link_confidence=call.child_link_confidence,
                superseded=call.superseded,
                parent_call_id=call.parent_call_id,
                raw_approved_input=_json_text(call.raw_approved_input),
            )
        columns[index] = row
    return columns


def visit_rows(run: AgentuseRun, origins: list[ItemOrigin]) -> list[dict]:
    """One ``visits`` row per session of the tree (the root first, then subagents), with the
    item span its messages fill in the aioc record."""
    index_of = {v.session_id: i for i, v in enumerate(run.visits)}
    spans: dict[int, list[int]] = {}
    for k, origin in enumerate(origins):
        spans.setdefault(origin.visit_index, []).append(k)
    rows = []
    for i, v in enumerate(run.visits):
        span = spans.get(i, [])
        rows.append({
            "visit_index": i,
            "agent": v.agent_id,
            "entered_after_turn": None,
            "via_call_id": v.via_call_id,
            "transition": "initial" if i == 0 else "subagent",
            "request_count": 0,
            "first_turn": None,
            "last_turn": None,
            "item_start": span[0] if span else None,
            "item_end": span[-1] + 1 if span else None,
            "session_id": v.session_id,
            "parent_visit_index": index_of.get(v.parent_session_id or ""),
            "parent_link": v.parent_link,
            "link_confidence": v.link_confidence,
            "depth": v.depth,
            "status": v.status,
            "model": v.model,
            "tokens_input": v.tokens.get("input"),
            "tokens_output": v.tokens.get("output"),
            **message_columns(run, v),
        })
    return rows


def gate_rows(run: AgentuseRun) -> list[tuple[dict, str]]:
    """Gates as suspended proposals, each with the path of the part file it comes from ("" when
    none): ``await_human`` parts (kind ``approval_gate``; the decision is the reason, the
    reviewer's comment the public reason) and tool calls held for approval (kind
    ``tool_approval``; reason = the part's state). Resume tokens are left out."""
    agents = {v.session_id: v.agent_id for v in run.visits}
    paths = {c.part_id: c.rel_path for c in run.tool_calls}
    rows = []
    for i, g in enumerate(run.gates):
        payload = {k: v for k, v in (g.resume_payload or {}).items() if k not in _SECRET_KEYS}
        row = {
            "proposal_index": i,
            "turn": g.turn,
            "call_id": g.call_id,
            "kind": g.kind,
            "agent": agents.get(g.session_id),
            "tool_name": g.tool,
            "reason": g.decision or g.status,
            "public_reason": g.comment,
            "args_canonical": canonical_json(g.input) if g.input is not None else None,
            "timestamp_text": iso_ms(g.suspended_at or g.t_start),
            "metadata": dumps_json(_gate_metadata(g, payload)),
            "payload": dumps_json(g.input),
        }
        rows.append((row, paths.get(g.part_id, "")))
    return rows


def finding_rows(run: AgentuseRun) -> list[dict]:
    """The problems whose content was still used, as run findings (``agentuse.<code>``)."""
    return [{"code": f"agentuse.{p.code}", "message": p.reason, "path": p.rel_path}
            for p in run.problems if p.kept]


def _gate_metadata(gate: Any, payload: dict) -> dict:
    meta = {"status": gate.status, "reviewer": gate.reviewer, "resumePayload": payload}
    if gate.raw_approved_input is not None:
        meta["rawApprovedInput"] = gate.raw_approved_input
    if gate.superseded:
        meta["superseded"] = True
    return meta


def session_columns(visit: Visit) -> dict:
    """The ``runs`` columns of schema 030 that come from newer ``session.json`` fields:
    ``error_history``, ``verification(_status)``, ``owner_pid``, ``execution`` (the intervals)
    and ``execution_ms`` (their closed total), ``execution_budget``, ``channels``,
    ``dismissed_at_text`` and ``reviewed_at_text``. JSON columns hold JSON text."""
    extras = visit.extras
    intervals = extras.get("execution") or []
    closed = [
        (as_int(i.get("start")), as_int(i.get("end"))) for i in intervals if isinstance(i, dict)
    ]
    closed = [(a, b) for a, b in closed if a is not None and b is not None]
    verification = extras.get("verification") or {}
    return {
        "error_history": _json_text(extras.get("errorHistory")),
        "verification": _json_text(extras.get("verification")),
        "verification_status": as_str(verification.get("status")),
        "owner_pid": as_int(dig(extras, "owner", "pid")),
        "execution": _json_text(extras.get("execution")),
        "execution_ms": sum(b - a for a, b in closed) if closed else None,
        "execution_budget": _json_text(extras.get("executionBudget")),
        "channels": _json_text(extras.get("channels")),
        "dismissed_at_text": iso_ms(as_int(extras.get("dismissedAt"))),
        "reviewed_at_text": iso_ms(as_int(extras.get("reviewedAt"))),
    }


def message_columns(run: AgentuseRun, visit: Visit) -> dict:
    """The ``visits`` columns of schema 030 from the visit's messages: ``assistant_error`` (the
    last message's ``assistant.error``, JSON text) and ``assistant_summary``."""
    own = [m for m in run.messages if m.session_id == visit.session_id]
    errors = [m.error for m in own if m.error is not None]
    summaries = [m.summary for m in own if m.summary is not None]
    return {
        "assistant_error": _json_text(errors[-1]) if errors else None,
        "assistant_summary": any(summaries) if summaries else None,
    }


def _json_text(value: Any) -> str | None:
    return None if value is None else dumps_json(value)
