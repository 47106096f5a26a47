"""A DuckDB-like connection that runs the store's SQL on Spark, over a Parquet layout.

The comparison engine (:mod:`recstore.compare`) is DuckDB SQL run through a connection's
``execute``; :class:`SparkConnection` takes the same statements, transpiles each with sqlglot and
recstore's dialect rules (:func:`recstore.query.dialects.to_dialect`, as the Spark build does)
and runs it on a Spark session over the views of a ``recstore export`` or ``recstore spark
build`` directory. So one definition of each statement serves both engines.

What it understands is what the comparison sends: ``SELECT`` (a cursor with ``description``,
``fetchall``, ``fetchone``, ``fetchmany``), ``CREATE OR REPLACE TEMP TABLE name AS SELECT``
(kept in memory until :meth:`SparkConnection.close`), ``CREATE OR REPLACE TEMP VIEW``, ``CREATE
TEMP TABLE name (columns)`` (empty), ``?`` parameters (put in as literals), and
``register``/``unregister`` of an Arrow table or a Spark DataFrame.

The layout's views are registered the first time a statement names them; a few store relations
the comparison reads are derived from them (:data:`STORE_RELATIONS`): a layout holds the
current revision of each run only, which is all a comparison on it reads.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from recstore.errors import InputError
from recstore.query.dialects import to_dialect
from recstore.query.export import PARTITION_COLUMN, parquet_view_paths
from recstore.query.views import Catalog
from recstore.spark.definitions import spark_definitions

__all__ = ["NO_LAYOUT", "STORE_RELATIONS", "RunSet", "SparkConnection", "SparkCursor"]

NO_LAYOUT = ("no exported views here; write them with `recstore spark build NDJSON... DIR` or "
             "`recstore export DIR`")
# Store relations a comparison reads, as DuckDB SQL over the layout's views: ``runs`` shows
# every proj_runs column (and run_rows's run_id) a comparison or a run selection reads, and the
# stream row of the current revision.
STORE_RELATIONS: dict[str, str] = {
    "proj_runs": "SELECT * FROM runs",
    "run_rows": "SELECT * FROM runs",
    "streams": "SELECT run_key AS stream_key, revision, first_seq, last_seq, "
               "unhex(record_hash) AS record_hash FROM runs",
    # the prefix of each run's whole input (what --pair-by input_scope reads), not every prefix
    "proj_input_prefixes": "SELECT feature_id AS run_seq, prefix_len, prefix_key "
                           "FROM cmp_input_scopes",
}


@dataclass
class RunSet:
    """A relation kept on Spark (e.g. one side's selected run keys) with its number of rows,
    which :meth:`SparkConnection.register` accepts as a DuckDB connection accepts Arrow."""

    frame: Any
    num_rows: int


class SparkCursor:
    """The rows of one statement, as DuckDB's cursor gives them."""

    def __init__(self, frame: Any | None):
        self._frame = frame
        self._rows: Iterator[Any] | None = None
        self.description = [(name,) for name in frame.columns] if frame is not None else None

    def _iter(self) -> Iterator[Any]:
        # collect(): one job; toLocalIterator() runs one per partition, which costs more for the
        # small results a comparison reads (the pair rows go through Arrow: to_arrow_table)
        if self._rows is None:
            self._rows = iter(()) if self._frame is None else iter(self._frame.collect())
        return self._rows

    def fetchall(self) -> list[tuple]:
        return [tuple(row) for row in self._iter()]

    def fetchone(self) -> tuple | None:
        row = next(self._iter(), None)
        return None if row is None else tuple(row)

    def fetchmany(self, size: int) -> list[tuple]:
        rows = self._iter()
        return [tuple(row) for _, row in zip(range(size), rows, strict=False)]

    def to_arrow_table(self) -> pa.Table:
        """The rows as Arrow, every column nullable (as DuckDB gives them)."""
        table = self._frame.toArrow()
        return table.cast(pa.schema([f.with_nullable(True) for f in table.schema]))


class SparkConnection:
    """Run DuckDB SQL on ``spark`` over the Parquet layout in ``directory`` (module docstring).

    Raises:
        InputError: ``directory`` holds no layout, or lacks a view a statement reads (an export
            written before the view was part of the layout).
    """

    def __init__(self, spark: Any, directory: str | Path):
        self.spark = spark
        self.directory = str(directory)
        self._paths = parquet_view_paths(directory)
        if not self._paths:
            raise InputError(NO_LAYOUT, source=self.directory)
        definitions = spark_definitions()
        self.catalog: Catalog = definitions.catalog
        self._types = definitions.tables
        self._registered: set[str] = set()
        self._kept: dict[str, Any] = {}  # temp tables: name -> cached DataFrame
        self._views: set[str] = set()  # temp views and registered relations

    def __enter__(self) -> SparkConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Drop the temporary tables and views this connection made."""
        for frame in self._kept.values():
            frame.unpersist()
        for name in {*self._kept, *self._registered, *self._views}:
            self.spark.catalog.dropTempView(name)
        self._kept.clear()
        self._registered.clear()
        self._views.clear()

    # -- the DuckDB connection methods the comparison calls -------------------------------

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> SparkCursor:
        tree = _with_parameters(sqlglot.parse_one(sql, read="duckdb"), params or ())
        if isinstance(tree, exp.Create):
            self._create(tree)
            return SparkCursor(None)
        return SparkCursor(self._frame(tree))

    def sql(self, sql: str) -> SparkCursor:
        return self.execute(sql)

    def register(self, name: str, rows: Any) -> None:
        if isinstance(rows, pa.Table):
            frame = self.spark.createDataFrame(rows)
        else:
            frame = rows.frame if isinstance(rows, RunSet) else rows
        frame.createOrReplaceTempView(name)
        self._views.add(name)

    def unregister(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)
        self._views.discard(name)

    def relation(self, sql: str) -> Any:
        """The rows of a DuckDB query as a Spark DataFrame (not collected)."""
        return self._frame(sqlglot.parse_one(sql, read="duckdb"))

    # -- internals ----------------------------------------------------------------------------

    def _frame(self, tree: exp.Expression) -> Any:
        self._register_read(tree)
        return self.spark.sql(to_dialect(tree, "spark", self.catalog))

    def _create(self, create: exp.Create) -> None:
        name = create.this.this.name if isinstance(create.this, exp.Schema) else create.this.name
        kind = create.args.get("kind", "").upper()
        if isinstance(create.this, exp.Schema):  # CREATE TEMP TABLE name (column type, ...)
            columns = ", ".join(
                f"CAST(NULL AS {c.args['kind'].sql('spark')}) AS `{c.name}`"
                for c in create.this.expressions)
            frame = self.spark.sql(f"SELECT {columns} WHERE FALSE")
        else:
            frame = self._frame(create.expression)
        if kind == "TABLE":
            self.keep(name, frame)
        else:
            self._views.add(name)
            frame.createOrReplaceTempView(name)

    def keep(self, name: str, frame: Any) -> None:
        """Make ``frame`` the temp table ``name``: computed now, as DuckDB computes a temp
        table, and kept without its plan, so a later statement reads the rows and does not plan
        again the statements that made them (which took Spark seconds per statement once a few
        temp tables were stacked)."""
        if name in self._kept:
            self._kept.pop(name).unpersist()
        frame = frame.localCheckpoint(eager=True)
        self._kept[name] = frame
        frame.createOrReplaceTempView(name)

    def _register_read(self, tree: exp.Expression) -> None:
        """Register the layout views (and derived store relations) ``tree`` reads."""
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            name = table.name.lower()
            if not name or name in ctes or self._defines(name):
                continue
            if name in STORE_RELATIONS:  # relation() registers what it reads in turn
                self.relation(STORE_RELATIONS[name]).createOrReplaceTempView(name)
                self._registered.add(name)
            elif name in self._paths:
                self._register_view(name)
            elif name in self._types or name in self.catalog.views:
                raise InputError(
                    f"view {name} is not in this layout; write the layout again with "
                    "`overwrite`", source=self.directory)

    def _defines(self, name: str) -> bool:
        """Whether ``name`` is already a temp view of this connection's (a layout view, a store
        relation, a temp table or view, or a registered relation)."""
        return name in self._registered or name in self._kept or name in self._views

    def _register_view(self, name: str) -> None:
        path = str(self._paths[name])
        frame = self.spark.read.option("basePath", path).parquet(path)
        if PARTITION_COLUMN in frame.columns:
            frame = frame.drop(PARTITION_COLUMN)
        frame.createOrReplaceTempView(name)
        self._registered.add(name)


def _with_parameters(tree: exp.Expression, params: Sequence[Any]) -> exp.Expression:
    """``tree`` with its ``?`` placeholders replaced by ``params`` as SQL literals."""
    placeholders = list(tree.find_all(exp.Placeholder, bfs=False))  # in text order
    if len(placeholders) != len(params):
        raise ValueError(f"{len(placeholders)} parameters in the statement, {len(params)} given")
    for node, value in zip(placeholders, params, strict=True):
        node.replace(_literal(value))
    return tree


def _literal(value: Any) -> exp.Expression:
    if isinstance(value, list | tuple):
        return exp.Array(expressions=[_literal(v) for v in value])
    return exp.convert(value)
