"""aioc ``extractToolCalls`` (docs/aioc-runrecord.md §4), byte-for-byte.

Example:
    >>> items = [
    ...     {"type": "tool_call_item", "callId": "c1", "name": "lookup", "arguments": {"b": 2, "a": 1}},
    ...     {"type": "tool_call_output_item", "callId": "c1", "output": {"ok": True}},
    ... ]
    >>> call = extract_tool_calls(items)[0]
    >>> call["turn"], call["hasOutput"], call["argsCanonicalJson"]
    (1, True, '{"a":1,"b":2}')
"""

from __future__ import annotations

from hashlib import sha256
from typing import Any

from recstore.canonical import canonical_bytes, canonical_json, sha256_text

__all__ = [
    "EMPTY_ARGS_HASH",
    "UNDEFINED",
    "extract_tool_calls",
    "locate_tool_calls",
    "output_canonical",
]

# H({}): the argsHash of an orphan output's synthetic call.
EMPTY_ARGS_HASH = sha256_text("{}")
# aioc canonicalizes JS `undefined` (an output item without an `output` key) as this string,
# so a missing output compares like this value.
UNDEFINED = "[undefined]"


def _new_call(call_id: Any, name: Any, arguments: dict[str, Any] | Any, turn: int | None) -> dict[str, Any]:
    # Canonical JSON escapes lone surrogates, so its UTF-8 is the text Node hashes: hashed as
    # printed, not encoded a second time (sha256_text).
    args_bytes = canonical_bytes(arguments)
    # Key order is aioc's object literal order; `turn` is absent (JS undefined) for orphans.
    call = {"callId": call_id, "name": name, "arguments": arguments, "hasOutput": False}
    if turn is not None:
        call["turn"] = turn
    call["argsCanonicalJson"] = args_bytes.decode("utf-8")
    call["argsHash"] = EMPTY_ARGS_HASH if args_bytes == b"{}" else sha256(args_bytes).hexdigest()
    return call


def extract_tool_calls(record_or_items: dict[str, Any] | list[Any]) -> list[dict[str, Any]]:
    """Tool calls of a JSON-form record (or its ``items``) exactly as aioc 0.2.8 extracts them.

    ``turn`` is the 1-based ordinal of the call over all ``tool_call_item`` entries (input history
    included), not the request turn. An output whose callId has no earlier call becomes an orphan
    (``name ""``, ``arguments {}``, no ``turn``). Outputs attach to the most recent call with the
    same callId. ``arguments`` and ``output`` are the record's own objects, not copies.
    """
    items = record_or_items if isinstance(record_or_items, list) else record_or_items["items"]
    return locate_tool_calls(items)[0]


def locate_tool_calls(items: list[Any]) -> tuple[list[dict[str, Any]], list[list[int | None]]]:
    """:func:`extract_tool_calls` plus, per call, ``[call item index, output item index]``
    (``None`` for an orphan's missing call or a dangling call's missing output)."""
    ordered: list[dict[str, Any]] = []
    positions: list[list[int | None]] = []
    by_id: dict[Any, int] = {}
    counter = 0
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "tool_call_item":
            counter += 1
            # Only a missing key becomes {}; an explicit null stays null.
            arguments = item["arguments"] if "arguments" in item else {}
            by_id[item.get("callId")] = len(ordered)
            ordered.append(_new_call(item.get("callId"), item.get("name"), arguments, counter))
            positions.append([index, None])
        elif kind == "tool_call_output_item":
            at = by_id.get(item.get("callId"))
            if at is None:
                at = by_id[item.get("callId")] = len(ordered)
                ordered.append(_new_call(item.get("callId"), "", {}, None))
                positions.append([None, None])
            call = ordered[at]
            positions[at][1] = index
            call["hasOutput"] = True
            if "output" in item:
                call["output"] = item["output"]
            else:  # JS assigns undefined, which JSON drops
                call.pop("output", None)
    return ordered, positions


def output_canonical(call: dict[str, Any]) -> str:
    """Canonical JSON of a call's output, with aioc's ``"[undefined]"`` for a missing one."""
    return canonical_json(call["output"] if "output" in call else UNDEFINED)
