"""The ingest hot path: placing prepared records into batches (streams, revisions, seqs, tags,
rejects, sources, lineage).

One :class:`BatchWriter` serves one write command while it holds the store's write lock. Records
are read in chunks; each chunk's run keys are looked up in one query, so identical records are
counted as duplicates and changed ones become revisions without the writer holding every stream
of the store in memory. Rows accumulate per batch, and every ``batch_size`` stored records
:mod:`recstore.store.batches` commits them as one transaction in the background. A source row is committed with the first batch of its input, and what
reading it found when it has been read whole.

Tags are stream events (``tags_changed``): ingest with tags adds one to every run stored or found
identical whose tags differ, and :meth:`BatchWriter.tag_runs` adds them for runs already stored.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple, Protocol

import duckdb
import pyarrow as pa

from recstore.errors import InputError
from recstore.formats.events import FAMILY_OF, Event
from recstore.formats.jsontext import dumps_json, loads_json
from recstore.formats.reader import RawInput
from recstore.progress import NO_PROGRESS, Progress
from recstore.store.batches import (
    Batch,
    BatchCommitter,
    now,
)
from recstore.store.chain import DEFAULT_BATCH_SIZE, line_digests
from recstore.store.chunks import store_schema
from recstore.store.counts import IngestSummary, SourceCounts
from recstore.store.derived import OwnRuns
from recstore.store.prepare import Prepared, Preparer, Refused, run_key_for, utf8_safe
from recstore.store.projection import (
    COLUMNS,
    Projection,
    RunContext,
)
from recstore.store.spool import remove_stale_spools

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_RECORD_BYTES",
    "INGEST_DUCKDB_THREADS",
    "BatchWriter",
    "InputSource",
    "run_key_for",
    "source_units",
]

# Records read, hashed and then looked up together (one query per chunk).
CHUNK_SIZE = 1000
# A batch is committed early once it holds this much payload text, so memory stays bounded.
BATCH_BYTES = 64 * 2**20
# How much log the write-ahead file may hold before DuckDB checkpoints it into the store.
CHECKPOINT_BYTES = "1GB"
# DuckDB's threads while `Store.ingest` writes. Its thread pool only adds CPU there: the inserts
# and commits already run on the commit thread beside the placing one, and the worker processes
# keep the other cores busy. One thread cut the writer's CPU by ~10 % a record (synth and the
# dev corpus, docs/store.md, issue 28); the checkpoint at close runs with the setting restored.
INGEST_DUCKDB_THREADS = 1
# A single record (line) larger than this is rejected unread (`--max-record-bytes`).
DEFAULT_MAX_RECORD_BYTES = 64 * 2**20
# IngestSummary.rejects lists at most this many (memory stays flat on a file of bad lines).
SUMMARY_REJECTS = 100
TAGS_EVENT = "tags_changed"
_NO_TAGS = "{}"



class InputSource(Protocol):
    """What the writer reads: a file (:class:`recstore.formats.reader.SourceFile`) or records
    handed over in-process."""

    uri: str
    format: str
    compression: str | None
    sha256: str | None
    size_bytes: int | None

    def inputs(self) -> Iterator[RawInput]: ...


_MEMORY_LIMIT = re.compile(r"\d+(?:\.\d+)?\s*(?:[KMGT]i?B|B)\Z", re.IGNORECASE)


def ingest_memory_limit() -> str:
    """DuckDB's memory limit while ingesting: env ``RECSTORE_INGEST_MEMORY`` (e.g. ``1GB``),
    default ``256MB``."""
    value = os.environ.get("RECSTORE_INGEST_MEMORY", "").strip() or "256MB"
    if not _MEMORY_LIMIT.match(value):
        raise InputError(f"expected a size such as 512MB, got {value!r}",
                         source="RECSTORE_INGEST_MEMORY")
    return value


class _Stream(NamedTuple):
    """What the writer knows of a stored stream: its current revision and tags."""

    record_hash: bytes
    revision: int
    tags_json: str
    next_pos: int | None  # None: not known yet (looked up when something is appended)


class BatchWriter:
    """Appends records to the store through ``con`` (an open writer connection); with
    ``duckdb_threads``, DuckDB runs on that many threads until the writer closes."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        tags: dict[str, str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        preparer: Preparer | None = None,
        progress: Progress = NO_PROGRESS,
        on_committed: Callable[[int], None] | None = None,
        duckdb_threads: int | None = None,
    ) -> None:
        self._con = con
        self._on_committed = on_committed  # called with each batch's id once it is committed
        self._preparer = preparer or Preparer()
        remove_stale_spools()  # the worker rows a killed ingest left in memory (store.spool)
        # DuckDB would otherwise cache up to 80 % of RAM in written pages, so an ingest's memory
        # grew with its input; this bound keeps it flat.
        con.execute(f"SET memory_limit = '{ingest_memory_limit()}'")
        # Every checkpoint rewrites the partly filled row groups of each table and frees the old
        # blocks, which DuckDB never returns: with its 16 MB default an ingest left a third of
        # the file free. Checkpointing once per ~1 GB of log (and when the writer closes) keeps
        # the file at the size of its data.
        con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_BYTES}'")
        # DuckDB's threads for the writer's inserts and commits (None: as configured), restored
        # at close: the setting is the database's, not the connection's
        self._threads = _set_threads(con, duckdb_threads)
        self.batch_size = batch_size
        self.tags = dict(tags or {})
        self.tags_json = dumps_json(self.tags)
        self.ingest_id = str(uuid.uuid4())
        self.summary = IngestSummary()
        self._progress = progress  # records read so far (their total is unknown up front)
        self._streams: dict[str, _Stream | None] = {}  # run key -> state; None: not stored
        # Looks stored streams up while a batch commits through ``con``: what was committed
        # before this writer began is all it needs (what the writer appended, it remembers).
        self._reader = con.cursor()
        self._own_runs: OwnRuns | None = None  # places aioc replay lines (made when one comes)
        # nothing was stored when this writer began: every stream it sees is one it appended
        # (which it remembers), so run keys need no look-up (a query per chunk that reads
        # what is stored)
        self._none_stored = self._max("SELECT count(*) FROM (SELECT 1 FROM streams LIMIT 1)") == 0
        self._next_seq = self._max("SELECT max(seq) FROM events") + 1
        self._next_batch = self._max("SELECT max(batch_id) FROM batches") + 1
        self._next_source = (
            max(
                self._max("SELECT max(source_id) FROM source_files"),
                self._max("SELECT max(source_id) FROM events"),
                self._max("SELECT max(source_id) FROM rejects"),
            )
            + 1
        )
        self._next_reject = self._max("SELECT max(reject_id) FROM rejects") + 1
        row = con.execute("SELECT hash FROM batches ORDER BY batch_id DESC LIMIT 1").fetchone()
        # records come prepared as chunks of Arrow rows (made with these column types), which
        # the commit places in SQL
        self.schema = self._preparer.schema = store_schema(con)
        self._committer = BatchCommitter(con, row[0] if row else None, self._count_batch,
                                         self.schema)
        self._batch = Batch(self._next_batch)

    def _count_batch(self, batch_id: int) -> None:
        self.summary.batches += 1
        if self._on_committed is not None:
            self._on_committed(batch_id)

    def __enter__(self) -> BatchWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Let a batch still committing end (after an error) and close the look-up cursor (an
        open cursor would keep the store's file lock)."""
        self._committer.close()
        self._reader.close()
        _set_threads(self._con, self._threads)

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The writer connection, once no batch is being committed through it."""
        self._wait_for_commit()
        return self._con

    def _max(self, sql: str) -> int:
        value = self._con.execute(sql).fetchone()[0]  # in __init__: nothing in flight yet
        return int(value) if value is not None else 0

    # -- sources ------------------------------------------------------------------------------

    def open_source(self, uri: str, fmt: str, compression: str | None = None) -> int:
        """Register an input; its row is committed with the current batch."""
        source_id = self._next_source
        self._next_source += 1
        self.summary.sources += 1
        self._batch.source_files.append(
            (source_id, utf8_safe(uri), fmt, compression, self._batch.batch_id, now())
        )
        return source_id

    def finish_source(
        self, counts: SourceCounts, sha256: str | None = None, size: int | None = None
    ) -> None:
        """Record what reading an input found (committed with the current batch)."""
        self._batch.source_results.append(
            (
                counts.source_id, sha256, size, counts.status, counts.records, counts.accepted,
                counts.revised, counts.duplicate, counts.rejected, self._batch.batch_id, now(),
            )
        )

    # -- reading ------------------------------------------------------------------------------

    def ingest_sources(
        self, sources: Iterable[InputSource], lineage: list[dict] | None = None
    ) -> IngestSummary:
        """Read every source, store its records, flush, and return the summary."""
        start = time.monotonic()
        for source in sources:
            self._ingest_source(source, lineage or [])
        self.flush()
        self.summary.seconds = time.monotonic() - start
        return self.summary

    def _ingest_source(self, source: InputSource, lineage: list[dict]) -> None:
        self.store_source(source, self._preparer.prepared(*source_units(source)), lineage)

    def store_source(self, source: InputSource, prepared: Iterable[Prepared | Refused],
                     lineage: list[dict] | None = None) -> SourceCounts:
        """Store ``source``'s records, prepared already (by :meth:`Preparer.prepared` over
        :func:`source_units`), as one input; its rows go with the pending batch, which is not
        committed here (see :meth:`submit`)."""
        counts = SourceCounts(self.open_source(source.uri, source.format, source.compression))
        for chunk in _chunks(iter(prepared), CHUNK_SIZE):
            self.store_prepared(chunk, counts, lineage or [])
        self.finish_source(counts, source.sha256, source.size_bytes)
        return counts

    def store_prepared(
        self,
        chunk: list[Prepared | Refused],
        counts: SourceCounts,
        lineage: Iterable[dict] = (),
    ) -> list[str]:
        """Store records made by :func:`recstore.store.prepare.prepare` (here or in a worker
        process), read from the input ``counts`` counts for (:meth:`open_source`).

        The chunk's run keys are looked up in one query; each record becomes a new run, a
        revision or a duplicate, a refused one is kept in rejects. ``lineage`` rows (see
        :meth:`recstore.store.Store.ingest_records`) go with the record their ``child`` names,
        or with every record when they name none. Full batches are committed in the background.
        Returns each record's outcome (``accepted``, ``revised``, ``duplicate``, ``rejected``).
        """
        links = _Links(lineage)
        self._look_up([key for p in chunk if isinstance(p, Prepared) for key in _keys_of(p)])
        outcomes = []
        for p in chunk:
            if isinstance(p, Refused):
                outcome = "rejected"
                self.reject(p.raw, counts.source_id, p.reason, p.path, p.problems)
            elif p.lineage:
                p, own = self._as_replay(p)
                outcome = self._store(p, counts.source_id, links, own)
            else:
                outcome = self._store(p, counts.source_id, links)
            counts.add(outcome)
            outcomes.append(outcome)
            self._progress.update(
                self.summary.accepted + self.summary.revised + self.summary.duplicate
                + self.summary.rejected,
                None,
            )
            self.submit_if_full()
        return outcomes

    def _as_replay(self, p: Prepared) -> tuple[Prepared, list[dict]]:
        """An aioc replay line's record (``p.lineage`` is its ``replay_of`` row) placed as
        ``recstore replay`` places a replay (``store.derived``): a run of its own. The row names
        the source by key, revision and record hash when it is stored; else by run id only,
        which the ``lineage`` and ``replays`` views resolve once the source is ingested."""
        link, *rest = p.lineage
        source = self.current(_source_key(link))
        if source is not None:
            link = {**link, "parent_run_key": _source_key(link), "detail": {
                "sourceRevision": source.revision, "sourceRecordHash": source.record_hash.hex(),
                **link["detail"]}}
        if self._own_runs is None:
            self._own_runs = OwnRuns(self, "aioc replay line")
        placed, links, _ = self._own_runs.own_run(p, [link, *rest], {})
        return placed, links

    def look_up(self, sql: str, params: list) -> duckdb.DuckDBPyConnection:
        """Run a read query on the look-up cursor (what was committed before this writer began,
        while a batch commits on the writer connection)."""
        return self._reader.execute(sql, params)

    def reject(self, raw: RawInput, source_id: int, reason: str, path: str | None,
               problems: list[dict] | None = None) -> None:
        """Keep ``raw`` in the rejects table (once per URI, line, reason and content), with
        every problem (``{path, problem}``) in ``reject_problems`` when there are several."""
        data = raw.data
        if data is None:
            data = (raw.text if raw.text is not None else dumps_json(raw.value)).encode(
                "utf-8", "surrogatepass"
            )
        text = raw.text if raw.text is not None else data.decode("utf-8", "replace")
        self._batch.rejects.append(
            (
                self._next_reject, source_id, utf8_safe(raw.source_uri), raw.line, reason, path,
                utf8_safe(text.rstrip("\r\n")), raw.raw,
                hashlib.sha256(data).digest() if raw.sha256 is None else raw.sha256,
                raw.size if raw.size is not None else len(data), self._batch.batch_id, now(),
            )
        )
        if problems:
            row = self._batch.rejects[-1]
            self._batch.reject_problems.append((*row[2:5], row[8], dumps_json(problems)))
        self._next_reject += 1
        self._batch.counts["rejected"] += 1
        self.summary.rejected += 1
        if len(self.summary.rejects) < SUMMARY_REJECTS:  # the rejects table keeps them all
            where = f"{raw.source_uri}:{raw.line}" if raw.line is not None else raw.source_uri
            self.summary.rejects.append(
                {"source": raw.source_uri, "line": raw.line, "path": path, "reason": reason,
                 "where": where, "problems": problems or [{"path": path, "problem": reason}]}
            )

    # -- what is stored -----------------------------------------------------------------------

    def _look_up(self, keys: list[str]) -> None:
        """Learn the current revision and tags of every stored stream among ``keys``."""
        unknown = list(dict.fromkeys(k for k in keys if k not in self._streams))
        if not unknown:
            return
        if self._none_stored:
            self._streams.update(dict.fromkeys(unknown))
            return
        wanted = pa.table({"stream_key": pa.array(unknown, pa.string())})  # noqa: F841
        # Every revision, the latest kept below: a window over the join costs twice the query.
        rows = self._reader.execute(
            """
            SELECT s.stream_key, s.record_hash, s.revision, coalesce(r.tags::VARCHAR, '{}')
            FROM streams s SEMI JOIN wanted w USING (stream_key)
            LEFT JOIN proj_runs r ON r.run_key = s.stream_key
            """
        ).fetchall()
        for key in unknown:
            self._streams[key] = None
        for key, digest, revision, tags in rows:
            known = self._streams[key]
            if known is None or revision > known.revision:
                self._streams[key] = _Stream(bytes(digest), revision, tags, None)

    def current_of(self, keys: list[str]) -> dict[str, _Stream | None]:
        """The stored state of each of ``keys`` (None: not stored), looked up in one query."""
        self._look_up(keys)
        return {key: self._streams[key] for key in keys}

    def current(self, key: str) -> _Stream | None:
        """The stored state of stream ``key`` (None when it is not stored)."""
        self._look_up([key])
        return self._streams[key]

    def _next_pos(self, key: str, state: _Stream | None) -> int:
        if state is None:
            return 0
        if state.next_pos is not None:
            return state.next_pos
        row = self._reader.execute(
            "SELECT max(stream_pos) FROM events WHERE stream_key = ?", [key]
        ).fetchone()
        return (row[0] if row and row[0] is not None else -1) + 1

    # -- storing ------------------------------------------------------------------------------

    def _store(self, p: Prepared, source_id: int, links: _Links, own: Iterable[dict] = ()) -> str:
        state = self._streams.get(p.key)
        if state is not None and state.record_hash == p.record_hash:
            self.count_duplicate()
            self._retag(p.key, state, source_id)
            return "duplicate"
        if p.rows is not None:  # a chunk's record: its rows are placed in SQL at commit
            ctx = self._append(
                p.key, p.run_id, p.fmt, p.record_hash, p, source_id, p.line, p.digests)
            self._stage_projection(p.key, ctx, len(self._batch.placement) - 1)
        else:
            ctx = self._append(
                p.key, p.run_id, p.fmt, p.record_hash, p.events, source_id, p.line, p.digests
            )
            row = list(p.projection["proj_runs"][0])
            for column, value in (
                ("revision", ctx.revision), ("tags", ctx.tags_json), ("source_id", source_id),
                ("batch_id", ctx.batch_id), ("first_seq", ctx.first_seq),
                ("last_seq", ctx.last_seq),
            ):
                row[_RUN_COLUMN[column]] = value
            p.projection["proj_runs"][0] = tuple(row)
            self._stage_projection(p.key, ctx, (p.projection, ctx.first_seq))
        self._batch.lineage.extend(
            _lineage_row(link, p.key, ctx.revision, source_id) for link in [*links.of(p), *own]
        )
        return "accepted" if ctx.revision == 1 else "revised"

    def append_revision(
        self,
        key: str,
        run_id: str,
        fmt: str,
        digest: bytes,
        events: list[Event],
        source_id: int,
        line: int | None,
        project: Callable[[RunContext], Projection],
    ) -> RunContext:
        """Append a new revision of stream ``key`` (its record events, then a tags event when
        the writer's tags change the run's) and stage ``project(ctx)`` as its projection (with
        absolute seqs)."""
        ctx = self._append(key, run_id, fmt, digest, events, source_id, line, None)
        self._stage_projection(key, ctx, (project(ctx), 0))
        return ctx

    def _append(
        self,
        key: str,
        run_id: str,
        fmt: str,
        digest: bytes,
        events: list | Prepared,
        source_id: int,
        line: int | None,
        digests: str | None,
    ) -> RunContext:
        """Append a revision's events (a list, or a chunk's record to place) and stream row;
        ``digests`` are the events' line digests as the first revision of a new stream
        (recomputed when that is not what this is)."""
        state = self.current(key)
        revision = 1 if state is None else state.revision + 1
        pos = self._next_pos(key, state)
        if pos != 0 or revision != 1:
            digests = None
        first_seq = self._next_seq
        tags_json = self._merged_tags(state)
        if isinstance(events, Prepared):
            count = events.event_count
            pos = self._place_events(events, key, revision, pos, source_id, tags_json, digests)
        else:
            count = len(events)
            pos = self._append_events(key, revision, pos, events, source_id, digests)
        last_seq = self._next_seq - 1
        if tags_json != (state.tags_json if state is not None else _NO_TAGS):
            pos = self._append_events(key, revision, pos, [self._tags_event()], source_id)
        batch = self._batch
        batch.streams.append(
            (key, revision, run_id, fmt, digest, first_seq, last_seq, count, source_id, line,
             batch.batch_id, now())
        )
        batch.streams_digest.add_stream(
            key, revision, run_id, fmt, digest, first_seq, last_seq, count, source_id, line
        )
        self._streams[key] = _Stream(digest, revision, tags_json, pos)
        return RunContext(
            key, run_id, fmt, revision, tags_json, source_id, line, batch.batch_id, first_seq,
            last_seq,
        )

    def _stage_projection(self, key: str, ctx: RunContext,
                          staged: tuple[Projection, int] | int) -> None:
        """Make ``staged`` the run's projection in this batch: its rows and what to add to
        their seqs, or its row in the batch's placement (a chunk's record)."""
        batch = self._batch
        if ctx.revision > 1 and key not in batch.projections:
            batch.replaced.add(key)
        earlier = batch.projections.get(key)
        if isinstance(earlier, int):  # placed earlier in this batch: its rows are not the run's
            batch.placement.set(earlier, "project", False)
        batch.projections[key] = staged
        batch.tag_updates.pop(key, None)
        batch.stored += 1
        self.summary.run_keys.append(key)
        outcome = "accepted" if ctx.revision == 1 else "revised"
        setattr(self.summary, outcome, getattr(self.summary, outcome) + 1)
        batch.counts[outcome] += 1

    def _merged_tags(self, state: _Stream | None) -> str:
        """The tags of a run once the writer's are added to its current ones."""
        if state is None:
            return self.tags_json
        if not self.tags:
            return state.tags_json
        return dumps_json({**loads_json(state.tags_json), **self.tags})

    def _tags_event(self, remove: Iterable[str] = ()) -> Event:
        change: dict[str, Any] = {"set": self.tags}
        if remove:
            change["remove"] = sorted(remove)
        return Event(TAGS_EVENT, None, None, dumps_json(change))

    def _retag(self, key: str, state: _Stream, source_id: int) -> None:
        """A run found identical gets the writer's tags it lacks, as a tags event."""
        tags_json = self._merged_tags(state)
        if tags_json == state.tags_json:
            return
        self.tag_run(key, state, self._tags_event(), tags_json, source_id)

    def tag_run(
        self, key: str, state: _Stream, event: Event, tags_json: str, source_id: int
    ) -> None:
        """Append a tags event to stored run ``key`` and set its projected tags."""
        pos = self._append_events(
            key, state.revision, self._next_pos(key, state), [event], source_id
        )
        self._streams[key] = state._replace(tags_json=tags_json, next_pos=pos)
        staged = self._batch.projections.get(key)
        if isinstance(staged, int):  # placed earlier in this batch from a chunk
            self._batch.placement.set(staged, "tags", tags_json)
        elif staged is not None:  # stored earlier in this batch: patch the staged run row
            row = list(staged[0]["proj_runs"][0])
            row[_RUN_COLUMN["tags"]] = tags_json
            staged[0]["proj_runs"][0] = tuple(row)
        else:
            self._batch.tag_updates[key] = tags_json
        self.summary.tagged += 1

    def _append_events(
        self,
        key: str,
        revision: int,
        pos: int,
        events: list,
        source_id: int,
        digests: str | None = None,
    ) -> int:
        """Stage ``events`` (``(type, idx, turn, payload)``) of stream ``key`` from stream
        position ``pos``, with their line digests when known; returns the next position."""
        batch = self._batch
        if batch.first_seq is None:
            batch.first_seq = self._next_seq
        families = [FAMILY_OF.get(event[0], 0) for event in events]
        batch.events.add(self._next_seq, key, pos, revision, events, families, source_id)
        payload_bytes = sum(len(event[3]) for event in events)
        batch.payload_bytes += payload_bytes
        batch.biggest = max(batch.biggest, payload_bytes)
        if digests is None:
            digests = line_digests(key, revision, events, pos)
        batch.events_digest.add_joined(digests, len(events))
        self._next_seq += len(events)
        return pos + len(events)

    def _place_events(self, p: Prepared, key: str, revision: int, pos: int, source_id: int,
                      tags_json: str, digests: str | None) -> int:
        """Place the events of chunk record ``p`` of stream ``key`` from stream position
        ``pos`` (its rows are inserted at commit, joined to the placement); returns the next
        position."""
        batch = self._batch
        if batch.first_seq is None:
            batch.first_seq = self._next_seq
        count = p.event_count
        if digests is None:  # not the first revision of a new stream: its lines differ
            digests = line_digests(key, revision, p.rows.record_events(p.first_event, count), pos)
        batch.events_digest.add_joined(digests, count)
        batch.payload_bytes += p.payload_bytes
        batch.placement.add(p.rows, p.rec, key, revision, self._next_seq, pos, source_id,
                            tags_json)
        self._next_seq += count
        return pos + count

    def count_duplicate(self) -> None:
        """Count a run found identical to its stored revision (nothing is appended)."""
        self.summary.duplicate += 1
        self._batch.counts["duplicate"] += 1

    def submit_if_full(self) -> None:
        """Commit the pending batch (in the background) once it is full."""
        batch = self._batch
        if (
            batch.stored + len(batch.rejects) >= self.batch_size
            or batch.payload_bytes >= BATCH_BYTES
        ):
            self._submit_batch()

    def flush(self) -> None:
        """Commit everything pending as one batch (one transaction) and wait until it is
        committed; no-op when nothing is pending."""
        self._submit_batch()
        self._wait_for_commit()

    def submit(self) -> None:
        """Start committing the pending batch in the background (once the batch in flight is
        committed) and begin the next one; no-op when nothing is pending."""
        self._submit_batch()

    @property
    def committing(self) -> bool:
        """Whether a batch is being committed in the background now."""
        return self._committer.busy

    @property
    def pending_batch_id(self) -> int:
        """The id of the batch that records stored now go with."""
        return self._batch.batch_id

    def _submit_batch(self) -> None:
        """Hand the pending batch to the committer and start the next one."""
        if self._committer.submit(self._batch, ingest_id=self.ingest_id, tags_json=self.tags_json):
            self._next_batch += 1
            self._batch = Batch(self._next_batch)

    def _wait_for_commit(self) -> None:
        self._committer.wait()


_RUN_COLUMN = {name: i for i, name in enumerate(COLUMNS["proj_runs"])}


def source_units(source: InputSource) -> tuple[Iterator[RawInput], str]:
    """What :meth:`Preparer.prepared` takes of ``source``: its inputs (unparsed when it can
    give them so, for the workers to parse) and the format of its records."""
    units = source.units() if hasattr(source, "units") else source.inputs()
    return units, getattr(source, "record_format", "aioc")


def _set_threads(con: duckdb.DuckDBPyConnection, threads: int | None) -> int | None:
    """Set DuckDB's ``threads`` to ``threads`` (None: leave it); returns what it was."""
    if threads is None:
        return None
    before = con.execute("SELECT current_setting('threads')").fetchone()[0]
    con.execute(f"SET threads = {int(threads)}")
    return int(before)


def _chunks(inputs: Iterator, size: int) -> Iterator[list]:
    chunk: list = []
    for raw in inputs:
        chunk.append(raw)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class _Links:
    """Lineage rows by the record they go with: the run id or key their ``child`` names, or
    every record (no ``child``)."""

    def __init__(self, lineage: Iterable[dict]) -> None:
        self.common: list[tuple[int, dict]] = []
        self.by_child: dict[str, list[tuple[int, dict]]] = {}
        for i, link in enumerate(lineage):
            child = link.get("child")
            bucket = self.common if child is None else self.by_child.setdefault(child, [])
            bucket.append((i, link))

    def of(self, p: Prepared) -> list[dict]:
        """The rows for record ``p``, in the order they were given."""
        found = self.common + self.by_child.get(p.run_id, []) + self.by_child.get(p.key, [])
        return [link for _, link in sorted(found, key=lambda pair: pair[0])]


def _keys_of(p: Prepared) -> list[str]:
    """The run keys storing ``p`` looks up: its own, and its source's when it is a replay line
    (so a chunk's sources are looked up with it, in one query)."""
    return [p.key, _source_key(p.lineage[0])] if p.lineage else [p.key]


def _source_key(link: dict) -> str:
    """The run key of the source an aioc replay line's ``replay_of`` row names by run id."""
    return run_key_for("aioc", link["parent_run_id"])


def _lineage_row(link: dict, key: str, revision: int, source_id: int) -> tuple:
    detail = link.get("detail")
    return (
        key, revision, link.get("parent_run_key"), link.get("parent_run_id"), link["relation"],
        None if detail is None else dumps_json(detail), source_id,
    )

