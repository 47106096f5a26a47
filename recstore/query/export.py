"""Export the public views as zstd Parquet for other engines (Spark, Trino, Polars, DuckDB).

Layout: ``DIR/<view>/day=YYYY-MM-DD/data_0.parquet`` — hive-partitioned by the day the run
started (``day=unknown`` when it has no start time) for ``runs`` and every view whose rows belong
to a run; other views (sources, batches, ...) and empty views are one unpartitioned file.
Columns Spark cannot read are converted: UUID, JSON, INTERVAL and TIME WITH TIME ZONE become
strings, 128-bit integers DOUBLE, unsigned integers the next wider signed type (UBIGINT
``DECIMAL(20, 0)``). Reading back, ``day`` is an extra partition column.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
from sqlglot import exp

from recstore.progress import NO_PROGRESS, Progress
from recstore.query.views import Catalog, View, catalog_from_connection

if TYPE_CHECKING:
    from recstore.store import Store

PARTITION_COLUMN = "day"
_SPARK_CASTS = {"UUID": "VARCHAR", "JSON": "VARCHAR", "HUGEINT": "DOUBLE", "UHUGEINT": "DOUBLE",
                "UBIGINT": "DECIMAL(20, 0)", "UINTEGER": "BIGINT", "USMALLINT": "INTEGER",
                "UTINYINT": "SMALLINT", "INTERVAL": "VARCHAR", "TIME WITH TIME ZONE": "VARCHAR"}


@dataclass
class ExportSummary:
    """Rows written per view and where."""

    directory: Path
    rows: dict[str, int] = field(default_factory=dict)
    partitioned: list[str] = field(default_factory=list)


def export_views(store: Store, directory: str | Path,
                 progress: Progress = NO_PROGRESS) -> ExportSummary:
    """Write every public view of ``store`` under ``directory`` (replacing earlier exports of
    those views) and return the row counts; ``progress`` follows the views written."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    summary = ExportSummary(directory)
    with store.reader() as con:
        catalog = catalog_from_connection(con)
        for done, view in enumerate(catalog.views.values(), start=1):
            summary.rows[view.name] = _export_view(con, catalog, view, directory / view.name)
            progress.update(done, len(catalog.views))
            if partitionable(catalog, view):
                summary.partitioned.append(view.name)
    return summary


def _export_view(con: duckdb.DuckDBPyConnection, catalog: Catalog, view: View,
                 target: Path) -> int:
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    count = con.execute(f"SELECT count(*) FROM {view.name}").fetchone()[0]  # type: ignore[index]
    options = "FORMAT parquet, COMPRESSION zstd"
    partitioned = bool(count) and partitionable(catalog, view)
    select = export_select(view, partitioned)
    if partitioned:
        options += f", PARTITION_BY ({PARTITION_COLUMN}), OVERWRITE true"
        to = _literal(str(target))
    else:  # empty or not run-scoped: one file, so a reader still finds the columns
        to = _literal(str(target / "data_0.parquet"))
    con.execute(f"COPY ({select.sql('duckdb')}) TO {to} ({options})")
    return int(count)


def export_select(view: View, partitioned: bool) -> exp.Select:
    """The rows of ``view`` as the export writes them (DuckDB SQL; the Spark build transpiles
    it): every column in a type Spark reads, and with ``partitioned`` the ``day`` its run
    started."""
    select = spark_safe_select(view)
    if partitioned:
        select = select.select(_day_expression(view), copy=False)
        if view.name != "runs":
            select = select.join(exp.to_table("runs").as_("run"),
                                 on=f"run.run_key = {view.name}.run_key", join_type="left",
                                 copy=False)
    return select


def spark_safe_select(view: View) -> exp.Select:
    """``SELECT`` of every column of ``view``, converting types Spark cannot read from Parquet."""
    columns = []
    for column in view.columns:
        ref = exp.column(column.name, table=view.name, quoted=True)
        cast = _SPARK_CASTS.get(column.type.upper())
        columns.append(exp.cast(ref, cast).as_(column.name, quoted=True) if cast else ref)
    return exp.select(*columns).from_(exp.to_table(view.name))


def partitionable(catalog: Catalog, view: View) -> bool:
    """Whether ``view``'s rows belong to runs, so the export partitions them by day."""
    return view.name == "runs" or view.name in catalog.run_children()


def _day_expression(view: View) -> exp.Expression:
    table = "runs" if view.name == "runs" else "run"
    day = exp.func("strftime", exp.column("started", table=table), exp.Literal.string("%Y-%m-%d"),
                   dialect="duckdb")
    return exp.func("coalesce", day, exp.Literal.string("unknown")).as_(PARTITION_COLUMN)


def _literal(text: str) -> str:
    return exp.Literal.string(text).sql("duckdb")


def parquet_view_paths(directory: str | Path) -> dict[str, Path]:
    """The exported view directories under ``directory`` by view name."""
    directory = Path(directory)
    return {p.name: p for p in sorted(directory.iterdir()) if p.is_dir()} if directory.is_dir() \
        else {}
