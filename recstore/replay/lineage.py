"""Replays in the store: read sources, write replay runs with lineage, walk derived runs.

A replay run is ingested through :meth:`Store.ingest_records` as a new stream; its ``replay_of``
lineage row (detail: source revision and record hash, source file, mode, input mode, harness
hash, stats, per-call provenance, the report's verdict) is written in the same transaction. The
source run is only read, never written. The ``replays`` and ``replay_calls`` views
(``schema/020_replay.sql``) expose the detail as columns.
"""

from __future__ import annotations

from collections.abc import Iterable

from recstore.replay.replay import ReplayReport
from recstore.store import Store
from recstore.store.store import StoredRun

__all__ = [
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


def lineage_tree(store: Store, ref: str) -> dict:
    """``{run_key, run_id, relation, status, children: [...]}``: every run derived from ``ref``
    (replays of it, replays of those, thread continuations, ...), from the ``lineage`` view."""
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
        children.setdefault(row[0], []).append(row)

    def node(key: str, relation: str | None, run_id, status, report, mode, seen: frozenset) -> dict:
        out = {"run_key": key, "run_id": run_id, "relation": relation, "status": status}
        if report is not None:
            out.update(report_status=report, mode=mode)
        kids = []
        for _, child, rel, cid, cstatus, creport, cmode in children.get(key, []):
            if child in seen:  # lineage is a DAG in practice; never loop on a bad row
                continue
            kids.append(node(child, rel, cid, cstatus, creport, cmode, seen | {child}))
        out["children"] = kids
        return out

    return node(root, None, root_row[0], root_row[1], None, None, frozenset({root}))


def render_tree(tree: dict) -> str:
    """The tree as indented text, one run per line."""
    lines: list[str] = []

    def walk(n: dict, prefix: str, last: bool, top: bool) -> None:
        label = f"{n['run_key']} [{n['status']}]"
        if n.get("relation"):
            extra = f" {n['mode']} {n['report_status']}" if n.get("report_status") else ""
            label = f"{label} ({n['relation']}{extra})"
        lines.append(label if top else f"{prefix}{'└── ' if last else '├── '}{label}")
        kids = n["children"]
        for i, kid in enumerate(kids):
            walk(kid, prefix if top else prefix + ("    " if last else "│   "), i == len(kids) - 1, False)

    walk(tree, "", True, True)
    return "\n".join(lines)
