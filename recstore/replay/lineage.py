"""Replays in the store: read sources, write replay runs with their lineage (the tree of derived
runs is read by :mod:`recstore.replay.tree`).

A replay run is stored as a new stream with its ``replay_of`` lineage row (detail: source
revision and record hash, source file, mode, input mode, harness hash, stats, per-call
provenance, the report's verdict) in the same transaction. Replays ride the ingest data path:
:func:`prepare_replay` does the per-record work (``recstore.store.prepare.prepare``) where the
replay ran, often a worker process (which also makes the records' rows one chunk of Arrow,
``recstore.store.chunks``; else the writer does), and a :class:`ReplayWriter` places the
prepared records through one ``BatchWriter`` for a whole command, as ingest places a chunk's
records (in SQL at commit), its batches committed in the background. The
source run is only read, never written. The ``replays`` and ``replay_calls`` views
(``schema/020_replay.sql``) expose the detail as columns.

A replay is always a run of its own, never a revision of a stored run (``recstore.store.derived``,
which ingest uses for aioc's replay lines too): a replay whose ``runId`` (chosen by the replayer:
an external command may print any) names a stored run, or another replay of the same command, is
stored under a fresh id; the id it claimed is kept as ``metadata.replayClaimedRunId`` and the
lineage detail's ``claimedRunId``. The one exception is the same replay again (identical record,
a replay of the same source, e.g. a deterministic replayer run twice): it is the stored replay,
and nothing is appended.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import duckdb

from recstore.formats.reader import RawInput
from recstore.replay.replay import ReplayReport
from recstore.store import Store
from recstore.store.chunks import Schema, chunkable, to_chunk
from recstore.store.counts import IngestSummary, SourceCounts
from recstore.store.derived import RELATION, OwnRuns
from recstore.store.ingest import BatchWriter
from recstore.store.prepare import Prepared, Refused, prepare
from recstore.store.store import StoredRun

__all__ = [
    "REPLAY_SOURCE",
    "Placed",
    "ReplayWriter",
    "SourceRun",
    "lineage_row",
    "load_source",
    "load_sources",
    "prepare_replay",
    "store_replays",
]

REPLAY_SOURCE = "recstore:replay"  # the source URI of replays stored by the replay commands
REPLAY_TAGS = {"kind": "replay"}
# Replays per write transaction: fewer than ingest's 2,000, because the last batch is staged and
# committed after the last replay, while nothing else runs.
STORE_BATCH = 500
# Prepared replays placed per look-up query (their run keys are looked up together): a batch's
# worth, for each look-up reads the store's streams whole (15-20 ms at 6,000 runs; with 200 a
# look-up, 15 of them made 0.08 ms of each of 3,000 replays).
PLACE_CHUNK = STORE_BATCH


# A stored run a replay starts from, with the identity its lineage row records.
SourceRun = StoredRun


def load_source(store: Store, ref: str) -> SourceRun:
    """The current revision of the run ``ref`` names (key, id or unique prefix)."""
    return load_sources(store, [store.resolve_run(ref)])[0]


def load_sources(store: Store, run_keys: list[str]) -> list[SourceRun]:
    """The current revisions of stored runs, in the order given (see ``Store.load_runs``)."""
    return store.load_runs(run_keys)


def lineage_row(source: SourceRun, record: dict, report: ReplayReport, provider: str) -> dict:
    """The ``replay_of`` lineage row for one replay (``Store.ingest_records`` format)."""
    harness = (record.get("metadata") or {}).get("harness")
    detail = {
        "sourceRevision": source.revision,
        "sourceRecordHash": source.record_hash,
        "sourceUri": source.source_uri,
        "mode": report.mode,
        "inputMode": report.input_mode,
        "harnessHash": harness.get("descriptorHash") if isinstance(harness, dict) else None,
        "harness": harness,
        "provider": provider,
        "status": report.status,
        "reason": report.reason,
        "replayStats": report.stats.to_json(),
        "unconsumedRecordedOutputs": report.unconsumed,
        "calls": [call.to_json() for call in report.calls],
        "error": report.error,
        "usage": report.usage,
    }
    return {
        "relation": RELATION,
        "parent_run_key": source.run_key,
        "parent_run_id": source.record.get("runId"),
        "child": record["runId"],
        "detail": detail,
    }


def prepare_replay(
    source: SourceRun, record: dict, report: ReplayReport, provider: str, line: int | None = None,
) -> tuple[Prepared | Refused, dict]:
    """A replay record ready for :meth:`ReplayWriter.add`: prepared as ingest prepares a record
    (pure work, so it runs where the replay ran) and its ``replay_of`` lineage row. ``line`` is
    the replay's place in its command's selection (the stream's ``line``)."""
    prepared = prepare(RawInput(REPLAY_SOURCE, line, None, record))
    return prepared, lineage_row(source, record, report, provider)


@dataclass
class Placed:
    """Where a replay given to :meth:`ReplayWriter.add` is stored: filled in when the writer
    places it (at the latest by :meth:`ReplayWriter.close`)."""

    run_key: str | None = None  # None: refused (kept in rejects) or not placed yet
    run_id: str | None = None
    claimed_run_id: str | None = None  # the runId the replay came with, when it was taken


@dataclass
class _Pending:
    prepared: Prepared | Refused
    lineage: list[dict]
    placed: Placed


class ReplayWriter:
    """Stores prepared replay records and their lineage rows through one ``BatchWriter`` on the
    writer connection ``con``, as one input (``source_uri``) with ``tags``: records are placed
    :data:`PLACE_CHUNK` at a time and batches committed in the background; :meth:`close`
    commits the rest. Each replay is stored as a run of its own (see the module docstring).
    Use it as a context manager; after an error nothing pending is committed.
    """

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        source_uri: str = REPLAY_SOURCE,
        tags: dict[str, str] | None = None,
    ) -> None:
        self._writer = BatchWriter(
            con, tags=REPLAY_TAGS if tags is None else tags, batch_size=STORE_BATCH
        )
        self._counts = SourceCounts(self._writer.open_source(source_uri, "records"))
        self._pending: list[_Pending] = []
        self._own = OwnRuns(self._writer, REPLAY_SOURCE)

    def __enter__(self) -> ReplayWriter:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self._writer.close()

    @property
    def schema(self) -> Schema:
        """The store's projection column types, for chunks made elsewhere (workers)."""
        return self._writer.schema

    def add(self, prepared: Prepared | Refused, lineage: Iterable[dict],
            placed: Placed | None = None) -> Placed:
        """Queue one prepared replay record with its lineage rows (each names it as ``child``;
        the first is its ``replay_of`` row). Returns where it will be stored (``placed``, when
        given, is filled in)."""
        placed = Placed() if placed is None else placed
        self._pending.append(_Pending(prepared, list(lineage), placed))
        if len(self._pending) >= PLACE_CHUNK:
            self._place()
        return placed

    def _place(self) -> None:
        if not self._pending:
            return
        keys = [p.prepared.key for p in self._pending if isinstance(p.prepared, Prepared)]
        stored = self._writer.current_of(keys)
        chunk, lineage = [], []
        for pending in self._pending:
            prepared, links = self._own_run(pending, stored)
            chunk.append(prepared)
            lineage.extend(links)
        # as ingest stores a record: its rows one chunk of Arrow, placed in SQL at commit (a
        # worker may have made the chunk already); after _own_run, which may prepare a record
        # again under a fresh id
        records = [p for p in chunk if chunkable(p) and p.rows is None]
        if records:
            to_chunk(records, self._writer.schema)
        self._writer.store_prepared(chunk, self._counts, lineage)
        self._pending = []

    def _own_run(self, pending: _Pending, stored: dict) -> tuple[Prepared | Refused, list[dict]]:
        """The record to store for ``pending`` and its lineage rows (``store.derived``)."""
        p, placed = pending.prepared, pending.placed
        if not isinstance(p, Prepared):
            return p, pending.lineage
        p, links, placed.claimed_run_id = self._own.own_run(p, pending.lineage, stored)
        placed.run_key, placed.run_id = p.key, p.run_id
        return p, links

    def close(self) -> IngestSummary:
        """Store everything queued, record the input as read and commit; the summary lists
        the replay runs stored (``run_keys``) and the rejected records."""
        self._place()
        self._writer.finish_source(self._counts)
        self._writer.flush()
        return self._writer.summary


def store_replays(
    store: Store, replays: Iterable[tuple[SourceRun, dict | None, ReplayReport, str]]
) -> list[str | None]:
    """Store replay records (failed ones too) with their lineage in one transaction; returns
    each replay's run key (None: it had no record, e.g. it could not start, or was refused).
    Each report's ``replay_run_id`` is set to the id its replay is stored under."""
    replays = list(replays)
    if not any(record is not None for _, record, _, _ in replays):
        return [None] * len(replays)
    with store.writer() as con, ReplayWriter(con) as writer:
        placed = []
        for source, record, report, provider in replays:
            if record is None:
                placed.append(Placed())
                continue
            prepared, link = prepare_replay(source, record, report, provider)
            placed.append(writer.add(prepared, [link]))
        writer.close()
    for (_, _, report, _), where in zip(replays, placed, strict=True):
        if where.run_id is not None:
            report.replay_run_id = where.run_id
    return [where.run_key for where in placed]
