"""Sweep results for people and CI: status with trends, and a JSON + self-contained HTML report.

Everything here reads the public sweep views (``sweeps``, ``sweep_runs``, ``sweep_cases``), so
what a report says can be reproduced with ``recstore query``. A *trend* compares a run with the
previous finished run of the same sweep, case by case on the source run: **newly failing** cases
fail now and did not before (or were not in that run), **fixed** cases failed before and do not now.
"""

from __future__ import annotations

import json
from collections import Counter
from html import escape
from pathlib import Path
from typing import Any

from recstore.errors import NotFoundError
from recstore.files import private_dir, write_private_text

#: Differences shown per case in the report (the JSON keeps the count of the rest).
MAX_DIFFERENCES = 20


def _rows(con: Any, sql: str, params: list | None = None) -> list[dict]:
    cur = con.execute(sql, params or [])
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _failing(con: Any, run_id: int) -> set[str]:
    return {r["source_run_key"] for r in _rows(
        con, "SELECT source_run_key FROM sweep_cases WHERE sweep_run_id = ? AND status = 'fail'",
        [run_id])}


def _trend(con: Any, run: dict) -> dict:
    previous = con.execute(
        "SELECT max(sweep_run_id) FROM sweep_runs WHERE sweep_name = ? AND sweep_run_id < ? "
        "AND status = 'finished'",
        [run["sweep_name"], run["sweep_run_id"]],
    ).fetchone()[0]
    if previous is None:
        return {"previous_run_id": None, "newly_failing": [], "fixed": []}
    now, before = _failing(con, run["sweep_run_id"]), _failing(con, previous)
    in_run = {r["source_run_key"] for r in _rows(
        con, "SELECT source_run_key FROM sweep_cases WHERE sweep_run_id = ? AND status <> 'pending'",
        [run["sweep_run_id"]])}
    return {
        "previous_run_id": previous,
        "newly_failing": sorted(now - before),
        "fixed": sorted((before - now) & in_run),
    }


def _run_json(run: dict) -> dict:
    out = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in run.items()}
    out["gate"] = "fail" if run["fail_count"] else ("warn" if run["warn_count"] else "pass")
    return out


def sweep_status(store: Any, name: str | None = None) -> list[dict]:
    """Runs of sweep ``name`` (oldest first), or the latest run of every sweep, each with its
    pass/warn/fail counts and trend against the previous run.

    Raises:
        NotFoundError: no sweep of that name has run on this store.
    """
    with store.reader() as con:
        if name is None:
            runs = _rows(con, "SELECT r.* FROM sweep_runs r JOIN sweeps s "
                              "ON r.sweep_run_id = s.last_run_id ORDER BY r.sweep_name")
        else:
            runs = _rows(con, "SELECT * FROM sweep_runs WHERE sweep_name = ? ORDER BY sweep_run_id",
                         [name])
            if not runs:
                raise NotFoundError(f"no sweep named {name!r} has run on {store.path}")
        return [_run_json(run) | {"trend": _trend(con, run)} for run in runs]


def sweep_report(store: Any, run_id: int) -> dict:
    """Everything about one sweep run: summary, spec, history, trend, drift and every case."""
    with store.reader() as con:
        runs = _rows(con, "SELECT * FROM sweep_runs WHERE sweep_run_id = ?", [run_id])
        if not runs:
            raise NotFoundError(f"no sweep run {run_id} in {store.path}")
        run = runs[0]
        spec = json.loads(con.execute("SELECT spec FROM sweep_run_starts WHERE sweep_run_id = ?",
                                      [run_id]).fetchone()[0])
        history = _rows(con, "SELECT sweep_run_id, started_at, status, case_count, pass_count, "
                             "warn_count, fail_count, pending_count FROM sweep_runs "
                             "WHERE sweep_name = ? AND sweep_run_id <= ? ORDER BY sweep_run_id",
                        [run["sweep_name"], run_id])
        cases = _rows(con, "SELECT * FROM sweep_cases WHERE sweep_run_id = ? ORDER BY case_index",
                      [run_id])
        calls = _replay_calls(con, run_id)
        trend = _trend(con, run)
    case_json = [_case_json(c, calls.get(c["replay_run_key"], [])) for c in cases]
    return {
        "run": _run_json(run),
        "spec": spec,
        "trend": trend,
        "history": [_run_json(h) for h in history],
        "signals": dict(Counter(s for c in case_json for s in c["signals"]).most_common()),
        "tool_drift": _drift_summary(case_json),
        "cases": case_json,
    }


def _replay_calls(con: Any, run_id: int) -> dict[str, list[dict]]:
    """The tool calls of the run's replays with their provenance (the ``replay_calls`` view)."""
    rows = _rows(con, "SELECT rc.replay_run_key, rc.turn, rc.tool_name AS name, rc.call_id AS callId, "
                      "rc.resolution, rc.source_run_id AS sourceRunId, "
                      "rc.source_output_item_index AS outputItemIndex "
                      "FROM replay_calls rc JOIN sweep_cases c ON c.replay_run_key = rc.replay_run_key "
                      "WHERE c.sweep_run_id = ? ORDER BY rc.replay_run_key, rc.call_index", [run_id])
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row.pop("replay_run_key"), []).append(row)
    return out


def _case_json(case: dict, calls: list[dict]) -> dict:
    def parsed(key: str, empty: Any) -> Any:
        value = case.get(key)
        return json.loads(value) if isinstance(value, str) else (empty if value is None else value)

    comparison = parsed("comparison", None)
    differences = (comparison or {}).get("differences", [])
    return {
        "case_index": case["case_index"],
        "status": case["status"],
        "source_run_key": case["source_run_key"],
        "replay_run_key": case["replay_run_key"],
        "replay_status": case["replay_status"],
        "source_status": case["source_status"],
        "candidate_status": case["candidate_status"],
        "signals": parsed("signals", []),
        "drift": parsed("drift", {}),
        "error": case["error"],
        "summary": (comparison or {}).get("summary"),
        "metrics": (comparison or {}).get("metrics"),
        "differences": differences[:MAX_DIFFERENCES],
        "difference_count": len(differences),
        "judge": parsed("judge", None),
        "calls": calls,
        "duration_ms": case["duration_ms"],
    }


def _drift_summary(cases: list[dict]) -> dict[str, dict[str, int]]:
    """Per tool: in how many cases it drifted and the summed drift counts, worst tool first."""
    totals: dict[str, Counter] = {}
    for case in cases:
        for tool, counts in case["drift"].items():
            bucket = totals.setdefault(tool, Counter())
            bucket["cases"] += 1
            bucket["failed_cases"] += case["status"] == "fail"
            bucket.update({k: v for k, v in counts.items() if k in ("added", "removed",
                                                                     "changed_args", "unrecorded")})
    order = sorted(totals, key=lambda t: (-(totals[t]["unrecorded"] + totals[t]["changed_args"]),
                                          -totals[t]["cases"], t))
    return {tool: dict(totals[tool]) for tool in order}


def write_report(store: Any, run_id: int, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``sweep-<run>.json`` and ``sweep-<run>.html`` into ``out_dir``; returns both paths."""
    report = sweep_report(store, run_id)
    out = private_dir(out_dir)
    json_path = out / f"sweep-{run_id}.json"
    html_path = out / f"sweep-{run_id}.html"
    # Records may hold lone surrogates (valid JSON escapes, not UTF-8): write them as escapes.
    write_private_text(json_path, json.dumps(report, indent=2, ensure_ascii=False, default=str)
                       + "\n", errors="backslashreplace")
    write_private_text(html_path, render_html(report), errors="backslashreplace")
    return json_path, html_path


# --- HTML --------------------------------------------------------------------------------------

_COLORS = {"pass": "#2e7d32", "warn": "#ef8f00", "fail": "#c62828", "pending": "#9e9e9e"}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#555} .tiles{display:flex;gap:12px;margin:16px 0;flex-wrap:wrap}
.tile{border-radius:6px;padding:10px 16px;color:#fff;min-width:90px}
.tile b{display:block;font-size:24px} .gate{font-weight:bold;text-transform:uppercase}
table{border-collapse:collapse;margin:6px 0} td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4} code,pre{font:12px ui-monospace,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;word-break:break-all;margin:0;max-height:240px;overflow:auto}
details{border:1px solid #ddd;border-radius:4px;margin:4px 0;padding:4px 8px}
summary{cursor:pointer} .pill{display:inline-block;border-radius:10px;padding:0 8px;color:#fff;font-size:12px}
.sig{display:inline-block;background:#eee;border-radius:3px;padding:0 5px;margin:1px;font-size:12px}
"""


def _pill(status: str) -> str:
    return f'<span class="pill" style="background:{_COLORS.get(status, "#555")}">{escape(status)}</span>'


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _pre(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
    return f"<pre>{escape(text)}</pre>"


def trend_svg(history: list[dict], width: int = 640, height: int = 180) -> str:
    """An inline SVG: one stacked bar (pass/warn/fail/pending) per run, oldest left."""
    if not history:
        return ""
    pad, top = 30, 10
    slot = (width - pad) / len(history)
    bar = max(min(slot * 0.7, 60), 2)
    most = max(h["case_count"] for h in history) or 1
    scale = (height - top - 25) / most
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="cases per run by outcome">',
             f'<line x1="{pad}" y1="{height - 25}" x2="{width}" y2="{height - 25}" stroke="#888"/>',
             f'<text x="2" y="{top + 10}" font-size="11">{most}</text>']
    for i, h in enumerate(history):
        x = pad + i * slot + (slot - bar) / 2
        y = height - 25
        for key in ("pass", "warn", "fail", "pending"):
            n = h[f"{key}_count"]
            if n:
                y -= n * scale
                parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{n * scale:.1f}" '
                             f'fill="{_COLORS[key]}"><title>run {h["sweep_run_id"]}: {n} {key}</title></rect>')
        parts.append(f'<text x="{x + bar / 2:.1f}" y="{height - 10}" font-size="11" '
                     f'text-anchor="middle">#{h["sweep_run_id"]}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _case_html(case: dict) -> str:
    signals = "".join(f'<span class="sig">{escape(s)}</span>' for s in case["signals"]) or "none"
    drift_rows = [[escape(tool), *(str(counts.get(k, 0)) for k in
                                   ("source_calls", "replay_calls", "added", "removed", "changed_args",
                                    "unrecorded"))] for tool, counts in case["drift"].items()]
    parts = [
        f'<p>source <code>{escape(case["source_run_key"])}</code> ({escape(str(case["source_status"]))}) → '
        f'replay <code>{escape(str(case["replay_run_key"]))}</code> ({escape(str(case["candidate_status"]))}), '
        f'replay report {escape(str(case["replay_status"]))}; signals: {signals}</p>',
    ]
    if case["error"]:
        parts.append(f"<p><b>Stopped:</b> {escape(case['error'])}</p>")
    if drift_rows:
        parts.append("<h4>Tool drift</h4>" + _table(
            ["tool", "source calls", "replay calls", "added", "removed", "changed args", "unrecorded"],
            drift_rows))
    if case["differences"]:
        more = case["difference_count"] - len(case["differences"])
        parts.append("<h4>Differences</h4>" + _table(
            ["path", "kind", "source", "replay"],
            [[f"<code>{escape(d.get('path', ''))}</code>", escape(d.get("kind", "")),
              _pre(d.get("left", "")), _pre(d.get("right", ""))] for d in case["differences"]]))
        if more > 0:
            parts.append(f"<p>… and {more} more differences (see the JSON report)</p>")
    if case["calls"]:
        parts.append("<h4>Replay tool calls and provenance</h4>" + _table(
            ["turn", "tool", "call id", "served", "from"],
            [[str(c.get("turn")), escape(str(c.get("name"))), f"<code>{escape(str(c.get('callId')))}</code>",
              escape(str(c.get("resolution"))), _provenance(c)] for c in case["calls"]]))
    if case["judge"]:
        parts.append("<h4>Judge</h4>" + _pre(case["judge"]))
    title = (f'{_pill(case["status"])} case {case["case_index"]} <code>{escape(case["source_run_key"])}</code>'
             + (f' — drift: {escape(", ".join(case["drift"]))}' if case["drift"] else ""))
    return f"<details><summary>{title}</summary>{''.join(parts)}</details>"


def _provenance(call: dict) -> str:
    if call.get("sourceRunId") is None:
        return "—"
    return escape(f"{call['sourceRunId']} items[{call.get('outputItemIndex')}]")


def render_html(report: dict) -> str:
    """The report as one self-contained HTML page (inline CSS and SVG, no scripts, no network)."""
    run = report["run"]
    trend = report["trend"]
    tiles = "".join(
        f'<div class="tile" style="background:{_COLORS[k]}"><b>{run[f"{k}_count"]}</b>{k}</div>'
        for k in ("pass", "warn", "fail", "pending"))
    drift_rows = [[escape(tool), str(c.get("cases", 0)), str(c.get("failed_cases", 0)),
                   str(c.get("changed_args", 0)), str(c.get("unrecorded", 0)), str(c.get("added", 0)),
                   str(c.get("removed", 0))] for tool, c in report["tool_drift"].items()]
    order = {"fail": 0, "warn": 1, "pending": 2, "pass": 3}
    cases = sorted(report["cases"], key=lambda c: (order.get(c["status"], 9), c["case_index"]))
    changed = [c for c in cases if c["status"] != "pass"]
    passed = [c for c in cases if c["status"] == "pass"]

    def keys(items: list[str]) -> str:
        return ", ".join(f"<code>{escape(k)}</code>" for k in items) or "none"

    body = [
        f"<h1>Sweep {escape(run['sweep_name'])} — run #{run['sweep_run_id']}</h1>",
        f'<p class="meta">candidate: {escape(str(run["candidate"]))} · started {escape(str(run["started_at"]))}'
        f' · {escape(str(run["status"]))} · selection <code>{escape(str(run["selection_query"]))}</code>'
        f' ({run["case_count"]} of {run["matched_count"]} matched runs)</p>',
        f'<p>Gate: <span class="gate" style="color:{_COLORS[run["gate"]]}">{run["gate"]}</span> — '
        f'<span id="case-count">{run["case_count"]} cases</span></p>',
        f'<div class="tiles">{tiles}</div>',
        "<h2>Trend across runs</h2>", trend_svg(report["history"]),
        f"<p>Against run #{trend['previous_run_id']}: newly failing {keys(trend['newly_failing'])}; "
        f"fixed {keys(trend['fixed'])}</p>" if trend["previous_run_id"] else "<p>First run of this sweep.</p>",
        "<h2>Signals</h2>",
        _table(["signal", "cases"], [[escape(s), str(n)] for s, n in report["signals"].items()])
        if report["signals"] else "<p>No case raised a signal.</p>",
        "<h2>Tool drift</h2>",
        _table(["tool", "cases", "failed cases", "changed args", "unrecorded calls", "added", "removed"],
               drift_rows) if drift_rows else "<p>No tool drifted.</p>",
        f"<h2>Changed cases ({len(changed)})</h2>",
        "".join(_case_html(c) for c in changed) or "<p>None.</p>",
        f"<h2>Passing cases ({len(passed)})</h2>",
        _table(["case", "source run", "replay run"],
               [[str(c["case_index"]), f"<code>{escape(c['source_run_key'])}</code>",
                 f"<code>{escape(str(c['replay_run_key']))}</code>"] for c in passed]) if passed else "<p>None.</p>",
        "<h2>Spec</h2>", _pre(report["spec"]),
    ]
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Sweep {escape(run['sweep_name'])} run {run['sweep_run_id']}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>\n")


def status_text(rows: list[dict]) -> str:
    """``sweep status`` as a table for people."""
    header = f"{'run':>5}  {'sweep':<24} {'started':<19}  {'status':<10} {'cases':>5} {'pass':>5} " \
             f"{'warn':>5} {'fail':>5}  trend"
    lines = [header]
    for r in rows:
        t = r["trend"]
        trend = "first run" if t["previous_run_id"] is None else (
            f"vs #{t['previous_run_id']}: {len(t['newly_failing'])} newly failing, {len(t['fixed'])} fixed")
        lines.append(f"{r['sweep_run_id']:>5}  {r['sweep_name'][:24]:<24} {str(r['started_at'])[:19]:<19}  "
                     f"{r['status']:<10} {r['case_count']:>5} {r['pass_count']:>5} {r['warn_count']:>5} "
                     f"{r['fail_count']:>5}  {trend}")
    return "\n".join(lines)
