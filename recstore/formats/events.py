"""Decompose an aioc RunRecord into typed events, and reassemble it.

A record becomes ``run_started`` (its opening fields plus the original top-level key order),
one event per element of each record array (``item_appended``, ``prompt_snapshot``,
``request_fingerprint``, ``policy_decision``, ``guardrail_decision``, ``suspended_proposal``)
and ``run_finished`` (outcome fields). Top-level fields recstore does not know are kept in
``run_started``. :func:`events_to_record` rebuilds a record canonical-equal to the input with the
original key order, including empty arrays and keys whose values are not arrays.

Example:
    >>> events = record_to_events({"runId": "r", "items": [{"type": "message"}], "status": "ok"})
    >>> [e.type for e in events]
    ['run_started', 'item_appended', 'run_finished']
    >>> events_to_record(events)
    {'runId': 'r', 'items': [{'type': 'message'}], 'status': 'ok'}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from recstore.formats.jsontext import dumps_json_bytes, dumps_json_lean, int32, loads_json

__all__ = [
    "ARRAY_EVENT_TYPES", "FAMILY_OF", "Event", "event_count", "events_to_record", "record_to_events",
]

# record array key -> event type of its elements, in the order aioc writes the arrays
ARRAY_EVENT_TYPES: dict[str, str] = {
    "items": "item_appended",
    "promptSnapshots": "prompt_snapshot",
    "requestFingerprints": "request_fingerprint",
    "policyDecisions": "policy_decision",
    "guardrailDecisions": "guardrail_decision",
    "suspendedProposals": "suspended_proposal",
}
_ARRAY_KEY_OF = {etype: key for key, etype in ARRAY_EVENT_TYPES.items()}
_RECORD_EVENT_TYPES = frozenset({"run_started", "run_finished", *_ARRAY_KEY_OF})
# How the store groups event rows physically within a batch (0: run-level events, 1: items,
# 2: other record entries, 3: agentuse files), so a scan of one kind skips the others.
FAMILY_OF: dict[str, int] = {
    "item_appended": 1,
    **{etype: 2 for etype in ARRAY_EVENT_TYPES.values() if etype != "item_appended"},
    "agentuse_file": 3,
}

# Fields only known when the run ends (aioc takes them at emission); all others open the run.
_FINISH_FIELDS = frozenset(
    {
        "completedAt",
        "status",
        "response",
        "errorName",
        "errorMessage",
        "contextSnapshot",
        "contextRedacted",
        "executionRecordingStatus",
    }
)


class Event(NamedTuple):
    """One event of a stream: ``idx`` is the element's position in its record array.
    ``payload_text`` is JSON text: a ``str`` or its UTF-8 ``bytes`` (:func:`record_to_events`
    makes ``bytes``, or, consuming a big record, whichever is smaller: see ``dumps_json_lean``)."""

    type: str
    idx: int | None
    turn: int | None
    payload_text: str | bytes


def event_count(record: dict[str, Any]) -> int:
    """How many events :func:`record_to_events` makes of ``record``."""
    return 2 + sum(
        len(value) for key, value in record.items()
        if key in ARRAY_EVENT_TYPES and isinstance(value, list)
    )


def record_to_events(record: dict[str, Any], consume: bool = False) -> list[Event]:
    """The events of one record, in stream order (run_started first, run_finished last), their
    payloads UTF-8 ``bytes``; ``consume``: each array element is replaced by None in ``record``
    once its event is made (a big record's parsed elements go as their payloads come), and each
    payload is a ``str`` where that takes less memory."""
    dumps = dumps_json_lean if consume else dumps_json_bytes
    start: dict[str, Any] = {}
    finish: dict[str, Any] = {}
    array_events: list[Event] = []
    for key, value in record.items():
        etype = ARRAY_EVENT_TYPES.get(key)
        if etype is not None and isinstance(value, list):
            for i, element in enumerate(value):
                turn = int32(element.get("turn")) if type(element) is dict else None
                array_events.append(Event(etype, i, turn, dumps(element)))
                if consume:
                    value[i] = element = None
        elif key in _FINISH_FIELDS:
            finish[key] = value
        else:
            start[key] = value
    started = Event("run_started", None, None, dumps({"keyOrder": list(record), "fields": start}))
    finished = Event("run_finished", None, None, dumps({"fields": finish}))
    return [started, *array_events, finished]


def events_to_record(events: Iterable[Event | tuple[str, str]]) -> dict[str, Any]:
    """Reassemble a record from its events (or ``(type, payload_text)`` rows) in stream order."""
    key_order: list[str] = []
    fields: dict[str, Any] = {}
    arrays: dict[str, list[Any]] = {}
    for event in events:
        etype, payload_text = (
            (event.type, event.payload_text) if isinstance(event, Event) else event
        )
        if etype not in _RECORD_EVENT_TYPES:
            continue  # tags_changed and the like describe the stream, not the record
        payload = loads_json(payload_text)
        if etype == "run_started":
            key_order = payload["keyOrder"]
            fields.update(payload["fields"])
        elif etype == "run_finished":
            fields.update(payload["fields"])
        else:
            arrays.setdefault(_ARRAY_KEY_OF[etype], []).append(payload)
    record: dict[str, Any] = {}
    for key in key_order:
        record[key] = fields[key] if key in fields else arrays.get(key, [])
    return record
