"""Committing a batch: the rows of up to ``batch_size`` stored records, staged as Arrow tables
and written in ONE transaction (events, streams, projections, rejects, sources, lineage and the
batch row with its chain hash), so a killed process leaves whole batches or nothing
(tech-notes §2.2). :class:`BatchCommitter` commits on a background thread while the writer
places the next batch's records (DuckDB releases the GIL while it inserts); at most one batch
is in flight."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import duckdb
import pyarrow as pa

from recstore.store.chain import EMPTY_DIGEST, Digest, batch_hash
from recstore.store.chunks import JoinedInsert, Placement, Schema, placed_inserts
from recstore.store.db import transaction
from recstore.store.prepare import LOCAL_BYTES, trim_heap
from recstore.store.projection import PROJECTION_TABLES, SEQ_COLUMNS, Projection, columns_for
from recstore.store.tables import (
    ARROW_TYPES,
    StagedInsert,
    arrow_column,
    insert_columns,
    stage_columns,
    table_columns,
)

__all__ = ["Batch", "BatchCommitter", "EventColumns", "delete_projections", "now"]

EVENT_COLUMNS = (
    "seq", "stream_key", "stream_pos", "revision", "type", "idx", "turn", "payload", "source_id",
    "batch_id",
)
STREAM_COLUMNS = (
    "stream_key", "revision", "run_id", "format", "record_hash", "first_seq", "last_seq",
    "event_count", "source_id", "line", "batch_id", "ingested_at",
)
LINEAGE_COLUMNS = (
    "child_run_key", "revision", "parent_run_key", "parent_run_id", "relation", "detail",
    "source_id", "batch_id",
)
REJECT_COLUMNS = (
    "reject_id", "source_id", "source_uri", "line", "reason", "path", "raw_text", "raw_bytes",
    "raw_sha256", "raw_size", "batch_id", "rejected_at",
)
REJECT_PROBLEM_COLUMNS = ("source_uri", "line", "reason", "raw_sha256", "problems")
SOURCE_FILE_COLUMNS = ("source_id", "uri", "format", "compression", "batch_id", "opened_at")
SOURCE_RESULT_COLUMNS = (
    "source_id", "sha256", "size_bytes", "status", "record_count", "accepted", "revised",
    "duplicate", "rejected", "batch_id", "finished_at",
)

# A reject is recorded once per (source URI, line, reason, content).
_REJECT_KEY = ("source_uri", "line", "reason", "raw_sha256")


def now() -> datetime:
    """Now in UTC, naive (the store's timestamps are UTC)."""
    return datetime.now(UTC).replace(tzinfo=None)


class EventColumns:
    """A batch's events as one list per column (``EVENT_COLUMNS`` but ``batch_id``), in seq
    order, with each event's family (run, item, entry, file).

    A record's events are added a column at a time (a few list extends per record, not a tuple
    per event): building a tuple per event, and transposing them back into columns for Arrow,
    was a third of the writer's placing and staging CPU."""

    def __init__(self) -> None:
        self.columns: tuple[list, ...] = tuple([] for _ in EVENT_COLUMNS[:-1])
        self.families: list[int] = []

    def __len__(self) -> int:
        return len(self.families)

    def add(self, first_seq: int, key: str, pos: int, revision: int, events: list,
            families: list[int], source_id: int) -> None:
        """Add ``events`` (``(type, idx, turn, payload)``) of stream ``key`` from seq
        ``first_seq`` and stream position ``pos``."""
        n = len(events)
        seqs, keys, positions, revisions, types, idxs, turns, payloads, sources = self.columns
        seqs.extend(range(first_seq, first_seq + n))
        keys.extend([key] * n)
        positions.extend(range(pos, pos + n))
        revisions.extend([revision] * n)
        if n:
            etypes, eidxs, eturns, epayloads = zip(*events, strict=True)
            types.extend(etypes)
            idxs.extend(eidxs)
            turns.extend(eturns)
            payloads.extend(epayloads)
        sources.extend([source_id] * n)
        self.families.extend(families)

    def table(self, types: dict[str, str]) -> pa.Table:
        """The rows as Arrow (``types``: the events table's column types), with ``family``."""
        names = EVENT_COLUMNS[:-1]
        arrays = [arrow_column(values, ARROW_TYPES[types[name]], False)
                  for name, values in zip(names, self.columns, strict=True)]
        return pa.table([*arrays, pa.array(self.families, pa.int8())],
                        names=[*names, "family"])

    def clear(self) -> None:
        """Let go of the rows (their payloads) once they are in Arrow."""
        for column in self.columns:
            column.clear()
        self.families.clear()


class Batch:
    """Rows of one batch (one transaction), in the order they will be committed."""

    def __init__(self, batch_id: int) -> None:
        self.batch_id = batch_id
        self.started_at = now()
        self.events = EventColumns()
        self.streams: list[tuple] = []
        # run key -> its rows (latest revision) and what to add to their event seqs, or its row
        # in ``placement`` (a record of a chunk)
        self.projections: dict[str, tuple[Projection, int] | int] = {}
        self.placement = Placement()
        self.replaced: set[str] = set()  # runs whose rows from earlier batches are replaced
        self.tag_updates: dict[str, str] = {}  # run key -> tags JSON, for rows already stored
        self.lineage: list[tuple] = []
        self.rejects: list[tuple] = []
        self.reject_problems: list[tuple] = []  # of the rejects with several problems
        self.source_files: list[tuple] = []
        self.source_results: list[tuple] = []
        self.counts = {"accepted": 0, "revised": 0, "duplicate": 0, "rejected": 0}
        self.events_digest = Digest()  # of the line digests, in seq order
        self.streams_digest = Digest()
        self.first_seq: int | None = None
        self.payload_bytes = 0
        self.biggest = 0  # payload bytes of its biggest run's events
        self.stored = 0

    @property
    def empty(self) -> bool:
        return not (
            self.events_digest.count or self.rejects or self.source_files or self.source_results
            or self.tag_updates
        )


class BatchCommitter:
    """Commits batches through ``con`` one at a time in the background, chaining each batch's
    hash to the one before (``prev_hash``: the store's last batch hash, None for the first)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, prev_hash: bytes | None,
                 on_committed: Callable[[int], None], schema: Schema) -> None:
        self._con = con
        self._schema = schema  # the projection tables' column types
        self._event_types = dict(table_columns(con, "events"))
        self._columns: dict = {}  # insert_columns' column cache for this connection
        self._prev_hash = prev_hash
        self._on_committed = on_committed
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, batch: Batch, *, ingest_id: str, tags_json: str) -> bool:
        """Start committing ``batch`` (after the one in flight); False when it is empty.

        The batch is a single transaction, so a killed process still leaves whole batches or
        nothing; meanwhile the writer parses and projects the next batch's records."""
        self.wait()
        if batch.empty:
            return False
        event_count = batch.events_digest.count
        digest = batch_hash(
            self._prev_hash, batch.batch_id, event_count,
            batch.events_digest.hexdigest() if event_count else EMPTY_DIGEST,
            batch.streams_digest.hexdigest() if batch.streams_digest.count else EMPTY_DIGEST,
        )
        batch_row = {
            "batch_id": batch.batch_id,
            "ingest_id": ingest_id,
            "started_at": batch.started_at,
            "tags": tags_json,
            "pid": os.getpid(),
            **batch.counts,
            "event_count": event_count,
            "first_seq": batch.first_seq,
            "last_seq": None if batch.first_seq is None else batch.first_seq + event_count - 1,
            "prev_hash": self._prev_hash,
            "hash": digest,
        }
        self._prev_hash = digest
        self._thread = threading.Thread(
            target=self._commit, args=(batch, batch_row), name="recstore-batch-commit")
        self._thread.start()
        return True

    @property
    def busy(self) -> bool:
        """Whether a batch is being committed now."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def wait(self) -> None:
        """Wait for the batch in flight (if any); re-raise what made its commit fail."""
        thread = self._thread
        if thread is None:
            return
        thread.join()
        self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error

    def close(self) -> None:
        """Let a batch still committing end (after an error elsewhere), raising nothing."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _stage(self, batch: Batch) -> list[StagedInsert | JoinedInsert]:
        b = batch.batch_id
        tables: list[tuple[str, tuple[str, ...], list[tuple]]] = [
            ("streams", STREAM_COLUMNS, batch.streams),
            ("source_files", SOURCE_FILE_COLUMNS, batch.source_files),
            ("source_results", SOURCE_RESULT_COLUMNS, batch.source_results),
            ("lineage_log", LINEAGE_COLUMNS, [(*row, b) for row in batch.lineage]),
        ]
        projections = [
            (table, columns_for(table, width), rows, offsets)
            for table in PROJECTION_TABLES
            for width, (rows, offsets) in _by_width(batch.projections.values(), table).items()
        ]
        staged: list[StagedInsert | JoinedInsert] = [
            stage_columns(self._con, table, columns, rows, columns_cache=self._columns)
            for table, columns, rows in tables
            if rows
        ]
        loose = None
        if batch.events:
            loose = batch.events.table(self._event_types)
        staged[:0] = placed_inserts(batch.placement, b, self._schema, loose)
        staged.extend(
            stage_columns(
                self._con, table, columns, rows, columns_cache=self._columns,
                add=(SEQ_COLUMNS.get(table, ()), offsets),
            )
            for table, columns, rows, offsets in projections
        )
        if batch.rejects:
            staged.append(
                stage_columns(
                    self._con, "rejects", REJECT_COLUMNS, batch.rejects,
                    columns_cache=self._columns, unless_exists=_REJECT_KEY,
                )
            )
        if batch.reject_problems:
            staged.append(
                stage_columns(
                    self._con, "reject_problems", REJECT_PROBLEM_COLUMNS, batch.reject_problems,
                    columns_cache=self._columns, unless_exists=_REJECT_KEY,
                )
            )
        return staged

    def _commit(self, batch: Batch, batch_row: dict[str, Any]) -> None:
        """Stage ``batch`` as Arrow tables and commit it (on the commit thread: Arrow conversion
        holds the GIL only in parts, DuckDB releases it)."""
        con = self._con
        try:
            big = batch.biggest > LOCAL_BYTES
            if big:
                _give_back()
            inserts = self._stage(batch)
            # the rows are in Arrow now; their Python copies (a big record's payloads) go
            batch.events.clear()
            batch.projections.clear()
            batch.placement.clear()
            with transaction(con):
                if batch.replaced:
                    delete_projections(con, sorted(batch.replaced))
                while inserts:  # each Arrow table goes once DuckDB holds its rows
                    if big:
                        _give_back()
                    inserts.pop(0).run(con)
                if batch.tag_updates:
                    _update_tags(con, batch.tag_updates)
                batch_row["committed_at"] = now()
                insert_columns(
                    con, "batches", tuple(batch_row), [tuple(batch_row.values())],
                    columns_cache=self._columns,
                )
        except BaseException as exc:  # re-raised in the writer's thread by wait()
            self._error = exc
            return
        self._on_committed(batch.batch_id)


def _give_back() -> None:
    """Return the memory freed since (what placing a big record left, its Python rows, the Arrow
    tables inserted) to the system before Arrow or DuckDB takes more: neither the C heap
    (``malloc_trim``) nor Arrow's allocator gives it back by itself, and the other allocators
    cannot use it. A 24.5 MiB record of many items: the insert and commit peaked 386 -> 308
    MiB, staging it in Arrow 363 -> 348 MiB."""
    trim_heap()
    pa.default_memory_pool().release_unused()


def _by_width(
    projections: Iterable[tuple[Projection, int] | int], table: str
) -> dict[int, tuple[list[tuple], list[int]]]:
    """The rows of ``table`` in ``projections`` (each run's rows and its seq offset), by row
    width (agentuse rows carry more columns), with each row's offset. A run's rows of one table
    share a width, so they are moved a run at a time."""
    groups: dict[int, tuple[list[tuple], list[int]]] = {}
    for staged in projections:
        if isinstance(staged, int):  # placed from a chunk (``placed_inserts``)
            continue
        rows, offset = staged
        run_rows = rows.get(table)
        if not run_rows:
            continue
        width = len(run_rows[0])
        if any(len(row) != width for row in run_rows):  # never made so; kept correct anyway
            for row in run_rows:
                group = groups.setdefault(len(row), ([], []))
                group[0].append(row)
                group[1].append(offset)
            continue
        group = groups.setdefault(width, ([], []))
        group[0].extend(run_rows)
        group[1].extend([offset] * len(run_rows))
    return groups


def _update_tags(con: duckdb.DuckDBPyConnection, tag_updates: dict[str, str]) -> None:
    retagged = pa.table(  # noqa: F841 - read by SQL
        {"run_key": list(tag_updates), "tags": list(tag_updates.values())}
    )
    con.execute(
        "UPDATE proj_runs SET tags = t.tags FROM retagged t WHERE proj_runs.run_key = t.run_key"
    )


def delete_projections(con: duckdb.DuckDBPyConnection, run_keys: list[str]) -> None:
    """Remove the projection rows of ``run_keys`` (before their new revision is projected)."""
    replaced = pa.table({"run_key": pa.array(run_keys, pa.string())})  # noqa: F841 - read by SQL
    for table in PROJECTION_TABLES:
        if table != "proj_runs":  # the others name the run by its revision's first seq
            con.execute(
                f"DELETE FROM {table} WHERE run_seq IN (SELECT first_seq FROM proj_runs "
                "WHERE run_key IN (SELECT run_key FROM replaced))"
            )
    con.execute("DELETE FROM proj_runs WHERE run_key IN (SELECT run_key FROM replaced)")
