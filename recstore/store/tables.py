"""Bulk inserts: rows (dicts) -> one Arrow table -> ``INSERT INTO t SELECT ... FROM arrow``.

executemany is 30-70x slower than an Arrow insert on DuckDB (tech-notes §1.1), so every write of
the store goes through :func:`insert_rows`. Column names and types come from the live table, so
the DDL in ``schema/*.sql`` stays the single definition. A TIMESTAMP column ``x`` next to an
``x_text`` column is parsed from the text in SQL (ISO 8601 with offset -> UTC), vectorized.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["StagedInsert", "insert_rows", "stage_rows", "table_columns"]

# \uD800-\uDBFF not followed by a low surrogate escape, or \uDC00-\uDFFF not preceded by a high one
_LONE_SURROGATE_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)

_ARROW_TYPES = {
    "VARCHAR": pa.string(),
    "JSON": pa.string(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "BOOLEAN": pa.bool_(),
    "BLOB": pa.binary(),
    "TIMESTAMP": pa.timestamp("us"),
    "DOUBLE": pa.float64(),
    "BIGINT[]": pa.list_(pa.int64()),
}
# Columns computed from other columns of the same row, as SQL over the staged table.
_DERIVED = {
    ("runs", "duration_ms"): (
        "date_diff('millisecond', timezone('UTC', try_cast(started_text AS TIMESTAMPTZ)), "
        "timezone('UTC', try_cast(completed_text AS TIMESTAMPTZ)))"
    ),
}


def _json_safe(text: str | None) -> str | None:
    """DuckDB's JSON type rejects lone-surrogate escapes; projections show them as U+FFFD.

    Only projection columns are affected: the event log keeps the exact text (VARCHAR)."""
    if text is None or ("\\ud" not in text and "\\uD" not in text):
        return text
    return _LONE_SURROGATE_ESCAPE.sub("\\\\ufffd", text)


def _utf8_safe(value: object) -> object:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def _staged_table(rows: Sequence[dict], schema: pa.Schema, json_columns: list[int]) -> pa.Table:
    """Rows -> Arrow in C (no per-cell Python lookups); the ``json_columns`` (positions) are made
    :func:`_json_safe`, looking at each value in Python only when a column has an escape."""
    try:
        staged = pa.Table.from_pylist(rows, schema=schema)
    except UnicodeEncodeError:  # a lone surrogate (valid JSON, not UTF-8) becomes U+FFFD
        staged = pa.Table.from_pylist(
            [{key: _utf8_safe(value) for key, value in row.items()} for row in rows], schema=schema
        )
    for i in json_columns:
        values = staged.column(i)
        if pc.any(pc.match_substring(values, "\\ud", ignore_case=True)).as_py():
            fixed = pa.array([_json_safe(v) for v in values.to_pylist()], pa.string())
            staged = staged.set_column(i, schema.field(i), fixed)
    return staged


def table_columns(
    con: duckdb.DuckDBPyConnection, table: str, catalog: str | None = None
) -> list[tuple[str, str]]:
    """``[(column, type)]`` of ``table`` in declaration order."""
    columns = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = ? AND table_schema = 'main' "
        "AND table_catalog = coalesce(?, current_database()) ORDER BY ordinal_position",
        [table, catalog],
    ).fetchall()
    if not columns:
        raise LookupError(f"table {table!r} does not exist in the store")
    return columns


def _select_list(table: str, columns: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    names = {name for name, _ in columns}
    staged: list[str] = []
    select: list[str] = []
    for name, dtype in columns:
        derived = _DERIVED.get((table, name))
        if derived is not None:
            select.append(derived)
        elif dtype == "TIMESTAMP" and f"{name}_text" in names:
            select.append(f"timezone('UTC', try_cast(\"{name}_text\" AS TIMESTAMPTZ))")
        else:
            staged.append(name)
            select.append(f'"{name}"')
    return staged, select


class StagedInsert(NamedTuple):
    """An INSERT ready to run: the statement and the Arrow table it reads as ``staged_rows``."""

    statement: str
    rows: pa.Table

    def run(self, con: duckdb.DuckDBPyConnection) -> None:
        """Execute the insert on ``con`` (DuckDB releases the GIL while it runs)."""
        staged_rows = self.rows  # noqa: F841 - read by DuckDB's replacement scan
        con.execute(self.statement)


def stage_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: Sequence[dict],
    catalog: str | None = None,
    columns_cache: dict | None = None,
) -> StagedInsert | None:
    """The insert of ``rows`` (dicts keyed by column; missing keys are NULL) into ``table``,
    converted to Arrow but not run; None when there are no rows.

    ``columns_cache`` (a dict owned by the caller, valid while the schema does not change) saves
    one catalog query per call."""
    if not rows:
        return None
    if columns_cache is None:
        columns = table_columns(con, table, catalog)
    else:
        key = (catalog, table)
        if key not in columns_cache:
            columns_cache[key] = table_columns(con, table, catalog)
        columns = columns_cache[key]
    staged, select = _select_list(table, columns)
    types = dict(columns)
    unknown = [types[name] for name in staged if types[name] not in _ARROW_TYPES]
    if unknown:
        raise LookupError(f"insert_rows: no Arrow type for {table} column type(s) {unknown}")
    schema = pa.schema((name, _ARROW_TYPES[types[name]]) for name in staged)
    json_columns = [i for i, name in enumerate(staged) if types[name] == "JSON"]
    target = f'"{catalog}".main."{table}"' if catalog else f'"{table}"'
    return StagedInsert(
        f"INSERT INTO {target} SELECT {', '.join(select)} FROM staged_rows",
        _staged_table(rows, schema, json_columns),
    )


def insert_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: Sequence[dict],
    catalog: str | None = None,
    columns_cache: dict | None = None,
) -> None:
    """Append ``rows`` to ``table`` now; see :func:`stage_rows`."""
    staged = stage_rows(con, table, rows, catalog, columns_cache)
    if staged is not None:
        staged.run(con)
