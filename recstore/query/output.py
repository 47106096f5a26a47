"""Write query results: a table for people, or json, ndjson, csv and parquet for programs.

Results arrive as a stream of batches (:class:`ResultStream`) and every writer consumes them
one batch at a time, so memory stays bounded by the batch size whatever the row count. The
batches are Arrow record batches, or, for a caller that only writes text and a result whose
column types DuckDB and Arrow turn into the same Python values (:func:`plain_type`),
:class:`RowBatch` es of DuckDB's own rows, so that such a query never imports pyarrow. The
table writer (:mod:`recstore.query.table`) sizes its columns from the first rows only, then
keeps those widths.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from recstore.errors import InputError

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS: tuple[str, ...] = ("table", "json", "ndjson", "csv", "parquet")
#: The format an output file's extension names (``-o items.csv`` writes CSV).
EXTENSIONS: dict[str, str] = {".csv": "csv", ".json": "json", ".ndjson": "ndjson",
                              ".jsonl": "ndjson", ".parquet": "parquet", ".txt": "table"}
BATCH_ROWS = 10_000

# DuckDB types whose Python values are the same read through DuckDB or through Arrow (checked in
# tests/test_startup_imports.py), and which of them a table aligns right. Dates and timestamps are
# not: one Python cannot hold reads as different text each way (see _python_values).
_NUMERIC_TYPES = frozenset("TINYINT SMALLINT INTEGER BIGINT UTINYINT USMALLINT UINTEGER UBIGINT "
                           "FLOAT DOUBLE".split())
_PLAIN_TYPES = _NUMERIC_TYPES | {"BOOLEAN", "VARCHAR", "JSON", "BLOB", '"NULL"'}
#: Types whose in-range values read the same both ways (the row path checks the range).
TIME_TYPES = frozenset({"TIMESTAMP", "DATE"})
_DECIMAL = re.compile(r"DECIMAL\(\d+,\d+\)")


def plain_type(name: str) -> bool:
    """Whether values of the DuckDB type ``name`` (as a relation prints it) come out of DuckDB's
    rows exactly as out of Arrow's: booleans, numbers (not HUGEINT), text, JSON, blobs, and
    lists of those."""
    if name.endswith("[]"):
        return plain_type(name[:-2])
    return name in _PLAIN_TYPES or bool(_DECIMAL.fullmatch(name))


@dataclass(frozen=True)
class RowBatch:
    """Rows of a result as DuckDB's Python tuples: a stand-in for an Arrow record batch where
    only text is written (see :func:`plain_type`)."""

    rows: list[tuple[Any, ...]]

    @property
    def num_rows(self) -> int:  # noqa: D102 - as pyarrow's
        return len(self.rows)

    def slice(self, offset: int, length: int) -> RowBatch:  # noqa: D102 - as pyarrow's
        return RowBatch(self.rows[offset:offset + length])

    def select(self, picked: list[int]) -> RowBatch:  # noqa: D102 - as pyarrow's
        return RowBatch([tuple(row[i] for i in picked) for row in self.rows])


@dataclass
class ResultStream:
    """Column names, their engine type names (``JSON`` columns are written as JSON values), and
    the rows as Arrow record batches (or :class:`RowBatch` es, when the caller asked for text
    only: :func:`~recstore.query.api.execute`), consumed once."""

    columns: list[str]
    types: list[str]
    batches: Iterator[pa.RecordBatch | RowBatch]
    schema: pa.Schema | None = None
    truncated: bool = False  # rows were cut at a row cap (recstore.query.limits)

    def close(self) -> None:
        """Stop reading: end the statement's limits watch, if any (rows left are dropped)."""
        close = getattr(self.batches, "close", None)
        if close is not None:
            close()

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """Rows as tuples of Python values, one batch in memory at a time."""
        for batch in self.batches:
            if isinstance(batch, RowBatch):
                yield from batch.rows
                continue
            columns = [_python_values(col) for col in batch.columns]
            yield from zip(*columns, strict=True)

    def select(self, names: list[str]) -> ResultStream:
        """Only the columns ``names``, in that order.

        Raises:
            InputError: a name is not a column of the result (``param`` "columns").
        """
        for name in names:
            if name not in self.columns:
                raise InputError(f"no column {name!r}; the result has {', '.join(self.columns)}",
                                 param="columns")
        picked = [self.columns.index(n) for n in names]
        if self.schema is None:
            return ResultStream(list(names), [self.types[i] for i in picked],
                                (batch.select(picked) for batch in self.batches))
        import pyarrow as pa

        schema = pa.schema([self.schema.field(i) for i in picked])
        return ResultStream(list(names), [self.types[i] for i in picked],
                            (batch.select(picked) for batch in self.batches), schema)

    def arrow(self) -> pa.Table:
        """Every remaining row as one Arrow table (like DuckDB's ``relation.arrow()``)."""
        import pyarrow as pa

        schema = self.schema or pa.schema([(c, pa.string()) for c in self.columns])
        return pa.Table.from_batches(list(self.batches), schema=schema)

    def df(self) -> Any:
        """Every remaining row as a pandas DataFrame (needs ``recstore[pandas]``)."""
        _require("pandas")
        return self.arrow().to_pandas()

    def pl(self) -> Any:
        """Every remaining row as a polars DataFrame (needs ``recstore[polars]``)."""
        polars = _require("polars")
        return polars.from_arrow(self.arrow())


def _python_values(column: pa.Array) -> list[Any]:
    """A column as Python values; one Python cannot hold (a timestamp in year 10000 or 0,
    which DuckDB and Arrow can) comes as Arrow's text of it, so one stored value cannot break
    printing."""
    import pyarrow as pa

    try:
        values: list[Any] = column.to_pylist()
    except (OverflowError, ValueError):
        values = column.cast(pa.string()).to_pylist()
    return values


def _require(module: str) -> Any:
    """Import an optional dataframe library, or say which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{module} is not installed; install it with: "
                          f"pip install 'recstore[{module}]'") from None


def output_format(output: str | Path, fmt: str | None,
                  allowed: tuple[str, ...] = FORMATS) -> str:
    """The format to write the file ``output`` in: ``fmt`` when given, else the one its
    extension names (:data:`EXTENSIONS`, any case).

    Raises:
        InputError: no ``fmt`` and the extension names none of ``allowed`` (a name without
            one, such as ``/dev/stdout``, too: guessing would write a table into ``.tsv``).
    """
    if fmt is not None:
        return fmt
    named = EXTENSIONS.get(Path(output).suffix.lower())
    if named in allowed:
        return named
    suffixes = [ext for ext, f in EXTENSIONS.items() if f in allowed]
    raise InputError(f"cannot tell the format from the name {str(output)!r}; end it in "
                     f"{', '.join(suffixes[:-1])} or {suffixes[-1]}, or give `fmt`",
                     param="output")


def write_result(result: ResultStream, fmt: str = "table", output: str | Path | None = None,
                 stdout: IO[str] | None = None, *, vertical: bool | None = None,
                 width: int | None = None) -> int:
    """Write ``result`` as ``fmt`` to the file ``output`` (or ``stdout``); return the row count.
    ``vertical`` draws a table as one ``column  value`` block per row (``None``: only a single
    row that does not fit the terminal). A table fits ``width`` cells; without it, the
    terminal's width on a terminal, else no width (long text cut at :data:`~recstore.query.table.PIPE_CELL` cells)."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}",
                         param="fmt")
    if fmt == "parquet":
        if output is None:
            raise InputError("parquet output needs a file (`output`)", param="fmt")
        return _write_parquet(result, Path(output))
    if output is not None:
        from recstore.files import write_output

        if fmt == "table":
            return write_output(output, lambda fh: _write_table(result, fh, width, vertical),
                                newline="")
        return write_output(output, lambda fh: _WRITERS[fmt](result, fh, False), newline="")
    import sys

    out = stdout or sys.stdout
    if fmt == "table":
        if width is None and out.isatty():
            width = shutil.get_terminal_size().columns
        return _write_table(result, out, width, vertical)
    return _WRITERS[fmt](result, out, out.isatty())


def _write_json(result: ResultStream, out: IO[str], _tty: bool) -> int:
    out.write("[")
    count = 0
    for row in _json_rows(result):
        out.write(("\n" if count == 0 else ",\n") + row)
        count += 1
    out.write("\n]\n" if count else "]\n")
    return count


def _write_ndjson(result: ResultStream, out: IO[str], _tty: bool) -> int:
    count = 0
    for row in _json_rows(result):
        out.write(row + "\n")
        count += 1
    return count


def _json_rows(result: ResultStream) -> Iterator[str]:
    import orjson

    from recstore.formats.jsontext import loads_json
    from recstore.jsonout import dumps_compact

    json_columns = {i for i, t in enumerate(result.types) if t.upper() == "JSON"}
    for row in result.rows():
        try:  # JSON columns hold JSON text already: embedded as is, not re-quoted
            yield dumps_compact(_row_object(result.columns, row, json_columns, orjson.Fragment))
        except TypeError:  # a value only the stdlib writes (a HUGEINT): parse the JSON text
            yield dumps_compact(_row_object(result.columns, row, json_columns, loads_json))


def _row_object(columns: list[str], row: tuple[Any, ...], json_columns: set[int],
                json_value: Callable[[str], Any]) -> dict[str, Any]:
    """``row`` as an object; the text of JSON columns goes through ``json_value``."""
    return {name: json_value(value) if i in json_columns and isinstance(value, str) else value
            for i, (name, value) in enumerate(zip(columns, row, strict=True))}


def _write_csv(result: ResultStream, out: IO[str], _tty: bool) -> int:
    import csv

    writer = csv.writer(out, lineterminator="\r\n")  # RFC 4180; also quotes lone \r
    writer.writerow(result.columns)
    count = 0
    for row in result.rows():
        writer.writerow([_cell(v) for v in row])
        count += 1
    return count


def _write_table(result: ResultStream, out: IO[str], width: int | None,
                 vertical: bool | None = None) -> int:
    from recstore.query.table import write_table

    numeric = _numeric_columns(result)
    return write_table(result.columns, ([_text(v) for v in row] for row in result.rows()), out,
                       width=width, numeric=numeric, vertical=vertical)


def _numeric_columns(result: ResultStream) -> list[bool]:
    """Which columns hold numbers (a table aligns them right): by the Arrow types, or by the
    DuckDB types of a result in rows."""
    if result.schema is None:
        return [t in _NUMERIC_TYPES or bool(_DECIMAL.fullmatch(t)) for t in result.types]
    import pyarrow as pa

    return [pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            for t in result.schema.types]


def _text(value: Any) -> str:
    """One-line text of a value for the table."""
    return _cell(value).replace("\r", " ").replace("\n", " ")


def _cell(value: Any) -> str:
    """Text of a value for CSV (quoting keeps line breaks intact)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime | date | time):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list | dict):
        from recstore.jsonout import dumps_compact

        return dumps_compact(value)
    return str(value)


def _write_parquet(result: ResultStream, path: Path) -> int:
    from recstore.files import write_output

    return write_output(path, lambda sink: _write_parquet_to(result, sink), mode="wb")


def _write_parquet_to(result: ResultStream, sink: IO[bytes]) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    writer: pq.ParquetWriter | None = None
    count = 0
    try:
        for batch in result.batches:
            if isinstance(batch, RowBatch):  # a caller's mistake, not the user's input
                raise TypeError("Parquet needs Arrow batches: open the result with arrow=True")
            if writer is None:
                writer = pq.ParquetWriter(sink, batch.schema, compression="zstd")
            writer.write_batch(batch)
            count += batch.num_rows
        if writer is None:  # no rows: still write a file with the columns
            schema = result.schema or pa.schema([(c, pa.string()) for c in result.columns])
            writer = pq.ParquetWriter(sink, schema, compression="zstd")
    finally:
        if writer is not None:
            writer.close()
    return count


_WRITERS = {"json": _write_json, "ndjson": _write_ndjson, "csv": _write_csv}

__all__ = ["FORMATS", "EXTENSIONS", "BATCH_ROWS", "ResultStream", "RowBatch", "output_format",
           "plain_type", "write_result"]
