"""Bulk inserts: row tuples -> one Arrow table -> ``INSERT INTO t (...) SELECT ... FROM arrow``.

executemany is 30-70x slower than an Arrow insert on DuckDB (tech-notes §1.1), so every write of
the store goes through :func:`stage_columns`. Column types come from the live table, so the DDL
in ``schema/*.sql`` stays the single definition; columns a caller does not give are NULL (or
computed). A TIMESTAMP column ``x`` next to an ``x_text`` column is parsed from the text in SQL
(ISO 8601 with offset -> UTC), vectorized, as is ``proj_runs.duration_ms``.
"""

from __future__ import annotations

import array
import io
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple, Protocol

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "ARROW_TYPES",
    "StagedInsert",
    "arrow_column",
    "derived_column",
    "insert_columns",
    "insert_rows",
    "registered",
    "stage_column_lists",
    "stage_columns",
    "table_columns",
    "tables_column_types",
]

# \uD800-\uDBFF not followed by a low surrogate escape, or \uDC00-\uDFFF not preceded by a high one
_LONE_SURROGATE_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)

# A text column this big (characters or bytes) is built by _exact_text.
_EXACT_TEXT_BYTES = 4 * 2**20
# Arrow type of each DuckDB column type the store's tables use.
ARROW_TYPES = {
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
    ("proj_runs", "duration_ms"): (
        "date_diff('millisecond', timezone('UTC', try_cast(started_text AS TIMESTAMPTZ)), "
        "timezone('UTC', try_cast(completed_text AS TIMESTAMPTZ)))"
    ),
}


def derived_column(table: str, name: str, dtype: str, given: set[str]) -> str | None:
    """DuckDB SQL computing column ``name`` (of type ``dtype``) of ``table`` from the staged
    columns ``given``, or None when it is not computed (the Spark build transpiles the same)."""
    derived = _DERIVED.get((table, name))
    if derived is None and dtype == "TIMESTAMP" and f"{name}_text" in given:
        derived = f"timezone('UTC', try_cast(\"{name}_text\" AS TIMESTAMPTZ))"
    return derived


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


def arrow_column(values: Sequence, arrow_type: pa.DataType, is_json: bool) -> pa.Array:
    """One column in C (no per-cell Python work unless a value needs repair): lone surrogates
    (valid JSON, not UTF-8) become U+FFFD, lone-surrogate escapes in JSON columns too. Text
    values may be ``str`` or UTF-8 ``bytes``."""
    try:
        array = _exact_text(values) if arrow_type == pa.string() else None
        if array is None:
            array = pa.array(values, arrow_type)
    except UnicodeEncodeError:
        array = pa.array([_utf8_safe(v) for v in values], arrow_type)
    if is_json and len(array) and pc.any(pc.match_substring(array, "\\ud", ignore_case=True)).as_py():
        array = pa.array([_json_safe(v) for v in array.to_pylist()], pa.string())
    return array


def _exact_text(values: Sequence) -> pa.Array | None:
    """A big text column (no NULLs) as one buffer of exactly its UTF-8, else None.

    Arrow's builder grows its buffer as it appends, and the allocator kept what it outgrew: a
    column of a 25 MB record's payloads took 100 MB. Written into one buffer here, the column
    takes its size (and an eighth, while the buffer grows)."""
    if len(values) == 0 or None in values or sum(map(len, values)) < _EXACT_TEXT_BYTES:
        return None
    # written a value at a time: a list of every value's UTF-8 before joining them held the
    # column once more (a 25 MB record of many items: 27 MiB)
    buffer = io.BytesIO()
    offsets = array.array("i", [0])
    end = 0
    for value in values:
        end += buffer.write(value if type(value) is bytes else value.encode("utf-8"))
        if end >= 2**31:  # past what a string column's 32-bit offsets address
            return None
        offsets.append(end)
    data = buffer.getvalue()  # the buffer itself, cut to size (no copy)
    del buffer
    column = pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets), pa.py_buffer(data))
    column.validate(full=True)  # bytes given as text must be UTF-8, as pa.array checks
    return column


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


def tables_column_types(con: duckdb.DuckDBPyConnection, tables: Sequence[str]
                        ) -> dict[str, dict[str, str]]:
    """``{table: {column: type}}`` of ``tables`` (columns in declaration order), in one query:
    :func:`table_columns` per table cost the writer ~3 ms each (information_schema)."""
    found: dict[str, dict[str, str]] = {}
    for table, column, dtype in con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE schema_name = 'main' AND database_name = current_database() "
        "AND list_contains(?, table_name) ORDER BY table_name, column_index",
        [list(tables)],
    ).fetchall():
        found.setdefault(table, {})[column] = dtype
    missing = [table for table in tables if table not in found]
    if missing:
        raise LookupError(f"table {missing[0]!r} does not exist in the store")
    return {table: found[table] for table in tables}


class StagedInsert(NamedTuple):
    """An INSERT ready to run: the statement and the Arrow table it reads as ``staged_rows``."""

    statement: str
    rows: pa.Table

    def run(self, con: duckdb.DuckDBPyConnection) -> None:
        """Execute the insert on ``con`` (DuckDB releases the GIL while it runs)."""
        staged_rows = self.rows  # noqa: F841 - read by DuckDB's replacement scan
        con.execute(self.statement)


def _live_columns(
    con: duckdb.DuckDBPyConnection, table: str, catalog: str | None, cache: dict | None
) -> list[tuple[str, str]]:
    if cache is None:
        return table_columns(con, table, catalog)
    key = (catalog, table)
    if key not in cache:
        cache[key] = table_columns(con, table, catalog)
    return cache[key]


def stage_columns(
    con: duckdb.DuckDBPyConnection,
    table: str,
    names: Sequence[str],
    rows: Sequence[tuple],
    catalog: str | None = None,
    columns_cache: dict | None = None,
    unless_exists: Sequence[str] | None = None,
    add: tuple[Sequence[str], Sequence[int]] | None = None,
) -> StagedInsert:
    """The insert of ``rows`` (tuples of the columns ``names``) into ``table``, converted to
    Arrow but not run. Columns not named are NULL, or computed (timestamps from ``*_text``).

    ``add`` = ``(columns, values)`` adds ``values[i]`` to those integer columns of row ``i``
    (vectorized; NULLs stay NULL): rows prepared apart get their place in the log here.

    ``unless_exists`` names columns that identify a row: a row equal on them to one already in
    the table is not inserted. ``columns_cache`` (a dict owned by the caller, valid while the
    schema does not change) saves one catalog query per call."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(names)
    return stage_column_lists(
        con, table, names, columns, catalog, columns_cache, unless_exists, add
    )


def stage_column_lists(
    con: duckdb.DuckDBPyConnection,
    table: str,
    names: Sequence[str],
    columns: Sequence[Sequence],
    catalog: str | None = None,
    columns_cache: dict | None = None,
    unless_exists: Sequence[str] | None = None,
    add: tuple[Sequence[str], Sequence[int]] | None = None,
) -> StagedInsert:
    """:func:`stage_columns` of rows given as one sequence of values per column of ``names``
    (a caller that builds columns skips the transposition)."""
    types = dict(_live_columns(con, table, catalog, columns_cache))
    unknown = [n for n in names if n not in types or types[n] not in ARROW_TYPES]
    if unknown:
        raise LookupError(f"{table}: no such column or no Arrow type for {unknown}")
    given = set(names)
    targets = list(names)
    select = [f'"{n}"' for n in names]
    for name, dtype in types.items():
        if name in given:
            continue
        derived = derived_column(table, name, dtype, given)
        if derived is not None:
            targets.append(name)
            select.append(derived)
    arrays = [
        arrow_column(values, ARROW_TYPES[types[name]], types[name] == "JSON")
        for name, values in zip(names, columns, strict=True)
    ]
    if add is not None and add[0]:
        offsets = pa.array(add[1], pa.int64())
        for name in add[0]:
            i = names.index(name)
            arrays[i] = pc.add(arrays[i], offsets)
    arrow = pa.table(arrays, names=list(names))
    target = f'"{catalog}".main."{table}"' if catalog else f'"{table}"'
    where = ""
    if unless_exists:
        match = " AND ".join(f"t.{c} IS NOT DISTINCT FROM staged_rows.{c}" for c in unless_exists)
        where = f" WHERE NOT EXISTS (SELECT 1 FROM {target} t WHERE {match})"
    return StagedInsert(
        f"INSERT INTO {target} ({', '.join(targets)}) SELECT {', '.join(select)} "
        f"FROM staged_rows{where}",
        arrow,
    )


def insert_columns(
    con: duckdb.DuckDBPyConnection,
    table: str,
    names: Sequence[str],
    rows: Sequence[tuple],
    catalog: str | None = None,
    columns_cache: dict | None = None,
) -> None:
    """Append ``rows`` to ``table`` now; see :func:`stage_columns`."""
    if rows:
        stage_columns(con, table, names, rows, catalog, columns_cache).run(con)


def insert_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: Sequence[dict],
    catalog: str | None = None,
    columns_cache: dict | None = None,
) -> None:
    """Append row dicts (keyed by column; missing keys are NULL) to ``table`` now."""
    if not rows:
        return
    names = list(dict.fromkeys(name for row in rows for name in row))
    insert_columns(
        con, table, names, [tuple(row.get(n) for n in names) for row in rows], catalog,
        columns_cache,
    )


class Registrar(Protocol):
    """A connection that can read an Arrow table under a name (DuckDB's, a SparkConnection)."""

    def register(self, name: str, rows: Any, /) -> Any: ...

    def unregister(self, name: str, /) -> Any: ...


@contextmanager
def registered(con: Registrar, name: str, rows: pa.Table) -> Iterator[None]:
    """``rows`` readable as the relation ``name`` on ``con`` while the context is open."""
    con.register(name, rows)
    try:
        yield
    finally:
        con.unregister(name)
