"""Renderings of a :class:`~recstore.compare.bulk.Comparison`: a readable text summary and a
self-contained HTML report (inline CSS and SVG, no scripts, no network, no external assets) with
the aggregate table, a chart of tool-call drift and a per-pair drill-down.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recstore.compare.bulk import Comparison

__all__ = ["render_html", "render_text"]

_TOP = 10
_CHART_TOOLS = 15


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def _interval(ci: list[float] | None) -> str:
    """The change rate's 95% interval as text (there is none for 0 pairs)."""
    if ci is None:
        return "no interval for 0 pairs"
    low, high = ci
    return f"95% CI {100 * low:.1f}–{100 * high:.1f}%"


def _divergence_kind(baseline_tool: str | None, candidate_tool: str | None) -> str:
    """What differs at a first point of divergence."""
    if baseline_tool is None:
        return "call added"
    if candidate_tool is None:
        return "call removed"
    return "arguments changed" if baseline_tool == candidate_tool else "other tool"


def _headline(comparison: Comparison) -> list[str]:
    agg = comparison.aggregate
    pairs = agg["pairs"]
    counts = comparison.unpaired_counts()
    flips = ", ".join(f"{f['baseline']}→{f['candidate']} {f['pairs']}" for f in agg["statusFlips"])
    cls = agg["classification"]
    rule = comparison.rule
    return [
        f"{pairs} pairs (paired by {comparison.pair_by}, duplicates {comparison.duplicates})",
        f"unpaired: baseline {counts['baseline']}, candidate {counts['candidate']}; "
        f"duplicate runs {counts['duplicates']}",
        f"changed: {agg['flags']['equal']['changed']} of {pairs} "
        f"({_pct(agg['flags']['equal']['changed'], pairs)}; {_interval(agg['changeRate']['ci95'])})",
        f"status flips: {flips or 'none'} (McNemar exact p = {agg['mcnemar']['pValue']:.4g})",
        f"classification: pass {cls['pass']}, warn {cls['warn']}, fail {cls['fail']} "
        f"(fail on {', '.join(rule.fail_on) or '-'}; warn on {', '.join(rule.warn_on) or '-'})",
    ]


def render_text(comparison: Comparison) -> str:
    """The readable summary ``recstore compare --baseline ... --candidate ...`` prints."""
    agg = comparison.aggregate
    title = f"comparison {comparison.comparison_id}" if comparison.comparison_id else "comparison"
    lines = [f"{title}: " + _headline(comparison)[0], *_headline(comparison)[1:], ""]
    lines.append(f"{'summary flag':<24}{'equal':>8}{'changed':>9}")
    for name, counts in agg["flags"].items():
        lines.append(f"{name:<24}{counts['equal']:>8}{counts['changed']:>9}")
    if agg["tools"]:
        lines += [
            "",
            f"{'tool':<28}{'baseline':>9}{'candidate':>10}{'added':>7}{'removed':>8}"
            f"{'args changed':>13}",
        ]
        for t in agg["tools"][:_TOP]:
            lines.append(
                f"{t['tool'][:27]:<28}{t['calls_baseline']:>9}{t['calls_candidate']:>10}"
                f"{t['added']:>7}{t['removed']:>8}{t['changed_args']:>13}"
            )
    div = agg["firstDivergence"]
    if div["pairs"]:
        lines += ["", f"first divergence of the tool-call sequence: {div['pairs']} pairs"]
        for d in div["byTools"][:5]:
            lines.append(
                f"  {d['pairs']:>6}  {d['baseline_tool'] or '(none)'} → "
                f"{d['candidate_tool'] or '(none)'} "
                f"({_divergence_kind(d['baseline_tool'], d['candidate_tool'])})"
            )
    if agg["policyOutcomeChanges"]:
        lines += ["", "policy outcome changes (resource: baseline → candidate):"]
        for p in agg["policyOutcomeChanges"][:5]:
            lines.append(
                f"  {p['changes']:>6}  {p['resource_kind']}:{p['resource_name']}: "
                f"{p['baseline_decision'] or '(none)'}/{p['baseline_reason'] or '-'} → "
                f"{p['candidate_decision'] or '(none)'}/{p['candidate_reason'] or '-'}"
            )
    return "\n".join(lines)


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1d2430}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
table{border-collapse:collapse;font-size:13px} td,th{padding:4px 10px;border-bottom:1px solid #e3e6ea}
th{text-align:left;background:#f4f6f8} td.n{text-align:right;font-variant-numeric:tabular-nums}
.fail{color:#b42318;font-weight:600}.warn{color:#b54708}.pass{color:#067647}
.meta{color:#5b6472;font-size:13px} details{margin:4px 0;font-size:13px}
summary{cursor:pointer} code{background:#f4f6f8;padding:1px 4px;border-radius:3px}
.kpi{display:inline-block;margin:8px 24px 8px 0}.kpi b{display:block;font-size:24px}
"""


def _table(headers: list[str], rows: list[list], numeric: set[int] = frozenset()) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{escape(str(v))}</td>' if i in numeric else f"<td>{escape(str(v))}</td>"
            for i, v in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _drift_chart(tools: list[dict]) -> str:
    """Horizontal stacked bars per tool: calls added, removed and with changed arguments."""
    shown = [t for t in tools if t["added"] + t["removed"] + t["changed_args"]][:_CHART_TOOLS]
    if not shown:
        return '<p class="meta">No tool-call drift: every pair made the same calls.</p>'
    widest = max(t["added"] + t["removed"] + t["changed_args"] for t in shown)
    label_w, bar_w, row_h = 180, 520, 22
    height = row_h * len(shown) + 40
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 80}" '
        f'height="{height}" role="img" aria-label="tool-call drift per tool">'
    ]
    colors = (("added", "#2e90fa"), ("removed", "#f04438"), ("changed_args", "#f79009"))
    for i, tool in enumerate(shown):
        y = 10 + i * row_h
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end" font-size="12">'
            f"{escape(tool['tool'] or '(orphan output)')[:28]}</text>"
        )
        x = float(label_w)
        for key, color in colors:
            width = bar_w * tool[key] / widest
            if width:
                parts.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{row_h - 6}" '
                    f'fill="{color}"><title>{escape(tool["tool"])}: {key} {tool[key]}</title></rect>'
                )
            x += width
        total = tool["added"] + tool["removed"] + tool["changed_args"]
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 14}" font-size="12">{total}</text>')
    legend_y = height - 12
    for i, (key, color) in enumerate(colors):
        lx = label_w + i * 150
        parts.append(f'<rect x="{lx}" y="{legend_y - 10}" width="12" height="12" fill="{color}"/>')
        parts.append(
            f'<text x="{lx + 16}" y="{legend_y}" font-size="12">{key.replace("_", " ")}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _pair_details(row: dict) -> str:
    flags = [
        ("response", row["same_final_response"]),
        ("tool-call shape", row["same_tool_call_shape"]),
        ("tool outputs", row["same_tool_outputs"]),
        ("policy", row["same_policy_decisions"]),
        ("guardrails", row["same_guardrail_decisions"]),
        ("metadata", row["same_metadata"]),
    ]
    changed = ", ".join(name for name, same in flags if not same) or "nothing"
    cls = escape(row["classification"])
    title = (
        f'<span class="{cls}">{cls}</span> #{row["pair_index"]} '
        f"{escape(str(row['pair_key'] or ''))} — changed: {escape(changed)}"
    )
    divergence = (
        f"index {row['first_divergence_index']}: {escape(str(row['first_divergence_tool_a']))} → "
        f"{escape(str(row['first_divergence_tool_b']))}"
        if row["first_divergence_index"] is not None
        else "none"
    )
    facts = _table(
        ["", "baseline", "candidate"],
        [
            ["run", row["baseline_run_key"], row["candidate_run_key"]],
            ["status", row["status_a"], row["status_b"]],
            ["response length", row["response_length_a"], row["response_length_b"]],
            ["tool calls", row["tool_calls_a"], row["tool_calls_b"]],
            [
                "tool sequence",
                " → ".join(map(str, row["baseline_tools"])) or "-",
                " → ".join(map(str, row["candidate_tools"])) or "-",
            ],
        ],
    )
    return (
        f'<details><summary>{title}</summary>{facts}<p class="meta">differences '
        f"{row['difference_count']}; matched calls {row['matched_tool_calls']}, missing "
        f"{row['missing_tool_calls']}, extra {row['extra_tool_calls']}; first divergence "
        f"{divergence}</p></details>"
    )


def render_html(comparison: Comparison) -> str:
    """A self-contained HTML report of ``comparison``."""
    agg = comparison.aggregate
    pairs = agg["pairs"]
    cls = agg["classification"]
    kpis = "".join(
        f'<div class="kpi"><b id="{key}">{escape(str(value))}</b>{escape(label)}</div>'
        for key, value, label in [
            ("pair-count", f"{pairs} pairs", "compared"),
            (
                "changed",
                f"{_pct(agg['flags']['equal']['changed'], pairs)}",
                f"changed ({_interval(agg['changeRate']['ci95'])})",
            ),
            ("fail-count", cls["fail"], "fail"),
            ("warn-count", cls["warn"], "warn"),
            ("pass-count", cls["pass"], "pass"),
        ]
    )
    flag_rows = [
        [name, c["equal"], c["changed"], _pct(c["changed"], pairs)]
        for name, c in agg["flags"].items()
    ]
    drifted = [t for t in agg["tools"] if t["added"] + t["removed"] + t["changed_args"]]
    tool_rows = [
        [
            t["tool"] or "(orphan output)",
            t["calls_baseline"],
            t["calls_candidate"],
            t["added"],
            t["removed"],
            t["changed_args"],
        ]
        for t in drifted
    ]
    steady = len(agg["tools"]) - len(drifted)
    flips = [[f["baseline"], f["candidate"], f["pairs"]] for f in agg["statusFlips"]]
    policy = [
        [
            p["resource_kind"],
            p["resource_name"],
            p["baseline_decision"],
            p["baseline_reason"],
            p["candidate_decision"],
            p["candidate_reason"],
            p["changes"],
        ]
        for p in agg["policyOutcomeChanges"]
    ]
    divergence = [
        [
            d["baseline_tool"] or "(none)",
            d["candidate_tool"] or "(none)",
            _divergence_kind(d["baseline_tool"], d["candidate_tool"]),
            d["pairs"],
        ]
        for d in agg["firstDivergence"]["byTools"]
    ]
    unpaired = [
        [u["side"], u["runKey"], u["pairKey"], u["reason"]] for u in comparison.unpaired[:500]
    ]
    options = comparison.options()
    sections = [
        f"<h1>recstore comparison {escape(str(comparison.comparison_id or ''))}</h1>",
        '<p class="meta">' + "<br>".join(escape(line) for line in _headline(comparison)) + "</p>",
        kpis,
        "<h2>Summary flags</h2>",
        _table(["flag", "equal", "changed", "changed %"], flag_rows, {1, 2, 3}),
        "<h2>Tool-call drift</h2>",
        _drift_chart(agg["tools"]),
        _table(
            ["tool", "baseline calls", "candidate calls", "added", "removed", "args changed"],
            tool_rows,
            {1, 2, 3, 4, 5},
        ),
        f'<p class="meta">{steady} more tools showed no drift.</p>',
        "<h2>Status flips</h2>",
        _table(["baseline", "candidate", "pairs"], flips, {2})
        if flips
        else '<p class="meta">none</p>',
        f'<p class="meta">McNemar exact test on pass/fail flips: p = '
        f"{agg['mcnemar']['pValue']:.4g} ({escape(agg['mcnemar']['outcome'])})</p>",
        "<h2>First divergence in the tool-call sequence</h2>",
        _table(["baseline tool", "candidate tool", "change", "pairs"], divergence, {3})
        if divergence
        else '<p class="meta">none</p>',
        "<h2>Policy outcome changes</h2>",
        _table(
            [
                "kind",
                "resource",
                "baseline decision",
                "baseline reason",
                "candidate decision",
                "candidate reason",
                "changes",
            ],
            policy,
            {6},
        )
        if policy
        else '<p class="meta">none</p>',
        "<h2>Unpaired and duplicate runs</h2>",
        _table(["side", "run", "key", "reason"], unpaired)
        if unpaired
        else '<p class="meta">none: every run was paired</p>',
        f"<h2>Pairs ({len(comparison.drilldown)} shown, worst first)</h2>",
        "".join(_pair_details(row) for row in comparison.drilldown),
        "<h2>Options</h2>",
        _table(["option", "value"], [[k, v] for k, v in options.items()]),
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>recstore comparison: {pairs} pairs</title><style>{_CSS}</style></head><body>"
        + "".join(sections)
        + "</body></html>"
    )
