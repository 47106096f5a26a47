"""Replays in the store: read sources, write replay runs with lineage, walk derived runs.

A replay run is ingested through :meth:`Store.ingest_records` as a new stream; its ``replay_of``
lineage row (detail: source revision and record hash, source file, mode, input mode, harness
hash, stats, per-call provenance, the report's verdict) is written in the same transaction. The
source run is only read, never written. The ``replays`` and ``replay_calls`` views
(``schema/020_replay.sql``) expose the detail as columns.
"""

from __future__ import annotations

from collections.abc import Iterable

from recstore.errors import InputError
from recstore.replay.replay import ReplayReport
from recstore.store import Store
from recstore.store.store import StoredRun

__all__ = [
    "TREE_LIMIT",
    "SourceRun",
    "lineage_row",
    "lineage_tree",
    "load_source",
    "load_sources",
    "render_tree",
    "store_replays",
]

RELATION = "replay_of"


# A stored run a replay starts from, with the identity its lineage row records.
SourceRun = StoredRun


def load_source(store: Store, ref: str) -> SourceRun:
    """The current revision of the run ``ref`` names (key, id or unique prefix)."""
    return load_sources(store, [store.resolve_run(ref)])[0]


def load_sources(store: Store, run_keys: list[str]) -> list[SourceRun]:
    """The current revisions of stored runs, in the order given (see ``Store.load_runs``)."""
    return store.load_runs(run_keys)


def lineage_row(source: SourceRun, record: dict, report: ReplayReport, provider: str) -> dict:
    """The ``replay_of`` lineage row for one replay (``Store.ingest_records`` format)."""
    harness = (record.get("metadata") or {}).get("harness")
    detail = {
        "sourceRevision": source.revision,
        "sourceRecordHash": source.record_hash,
        "sourceUri": source.source_uri,
        "mode": report.mode,
        "inputMode": report.input_mode,
        "harnessHash": harness.get("descriptorHash") if isinstance(harness, dict) else None,
        "harness": harness,
        "provider": provider,
        "status": report.status,
        "reason": report.reason,
        "replayStats": report.stats.to_json(),
        "unconsumedRecordedOutputs": report.unconsumed,
        "calls": [call.to_json() for call in report.calls],
        "error": report.error,
    }
    return {
        "relation": RELATION,
        "parent_run_key": source.run_key,
        "parent_run_id": source.record.get("runId"),
        "child": record["runId"],
        "detail": detail,
    }


def store_replays(
    store: Store, replays: Iterable[tuple[SourceRun, dict | None, ReplayReport, str]]
) -> list[str]:
    """Ingest replay records (failed ones too) with their lineage in one transaction; returns
    the replay run keys. Replays without a record (they could not start) are skipped."""
    records, rows = [], []
    for source, record, report, provider in replays:
        if record is None:
            continue
        records.append(record)
        rows.append(lineage_row(source, record, report, provider))
    if not records:
        return []
    summary = store.ingest_records(records, source_uri="recstore:replay", tags={"kind": "replay"}, lineage=rows)
    return summary.run_keys


#: Runs ``lineage_tree`` shows by default before it stops (``recstore lineage --limit``).
TREE_LIMIT = 500


def lineage_tree(store: Store, ref: str, *, limit: int = TREE_LIMIT) -> dict:
    """``{run_key, run_id, relation, status, children: [...]}``: every run derived from ``ref``
    (replays of it, replays of those, thread continuations, ...), from the ``lineage`` view.

    Lineage rows come from input (``metadata.replayOfRunId``, rows attached at ingest) and can
    form cycles or dense graphs, so the walk is guarded. Each run's subtree is shown once: a run
    met again is a leaf with ``marker`` ``"cycle"`` (it is an ancestor on this path: the link
    points back up) or ``"repeat"`` (its subtree is shown earlier). At most ``limit`` nodes are
    shown; when the walk stops early the root gets ``truncated: {limit, runsShown,
    runsReachable}``.
    """
    if limit < 1:
        raise InputError("the lineage limit must be at least 1")
    root = store.resolve_run(ref)
    with store.reader() as con:
        rows = con.execute(
            "SELECT l.parent_run_key, l.child_run_key, l.relation, r.run_id, r.status, "
            "rp.report_status, rp.mode "
            "FROM lineage l JOIN runs r ON r.run_key = l.child_run_key "
            "LEFT JOIN replays rp ON rp.replay_run_key = l.child_run_key AND l.relation = 'replay_of' "
            "WHERE l.parent_run_key IS NOT NULL"
        ).fetchall()
        root_row = con.execute("SELECT run_id, status FROM runs WHERE run_key = ?", [root]).fetchone()
    children: dict[str, list[tuple]] = {}
    for row in sorted(set(rows), key=lambda r: (r[1], r[2])):
        children.setdefault(row[0], []).append(row[1:])
    tree = _node(root, None, root_row[0], root_row[1], None, None)
    shown = _walk(tree, children, limit)
    if shown["omitted"]:
        tree["truncated"] = {"limit": limit, "runsShown": len(shown["runs"]),
                             "runsReachable": len(_reachable(root, children))}
    return tree


def _node(key: str, relation: str | None, run_id, status, report, mode) -> dict:
    out = {"run_key": key, "run_id": run_id, "relation": relation, "status": status}
    if report is not None:
        out.update(report_status=report, mode=mode)
    out["children"] = []
    return out


def _walk(tree: dict, children: dict[str, list[tuple]], limit: int) -> dict:
    """Fill ``tree`` depth first (iteratively: lineage chains can be thousands deep), expanding
    each run once and stopping after ``limit`` nodes; returns the runs shown and whether any
    link was left out."""
    expanded = {tree["run_key"]}
    count = 1
    # (node to fill, the runs on the path from the root to it)
    stack: list[tuple[dict, frozenset]] = [(tree, frozenset({tree["run_key"]}))]
    omitted = False
    while stack:
        parent, path = stack.pop()
        pending = []
        for child, relation, run_id, status, report, mode in children.get(parent["run_key"], []):
            if count >= limit:
                omitted = True
                break
            node = _node(child, relation, run_id, status, report, mode)
            parent["children"].append(node)
            count += 1
            if child in path:
                node["marker"] = "cycle"
            elif child in expanded:
                node["marker"] = "repeat"
            else:
                expanded.add(child)
                pending.append((node, path | {child}))
        stack.extend(reversed(pending))
    return {"runs": expanded, "omitted": omitted}


def _reachable(root: str, children: dict[str, list[tuple]]) -> set[str]:
    seen, todo = {root}, [root]
    while todo:
        for child, *_ in children.get(todo.pop(), []):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


_MARKERS = {"cycle": " ↻ cycle: an ancestor on this path", "repeat": " (subtree shown above)"}


def render_tree(tree: dict) -> str:
    """The tree as indented text, one run per line (cycles and repeats marked, a note when the
    walk stopped at its limit)."""
    lines: list[str] = []
    # (node, prefix of its line, prefix of its children's lines)
    stack: list[tuple[dict, str, str]] = [(tree, "", "")]
    while stack:
        node, lead, indent = stack.pop()
        label = f"{node['run_key']} [{node['status']}]"
        if node.get("relation"):
            extra = f" {node['mode']} {node['report_status']}" if node.get("report_status") else ""
            label = f"{label} ({node['relation']}{extra})"
        lines.append(lead + label + _MARKERS.get(node.get("marker"), ""))
        kids = node["children"]
        for i, kid in reversed(list(enumerate(kids))):
            last = i == len(kids) - 1
            stack.append((kid, indent + ("└── " if last else "├── "),
                          indent + ("    " if last else "│   ")))
    cut = tree.get("truncated")
    if cut:
        lines.append(f"… stopped after {cut['limit']} lines: {cut['runsShown']} of "
                     f"{cut['runsReachable']} derived runs shown (--limit N shows more)")
    return "\n".join(lines)
