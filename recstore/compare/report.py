"""Renderings of a :class:`~recstore.compare.bulk.Comparison`: a readable text summary and a
self-contained HTML report (one file: inline CSS, SVG, data and script, no network) with every
pair in a filterable table and its drill-down (:mod:`recstore.compare.details`), slices, the
aggregate tables and a chart of tool-call drift. The page is the Jinja2 template
``templates/compare.html.j2``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from recstore.canonical import canonical_json
from recstore.compare.details import DETAIL_LIMIT, ORDER_LABELS, PairBrowser, browse_pairs

if TYPE_CHECKING:
    from recstore.compare.bulk import Comparison
    from recstore.spark.compare import ParquetLayout
    from recstore.store import Store

__all__ = ["render_html", "render_text"]

_TOP = 10
_CHART_TOOLS = 15
_UNPAIRED_SHOWN = 500
_DRIFT_COLORS = (("added", "#2e90fa"), ("removed", "#f04438"), ("changed_args", "#f79009"))


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
        f"classification: pass {cls['pass']}, warn {cls['warn']}, fail {cls['fail']}, "
        f"still failing {cls['still_failing']} "
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


def _drift_chart(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometry of the drift chart: horizontal stacked bars per tool (added, removed, changed
    arguments), the template draws them."""
    shown = [t for t in tools if t["added"] + t["removed"] + t["changed_args"]][:_CHART_TOOLS]
    label_w, bar_w, row_h = 180, 520, 22
    chart: dict[str, Any] = {"label_w": label_w, "width": label_w + bar_w + 80,
             "height": row_h * len(shown) + 40, "bars": [], "legend": []}
    if not shown:
        return chart
    widest = max(t["added"] + t["removed"] + t["changed_args"] for t in shown)
    for i, tool in enumerate(shown):
        x, segments = float(label_w), []
        for key, color in _DRIFT_COLORS:
            width = bar_w * tool[key] / widest
            if width:
                segments.append({"x": x, "width": width, "color": color, "key": key,
                                 "count": tool[key]})
            x += width
        name = tool["tool"] or "(orphan output)"
        chart["bars"].append({"y": 10 + i * row_h, "tool": name, "label": name[:28], "end": x,
                              "segments": segments,
                              "total": tool["added"] + tool["removed"] + tool["changed_args"]})
    chart["legend"] = [{"x": label_w + i * 150, "color": color, "label": key.replace("_", " ")}
                       for i, (key, color) in enumerate(_DRIFT_COLORS)]
    return chart


def render_html(comparison: Comparison, store: Store | ParquetLayout | None = None, *,
                detail_limit: int = DETAIL_LIMIT, browser: PairBrowser | None = None,
                run_link: str | None = None) -> str:
    """A self-contained HTML report of ``comparison``; ``store`` (or the Parquet layout a Spark
    comparison ran over) is read for the pairs' slices, tool names and the drill-downs of the
    first ``detail_limit`` changed pairs (or pass the ``browser`` that
    :func:`~recstore.compare.details.browse_pairs` returned). ``run_link`` (e.g. ``/runs/``, as
    ``recstore serve`` passes) makes every run key a link to that prefix + the key."""
    from recstore.templating import render_page

    agg = comparison.aggregate
    pairs = agg["pairs"]
    cls = agg["classification"]
    if browser is None:
        if store is None:
            raise TypeError("render_html needs the store (or a PairBrowser)")
        browser = browse_pairs(store, comparison, detail_limit=detail_limit)
    drifted = [t for t in agg["tools"] if t["added"] + t["removed"] + t["changed_args"]]
    return render_page(
        "compare.html.j2",
        script="compare.js",
        comparison_id=comparison.comparison_id,
        headline=_headline(comparison),
        agg=agg,
        pct=_pct,
        kpis=[
            {"id": "pair-count", "value": f"{pairs} pairs", "label": "compared"},
            {"id": "changed", "value": _pct(agg["flags"]["equal"]["changed"], pairs),
             "label": f"changed ({_interval(agg['changeRate']['ci95'])})"},
            {"id": "regressed-count", "value": agg["mcnemar"]["baselinePassedCandidateFailed"],
             "label": "regressed (completed → failed)"},
            {"id": "fail-count", "value": cls["fail"], "label": "fail"},
            {"id": "still-failing-count", "value": cls["still_failing"],
             "label": "still failing (both failed alike)"},
            {"id": "warn-count", "value": cls["warn"], "label": "warn"},
            {"id": "pass-count", "value": cls["pass"], "label": "pass"},
        ],
        chart=_drift_chart(agg["tools"]),
        drifted=drifted,
        steady=len(agg["tools"]) - len(drifted),
        divergence=[
            {"baseline": d["baseline_tool"] or "(none)", "candidate": d["candidate_tool"] or "(none)",
             "kind": _divergence_kind(d["baseline_tool"], d["candidate_tool"]), "pairs": d["pairs"]}
            for d in agg["firstDivergence"]["byTools"]
        ],
        unpaired=comparison.unpaired[:_UNPAIRED_SHOWN],
        unpaired_more=max(0, len(comparison.unpaired) - _UNPAIRED_SHOWN),
        options={k: v if isinstance(v, str) or v is None else canonical_json(v)
                 for k, v in comparison.options().items()},
        slices=browser.slices,
        signals=browser.signals,
        dimensions=browser.dimensions,
        order_labels=ORDER_LABELS,
        data={**browser.to_json(), "runLink": run_link},
    )
