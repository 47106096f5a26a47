"""The tool tape: recorded tool outputs of a source run, served to a replay (aioc §6.6).

Matching rules (aioc ``buildRecordedToolQueues``):

* calls come from ``extract_tool_calls(source)`` over **all** items, input history included, so
  an output recorded in an earlier conversation turn can satisfy a replay call;
* only calls with an output and a non-empty name count (orphans are dropped);
* an *envelope-like* output (a non-array object whose ``status`` is ``ok``, ``denied`` or
  ``approval_required`` and which has the keys ``code``, ``publicReason`` and ``data``) is
  unwrapped one level when ``ok`` and skipped otherwise; anything else is a legacy raw output and
  is served as is;
* the key is ``name + "\\x1f" + argsHash`` and each key's queue is FIFO in record order, shared
  by all agents.

Reproduction rules (:data:`REPRODUCE`, used by ``--from-source``) differ in two places, both
because aioc's rules read a JSON record and so cannot reproduce it:

* only the source's *emitted* calls are on the tape: its input-history calls were served to the
  earlier runs of the conversation, and letting them serve again hands a call another call's
  output whenever a key repeats;
* an ``ok`` envelope whose ``data`` key is missing (a tool that returned JS ``undefined``; JSON
  drops the key) serves :data:`~recstore.runtime.ABSENT`, so the replay output keeps ``data``
  absent. aioc itself treats that object as a legacy raw output and wraps it again (see the
  double-wrapped outputs in ``corpus-dev/corpus-replays.ndjson.gz``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from recstore.records import input_scope, locate_tool_calls
from recstore.runtime import ABSENT

__all__ = ["AIOC", "REPRODUCE", "TapeEntry", "TapeRules", "ToolTape", "build_tape", "tape_key"]

_ENVELOPE_STATUSES = frozenset({"ok", "denied", "approval_required"})
_ENVELOPE_KEYS = ("code", "publicReason", "data")


@dataclass(frozen=True)
class TapeRules:
    """Which recorded calls go on the tape and how an ``ok`` envelope without ``data`` is served."""

    include_history: bool = True
    keep_absent_data: bool = False


AIOC = TapeRules()
REPRODUCE = TapeRules(include_history=False, keep_absent_data=True)


def tape_key(name: str, args_hash: str) -> str:
    """The queue key of a call: tool name and argsHash joined by U+001F."""
    return f"{name}\x1f{args_hash}"


@dataclass(frozen=True)
class TapeEntry:
    """One recorded output that a replay call may consume, with where it came from."""

    name: str
    args_hash: str
    args_canonical_json: str
    value: Any  # what the tool wrapper returns; ABSENT keeps an envelope's data absent
    source_run_id: str
    call_id: Any
    call_item_index: int | None
    output_item_index: int

    @property
    def key(self) -> str:
        return tape_key(self.name, self.args_hash)

    def provenance(self) -> dict:
        """JSON form of where this entry came from."""
        return {
            "sourceRunId": self.source_run_id,
            "callId": self.call_id,
            "callItemIndex": self.call_item_index,
            "outputItemIndex": self.output_item_index,
        }


def is_envelope_like(output: Any) -> bool:
    """aioc's test for a tool result envelope (all four keys present, known status)."""
    return (
        isinstance(output, dict)
        and output.get("status") in _ENVELOPE_STATUSES
        and all(key in output for key in _ENVELOPE_KEYS)
    )


def _is_ok_without_data(output: Any) -> bool:
    return (
        isinstance(output, dict)
        and output.get("status") == "ok"
        and "data" not in output
        and "code" in output
        and "publicReason" in output
    )


def _served_value(output: Any, rules: TapeRules) -> tuple[bool, Any]:
    """(replayable, value) for a recorded output under ``rules``."""
    if rules.keep_absent_data and _is_ok_without_data(output):
        return True, ABSENT
    if is_envelope_like(output):
        if output["status"] != "ok":
            return False, None
        return True, output["data"]
    return True, output


@dataclass
class ToolTape:
    """FIFO queues of recorded outputs keyed by :func:`tape_key`."""

    queues: dict[str, deque[TapeEntry]]
    recorded_tool_calls: int
    rules: TapeRules = field(default=AIOC)

    def take(self, name: str, args_hash: str) -> TapeEntry | None:
        """Pop the oldest entry recorded for this call, or ``None`` on a miss."""
        queue = self.queues.get(tape_key(name, args_hash))
        if not queue:
            return None
        return queue.popleft()

    def remaining(self) -> list[TapeEntry]:
        """Entries no replay call consumed, in record order."""
        left = [entry for queue in self.queues.values() for entry in queue]
        return sorted(left, key=lambda entry: entry.output_item_index)

    def __len__(self) -> int:
        return sum(len(queue) for queue in self.queues.values())


def build_tape(source: dict, rules: TapeRules = AIOC) -> ToolTape:
    """The tool tape of a JSON-form source record (see the module docstring for the rules)."""
    items = source.get("items") or []
    calls, positions = locate_tool_calls(items)
    first_emitted = 0
    if not rules.include_history:
        first_emitted = input_scope(source).count or 0
    run_id = source.get("runId")
    queues: dict[str, deque[TapeEntry]] = {}
    recorded = 0
    for call, (call_index, output_index) in zip(calls, positions, strict=True):
        if not call["hasOutput"]:
            continue
        recorded += 1  # aioc counts orphans, handoffs and denied envelopes too
        if call["name"] == "" or call_index is None or call_index < first_emitted:
            continue
        replayable, value = _served_value(call.get("output", ABSENT), rules)
        if not replayable:
            continue
        entry = TapeEntry(
            name=call["name"],
            args_hash=call["argsHash"],
            args_canonical_json=call["argsCanonicalJson"],
            value=value,
            source_run_id=run_id,
            call_id=call["callId"],
            call_item_index=call_index,
            output_item_index=output_index,
        )
        queues.setdefault(entry.key, deque()).append(entry)
    return ToolTape(queues=queues, recorded_tool_calls=recorded, rules=rules)
