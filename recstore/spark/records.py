"""The per-line work of a Spark build, run on the executors: NDJSON lines to prepared records.

:func:`prepare_lines` is a ``mapInArrow`` function: it runs the ingest's own
:func:`recstore.store.prepare.prepare` (parse, validate, canonical hashes, events, the projection
rows of :func:`recstore.store.projection.project_record`) on every line, so a build analyses a
record with the one Python definition the store uses. Each input row is a line with the file and
split (``block``: the byte offset where Spark's split of the file starts) it came from; each
output row is one line: a prepared record (its events and projection rows as lists of structs,
seqs counted from the record's first event, as :func:`prepare` counts them), a refused one (what
the rejects table keeps of it) or a blank line. ``row`` counts the lines of a split from 0 in
read order: a split is read whole, in order, by one task, so its lines arrive in file order.
Columns are typed as the store's tables type them (:data:`recstore.store.tables.ARROW_TYPES`,
with the same repairs of lone surrogates).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa

from recstore.formats.reader import PENDING, RawInput
from recstore.store.prepare import Prepared, Refused, prepare, utf8_safe
from recstore.store.projection import COLUMNS, PROJECTION_TABLES
from recstore.store.tables import ARROW_TYPES, arrow_column

__all__ = ["EVENT_FIELDS", "prepare_lines", "prepared_schema", "source_uri"]

# (name, DuckDB type) of an event as prepare() gives it: type, idx, turn, payload.
EVENT_FIELDS = (("type", "VARCHAR"), ("idx", "INTEGER"), ("turn", "INTEGER"),
                ("payload", "VARCHAR"))
_HEAD = [("file", pa.string()), ("block", pa.int64()), ("row", pa.int64()),
         ("file_size", pa.int64()), ("kind", pa.string())]
_RECORD = [("run_key", pa.string()), ("run_id", pa.string()), ("record_hash", pa.binary()),
           ("event_count", pa.int32())]
_JSON = {b"duckdb_type": b"JSON"}
_REJECT = [("reason", pa.string()), ("path", pa.string()), ("raw_text", pa.string()),
           ("raw_bytes", pa.binary()), ("raw_sha256", pa.binary()), ("raw_size", pa.int64())]


def source_uri(file_path: str) -> str:
    """The source URI the store records for a file Spark read: a local file as its path (as
    ``recstore ingest`` records it), any other URI as it is."""
    parts = urlsplit(file_path)
    if parts.scheme == "file":
        return unquote(parts.path)
    return file_path


def _struct(fields: Iterable[tuple[str, str]]) -> pa.StructType:
    """A struct of store columns; JSON ones are marked, so their text gets the store's repair."""
    return pa.struct([pa.field(name, ARROW_TYPES[dtype], metadata=_JSON if dtype == "JSON" else None)
                      for name, dtype in fields])


def prepared_schema(tables: dict[str, tuple[tuple[str, str], ...]]) -> pa.Schema:
    """Schema of :func:`prepare_lines`' output, typed from the store's ``tables``
    (``{table: ((column, DuckDB type), ...)}``)."""
    lists = [("events", pa.list_(_struct(EVENT_FIELDS)))]
    for table in PROJECTION_TABLES:
        types = dict(tables[table])
        lists.append((table, pa.list_(_struct((c, types[c]) for c in COLUMNS[table]))))
    return pa.schema(_HEAD + _RECORD + lists + _REJECT)


class _Lines:
    """Output rows of one batch, column by column."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.columns: dict[str, list] = {name: [] for name in schema.names}
        self.nested: dict[str, list[tuple]] = {name: [] for name in ("events", *PROJECTION_TABLES)}
        self.offsets: dict[str, list[int]] = {name: [0] for name in self.nested}

    def add(self, head: tuple, item: Prepared | Refused | None) -> None:
        kind = "blank" if item is None else "record" if isinstance(item, Prepared) else "reject"
        values = dict(zip(("file", "block", "row", "file_size"), head, strict=True), kind=kind)
        if isinstance(item, Prepared):
            values.update(run_key=item.key, run_id=item.run_id, record_hash=item.record_hash,
                          event_count=len(item.events))
            self._nest("events", item.events)
            for table in PROJECTION_TABLES:
                self._nest(table, item.projection.get(table, ()))
        else:
            for name in self.nested:
                self._nest(name, ())
            if isinstance(item, Refused):
                values.update(zip(("raw_text", "raw_bytes", "raw_sha256", "raw_size"),
                                  reject_fields(item.raw), strict=True),
                              reason=item.reason, path=item.path)
        for name, column in self.columns.items():
            if name not in self.nested:
                column.append(values.get(name))

    def _nest(self, name: str, rows: Iterable[tuple]) -> None:
        self.nested[name].extend(rows)
        self.offsets[name].append(len(self.nested[name]))

    def batch(self) -> pa.RecordBatch:
        arrays = []
        for field in self.schema:
            if field.name in self.nested:
                arrays.append(self._list(field))
            else:
                arrays.append(pa.array(self.columns[field.name], field.type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _list(self, field: pa.Field) -> pa.Array:
        struct_type = field.type.value_type
        rows = self.nested[field.name]
        columns = list(zip(*rows, strict=True)) if rows else [()] * struct_type.num_fields
        children = [
            arrow_column(list(values), child.type, child.metadata == _JSON)
            for values, child in zip(columns, struct_type, strict=True)
        ]
        values = pa.StructArray.from_arrays(children, fields=list(struct_type))
        return pa.ListArray.from_arrays(pa.array(self.offsets[field.name], pa.int32()), values)


def reject_fields(raw: RawInput) -> tuple[str, bytes | None, bytes, int]:
    """What the rejects table keeps of a refused input: its text (invalid UTF-8 as U+FFFD, no
    line end), its exact bytes when they are not UTF-8, and the sha256 and size of its bytes."""
    data = raw.data if raw.data is not None else (raw.text or "").encode("utf-8", "surrogatepass")
    text = raw.text if raw.text is not None else data.decode("utf-8", "replace")
    return (utf8_safe(text.rstrip("\r\n")), raw.raw,
            hashlib.sha256(data).digest() if raw.sha256 is None else raw.sha256,
            raw.size if raw.size is not None else len(data))


def prepare_lines(batches: Iterator[pa.RecordBatch], schema: pa.Schema,
                  fmt: str = "aioc", counter: Any = None) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: rows ``(data: binary, file, block, file_size)`` of one partition, in
    read order, to rows of ``schema`` (:func:`prepared_schema`); ``counter`` (a Spark
    accumulator) counts the lines prepared, for the driver's progress display."""
    next_row: dict[tuple[str, int], int] = {}
    uris: dict[str, str] = {}
    for batch in batches:
        out = _Lines(schema)
        columns = [batch.column(name).to_pylist() for name in ("data", "file", "block",
                                                               "file_size")]
        for data, file, block, size in zip(*columns, strict=True):
            row = next_row.get((file, block), 0)
            next_row[file, block] = row + 1
            if not data.strip():
                out.add((file, block, row, size), None)
                continue
            uri = uris.get(file) or uris.setdefault(file, source_uri(file))
            # the reader's lines keep their end; Spark's do not
            raw = RawInput(uri, None, None, PENDING, data=bytes(data) + b"\n")
            out.add((file, block, row, size), prepare(raw, fmt))
        if counter is not None:
            counter.add(batch.num_rows)
        yield out.batch()
