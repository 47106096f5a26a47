"""The agentuse-only projection columns of schema 030 (NULL for aioc runs): per run from the
newer ``session.json`` fields, per visit from its messages."""

from __future__ import annotations

from typing import Any

from recstore.formats.agentuse.fields import as_int, as_str, dig
from recstore.formats.agentuse.model import AgentuseRun, Visit
from recstore.formats.agentuse.record import iso_ms
from recstore.formats.jsontext import dumps_json


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
