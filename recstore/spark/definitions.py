"""The store's definitions as Spark SQL: table columns, derived columns and public views.

Everything comes from one place, the shipped ``schema/*.sql`` applied to a scratch in-memory
DuckDB database (as :func:`recstore.query.views.default_catalog` does): table columns and types
from DuckDB's catalogue, each public view's SQL as DuckDB keeps it, and the macros the views call
(``rs_json``, ``rs_member``, ``rs_time``, ``current_events``, ...). A view's SQL has its macros
expanded in place and is then transpiled by sqlglot with recstore's dialect rules
(:func:`recstore.query.dialects.to_dialect`, including :mod:`recstore.query.spark_json`), so the
Spark build computes each view from the same definition the store uses.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import duckdb
import sqlglot
from sqlglot import exp

from recstore.query.dialects import to_dialect
from recstore.query.views import (
    PUBLIC_VIEWS,
    Catalog,
    layout_catalog,
    schema_connection,
)
from recstore.store.db import schema_files

__all__ = [
    "SparkDefinitions", "duckdb_to_spark", "expand_macros", "spark_definitions", "spark_type",
]

# Views of the store layer (schema files below 010) and the helper views every layer reads
# (run_rows, the cmp_* feature views) are what a build computes; the public views later layers add
# (comparisons, replays, sweeps) show what those commands recorded in a store, which raw records
# never hold, so a build writes them empty, with their columns.
_STORE_LAYER = 10
_VIEW_DDL = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?VIEW\s+(\w+)", re.IGNORECASE)

# Spark type of each DuckDB type a store table or public view uses (after the export's casts:
# JSON is text, unsigned integers the next wider signed type).
_SPARK_TYPES = {
    "VARCHAR": "STRING", "JSON": "STRING", "INTEGER": "INT", "BIGINT": "BIGINT",
    "BOOLEAN": "BOOLEAN", "BLOB": "BINARY", "TIMESTAMP": "TIMESTAMP_NTZ", "DOUBLE": "DOUBLE",
    "UBIGINT": "DECIMAL(20, 0)", "TIMESTAMP WITH TIME ZONE": "TIMESTAMP",
    "BIGINT[]": "ARRAY<BIGINT>", "VARCHAR[]": "ARRAY<STRING>",
    "MAP(VARCHAR, VARCHAR)": "MAP<STRING, STRING>",
}


def spark_type(duckdb_type: str) -> str:
    """The Spark SQL type holding a DuckDB column type as the Parquet export writes it."""
    try:
        return _SPARK_TYPES[duckdb_type.upper()]
    except KeyError:
        raise ValueError(f"no Spark type for DuckDB type {duckdb_type}") from None


@dataclass(frozen=True)
class Macro:
    """A DuckDB macro: parameter names and body (an expression, or a query for a table
    macro)."""

    params: tuple[str, ...]
    body: exp.Expression


@dataclass(frozen=True)
class SparkDefinitions:
    """Tables and views of a store, ready for Spark."""

    tables: dict[str, tuple[tuple[str, str], ...]]  # table -> ((column, DuckDB type), ...)
    # every view in creation order -> Spark SQL; None: a public view empty in a build
    views: dict[str, str | None]
    catalog: Catalog  # the views a build writes (recstore.query.views.layout_catalog)
    macros: dict[str, Macro]

    def to_spark(self, sql: str) -> str:
        """Spark SQL of a DuckDB query that may call the store's macros."""
        return duckdb_to_spark(sql, self.macros, self.catalog)


def _substitute(body: exp.Expression, params: tuple[str, ...],
                args: list[exp.Expression]) -> exp.Expression:
    values = dict(zip(params, args, strict=True))

    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name in values:
            return values[node.name].copy()
        return node

    return body.copy().transform(replace)


def expand_macros(tree: exp.Expression, macros: dict[str, Macro]) -> exp.Expression:
    """``tree`` with every call of a macro in ``macros`` replaced by its body (arguments put in
    for the parameters, nested macros expanded too); a table macro in FROM becomes a subquery
    under the same alias."""
    def expand(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Anonymous):
            macro = macros.get(node.this.name.lower())
            if macro is not None:
                body = _substitute(macro.body, macro.params, list(node.this.expressions))
                alias = node.alias or node.this.name
                return exp.Subquery(this=expand_macros(body, macros),
                                    alias=exp.TableAlias(this=exp.to_identifier(alias)))
        if isinstance(node, exp.Anonymous):
            macro = macros.get(node.name.lower())
            if macro is not None:
                body = _substitute(macro.body, macro.params, list(node.expressions))
                return exp.Paren(this=expand_macros(body, macros))
        return node

    return tree.copy().transform(expand)


def _macros(con: duckdb.DuckDBPyConnection) -> dict[str, Macro]:
    rows = con.execute(
        "SELECT function_name, function_type, parameters, macro_definition FROM duckdb_functions() "
        "WHERE function_type IN ('macro', 'table_macro') AND schema_name = 'main' AND NOT internal"
    ).fetchall()
    return {
        name.lower(): Macro(tuple(params), sqlglot.parse_one(body, read="duckdb"))
        for name, _kind, params, body in rows
    }


def _views_in_order() -> list[tuple[str, bool]]:
    """Every view the schema files create, in creation order (a view reads views before it),
    each with whether a build computes it (module docstring: not a later layer's public view)."""
    names: dict[str, bool] = {}
    for version, _name, path in schema_files():
        for name in _VIEW_DDL.findall(path.read_text(encoding="utf-8")):
            names[name.lower()] = version < _STORE_LAYER or name.lower() not in PUBLIC_VIEWS
    return list(names.items())


def duckdb_to_spark(sql: str, macros: dict[str, Macro], catalog: Catalog | None = None) -> str:
    """Spark SQL of a DuckDB query (or of the query of a ``CREATE VIEW``) calling ``macros``."""
    create = sqlglot.parse_one(sql, read="duckdb")
    query = create.expression if isinstance(create, exp.Create) else create
    expanded = expand_macros(query, macros)
    # printed and read again, so paths put in for macro parameters parse as JSON paths
    return to_dialect(sqlglot.parse_one(expanded.sql("duckdb"), read="duckdb"), "spark", catalog)


@functools.lru_cache(maxsize=1)
def spark_definitions() -> SparkDefinitions:
    """The store's tables, macros and views for Spark (read once per process)."""
    with schema_connection() as con:
        catalog = layout_catalog(con)
        tables: dict[str, list[tuple[str, str]]] = {}
        for table, column, dtype in con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE schema_name = 'main' AND database_name = current_database() "
            "AND table_name IN (SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main')"
            " ORDER BY table_name, column_index"
        ).fetchall():
            tables.setdefault(table, []).append((column, dtype))
        macros = _macros(con)
        views: dict[str, str | None] = {}
        for name, computed in _views_in_order():
            if name in tables:
                continue  # a view a later schema file replaced with a table
            (sql,) = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = ? "
                                 "AND schema_name = 'main'", [name]).fetchone()
            views[name] = duckdb_to_spark(sql, macros, catalog) if computed else None
        return SparkDefinitions({t: tuple(c) for t, c in tables.items()}, views, catalog, macros)
