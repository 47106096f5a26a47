"""Row-for-row comparison of two Parquet layouts of the store's views (``recstore export`` of a
store, ``recstore spark build`` of the same files), read with DuckDB: same views, same day
partitions, same columns in the same Parquet types, and the same multiset of rows."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from recstore.query import default_catalog
from recstore.query.export import MANIFEST

# Columns a build cannot equal by design (recstore.spark.build's docstring): when and by which
# process the store wrote, the log's hash chain, and the sha256 of each input (the build never
# reads an input whole).
BUILD_ONLY_DIFFERS = {
    "batches": ("ingest_id", "started_at", "committed_at", "pid", "prev_hash", "hash"),
    "sources": ("sha256", "opened_at", "ingested_at"),
    "rejects": ("rejected_at",),
}


def _parquet(directory: Path) -> str:
    return f"read_parquet('{directory}/**/*.parquet', hive_partitioning = true)"


def _days(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("day="))


def layout_differences(store_dir: Path, build_dir: Path) -> list[str]:
    """Where ``build_dir`` does not lay out views, partitions and columns as ``store_dir``."""
    con = duckdb.connect()
    views = sorted(p.name for p in store_dir.iterdir() if p.is_dir())
    built = sorted(p.name for p in build_dir.iterdir() if p.is_dir())
    problems = [] if views == built else [f"views: {views} != {built}"]
    manifests = [json.loads((d / MANIFEST).read_text()) for d in (store_dir, build_dir)]
    for field in ("format", "complete", "views", "partitioned"):
        if manifests[0].get(field) != manifests[1].get(field):
            problems.append(f"manifest {field}: {manifests[0].get(field)} != "
                            f"{manifests[1].get(field)}")
    for view in set(views) & set(built):
        if _days(store_dir / view) != _days(build_dir / view):
            problems.append(f"{view}: other day partitions")
        columns = [con.execute(f"DESCRIBE SELECT * FROM {_parquet(d / view)}").fetchall()
                   for d in (store_dir, build_dir)]
        if [c[:2] for c in columns[0]] != [c[:2] for c in columns[1]]:
            problems.append(f"{view}: columns {columns[0]} != {columns[1]}")
    return problems


def row_differences(store_dir: Path, build_dir: Path, view: str) -> tuple[int, list[tuple]]:
    """The number of rows of ``view`` in the store's export, and the rows only one side has
    (side first); JSON columns are compared as JSON values (Spark prints 1e21 as 1.0E21)."""
    con = duckdb.connect()
    columns = con.execute(f"DESCRIBE SELECT * FROM {_parquet(store_dir / view)}").fetchall()
    catalog = default_catalog().views.get(view)
    json_columns = {c.name for c in catalog.columns if c.type == "JSON"} if catalog else set()
    skipped = set(BUILD_ONLY_DIFFERS.get(view, ()))
    select = ", ".join(f'json("{name}")' if name in json_columns else f'"{name}"'
                       for name, *_ in columns if name not in skipped)
    sides = {side: f"SELECT {select} FROM {_parquet(d / view)}"
             for side, d in (("store", store_dir), ("build", build_dir))}
    only = con.execute(
        f"(SELECT 'store only', * FROM ({sides['store']} EXCEPT ALL {sides['build']})) "
        f"UNION ALL (SELECT 'build only', * FROM ({sides['build']} EXCEPT ALL {sides['store']}))"
    ).fetchall()
    (count,) = con.execute(f"SELECT count(*) FROM {_parquet(store_dir / view)}").fetchone()
    return count, only
