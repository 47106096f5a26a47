"""aioc ``compareRunRecords`` (docs/aioc-runrecord.md §5), byte-for-byte.

Example:
    >>> a = {"response": "hi", "items": [], "policyDecisions": []}
    >>> compare_records(a, dict(a, response="hey"))["summary"]["sameFinalResponse"]
    False
    >>> compare_records(a, dict(a, response="hey"), include_sections=[])["equal"]
    True
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import orjson

from recstore.canonical import canonical_json
from recstore.records.toolcalls import UNDEFINED, extract_tool_calls

__all__ = ["SECTIONS", "canonical_equal", "compare_records", "resolve_sections", "utf16_length"]

SECTIONS = ("response", "toolCalls", "policy", "guardrails", "metadata")
_MISSING = object()


def resolve_sections(
    include_sections: Iterable[str] | None = None, exclude_sections: Iterable[str] | None = None
) -> set[str]:
    """The compared sections: ``include`` (``None`` = all five; ``[]`` = none) minus ``exclude``.
    Unknown names are ignored, as in aioc."""
    sections = set(SECTIONS) if include_sections is None else set(include_sections)
    sections.difference_update(exclude_sections or ())
    return sections


def utf16_length(text: str) -> int:
    """``String.prototype.length``: UTF-16 code units (astral characters count twice)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def canonical_equal(left: Any, right: Any) -> bool:
    """``canonical_json(left) == canonical_json(right)``, mostly without building either string.

    Equal sorted-key orjson bytes imply equal canonical JSON: orjson keeps ``true`` apart from
    ``1`` and writes every other value deterministically, so only values it cannot write (ints
    beyond 64 bits, lone surrogates) or that differ in its bytes but may not canonically
    (``1`` vs ``1.0``, rounded big ints, ``__proto__`` keys) take the exact path.
    """
    if left is right:
        return True
    try:
        if orjson.dumps(left, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
            right, option=orjson.OPT_SORT_KEYS
        ):
            return True
    except TypeError:
        pass
    if _surely_differ(left, right):
        return False
    return canonical_json(left) == canonical_json(right)


_SCALAR_TYPES = (str, bool, type(None))


def _surely_differ(left: Any, right: Any) -> bool:
    """True when the values have a different string, boolean, null or shape at one path, which
    canonical JSON always keeps apart; False when undecided (only numbers can look different in
    Python and print alike, e.g. ``1``/``1.0`` or ints that round to one double)."""
    if type(left) is dict and type(right) is dict:
        if left.keys() != right.keys() and left.keys() - {"__proto__"} != right.keys() - {
            "__proto__"
        }:
            return True
        return any(
            key != "__proto__" and key in right and _surely_differ(value, right[key])
            for key, value in left.items()
        )
    if type(left) is list and type(right) is list:
        return len(left) != len(right) or any(map(_surely_differ, left, right))
    if isinstance(left, _SCALAR_TYPES) and isinstance(right, _SCALAR_TYPES):
        return left is not right and left != right
    # number vs number is undecided; so is None vs an int too big for a double (both "null")
    numbers = (int, float)
    left_num = isinstance(left, numbers) and not isinstance(left, bool)
    right_num = isinstance(right, numbers) and not isinstance(right, bool)
    if left_num or right_num:
        return not (left_num and right_num) and left is not None and right is not None
    return True


def _difference(path: str, kind: str, left: Any = _MISSING, right: Any = _MISSING) -> dict[str, Any]:
    # aioc leaves JS-undefined sides out of the JSON, so an absent value has no key at all.
    diff: dict[str, Any] = {"path": path, "kind": kind}
    if left is not _MISSING:
        diff["left"] = left
    if right is not _MISSING:
        diff["right"] = right
    return diff


def _compare_positional(path: str, left: list[Any], right: list[Any], differences: list[dict[str, Any]]) -> bool:
    """aioc ``compareArraysByCanonical``: whole entries, timestamps and callIds included."""
    same = len(left) == len(right)
    if not same:
        differences.append(_difference(f"{path}.length", "mismatch", len(left), len(right)))
    for index in range(max(len(left), len(right))):
        if index >= len(left):
            same = False
            differences.append(_difference(f"{path}[{index}]", "missing_left", right=right[index]))
        elif index >= len(right):
            same = False
            differences.append(_difference(f"{path}[{index}]", "missing_right", left=left[index]))
        elif not canonical_equal(left[index], right[index]):
            same = False
            differences.append(
                _difference(f"{path}[{index}]", "mismatch", left[index], right[index])
            )
    return same


def _tool_call_metrics(calls_a: list[dict[str, Any]], calls_b: list[dict[str, Any]]) -> dict[str, int]:
    counts_a = Counter(f"{c['name']}\x1f{c['argsHash']}" for c in calls_a)
    counts_b = Counter(f"{c['name']}\x1f{c['argsHash']}" for c in calls_b)
    matched = sum((counts_a & counts_b).values())
    return {
        "toolCallsA": len(calls_a),
        "toolCallsB": len(calls_b),
        "matchedToolCalls": matched,
        "missingToolCalls": len(calls_a) - matched,
        "extraToolCalls": len(calls_b) - matched,
    }


def _compare_tool_calls(calls_a: list[dict[str, Any]], calls_b: list[dict[str, Any]], differences: list[dict[str, Any]]) -> bool:
    """Positional comparison; ``hasOutput`` and ``output`` diffs leave the shape flag true."""
    same_shape = len(calls_a) == len(calls_b)
    if not same_shape:
        differences.append(_difference("toolCalls.length", "mismatch", len(calls_a), len(calls_b)))
    for index in range(max(len(calls_a), len(calls_b))):
        path = f"toolCalls[{index}]"
        if index >= len(calls_a):
            same_shape = False
            differences.append(_difference(path, "missing_left", right=calls_b[index]))
            continue
        if index >= len(calls_b):
            same_shape = False
            differences.append(_difference(path, "missing_right", left=calls_a[index]))
            continue
        a, b = calls_a[index], calls_b[index]
        for key in ("name", "argsHash"):
            if a[key] != b[key]:
                same_shape = False
                differences.append(_difference(f"{path}.{key}", "mismatch", a[key], b[key]))
        if a["hasOutput"] != b["hasOutput"]:
            differences.append(
                _difference(f"{path}.hasOutput", "mismatch", a["hasOutput"], b["hasOutput"])
            )
        if (
            a["hasOutput"]
            and b["hasOutput"]
            and not canonical_equal(a.get("output", UNDEFINED), b.get("output", UNDEFINED))
        ):
            differences.append(
                _difference(
                    f"{path}.output",
                    "mismatch",
                    a.get("output", _MISSING),
                    b.get("output", _MISSING),
                )
            )
    return same_shape


def compare_records(
    left: dict[str, Any],
    right: dict[str, Any],
    include_sections: Iterable[str] | None = None,
    exclude_sections: Iterable[str] | None = None,
    response_match_mode: str = "exact",
) -> dict[str, Any]:
    """Compare two JSON-form RunRecords exactly as aioc 0.2.8 ``compareRunRecords`` does.

    Returns ``{equal, summary, metrics, differences}`` with aioc's key names and difference order.
    Metrics are computed whatever the sections; a summary flag stays true when its section is not
    compared. ``include_sections=[]`` compares nothing (always equal), unlike ``None`` (all).
    The response text is compared only when ``response_match_mode`` is ``"exact"`` (aioc's one
    mode); any other value skips it, as aioc does.
    """
    sections = resolve_sections(include_sections, exclude_sections)
    differences: list[dict[str, Any]] = []
    calls_a = extract_tool_calls(left)
    calls_b = extract_tool_calls(right)
    metrics = {
        "responseLengthA": utf16_length(left["response"]),
        "responseLengthB": utf16_length(right["response"]),
        **_tool_call_metrics(calls_a, calls_b),
    }

    same_response = True
    if "response" in sections and response_match_mode == "exact":
        if left["response"] != right["response"]:
            same_response = False
            differences.append(
                _difference("response", "mismatch", left["response"], right["response"])
            )
    same_shape = True
    if "toolCalls" in sections:
        same_shape = _compare_tool_calls(calls_a, calls_b, differences)
    same_policy = True
    if "policy" in sections:
        same_policy = _compare_positional(
            "policyDecisions", left["policyDecisions"], right["policyDecisions"], differences
        )
    same_guardrails = True
    if "guardrails" in sections:
        same_guardrails = _compare_positional(
            "guardrailDecisions",
            _or_empty(left.get("guardrailDecisions"), []),
            _or_empty(right.get("guardrailDecisions"), []),
            differences,
        )
    if "metadata" in sections:
        if not canonical_equal(
            _or_empty(left.get("metadata"), {}), _or_empty(right.get("metadata"), {})
        ):
            differences.append(
                _difference(
                    "metadata",
                    "mismatch",
                    left.get("metadata", _MISSING),
                    right.get("metadata", _MISSING),
                )
            )

    return {
        "equal": not differences,
        "summary": {
            "sameFinalResponse": same_response,
            "sameToolCallShape": same_shape,
            "samePolicyDecisions": same_policy,
            "sameGuardrailDecisions": same_guardrails,
        },
        "metrics": metrics,
        "differences": differences,
    }


def _or_empty(value: Any, empty: Any) -> Any:
    """JS ``value ?? empty``: absent and null both fall back."""
    return empty if value is None else value
