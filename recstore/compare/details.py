"""Every pair of a comparison as a person browses it: one row per pair in report order
(regressions first, then other failures, then changes, then unchanged pairs), the signals it
raised, its slice values (agent, metadata keys) and tool names for search, the same headline
numbers per slice, and for the first changed pairs a drill-down: both responses with a word
diff, the tool-call sequences aligned (:func:`recstore.records.diff.align_calls`) with argument
diffs, policy and guardrail decision changes, statuses and errors.

:func:`browse_pairs` reads the store once (a reader) and returns JSON-ready data that the HTML
report embeds; :func:`pair_detail` is the pure per-pair part.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from recstore.canonical import canonical_json
from recstore.compare.aggregate import SIGNALS
from recstore.compare.connection import CompareConnection
from recstore.compare.features import stored_revisions
from recstore.jsonout import dumps
from recstore.records import extract_tool_calls
from recstore.records.diff import align_calls, value_diff, word_diff
from recstore.records.toolcalls import output_canonical

if TYPE_CHECKING:
    from recstore.compare.bulk import Comparison
    from recstore.spark.compare import ParquetLayout
    from recstore.store import Store

__all__ = ["DETAIL_LIMIT", "ORDER_LABELS", "PairBrowser", "browse_pairs", "pair_detail"]

#: Changed pairs whose drill-down is embedded (the rest show their row and the command that
#: prints their full comparison); a drill-down is a few KB, so 2,000 stay a few MB.
DETAIL_LIMIT = 2000
#: Report order groups, best first: a row's ``rank`` indexes this list.
ORDER_LABELS = ["regression", "fail", "changed", "unchanged"]
# Slices: a metadata key with more distinct values than this is an id, not a slice.
_MAX_SLICE_VALUES = 50
_MAX_TEXT = 20_000
_MAX_ARGS = 2_000
_MAX_STEPS = 1_000

ROW_FIELDS = [
    "pair",
    "key",
    "baseline",
    "candidate",
    "classification",
    "rank",
    "status_a",
    "status_b",
    "differences",
    "signals",
    "slices",
    "tools",
]


@dataclass
class PairBrowser:
    """Rows (``ROW_FIELDS`` lists, in report order), the names their indexes point to, slice
    counts and drill-downs by pair index: the data behind the report's pair table."""

    rows: list[list[Any]] = field(default_factory=list)
    signals: list[str] = field(default_factory=list)
    dimensions: list[dict[str, Any]] = field(default_factory=list)  # {name, values: [...]}
    tools: list[str] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    details: dict[int, dict[str, Any]] = field(default_factory=dict)
    detail_limit: int = DETAIL_LIMIT

    def to_json(self) -> dict[str, Any]:
        return {
            "fields": ROW_FIELDS,
            "rows": self.rows,
            "signals": self.signals,
            "dimensions": self.dimensions,
            "tools": self.tools,
            "order": ORDER_LABELS,
            "details": {str(k): v for k, v in self.details.items()},
            "detailLimit": self.detail_limit,
        }


def _rank(row: dict[str, Any]) -> int:
    if row["status_b"] == "failed" and row["status_a"] != "failed":
        return 0
    if row["classification"] == "fail":
        return 1
    if not row["equal"] or row["classification"] == "warn":
        return 2
    return 3


def _signal_masks(pairs: pa.Table) -> list[int]:
    """Per pair, a bit mask over ``SIGNALS`` (evaluated with the classification's own SQL)."""
    con = duckdb.connect()
    try:
        con.register("p", pairs)
        bits = " + ".join(
            f"(CASE WHEN coalesce(({sql}), FALSE) THEN {1 << i} ELSE 0 END)"
            for i, sql in enumerate(SIGNALS.values())
        )
        return [m for (m,) in con.execute(f"SELECT {bits} FROM p ORDER BY pair_index").fetchall()]
    finally:
        con.close()


def _run_facts(con: CompareConnection, pairs: pa.Table) -> tuple[dict[int, tuple[Any, ...]], dict[int, list[str]]]:
    """Per pair: (baseline agent, baseline metadata) and the tool names either run called; in
    pair order, which orders the slice dimensions (by the first pair that has each)."""
    con.register("_rep_pairs", pairs.select(["pair_index", "baseline_run_key", "candidate_run_key"]))
    try:
        facts = {
            i: (agent, metadata)
            for i, agent, metadata in con.execute(
                "SELECT p.pair_index, r.agent, r.metadata FROM _rep_pairs p "
                "JOIN runs r ON r.run_key = p.baseline_run_key ORDER BY p.pair_index"
            ).fetchall()
        }
        # sorted here: Spark's transpiled list aggregate keeps no order
        tools = {
            pair: sorted(names)
            for pair, names in con.execute(
                "SELECT pair_index, list(DISTINCT name) FROM ("
                " SELECT p.pair_index, t.name FROM _rep_pairs p "
                " JOIN tool_calls t ON t.run_key = p.baseline_run_key"
                " UNION ALL SELECT p.pair_index, t.name FROM _rep_pairs p"
                " JOIN tool_calls t ON t.run_key = p.candidate_run_key)"
                " WHERE name IS NOT NULL GROUP BY pair_index"
            ).fetchall()
        }
    finally:
        con.unregister("_rep_pairs")
    return facts, tools


def _dimensions(facts: dict[int, tuple[Any, ...]], skip_key: str | None) -> dict[str, dict[int, str]]:
    """Slice dimensions: ``agent`` and every scalar top-level metadata key with 2 to
    ``_MAX_SLICE_VALUES`` distinct values (the pairing key itself is an id, left out)."""
    dims: dict[str, dict[int, str]] = {"agent": {}}
    for pair, (agent, metadata) in facts.items():
        if agent is not None:
            dims["agent"][pair] = agent
        values = json.loads(metadata) if isinstance(metadata, str) else metadata
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            if isinstance(value, str | int | float | bool) and f"metadata.{key}" != skip_key:
                dims.setdefault(f"metadata.{key}", {})[pair] = (
                    value if isinstance(value, str) else canonical_json(value)
                )
    return {
        name: by_pair
        for name, by_pair in dims.items()
        if 2 <= len(set(by_pair.values())) <= _MAX_SLICE_VALUES
    }


def _slice_rows(dims: dict[str, dict[int, str]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The headline numbers per slice value, most pairs first."""
    out = []
    for name, by_pair in dims.items():
        counts: dict[str, Counter[Any]] = {}
        for row in rows:
            value = by_pair.get(row["pair_index"])
            if value is None:
                continue
            c = counts.setdefault(value, Counter())
            c["pairs"] += 1
            c["changed"] += not row["equal"]
            c[row["classification"]] += 1
            c["regressed"] += row["status_a"] != "failed" and row["status_b"] == "failed"
        for value, c in sorted(counts.items(), key=lambda kv: (-kv[1]["pairs"], kv[0])):
            out.append(
                {"dimension": name, "value": value, "pairs": c["pairs"], "changed": c["changed"],
                 "pass": c["pass"], "warn": c["warn"], "fail": c["fail"],
                 "still_failing": c["still_failing"],
                 "regressed": c["regressed"]}
            )
    return out


def browse_pairs(store: Store | ParquetLayout, comparison: Comparison, *,
                 detail_limit: int = DETAIL_LIMIT) -> PairBrowser:
    """Every pair of ``comparison`` in report order, with slices and the drill-downs of the
    first ``detail_limit`` changed pairs (records read from ``store`` at the compared
    revisions; a Spark :class:`~recstore.spark.compare.ParquetLayout` reads them from its
    events, as a store does)."""
    pairs = comparison.pairs
    rows = pairs.to_pylist()
    masks = _signal_masks(pairs)
    for row, mask in zip(rows, masks, strict=True):
        row["rank"], row["mask"] = _rank(row), mask
    rows.sort(key=lambda r: (r["rank"], -r["difference_count"], r["pair_index"]))
    browser = PairBrowser(signals=list(SIGNALS), detail_limit=detail_limit)
    chosen = [r for r in rows if r["rank"] < 3][:detail_limit]
    with store.reader() as con:
        facts, tools = _run_facts(con, pairs)
        revisions = {(r[side + "_run_key"], r[side + "_revision"])
                     for r in chosen for side in ("baseline", "candidate")}
        # a ParquetLayout's reader answers the same queries as a store's
        records = {(k, r): rec for k, r, rec in stored_revisions(
            con, sorted(revisions))}  # type: ignore[arg-type]
    dims = _dimensions(facts, comparison.pair_by)
    browser.slices = _slice_rows(dims, rows)
    value_index: dict[str, dict[str, int]] = {}
    for name, by_pair in dims.items():
        values = sorted(set(by_pair.values()))
        browser.dimensions.append({"name": name, "values": values})
        value_index[name] = {v: i for i, v in enumerate(values)}
    tool_names = sorted({t for names in tools.values() for t in names})
    tool_index = {t: i for i, t in enumerate(tool_names)}
    browser.tools = tool_names
    for row in rows:
        i = row["pair_index"]
        browser.rows.append([
            i, row["pair_key"], row["baseline_run_key"], row["candidate_run_key"],
            row["classification"], row["rank"], row["status_a"], row["status_b"],
            row["difference_count"], row["mask"],
            [_value_number(value_index[name], by_pair.get(i)) for name, by_pair in dims.items()],
            [tool_index[t] for t in tools.get(i, [])],
        ])
    for row in chosen:
        left = records.get((row["baseline_run_key"], row["baseline_revision"]))
        right = records.get((row["candidate_run_key"], row["candidate_revision"]))
        if left is not None and right is not None:
            browser.details[row["pair_index"]] = pair_detail(left, right)
    return browser


def _value_number(numbers: dict[str, int], value: str | None) -> int:
    """The index of a pair's dimension value, -1 when the pair has none."""
    return -1 if value is None else numbers.get(value, -1)


def _error(record: dict[str, Any]) -> str | None:
    name, message = record.get("errorName"), record.get("errorMessage")
    if name is None and message is None:
        return None
    return ": ".join(str(p) for p in (name, message) if p is not None)


def _text(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else dumps(value, indent=None)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _call_side(call: dict[str, Any] | None) -> dict[str, Any] | None:
    if call is None:
        return None
    return {"turn": call.get("turn"), "name": call.get("name"),
            "args": _text(call.get("arguments"), _MAX_ARGS)}


def _aligned_calls(left: dict[str, Any], right: dict[str, Any]) -> list[dict[str, Any]]:
    calls_a, calls_b = extract_tool_calls(left), extract_tool_calls(right)
    steps = []
    for step in align_calls(calls_a, calls_b)[:_MAX_STEPS]:
        a = calls_a[step.a] if step.a is not None else None
        b = calls_b[step.b] if step.b is not None else None
        out: dict[str, Any] = {"op": step.op, "a": _call_side(a), "b": _call_side(b)}
        if step.op == "changed" and a is not None and b is not None:
            out["diff"] = value_diff(a["arguments"], b["arguments"], limit=20)
        if a is not None and b is not None and output_canonical(a) != output_canonical(b):
            out["output"] = value_diff(a.get("output"), b.get("output"), limit=10)
        steps.append(out)
    return steps


def _policy_line(entry: Any) -> str:
    if not isinstance(entry, dict):
        return canonical_json(entry)
    raw = entry.get("resource")
    resource: dict[str, Any] = raw if isinstance(raw, dict) else {}
    what = " ".join(str(v) for v in (resource.get("kind"), resource.get("name")) if v is not None)
    reason = f" ({entry['reason']})" if entry.get("reason") is not None else ""
    return f"{what or '?'}: {entry.get('decision')}{reason}"


def _guardrail_line(entry: Any) -> str:
    if not isinstance(entry, dict):
        return canonical_json(entry)
    reason = f" ({entry['reason']})" if entry.get("reason") is not None else ""
    return f"{entry.get('guardrailName')}: {entry.get('decision')}{reason}"


def _decision_changes(left: dict[str, Any], right: dict[str, Any]) -> list[dict[str, Any]]:
    """Policy and guardrail entries that differ, by position (as aioc compares them)."""
    out = []
    for section, key, line in (("policy", "policyDecisions", _policy_line),
                               ("guardrails", "guardrailDecisions", _guardrail_line)):
        a, b = left.get(key) or [], right.get(key) or []
        for i in range(max(len(a), len(b))):
            ea = a[i] if i < len(a) else None
            eb = b[i] if i < len(b) else None
            if i < len(a) and i < len(b) and canonical_json(ea) == canonical_json(eb):
                continue
            out.append({
                "section": section, "index": i,
                "a": line(ea) if i < len(a) else None,
                "b": line(eb) if i < len(b) else None,
                "diff": value_diff(ea, eb, limit=10) if i < len(a) and i < len(b) else [],
            })
    return out


def pair_detail(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    """What a person needs to see of one pair: statuses and errors, the responses as a word
    diff, the aligned tool calls and the decision changes (JSON-ready)."""
    response_a, response_b = left.get("response"), right.get("response")
    text_a, text_b = (r if isinstance(r, str) else "" if r is None else canonical_json(r)
                      for r in (response_a, response_b))
    return {
        "status": [left.get("status"), right.get("status")],
        "error": [_error(left), _error(right)],
        "response": word_diff(text_a[:_MAX_TEXT], text_b[:_MAX_TEXT]),
        "responseCut": max(len(text_a), len(text_b)) > _MAX_TEXT,
        "calls": _aligned_calls(left, right),
        "decisions": _decision_changes(left, right),
    }

