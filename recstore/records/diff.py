"""Differences between two runs' parts as a person reads them: an aligned tool-call sequence
(an edit script), a word-level text diff and a path-level JSON value diff.

These are for reports, not for aioc parity: ``compare_records`` decides *whether* runs differ
(position by position, as aioc does); these functions show *how*.

Example:
    >>> a = [{"name": "search", "argsHash": "1"}, {"name": "refund", "argsHash": "2"}]
    >>> b = [{"name": "search", "argsHash": "1"}, {"name": "lookup", "argsHash": "3"},
    ...      {"name": "refund", "argsHash": "4"}]
    >>> [(s.op, s.a, s.b) for s in align_calls(a, b)]
    [('matched', 0, 0), ('added', None, 1), ('changed', 1, 2)]
    >>> word_diff("the cat sat", "the dog sat")
    [('equal', 'the '), ('delete', 'cat'), ('insert', 'dog'), ('equal', ' sat')]
    >>> value_diff({"amount": 10, "to": "x"}, {"amount": 12})
    [('$.amount', 'changed', '10', '12'), ('$.to', 'removed', '"x"', None)]
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from recstore.canonical import canonical_json

__all__ = ["CallStep", "align_calls", "value_diff", "word_diff"]

# Above this many cells the quadratic edit-distance table gives way to difflib's matching
# blocks (a longest-matching-block heuristic, linear-ish), aligned again inside each block.
_MAX_CELLS = 40_000
_WORDS = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)


@dataclass(frozen=True)
class CallStep:
    """One step of an alignment: ``matched`` (same name and arguments), ``changed`` (same name,
    other arguments), ``added`` (only in ``b``) or ``removed`` (only in ``a``); ``a``/``b`` are
    indexes into the two sequences (``None`` on the side the call is missing from)."""

    op: str
    a: int | None
    b: int | None


def _key(call: dict[str, Any]) -> tuple[Any, Any]:
    return call.get("name"), call.get("argsHash")


def align_calls(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> list[CallStep]:
    """A minimal edit script from tool calls ``a`` to ``b`` (extract_tool_calls dicts).

    Cost: a matched call 0, a changed call (same name, other ``argsHash``) 1, an added or
    removed call 1 each, so a call whose arguments changed is shown as one changed step, never
    as a removal plus an addition. Ties prefer matching, then changing, then removing first.
    """
    ka, kb = [_key(c) for c in a], [_key(c) for c in b]
    head = 0
    while head < len(ka) and head < len(kb) and ka[head] == kb[head]:
        head += 1
    tail = 0
    while tail < len(ka) - head and tail < len(kb) - head and ka[-1 - tail] == kb[-1 - tail]:
        tail += 1
    steps = [CallStep("matched", i, i) for i in range(head)]
    steps += _align_middle(ka, kb, head, len(ka) - tail, head, len(kb) - tail)
    steps += [CallStep("matched", len(ka) - tail + i, len(kb) - tail + i) for i in range(tail)]
    return steps


def _align_middle(ka: list[Any], kb: list[Any], a0: int, a1: int, b0: int, b1: int) -> list[CallStep]:
    if (a1 - a0) * (b1 - b0) <= _MAX_CELLS:
        return _edit_script(ka, kb, a0, a1, b0, b1)
    out: list[CallStep] = []
    matcher = difflib.SequenceMatcher(None, ka[a0:a1], kb[b0:b1], autojunk=False)
    for tag, i0, i1, j0, j1 in matcher.get_opcodes():
        if tag == "equal":
            out += [CallStep("matched", a0 + i0 + k, b0 + j0 + k) for k in range(i1 - i0)]
        elif (i1 - i0) * (j1 - j0) <= _MAX_CELLS:
            out += _edit_script(ka, kb, a0 + i0, a0 + i1, b0 + j0, b0 + j1)
        else:  # a huge block with nothing in common: removals, then additions
            out += [CallStep("removed", a0 + i, None) for i in range(i0, i1)]
            out += [CallStep("added", None, b0 + j) for j in range(j0, j1)]
    return out


def _edit_script(ka: list[Any], kb: list[Any], a0: int, a1: int, b0: int, b1: int) -> list[CallStep]:
    """Edit distance table over ``ka[a0:a1]`` and ``kb[b0:b1]``, then the path back."""
    n, m = a1 - a0, b1 - b0
    cost = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        cost[i][m] = n - i
    for j in range(m + 1):
        cost[n][j] = m - j
    for i in range(n - 1, -1, -1):
        row, below = cost[i], cost[i + 1]
        name_a = ka[a0 + i]
        for j in range(m - 1, -1, -1):
            best = min(below[j], row[j + 1]) + 1
            other = kb[b0 + j]
            if other[0] == name_a[0]:
                best = min(best, below[j + 1] + (other != name_a))
            row[j] = best
    steps: list[CallStep] = []
    i = j = 0
    while i < n or j < m:
        here = cost[i][j]
        if i < n and j < m and ka[a0 + i][0] == kb[b0 + j][0]:
            same = ka[a0 + i] == kb[b0 + j]
            if here == cost[i + 1][j + 1] + (not same):
                steps.append(CallStep("matched" if same else "changed", a0 + i, b0 + j))
                i, j = i + 1, j + 1
                continue
        if i < n and here == cost[i + 1][j] + 1:
            steps.append(CallStep("removed", a0 + i, None))
            i += 1
        else:
            steps.append(CallStep("added", None, b0 + j))
            j += 1
    return steps


def word_diff(a: str, b: str) -> list[tuple[str, str]]:
    """``(op, text)`` segments turning ``a`` into ``b`` word by word: ``equal``, ``delete``
    (only in ``a``) and ``insert`` (only in ``b``); whitespace and punctuation are words too,
    so joining the equal and delete texts gives ``a`` back, equal and insert gives ``b``."""
    wa, wb = _WORDS.findall(a), _WORDS.findall(b)
    out: list[tuple[str, str]] = []

    def emit(op: str, words: list[str]) -> None:
        if not words:
            return
        text = "".join(words)
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))

    matcher = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
    for tag, i0, i1, j0, j1 in matcher.get_opcodes():
        if tag == "equal":
            emit("equal", wa[i0:i1])
        else:
            emit("delete", wa[i0:i1])
            emit("insert", wb[j0:j1])
    return out


def value_diff(a: Any, b: Any, path: str = "$", limit: int = 50) -> list[tuple[str, str, str | None,
                                                                                str | None]]:
    """``(path, kind, left, right)`` for each leaf where JSON values ``a`` and ``b`` differ:
    ``changed``, ``added`` (only in ``b``) or ``removed``; values as canonical JSON text.
    Objects are compared key by key, arrays position by position; at most ``limit`` rows."""
    out: list[tuple[str, str, str | None, str | None]] = []
    _walk(a, b, path, out, limit)
    return out


def _children(a: Any, b: Any, path: str) -> Iterator[tuple[str, bool, bool, Any, Any]]:
    """``(path, in a, in b, a's value, b's value)`` per key of two objects or index of two
    arrays."""
    if isinstance(a, dict):
        for key in list(a) + [k for k in b if k not in a]:
            sub = f"{path}.{key}" if re.fullmatch(r"[A-Za-z_]\w*", key) else \
                f"{path}[{canonical_json(key)}]"
            yield sub, key in a, key in b, a.get(key), b.get(key)
    else:
        for i in range(max(len(a), len(b))):
            yield f"{path}[{i}]", i < len(a), i < len(b), a[i] if i < len(a) else None, \
                b[i] if i < len(b) else None


def _walk(a: Any, b: Any, path: str, out: list[Any], limit: int) -> None:
    if len(out) >= limit:
        return
    if not (isinstance(a, dict) and isinstance(b, dict) or isinstance(a, list)
            and isinstance(b, list)):
        left, right = canonical_json(a), canonical_json(b)
        if left != right:
            out.append((path, "changed", left, right))
        return
    for sub, in_a, in_b, va, vb in _children(a, b, path):
        if not in_b:
            out.append((sub, "removed", canonical_json(va), None))
        elif not in_a:
            out.append((sub, "added", None, canonical_json(vb)))
        else:
            _walk(va, vb, sub, out, limit)
        if len(out) >= limit:
            return
