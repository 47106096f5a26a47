"""aioc's replay lines: ``{sourceRunId, mode, replayStats, replayRunRecord, error?}``, one per
replay, as aioc's replay tooling writes them (and recstore's fixtures hold).

:func:`replay_line` tells such a line from a RunRecord (it has ``replayRunRecord`` and no
``runId``) and validates it: the replay's RunRecord is validated as any record is, with paths
under ``$.replayRunRecord``. The store keeps the record as a run of its own and the rest as its
``replay_of`` lineage row (``recstore.store.prepare``; docs/replay.md "Replays from aioc").

Example:
    >>> line = replay_line({"sourceRunId": "s1", "mode": "strict", "replayStats": None,
    ...                     "replayRunRecord": None, "error": {"name": "E", "message": "no"}})
    Traceback (most recent call last):
    ...
    recstore.errors.InputError: at $.replayRunRecord: the replay of s1 failed before it made a \
run record (E: no), so there is no run to store
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recstore.canonical import json_type_name
from recstore.errors import InputError
from recstore.formats.aioc import validate_run_record

__all__ = ["RECORD_FIELD", "ReplayLine", "replay_line"]

RECORD_FIELD = "replayRunRecord"


@dataclass(frozen=True)
class ReplayLine:
    """A valid replay line: the replay's record, the run it replays, and how it was replayed."""

    record: dict
    source_run_id: str
    mode: str | None
    replay_stats: dict | None
    error: dict | None  # aioc's {name, message} when the replay failed

    def lineage_detail(self) -> dict:
        """The ``replay_of`` detail (the keys a ``recstore replay`` row has, as far as a line
        says them; ``status`` is None: recstore did not judge the replay)."""
        reason = None
        if self.error is not None:
            reason = ": ".join(str(self.error[k]) for k in ("name", "message")
                               if self.error.get(k) is not None) or None
        return {
            "origin": "aioc replay line",
            "mode": self.mode,
            "status": None,
            "reason": reason,
            "replayStats": self.replay_stats,
            "error": self.error,
            "calls": [],
        }


def replay_line(value: Any, source: str | None = None) -> ReplayLine | None:
    """The replay line ``value`` is, or None when it is not one (a RunRecord, anything else).

    Raises:
        InputError: it is a replay line but not a valid one (naming the JSON path).
    """
    if not isinstance(value, dict) or RECORD_FIELD not in value or "runId" in value:
        return None
    source_run_id = value.get("sourceRunId")
    if not isinstance(source_run_id, str) or not source_run_id:
        got = "required field missing" if "sourceRunId" not in value else (
            f"expected a non-empty string, got {json_type_name(source_run_id)}"
            if not isinstance(source_run_id, str) else "expected a non-empty string")
        raise InputError(got, source=source, path="$.sourceRunId")
    mode = _optional(value, "mode", str, "a string", source)
    stats = _optional(value, "replayStats", dict, "an object", source)
    error = _optional(value, "error", dict, "an object", source)
    record = value[RECORD_FIELD]
    if record is None and error is not None:
        what = ": ".join(str(error[k]) for k in ("name", "message") if error.get(k) is not None)
        raise InputError(
            f"the replay of {source_run_id} failed before it made a run record ({what}), "
            "so there is no run to store", source=source, path=f"$.{RECORD_FIELD}")
    try:
        validate_run_record(record, source=source)
    except InputError as exc:
        raise InputError(
            exc.problem, source=source, path=_nested(exc.path),
            problems=exc.problems and [{**p, "path": _nested(p["path"])} for p in exc.problems],
        ) from None
    return ReplayLine(record, source_run_id, mode, stats, error)


def _optional(value: dict, name: str, kind: type, what: str, source: str | None):
    found = value.get(name)
    if found is not None and not isinstance(found, kind):
        raise InputError(f"expected {what} or null, got {json_type_name(found)}",
                         source=source, path=f"$.{name}")
    return found


def _nested(path: str | None) -> str:
    """A path inside the replay's record as a path inside the line."""
    return f"$.{RECORD_FIELD}" + (path or "$")[1:]
