"""The ingest hot path: validate, hash, decompose into events, project, and append in batches.

One :class:`BatchWriter` serves one ingest command while it holds the store's write lock. Rows
accumulate in Python lists and are flushed every ``batch_size`` stored records as Arrow tables
inside ONE transaction (events, streams, projections, rejects, sources, lineage and the batch
row together), so a killed process leaves whole batches or nothing (tech-notes §2.2).

Idempotency: the canonical hash of each stream's current revision is loaded once per command;
an identical record appends nothing, a changed record with a known run key appends a revision.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import duckdb
import pyarrow as pa

from recstore.canonical import canonical_json, json_type_name
from recstore.errors import InputError
from recstore.formats.aioc import validate_run_record
from recstore.formats.events import Event, record_to_events
from recstore.formats.jsontext import dumps_json, sha256_canonical_record
from recstore.formats.reader import RawInput
from recstore.progress import NO_PROGRESS, Progress
from recstore.store.projection import PROJECTION_TABLES, RunContext, project_record
from recstore.store.tables import StagedInsert, insert_rows, stage_rows

__all__ = [
    "BatchWriter",
    "IngestSummary",
    "InputSource",
    "delete_projections",
    "event_hash",
    "run_key_for",
]

DEFAULT_BATCH_SIZE = 2000
# IngestSummary.rejects lists at most this many (memory stays flat on a file of bad lines).
SUMMARY_REJECTS = 100
_SEP = "\x1f"


def run_key_for(fmt: str, run_id: str) -> str:
    """Store key of a run: ``aioc:<runId>`` / ``agentuse:<sessionId>`` / ``otlp:<runId>``."""
    return f"{fmt}:{run_id}"


def event_hash(
    prev_hash: str | None,
    stream_key: str,
    stream_pos: int,
    revision: int,
    etype: str,
    idx: int | None,
    turn: int | None,
    payload: str,
) -> str:
    """Chain hash of one event. ``recstore verify`` recomputes the same string in SQL:
    the fields joined by U+001F, NULLs as empty strings, then the payload text."""
    text = _SEP.join(
        (
            prev_hash or "",
            stream_key,
            str(stream_pos),
            str(revision),
            etype,
            "" if idx is None else str(idx),
            "" if turn is None else str(turn),
            payload,
        )
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class InputSource(Protocol):
    """What the writer reads: a file (:class:`recstore.formats.reader.SourceFile`) or records
    handed over in-process."""

    uri: str
    format: str
    compression: str | None
    sha256: str | None
    size_bytes: int | None

    def inputs(self) -> Iterator[RawInput]: ...


@dataclass
class IngestSummary:
    """What one ingest did. ``run_keys`` lists the runs stored (new or revised), in order."""

    accepted: int = 0
    revised: int = 0
    duplicate: int = 0
    rejected: int = 0
    sources: int = 0
    batches: int = 0
    seconds: float = 0.0
    run_keys: list[str] = field(default_factory=list)
    rejects: list[dict] = field(default_factory=list)  # first SUMMARY_REJECTS: {where, reason, ...}

    @property
    def exit_code(self) -> int:
        """1 when anything was rejected, else 0."""
        return 1 if self.rejected else 0

    def line(self) -> str:
        """The one-line summary the CLI prints."""
        rate = (self.accepted + self.revised + self.duplicate) / self.seconds if self.seconds else 0
        return (
            f"accepted {self.accepted}, duplicate {self.duplicate}, revised {self.revised}, "
            f"rejected {self.rejected} ({self.sources} sources, {self.batches} batches, "
            f"{self.seconds:.2f}s, {rate:,.0f} records/s)"
        )

    def to_dict(self) -> dict:
        """JSON form for ``--json``."""
        return asdict(self)


@dataclass
class _SourceCounts:
    source_id: int
    records: int = 0
    accepted: int = 0
    revised: int = 0
    duplicate: int = 0
    rejected: int = 0


_MEMORY_LIMIT = re.compile(r"\d+(?:\.\d+)?\s*(?:[KMGT]i?B|B)\Z", re.IGNORECASE)


def ingest_memory_limit() -> str:
    """DuckDB's memory limit while ingesting: env ``RECSTORE_INGEST_MEMORY`` (e.g. ``1GB``),
    default ``256MB``."""
    value = os.environ.get("RECSTORE_INGEST_MEMORY", "").strip() or "256MB"
    if not _MEMORY_LIMIT.match(value):
        raise InputError(f"expected a size such as 512MB, got {value!r}",
                         source="RECSTORE_INGEST_MEMORY")
    return value


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class BatchWriter:
    """Appends records to the store through ``con`` (an open writer connection)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        tags: dict[str, str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        progress: Progress = NO_PROGRESS,
    ) -> None:
        self._con = con
        # DuckDB would otherwise cache up to 80 % of RAM in written pages, so an ingest's memory
        # grew with its input; this bound keeps it flat and cost no speed in bench_ingest.
        con.execute(f"SET memory_limit = '{ingest_memory_limit()}'")
        # the batch being committed in the background, and what made its commit fail
        self._commit_thread: threading.Thread | None = None
        self._commit_error: BaseException | None = None
        self.batch_size = batch_size
        self.tags_json = dumps_json(dict(tags or {}))
        self.ingest_id = str(uuid.uuid4())
        self.summary = IngestSummary()
        self._progress = progress  # records read so far (their total is unknown up front)
        # stream_key -> (record_hash, revision, last_seq) of its current revision
        self._current: dict[str, tuple[str, int, int]] = {
            key: (h, rev, last)
            for key, h, rev, last in con.execute(
                "SELECT stream_key, arg_max(record_hash, revision), max(revision), "
                "arg_max(last_seq, revision) FROM streams GROUP BY stream_key"
            ).fetchall()
        }
        # stream_key -> (next stream_pos, last hash) for streams this writer appended to
        self._tails: dict[str, tuple[int, str]] = {}
        self._columns: dict = {}  # insert_rows' column cache for this connection
        self._next_seq = self._max("SELECT max(seq) FROM events") + 1
        self._next_batch = self._max("SELECT max(batch_id) FROM batches") + 1
        self._next_source = (
            max(
                self._max("SELECT max(source_id) FROM sources"),
                self._max("SELECT max(source_id) FROM events"),
                self._max("SELECT max(source_id) FROM rejects"),
            )
            + 1
        )
        self._next_reject = self._max("SELECT max(reject_id) FROM rejects") + 1
        self._reset_batch()

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The writer connection, once no batch is being committed through it."""
        self._wait_for_commit()
        return self._con

    def _max(self, sql: str) -> int:
        value = self.con.execute(sql).fetchone()[0]
        return int(value) if value is not None else 0

    def _reset_batch(self) -> None:
        self._events: list[dict] = []
        self._streams: list[dict] = []
        self._rejects: list[dict] = []
        self._sources: list[dict] = []
        self._lineage: list[dict] = []
        self._projections: dict[str, dict[str, list[dict]]] = {}
        self._replaced_in_db: set[str] = set()
        self._stored_in_batch = 0
        self._batch_counts = {"accepted": 0, "revised": 0, "duplicate": 0, "rejected": 0}
        self._batch_started = _now()

    # -- reading ------------------------------------------------------------------------------

    def ingest_sources(
        self, sources: Iterable[InputSource], lineage: list[dict] | None = None
    ) -> IngestSummary:
        """Read every source, store its records, flush, and return the summary."""
        start = time.monotonic()
        try:
            for source in sources:
                self._ingest_source(source, lineage or [])
            self.flush()
        finally:
            if self._commit_thread is not None:  # only after an error: let it end before closing
                self._commit_thread.join()
        self.summary.seconds = time.monotonic() - start
        return self.summary

    def _ingest_source(self, source: InputSource, lineage: list[dict]) -> None:
        counts = _SourceCounts(self._next_source)
        self._next_source += 1
        self.summary.sources += 1
        for raw in source.inputs():
            counts.records += 1
            outcome = self._ingest_one(raw, source, counts.source_id, lineage)
            setattr(counts, outcome, getattr(counts, outcome) + 1)
            self._batch_counts[outcome] += 1
            done = self.summary.accepted + self.summary.revised + self.summary.duplicate
            self._progress.update(done + self.summary.rejected, None)
            if self._stored_in_batch >= self.batch_size:
                self._submit_batch()
        usable = counts.accepted + counts.revised + counts.duplicate
        status = "ok" if not counts.rejected else ("partial" if usable else "rejected")
        self._sources.append(
            {
                "source_id": counts.source_id,
                "uri": source.uri,
                "sha256": source.sha256,
                "size_bytes": source.size_bytes,
                "format": source.format,
                "compression": source.compression,
                "status": status,
                "record_count": counts.records,
                "accepted": counts.accepted,
                "revised": counts.revised,
                "duplicate": counts.duplicate,
                "rejected": counts.rejected,
                "ingested_at": _now(),
            }
        )

    def _ingest_one(
        self, raw: RawInput, source: InputSource, source_id: int, lineage: list[dict]
    ) -> str:
        if raw.error is not None:
            return self._reject(raw, source_id, raw.error, None)
        record = raw.value
        if not isinstance(record, dict):
            return self._reject(
                raw, source_id, f"not a JSON object (got {json_type_name(record)})", None
            )
        try:
            validate_run_record(record, source=source.uri)
        except InputError as exc:
            return self._reject(raw, source_id, exc.problem, exc.path)
        return self._store(record, raw, source, source_id, lineage)

    def _reject(self, raw: RawInput, source_id: int, reason: str, path: str | None) -> str:
        text = raw.text if raw.text is not None else dumps_json(raw.value)
        self._rejects.append(
            {
                "reject_id": self._next_reject,
                "source_id": source_id,
                "source_uri": raw.source_uri,
                "line": raw.line,
                "reason": reason,
                "path": path,
                "raw_text": text,
                "raw_bytes": raw.raw,
                "rejected_at": _now(),
            }
        )
        self._next_reject += 1
        self.summary.rejected += 1
        if len(self.summary.rejects) >= SUMMARY_REJECTS:  # the rejects table keeps them all
            return "rejected"
        where = f"{raw.source_uri}:{raw.line}" if raw.line is not None else raw.source_uri
        self.summary.rejects.append(
            {
                "source": raw.source_uri,
                "line": raw.line,
                "path": path,
                "reason": reason,
                "where": where,
            }
        )
        return "rejected"

    # -- storing ------------------------------------------------------------------------------

    def _store(
        self,
        record: dict,
        raw: RawInput,
        source: InputSource,
        source_id: int,
        lineage: list[dict],
    ) -> str:
        run_id = record["runId"]
        fmt = getattr(source, "record_format", "aioc")  # records converted from another format
        key = run_key_for(fmt, run_id)
        item_canons = [canonical_json(item) for item in record["items"]]
        record_hash = sha256_canonical_record(record, "items", item_canons)
        current = self._current.get(key)
        if current is not None and current[0] == record_hash:
            self.summary.duplicate += 1
            return "duplicate"
        revision = 1 if current is None else current[1] + 1
        events = record_to_events(record)
        first_seq = self._next_seq
        self._append_events(key, revision, events, source_id)
        last_seq = self._next_seq - 1
        self._current[key] = (record_hash, revision, last_seq)
        self._streams.append(
            {
                "stream_key": key,
                "revision": revision,
                "run_id": run_id,
                "format": fmt,
                "record_hash": record_hash,
                "first_seq": first_seq,
                "last_seq": last_seq,
                "event_count": len(events),
                "source_id": source_id,
                "source_uri": source.uri,
                "line": raw.line,
                "ingested_at": _now(),
            }
        )
        ctx = RunContext(
            run_key=key,
            run_id=run_id,
            format=fmt,
            revision=revision,
            record_hash=record_hash,
            tags_json=self.tags_json,
            source_id=source_id,
            source_uri=source.uri,
            source_line=raw.line,
            batch_id=self._next_batch,
            first_seq=first_seq,
            last_seq=last_seq,
        )
        projection = project_record(record, ctx, events, item_canons)
        for link in lineage:
            if link.get("child", run_id) in (run_id, key):
                self._lineage.append(_lineage_row(link, key, revision, source_id))
        return self._stage_projection(key, revision, projection)

    def _stage_projection(self, key: str, revision: int, projection: dict[str, list[dict]]) -> str:
        """Queue ``key``'s new projection for this batch and count the run as accepted (its first
        revision) or revised; a run already in the database has its old rows replaced at commit."""
        if revision > 1 and key not in self._projections:
            self._replaced_in_db.add(key)
        self._projections[key] = projection
        self._stored_in_batch += 1
        self.summary.run_keys.append(key)
        if revision == 1:
            self.summary.accepted += 1
            return "accepted"
        self.summary.revised += 1
        return "revised"

    def _tail(self, key: str) -> tuple[int, str | None]:
        tail = self._tails.get(key)
        if tail is not None:
            return tail
        current = self._current.get(key)
        if current is None:
            return 0, None
        pos, last_hash = self.con.execute(
            "SELECT stream_pos, hash FROM events WHERE seq = ?", [current[2]]
        ).fetchone()
        return pos + 1, last_hash

    def _append_events(self, key: str, revision: int, events: list[Event], source_id: int) -> None:
        pos, prev = self._tail(key)
        for event in events:
            digest = event_hash(
                prev, key, pos, revision, event.type, event.idx, event.turn, event.payload_text
            )
            self._events.append(
                {
                    "seq": self._next_seq,
                    "stream_key": key,
                    "stream_pos": pos,
                    "revision": revision,
                    "type": event.type,
                    "idx": event.idx,
                    "turn": event.turn,
                    "payload": event.payload_text,
                    "source_id": source_id,
                    "prev_hash": prev,
                    "hash": digest,
                }
            )
            self._next_seq += 1
            pos += 1
            prev = digest
        self._tails[key] = (pos, prev)

    # -- committing ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Commit everything pending as one batch (one transaction) and wait until it is
        committed; no-op when nothing is pending."""
        self._submit_batch()
        self._wait_for_commit()

    def _submit_batch(self) -> None:
        """Hand the pending rows to a background thread that commits them as one batch.

        DuckDB releases the GIL while it inserts and commits, so the next batch's records are
        parsed and projected meanwhile (the machine has 2 cores). At most one batch is in flight
        and it is a single transaction, so a killed process still leaves whole batches or nothing.
        """
        self._wait_for_commit()
        if not (self._events or self._rejects or self._sources):
            self._reset_batch()
            return
        batch_id = self._next_batch
        for rows in (self._events, self._streams, self._rejects, self._sources, self._lineage):
            for row in rows:
                row["batch_id"] = batch_id
        tables = [
            ("events", self._events),
            ("streams", self._streams),
            *(
                (table, [row for rows in self._projections.values() for row in rows[table]])
                for table in PROJECTION_TABLES
            ),
            ("lineage_log", self._lineage),
            ("rejects", self._rejects),
            ("sources", self._sources),
        ]
        # Arrow conversion needs the GIL, so it happens here; the thread only runs DuckDB.
        inserts = [
            staged
            for table, rows in tables
            if (staged := stage_rows(self._con, table, rows, columns_cache=self._columns))
        ]
        batch_row = {
            "batch_id": batch_id,
            "ingest_id": self.ingest_id,
            "started_at": self._batch_started,
            "tags": self.tags_json,
            "pid": os.getpid(),
            **self._batch_counts,
        }
        replaced = sorted(self._replaced_in_db)
        self._next_batch += 1
        self._reset_batch()
        self._commit_thread = threading.Thread(
            target=self._commit_batch,
            args=(inserts, batch_row, replaced),
            name="recstore-batch-commit",
        )
        self._commit_thread.start()

    def _wait_for_commit(self) -> None:
        """Wait for the batch in flight (if any); re-raise what made its commit fail."""
        thread = self._commit_thread
        if thread is None:
            return
        thread.join()
        self._commit_thread = None
        error, self._commit_error = self._commit_error, None
        if error is not None:
            raise error

    def _commit_batch(
        self, inserts: list[StagedInsert], batch_row: dict[str, Any], replaced: list[str]
    ) -> None:
        con = self._con
        try:
            con.execute("BEGIN TRANSACTION")
            try:
                if replaced:
                    delete_projections(con, replaced)
                for staged in inserts:
                    staged.run(con)
                batch_row["committed_at"] = _now()
                insert_rows(con, "batches", [batch_row], columns_cache=self._columns)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        except BaseException as exc:  # re-raised in the ingesting thread by _wait_for_commit
            self._commit_error = exc
            return
        self.summary.batches += 1


def delete_projections(con: duckdb.DuckDBPyConnection, run_keys: list[str]) -> None:
    """Remove the projection rows of ``run_keys`` (before their new revision is projected)."""
    replaced = pa.table({"run_key": pa.array(run_keys, pa.string())})  # noqa: F841 - read by SQL
    for table in PROJECTION_TABLES:
        con.execute(f"DELETE FROM {table} WHERE run_key IN (SELECT run_key FROM replaced)")


def _lineage_row(link: dict, key: str, revision: int, source_id: int) -> dict:
    detail = link.get("detail")
    return {
        "child_run_key": key,
        "revision": revision,
        "parent_run_key": link.get("parent_run_key"),
        "parent_run_id": link.get("parent_run_id"),
        "relation": link["relation"],
        "detail": None if detail is None else dumps_json(detail),
        "source_id": source_id,
    }
