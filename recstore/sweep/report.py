"""Sweep results for people and CI: status with trends, and a JSON + self-contained HTML report.

Everything here reads the public sweep views (``sweeps``, ``sweep_runs``, ``sweep_cases``), so
what a report says can be reproduced with ``recstore query``. A *trend* compares a run with the
previous finished run of the same sweep, case by case on the source run: **newly failing** cases
fail now and did not before (or were not in that run), **fixed** cases failed before and do not now.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from recstore.errors import NotFoundError
from recstore.files import private_dir, write_private_text
from recstore.jsonout import dumps, utc_timestamp, write_json
from recstore.sweep.runner import run_label, run_usage
from recstore.sweep.spec import CompareSpec

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
    row = con.execute(
        "SELECT sweep_run_id, run_number FROM sweep_runs WHERE sweep_name = ? AND sweep_run_id < ? "
        "AND status = 'finished' ORDER BY sweep_run_id DESC LIMIT 1",
        [run["sweep_name"], run["sweep_run_id"]],
    ).fetchone()
    if row is None:
        return {"previous_run_id": None, "previous_run_number": None, "newly_failing": [],
                "fixed": []}
    previous, previous_number = row
    now, before = _failing(con, run["sweep_run_id"]), _failing(con, previous)
    in_run = {r["source_run_key"] for r in _rows(
        con, "SELECT source_run_key FROM sweep_cases WHERE sweep_run_id = ? AND status <> 'pending'",
        [run["sweep_run_id"]])}
    return {
        "previous_run_id": previous,
        "previous_run_number": previous_number,
        "newly_failing": sorted(now - before),
        "fixed": sorted((before - now) & in_run),
    }


def _run_json(run: dict) -> dict:
    out = {k: (utc_timestamp(v) if isinstance(v, datetime) else v) for k, v in run.items()}
    out["run"] = run_label(run["sweep_name"], run["run_number"])
    out["gate"] = "fail" if run["fail_count"] else ("warn" if run["warn_count"] else "pass")
    return out


def compared_text(compared: dict) -> str:
    """One line saying what a sweep's comparisons covered (``CompareSpec.compared()``)."""
    from recstore.records import SECTIONS

    sections = compared["sections"]
    text = f"compared: {', '.join(sections) or 'nothing'}"
    if compared["ignored"]:
        text += f" (ignoring {', '.join(compared['ignored'])})"
    if compared["preset"]:
        text += f"; preset {compared['preset']}"
    skipped = [s for s in SECTIONS if s not in sections]
    return text + (f"; not compared: {', '.join(skipped)}" if skipped else "")


def usage_text(usage: dict) -> str:
    """One line of a sweep run's model usage (``run_usage``)."""
    return (f"model requests: {usage['requests']:,} ({usage['retries']:,} retries, "
            f"{usage['rateLimited']:,} rate-limited); tokens: {usage['totalTokens']:,} "
            f"({usage['promptTokens']:,} prompt, {usage['completionTokens']:,} completion)")


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
        history = _rows(con, "SELECT sweep_run_id, run_number, sweep_name, started_at, status, "
                             "case_count, pass_count, "
                             "warn_count, fail_count, pending_count FROM sweep_runs "
                             "WHERE sweep_name = ? AND sweep_run_id <= ? ORDER BY sweep_run_id",
                        [run["sweep_name"], run_id])
        cases = _rows(con, "SELECT * FROM sweep_cases WHERE sweep_run_id = ? ORDER BY case_index",
                      [run_id])
        calls = _replay_calls(con, run_id)
        trend = _trend(con, run)
    usage = run_usage(store, run_id)
    case_json = [_case_json(c, calls.get(c["replay_run_key"], [])) for c in cases]
    return {
        "run": _run_json(run),
        "compared": CompareSpec.model_validate(spec.get("compare") or {}).compared(),
        "usage": usage,
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
        "difference_groups": _difference_groups(differences),
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
    """Write ``sweep-<name>-<N>.json`` and ``.html`` (run N of the sweep) into ``out_dir``;
    returns both paths."""
    report = sweep_report(store, run_id)
    out = private_dir(out_dir)
    stem = f"sweep-{report['run']['sweep_name']}-{report['run']['run_number']}"
    json_path = out / f"{stem}.json"
    html_path = out / f"{stem}.html"
    write_json(json_path, report)
    write_private_text(html_path, render_html(report), errors="backslashreplace")
    return json_path, html_path


# --- HTML --------------------------------------------------------------------------------------

_COLORS = {"pass": "#2e7d32", "warn": "#ef8f00", "fail": "#c62828", "pending": "#9e9e9e"}


def _difference_groups(differences: list[dict]) -> list[dict]:
    """Differences counted by top-level section and kind (``toolCalls``/``missing_right``...),
    with the first path of each: what a stopped replay's long list says in a few rows."""
    groups: dict[tuple[str, str], dict] = {}
    for d in differences:
        path = str(d.get("path", ""))
        section = path.split("[", 1)[0].split(".", 1)[0] or "(record)"
        group = groups.setdefault((section, str(d.get("kind", ""))),
                                  {"section": section, "kind": str(d.get("kind", "")),
                                   "count": 0, "first": path})
        group["count"] += 1
    return sorted(groups.values(), key=lambda g: (-g["count"], g["section"], g["kind"]))


def trend_chart(history: list[dict], width: int = 720, height: int = 210) -> dict:
    """Geometry of the trend chart: one stacked bar (pass/warn/fail/pending) per run, oldest
    left, labelled with its number and start date, and the fail rate as a line (right axis)."""
    left, top, base = 30, 10, height - 48
    right = width - 40
    chart: dict[str, Any] = {"width": width, "height": height, "left": left, "right": right,
                             "top": top, "base": base, "bars": [], "line": ""}
    if not history:
        return chart
    slot = (right - left) / len(history)
    chart["bar"] = bar = max(min(slot * 0.7, 60), 2)
    chart["most"] = most = max(h["case_count"] for h in history) or 1
    scale = (base - top) / most
    worst = max((h["fail_count"] / h["case_count"] for h in history if h["case_count"]),
                default=0.0)
    # the right axis ends at the first of these above the worst rate, so low rates stay visible
    chart["rate_max"] = rate_max = next(m for m in (0.05, 0.1, 0.25, 0.5, 1.0) if worst <= m)
    points = []
    for i, h in enumerate(history):
        x = left + i * slot + (slot - bar) / 2
        y, segments = float(base), []
        for key in ("pass", "warn", "fail", "pending"):
            n = h[f"{key}_count"]
            if n:
                y -= n * scale
                segments.append({"key": key, "count": n, "y": y, "height": n * scale})
        rate = h["fail_count"] / h["case_count"] if h["case_count"] else 0.0
        rate_y = base - rate / rate_max * (base - top)
        started = h.get("started_at")
        date = started.strftime("%m-%d %H:%M") if hasattr(started, "strftime") else \
            str(started or "")[5:16].replace("T", " ")
        chart["bars"].append({"run": h["run_number"], "x": x, "center": x + bar / 2,
                              "segments": segments, "date": date, "rate": f"{100 * rate:.1f}%",
                              "rate_y": rate_y})
        points.append(f"{x + bar / 2:.1f},{rate_y:.1f}")
    chart["line"] = " ".join(points)
    return chart


def render_html(report: dict) -> str:
    """The report as one self-contained HTML page (inline CSS and SVG, no scripts, no network)."""
    from recstore.templating import render_page

    order = {"fail": 0, "warn": 1, "pending": 2, "pass": 3}
    cases = sorted(report["cases"], key=lambda c: (order.get(c["status"], 9), c["case_index"]))
    return render_page(
        "sweep.html.j2",
        report=report,
        run=report["run"],
        trend=report["trend"],
        colors=_COLORS,
        chart=trend_chart(report["history"]),
        changed=[c for c in cases if c["status"] != "pass"],
        passed=[c for c in cases if c["status"] == "pass"],
        case_ids={c["source_run_key"]: c["case_index"] for c in report["cases"]},
        compared=compared_text(report["compared"]),
        usage=usage_text(report["usage"]) if report["usage"]["requests"] else None,
        to_json=lambda v: dumps(v, indent=1),
    )


def status_text(rows: list[dict]) -> str:
    """``sweep status`` as a table for people."""
    header = f"{'run':>5}  {'sweep':<24} {'started':<19}  {'status':<10} {'cases':>5} {'pass':>5} " \
             f"{'warn':>5} {'fail':>5}  trend"
    lines = [header]
    for r in rows:
        t = r["trend"]
        trend = "first run" if t["previous_run_id"] is None else (
            f"vs #{t['previous_run_number']}: {len(t['newly_failing'])} newly failing, {len(t['fixed'])} fixed")
        lines.append(f"{'#' + str(r['run_number']):>5}  {r['sweep_name'][:24]:<24} {str(r['started_at'])[:19]:<19}  "
                     f"{r['status']:<10} {r['case_count']:>5} {r['pass_count']:>5} {r['warn_count']:>5} "
                     f"{r['fail_count']:>5}  {trend}")
    return "\n".join(lines)
