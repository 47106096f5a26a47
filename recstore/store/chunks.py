"""Prepared records as Arrow, and their placement as set operations in DuckDB.

A worker (or the writer itself, for a small input) prepares records a chunk at a time and turns
their events and projection rows into Arrow tables, one per store table, every row naming its
record by ``rec`` (its place in the chunk) and every seq counted from the record's first event
(:class:`ChunkRows`, :func:`to_chunk`). The writer then only decides, per record, what
:mod:`recstore.store.ingest` always decided (duplicate, new run or revision; its revision, first
seq and stream position, tags) and appends that to a small placement table
(:class:`Placement`). When the batch commits, each table's rows are one ``INSERT ... SELECT``
joining the chunks' rows to the placement: seqs and stream positions are offsets added in SQL,
duplicates and runs restaged later in the batch drop out of the join, and the writer never
touches a row. The writer's CPU per record is then a few dict look-ups and list appends, so
more cores preparing records make ingest faster (issue 28).
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from recstore.formats.events import FAMILY_OF
from recstore.store.projection import COLUMNS, PROJECTION_TABLES, SEQ_COLUMNS
from recstore.store.tables import (
    ARROW_TYPES,
    arrow_column,
    derived_column,
    tables_column_types,
)

__all__ = [
    "EVENT_TYPES", "ChunkRows", "JoinedInsert", "Placement", "chunkable", "import_lazy_modules",
    "placed_inserts", "store_schema", "to_chunk",
]

# DuckDB types of the events columns a chunk holds (as the events table declares them)
EVENT_TYPES = {"type": "VARCHAR", "idx": "INTEGER", "turn": "INTEGER", "payload": "VARCHAR"}
# Columns the placement gives every row of a placed record.
PLACEMENT_COLUMNS = (
    "gid", "stream_key", "revision", "seq_base", "pos_base", "source_id", "tags", "project",
)
# proj_runs columns the writer sets when it places a record (prepare leaves placeholders).
_PLACED_RUN_COLUMNS = {
    "revision": "p.revision", "tags": "p.tags", "source_id": "p.source_id",
    "first_seq": "p.seq_base", "last_seq": "p.seq_base + x.last_seq",
}

# {table: {column: DuckDB type}} of the store's projection tables, as the writer reads them
Schema = dict[str, dict[str, str]]


class ChunkRows:
    """The events and projection rows of a chunk of prepared records, as Arrow tables: each
    has ``rec`` (the record's place in the chunk) first; events have ``pos`` (the event's place
    in its record) and ``family`` (:data:`recstore.formats.events.FAMILY_OF`); seqs count from
    each record's first event."""

    __slots__ = ("events", "tables", "size")

    def __init__(self, events: pa.Table, tables: dict[str, pa.Table], size: int) -> None:
        self.events = events
        self.tables = tables
        self.size = size

    def record_events(self, start: int, count: int) -> list[tuple]:
        """The events ``(type, idx, turn, payload)`` of a record whose first event is row
        ``start``: read back only when its line digests must be made again (a revision)."""
        part = self.events.slice(start, count).select(list(EVENT_TYPES)).to_pydict()
        return list(zip(*part.values(), strict=True))


def chunkable(p: object) -> bool:
    """Whether a prepared record goes into a chunk: a record (not a refused input) whose rows
    have the base columns, and not an aioc replay line (placing one may prepare it again from
    its events)."""
    projection = getattr(p, "projection", None)
    if projection is None or p.lineage:
        return False
    return all(not rows or len(rows[0]) == len(COLUMNS[table]) for table, rows in projection.items())


def to_chunk(prepared: Sequence, schema: Schema) -> ChunkRows:
    """The rows of ``prepared`` (:class:`~recstore.store.prepare.Prepared` records whose
    events and projection are still Python lists) as one :class:`ChunkRows`; each record then
    refers to it (``rows``, ``rec``, ``first_event``) and lets go of its lists."""
    recs: list[int] = []
    positions: list[int] = []
    families: list[int] = []
    event_columns: tuple[list, ...] = ([], [], [], [])
    table_rows: dict[str, tuple[list[int], list[tuple]]] = {t: ([], []) for t in PROJECTION_TABLES}
    for rec, p in enumerate(prepared):
        events = p.events
        n = len(events)
        p.first_event = len(recs)
        p.event_count = n
        recs.extend([rec] * n)
        positions.extend(range(n))
        if n:
            for column, values in zip(event_columns, zip(*events, strict=True), strict=True):
                column.extend(values)
            families.extend([FAMILY_OF.get(etype, 0) for etype in event_columns[0][-n:]])
        p.payload_bytes = sum(map(len, event_columns[3][-n:])) if n else 0
        for table, rows in p.projection.items():
            if rows:
                owners, kept = table_rows[table]
                owners.extend([rec] * len(rows))
                kept.extend(rows)
        p.events = p.projection = None
        p.rec = rec
    types, idxs, turns, payloads = event_columns
    events = pa.table(
        [pa.array(recs, pa.int32()), pa.array(positions, pa.int32()),
         arrow_column(types, pa.string(), False), pa.array(idxs, pa.int32()),
         pa.array(turns, pa.int32()), _payload_column(payloads), pa.array(families, pa.int8())],
        names=["rec", "pos", *EVENT_TYPES, "family"],
    )
    tables = {}
    for table, (owners, rows) in table_rows.items():
        if rows:
            tables[table] = _table(table, owners, rows, schema[table])
    chunk = ChunkRows(events, tables, len(prepared))
    for p in prepared:
        p.rows = chunk
    return chunk


def _payload_column(payloads: list[str | bytes]) -> pa.Array:
    """The events' payloads as a string column: their UTF-8 ``bytes`` (what
    :func:`recstore.formats.events.record_to_events` makes) joined into one buffer, its
    offsets their running lengths, checked as UTF-8 by the cast (zero-copy) as ``pa.array``
    checks text given as bytes. Anything else (a ``str``: a big record's lean payloads)
    takes :func:`~recstore.store.tables.arrow_column` (Arrow's builder: more CPU, see
    docs/store.md)."""
    try:
        data = b"".join(payloads)
    except TypeError:  # a str among them
        return arrow_column(payloads, pa.string(), False)
    if len(data) >= 2**31:  # past what a string column's 32-bit offsets address
        return arrow_column(payloads, pa.string(), False)
    offsets = array.array("i", [0])
    offsets.extend(accumulate(map(len, payloads)))
    column = pa.Array.from_buffers(
        pa.binary(), len(payloads), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return column.cast(pa.string())


def _table(table: str, owners: list[int], rows: list[tuple], types: dict[str, str]) -> pa.Table:
    columns = COLUMNS[table]
    arrays = [pa.array(owners, pa.int32())]
    for name, values in zip(columns, zip(*rows, strict=True), strict=True):
        dtype = types[name]
        arrays.append(arrow_column(values, ARROW_TYPES[dtype], dtype == "JSON"))
    return pa.table(arrays, names=["rec", *columns])


class Placement:
    """Where a batch places the records of its chunks: one row per stored record (its id in
    the batch's chunks, stream key, revision, first seq and stream position, source, tags, and
    whether its projection rows are the run's in this batch)."""

    def __init__(self) -> None:
        self.chunks: list[tuple[ChunkRows, int]] = []  # each chunk with the id of its record 0
        self._size = 0
        self.columns: dict[str, list] = {name: [] for name in PLACEMENT_COLUMNS}

    def __len__(self) -> int:
        return len(self.columns["gid"])

    def add(self, rows: ChunkRows, rec: int, stream_key: str, revision: int, seq_base: int,
            pos_base: int, source_id: int, tags: str) -> int:
        """Place record ``rec`` of ``rows``; returns its row (see :meth:`set`)."""
        if not self.chunks or self.chunks[-1][0] is not rows:
            self.chunks.append((rows, self._size))
            self._size += rows.size
        c = self.columns
        c["gid"].append(self.chunks[-1][1] + rec)
        c["stream_key"].append(stream_key)
        c["revision"].append(revision)
        c["seq_base"].append(seq_base)
        c["pos_base"].append(pos_base)
        c["source_id"].append(source_id)
        c["tags"].append(tags)
        c["project"].append(True)
        return len(c["gid"]) - 1

    def set(self, row: int, column: str, value: object) -> None:
        """Change one value of a placed record (its tags, or that it is no longer projected)."""
        self.columns[column][row] = value

    def table(self) -> pa.Table:
        c = self.columns
        return pa.table({
            "gid": pa.array(c["gid"], pa.int64()),
            "stream_key": pa.array(c["stream_key"], pa.string()),
            "revision": pa.array(c["revision"], pa.int32()),
            "seq_base": pa.array(c["seq_base"], pa.int64()),
            "pos_base": pa.array(c["pos_base"], pa.int32()),
            "source_id": pa.array(c["source_id"], pa.int32()),
            "tags": arrow_column(c["tags"], pa.string(), True),
            "project": pa.array(c["project"], pa.bool_()),
        })

    def rows_of(self, name: str) -> pa.Table | None:
        """The rows of events (``name`` "events") or of a projection table in every chunk,
        with ``gid`` in place of ``rec``; None when no chunk has any."""
        parts = []
        for rows, base in self.chunks:
            part = rows.events if name == "events" else rows.tables.get(name)
            if part is None or not len(part):
                continue
            gid = pc.add(part.column(0).cast(pa.int64()), pa.scalar(base, pa.int64()))
            parts.append(part.set_column(0, "gid", gid))
        return pa.concat_tables(parts) if parts else None

    def clear(self) -> None:
        self.chunks.clear()
        for column in self.columns.values():
            column.clear()


def placed_inserts(placement: Placement, batch_id: int, types: Schema,
                   loose_events: pa.Table | None) -> list[JoinedInsert]:
    """The inserts of the events of the batch (the placed
    chunks' joined to the placement, and ``loose_events``, rows staged one by one, with a
    ``family`` column), grouped by family, then by type and array index, in seq order within
    each, and the projection rows of the placed records whose rows are current in the batch.
    Items at the same index of different runs are alike (a system prompt, a tool's output), so
    side by side they compress better: zstd takes 2048 payloads at a time (6,000 dev-corpus
    records, benchmarks/bench_store_bytes.py: the payload column 8.3 -> 5.6 MB)."""
    inserts = []
    placed = placement.table() if len(placement) else None
    events = placement.rows_of("events") if placed is not None else None
    selects = []
    if events is not None:
        selects.append(
            "SELECT p.seq_base + e.pos AS seq, p.stream_key, p.pos_base + e.pos AS stream_pos, "
            f"p.revision, e.type, e.idx, e.turn, e.payload, p.source_id, {batch_id} AS batch_id, "
            "e.family FROM chunk_events e JOIN placement p USING (gid)")
    if loose_events is not None:
        selects.append(
            "SELECT seq, stream_key, stream_pos, revision, type, idx, turn, payload, source_id, "
            f"{batch_id} AS batch_id, family FROM loose_events")
    if selects:
        columns = ("seq, stream_key, stream_pos, revision, type, idx, turn, payload, "
                   "source_id, batch_id")
        inserts.append(JoinedInsert(
            f"INSERT INTO events ({columns}) SELECT {columns} FROM ("
            + " UNION ALL ".join(selects) + ") ORDER BY family, type, idx, seq",
            {"chunk_events": events, "placement": placed, "loose_events": loose_events}))
    if placed is None:
        return inserts
    for table in PROJECTION_TABLES:
        rows = placement.rows_of(table)
        if rows is not None:
            inserts.append(JoinedInsert(_projection_insert(table, batch_id, types[table]),
                            {"chunk_rows": rows, "placement": placed}))
    return inserts


def _projection_insert(table: str, batch_id: int, types: dict[str, str]) -> str:
    """The insert of a projection table's chunk rows of the projected records, seqs shifted by
    the revision's first seq, run columns set as the writer sets them, and the columns the
    store computes on insert (times from ``*_text``, ``duration_ms``)."""
    shifted = set(SEQ_COLUMNS.get(table, ()))
    given = set(COLUMNS[table])
    targets, values = [], []
    for name in COLUMNS[table]:
        targets.append(f'"{name}"')
        if name in shifted:
            values.append(f'x."{name}" + p.seq_base')
        elif table == "proj_runs" and name == "batch_id":
            values.append(str(batch_id))
        elif table == "proj_runs" and name in _PLACED_RUN_COLUMNS:
            values.append(_PLACED_RUN_COLUMNS[name])
        else:
            values.append(f'x."{name}"')
    for name, dtype in types.items():
        if name not in given:
            derived = derived_column(table, name, dtype, given)
            if derived is not None:
                targets.append(f'"{name}"')
                values.append(derived)
    # a run's rows together, in their order (as they were staged before): they compress better
    order = "p.seq_base" if table == "proj_runs" else f'p.seq_base, x."{COLUMNS[table][1]}"'
    return (f"INSERT INTO {table} ({', '.join(targets)}) SELECT {', '.join(values)} "
            f"FROM chunk_rows x JOIN placement p USING (gid) WHERE p.project ORDER BY {order}")


class JoinedInsert(NamedTuple):
    """An insert reading several Arrow tables, each registered under its name while it runs."""

    statement: str
    tables: dict[str, pa.Table | None]

    def run(self, con: duckdb.DuckDBPyConnection) -> None:
        """Execute the insert on ``con`` (DuckDB releases the GIL while it runs)."""
        names = [name for name, table in self.tables.items() if table is not None]
        for name in names:
            con.register(name, self.tables[name])
        try:
            con.execute(self.statement)
        finally:
            for name in names:
                con.unregister(name)


def store_schema(con: duckdb.DuckDBPyConnection) -> Schema:
    """The column types of the store's projection tables, for :func:`to_chunk`."""
    return tables_column_types(con, PROJECTION_TABLES)


def import_lazy_modules() -> None:
    """Import now what staging a chunk imports lazily: pyarrow's first array made from a list
    imports pandas, when it is installed, to test for pandas types. Called before worker
    processes are forked, they inherit it instead of each importing it at its first chunk
    (0.3-0.4 s of CPU a worker, measured; the writer imports it at its first batch anyway).
    The CLI answers that probe without pandas (``cli.answer_pyarrow_pandas_probe``), so this
    saves the workers of an in-process ``Store.ingest`` (a library caller, bench_ingest)."""
    pa.array([0], pa.int32())
