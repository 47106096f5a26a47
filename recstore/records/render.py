"""Readable text for an analysis (``recstore inspect``/``show``) and a comparison
(``recstore compare``), made :func:`printable`: control characters and lone surrogates are
shown as escapes (``\\x1b``, ``\\udXXX``).

Example:
    >>> rec = {"runId": "r1", "status": "completed", "agentName": "A", "response": "hi",
    ...        "items": [], "requestFingerprints": [], "promptSnapshots": [], "policyDecisions": []}
    >>> from recstore.records import analyze
    >>> print(render_analysis(analyze(rec)).splitlines()[0])
    run r1  completed  agent A
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recstore.records.structure import RecordAnalysis, ToolCallJoin

__all__ = ["clip", "printable", "render_analysis", "render_comparison", "visible"]

# What a terminal could act on or that hides text: C0 and C1 controls (ESC starts colour,
# title and clear-screen sequences), DEL, bidirectional overrides and isolates, line and
# paragraph separators, and lone surrogates (not printable as UTF-8).
_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
    "\ud800-\udfff]"
)
_PREVIEW = 72
# Characters a terminal shows as blank or not at all, so two values that differ only in them
# would look the same: NBSP and the other Unicode space separators, zero-width characters and
# the BOM (ASCII spaces stay as they are: the quotes around a string show where it ends).
_INVISIBLE = re.compile("[\u00a0\u1680\u2000-\u200d\u202f\u205f\u2060\u3000\ufeff]")


def printable(text: str, keep: str = "") -> str:
    """``text`` safe to print on a terminal: every control or direction-changing character
    except those in ``keep`` is shown as an escape (``\\x1b``, ``\\u202e``), so stored
    strings cannot retitle, clear or recolour the screen.

    >>> printable("ok\\x1b]0;pwned\\x07 \\u202eevil\\nnext", keep="\\n")
    'ok\\\\x1b]0;pwned\\\\x07 \\\\u202eevil\\nnext'
    """

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _UNPRINTABLE.sub(escape, text)


def clip(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` terminal cells (a CJK character is two), ending in
    ``…`` when cut; one line stays one line.

    >>> clip("handoff_to_agent", 8), clip("研究 Agent", 5), clip("ok", 8)
    ('handoff…', '研究…', 'ok')
    """
    from rich.cells import cell_len, get_character_cell_size

    if cell_len(text) <= width:
        return text
    room, end = width - 1, 0
    for char in text:
        size = get_character_cell_size(char)
        if size > room:
            break
        room -= size
        end += 1
    return text[:end] + "…" if width > 0 else ""


def _preview(value: Any) -> str:
    from recstore.jsonout import dumps, escape_surrogates

    text = value if isinstance(value, str) else dumps(value, indent=None)
    text = escape_surrogates(text).replace("\n", "\\n")
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def _interval(start: int | None, end: int | None) -> str:
    return "no items" if start is None else f"items[{start}:{end}]"


def _turns(turns: list[Any]) -> str:
    if not turns:
        return "no requests"
    return ("turn " if len(turns) == 1 else "turns ") + ",".join(str(t) for t in turns)


def _call_line(join: ToolCallJoin) -> str:
    call = join.call
    ordinal = call.get("turn", "-")
    where = (
        "input history"
        if join.in_input
        else (
            f"turn {join.request_turn} · {join.agent}"
            if join.request_turn is not None
            else "no request"
        )
    )
    status = join.envelope_status or "no output"
    if join.envelope_code is not None:
        status += f" ({join.envelope_code})"
    parts = [
        f"  #{ordinal:<3} {call.get('name') or '(orphan output)'}",
        f"[{call.get('callId')}]",
        where,
        status,
    ]
    if join.decision is not None:
        parts.append(f"policy {join.decision}")
    if join.is_handoff:
        parts.append(f"→ {join.handoff_target if join.handoff_target is not None else '?'}")
    parts.append(f"args {_preview(call.get('arguments'))}")
    return "  ".join(parts)


def _decision_lines(analysis: RecordAnalysis) -> list[str]:
    lines = []
    for d in analysis.policy_decisions:
        e = d.entry
        raw = e.get("resource")
        resource: dict[str, Any] = raw if isinstance(raw, dict) else {}
        joined = (
            f"call #{analysis.tool_calls[d.tool_call_index].call.get('turn', '-')}"
            if d.tool_call_index is not None
            else "no call"
        )
        lines.append(
            f"  policy[{d.index}]  turn {d.turn}  {resource.get('kind')} {resource.get('name')}: "
            f"{e.get('decision')} ({e.get('reason')})  {joined}"
        )
    for d in analysis.guardrail_decisions:
        e = d.entry
        reason = f" ({e['reason']})" if e.get("reason") is not None else ""
        lines.append(
            f"  guardrail[{d.index}]  turn {d.turn}  {e.get('guardrailName')}: {e.get('decision')}{reason}"
        )
    for d in analysis.suspended_proposals:
        e = d.entry
        lines.append(
            f"  proposal[{d.index}]  turn {d.turn}  {e.get('kind')} [{e.get('callId')}] awaiting approval"
            f" ({e.get('reason')})"
        )
    return lines


def render_analysis(analysis: RecordAnalysis, width: int | None = None) -> str:
    """A readable summary of one record: visits, requests with their item intervals, tool calls
    with envelope status, handoffs, decisions and findings. With a ``width`` (a terminal's),
    each tool call's line is cut to it with ``…`` (its arguments go first) rather than wrap."""
    a = analysis
    head = f"run {a.run_id}  {a.status}  agent {a.agent_name}"
    if a.initial_agent != a.agent_name:
        head += f" (started as {a.initial_agent})"
    scope = (
        f"input scope {a.scope.count} of {a.item_count} items (from {a.scope.source})"
        if a.scope.source
        else f"input scope unknown ({a.item_count} items)"
    )
    if a.execution_recording_status is not None:
        scope += f"  executionRecordingStatus {a.execution_recording_status}"
    lines = [head, scope, "", f"visits ({len(a.visits)})"]
    for v in a.visits:
        how = (
            v.transition
            if v.index == 0
            else f"{v.transition} after turn {v.entered_after_turn} via {v.via_call_id}"
        )
        lines.append(
            f"  {v.index}  {v.agent}  {how}  {_turns(v.turns)}  {_interval(v.item_start, v.item_end)}"
        )
    lines.append(f"requests ({len(a.requests)})")
    for r in a.requests:
        lines.append(
            f"  turn {r.turn}  {r.agent}  {r.model}  {_interval(r.output_start, r.output_end)}"
            f"  messageCount {r.message_count}"
        )
    lines.append(f"tool calls ({len(a.tool_calls)})")
    calls = (printable(_call_line(j)) for j in a.tool_calls)
    lines.extend(calls if width is None else (clip(line, width) for line in calls))
    if a.transitions:
        lines.append(f"handoffs ({len(a.transitions)})")
        for t in a.transitions:
            applied = {True: "applied", False: "not applied", None: "unknown"}[t.applied]
            lines.append(
                f"  policy[{t.decision_index}]  turn {t.turn}  → {t.target}  {t.decision}: {applied} ({t.basis})"
            )
    decisions = _decision_lines(a)
    lines.append(f"decisions ({len(decisions)})")
    lines.extend(decisions)
    lines.append(f"findings ({len(a.findings)})")
    lines.extend(f"  {f.code} at {f.path}: {f.message}" for f in a.findings)
    return printable("\n".join(lines), keep="\n")


def render_comparison(result: dict[str, Any], left_name: str = "A", right_name: str = "B",
                      full: bool = False) -> str:
    """A readable aioc comparison result: verdict, summary flags, metrics and each difference.

    Each difference shows its two sides as :func:`visible` text, so values that differ only in
    whitespace (a trailing space, a tab, NBSP, CR) look different. Long sides are cut to a
    window around the first character where they differ, unless ``full``.
    """
    m = result["metrics"]
    count = len(result["differences"])
    verdict = (
        "equal" if result["equal"]
        else f"different ({count} difference{'' if count == 1 else 's'})"
    )
    flags = "  ".join(f"{k} {str(v).lower()}" for k, v in result["summary"].items())
    lines = [
        f"{left_name} vs {right_name}: {verdict}",
        f"  {flags}",
        f"  response length {m['responseLengthA']} vs {m['responseLengthB']}; tool calls "
        f"{m['toolCallsA']} vs {m['toolCallsB']} (matched {m['matchedToolCalls']}, "
        f"missing {m['missingToolCalls']}, extra {m['extraToolCalls']})",
    ]
    for d in result["differences"]:
        left, right = _difference_sides(d, full)
        lines.append(f"  {d['path']}  {d['kind']}")
        lines.append(f"    - {left}")
        lines.append(f"    + {right}")
    return printable("\n".join(lines), keep="\n")


def visible(value: Any) -> str:
    """``value`` as one line where every character counts: a string in double quotes with JSON
    escapes (``\\t``, ``\\r``, ``\\n``), and characters that print as blank or as nothing
    (NBSP and the other Unicode spaces, zero-width characters, the BOM) as ``\\uXXXX``; any
    other value as compact JSON.

    >>> visible("ok\u00a0\\t ")
    '"ok\\\\u00a0\\\\t "'
    """
    from recstore.jsonout import dumps, escape_surrogates

    text = dumps(value, indent=None)
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", escape_surrogates(text))


def _difference_sides(difference: dict[str, Any], full: bool) -> tuple[str, str]:
    """Both sides of one difference as :func:`visible` text, each cut (unless ``full``) to the
    same window: from a little before the first character where they differ."""
    sides = [visible(difference[k]) if k in difference else None for k in ("left", "right")]
    texts = [s for s in sides if s is not None]
    start = 0
    if not full and len(texts) == 2 and max(map(len, texts)) > _PREVIEW:
        start = max(0, _common_prefix(*texts) - _PREVIEW // 4)
    return tuple(  # type: ignore[return-value]
        "(absent)" if s is None else (s if full else _window(s, start)) for s in sides
    )


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _window(text: str, start: int) -> str:
    """``text`` from ``start``, at most :data:`_PREVIEW` characters, with ``…`` where it is cut."""
    head = "…" if start else ""
    rest = text[start:]
    if len(head) + len(rest) <= _PREVIEW:
        return head + rest
    return head + rest[: _PREVIEW - len(head) - 1] + "…"
