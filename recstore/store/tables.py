"""Bulk inserts: rows (dicts) -> one Arrow table -> ``INSERT INTO t SELECT ... FROM arrow``.

executemany is 30-70x slower than an Arrow insert on DuckDB (tech-notes §1.1), so every write of
the store goes through :func:`insert_rows`. Column names and types come from the live table, so
the DDL in ``schema/*.sql`` stays the single definition. A TIMESTAMP column ``x`` next to an
``x_text`` column is parsed from the text in SQL (ISO 8601 with offset -> UTC), vectorized.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import duckdb
import pyarrow as pa

__all__ = ["insert_rows", "table_columns"]

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


def _arrow_array(values: list, arrow_type: pa.DataType | None) -> pa.Array:
    try:
        return pa.array(values, type=arrow_type)
    except UnicodeEncodeError:  # a lone surrogate (valid JSON, not UTF-8) becomes U+FFFD
        return pa.array([_utf8_safe(v) for v in values], type=arrow_type)


def _utf8_safe(value: object) -> object:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


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


def insert_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: Sequence[dict],
    catalog: str | None = None,
    columns_cache: dict | None = None,
) -> None:
    """Append ``rows`` (dicts keyed by column; missing keys are NULL) to ``table``.

    ``columns_cache`` (a dict owned by the caller, valid while the schema does not change) saves
    one catalog query per call."""
    if not rows:
        return
    if columns_cache is None:
        columns = table_columns(con, table, catalog)
    else:
        key = (catalog, table)
        if key not in columns_cache:
            columns_cache[key] = table_columns(con, table, catalog)
        columns = columns_cache[key]
    staged, select = _select_list(table, columns)
    types = dict(columns)
    columns_data = {}
    for name in staged:
        values = [row.get(name) for row in rows]
        if types[name] == "JSON":
            values = [_json_safe(v) for v in values]
        columns_data[name] = _arrow_array(values, _ARROW_TYPES.get(types[name]))
    staged_rows = pa.table(columns_data)  # noqa: F841 - read by DuckDB's replacement scan below
    target = f'"{catalog}".main."{table}"' if catalog else f'"{table}"'
    con.execute(f"INSERT INTO {target} SELECT {', '.join(select)} FROM staged_rows")
