"""``Store``: the one object that owns the DuckDB file (docs/DESIGN.md, store layer).

Connections are short-lived: a writer is opened per command and closed after, so the write
lock is held only while something is being written, and readers opened in between work.

Example:
    >>> store = Store("runs.duckdb")                                  # doctest: +SKIP
    >>> print(store.ingest(["records/"]).line())                      # doctest: +SKIP
    accepted 13, duplicate 0, revised 0, rejected 0 (...)
    >>> store.get_record("simple")["runId"]                           # doctest: +SKIP
    'simple-run'
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from recstore.errors import InputError, NotFoundError
from recstore.files import owner_only_umask
from recstore.formats.events import Event, events_to_record
from recstore.formats.reader import RawInput, iter_sources
from recstore.progress import NO_PROGRESS, Progress
from recstore.store import agentuse_ingest, db, otlp_io
from recstore.store.ingest import DEFAULT_BATCH_SIZE, BatchWriter, IngestSummary
from recstore.store.projection import PROJECTION_TABLES, RunContext, project_record
from recstore.store.tables import insert_rows

__all__ = ["DEFAULT_DB", "Store", "StoredRun", "VerifyReport"]

DEFAULT_DB = "recstore.duckdb"
_REBUILD_CHUNK = 2000
_STORE_CATALOG = "store"


@dataclass
class VerifyReport:
    """Outcome of :meth:`Store.verify`; ``ok`` when ``problems`` is empty."""

    streams: int = 0
    events: int = 0
    runs: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return {"ok": self.ok, "streams": self.streams, "events": self.events, "runs": self.runs,
                "problems": self.problems}


@dataclass(frozen=True)
class StoredRun:
    """The current revision of a stored run: its identity and the record."""

    run_key: str
    revision: int
    record_hash: str
    source_uri: str | None
    record: dict


class _RecordsSource:
    """Records handed over in-process (replay, sweeps), read like a file."""

    format = "records"
    compression = None
    sha256 = None
    size_bytes = None

    def __init__(self, uri: str, records: Iterable[Any]):
        self.uri = uri
        self._records = records

    def inputs(self) -> Iterator[RawInput]:
        for i, record in enumerate(self._records, start=1):
            yield RawInput(self.uri, i, None, record)


class Store:
    """A recstore DuckDB file. ``path`` defaults to env ``RECSTORE_DB``, else
    ``./recstore.duckdb``.

    DuckDB lets one process write the file or several read it, never both. Opening a connection
    while another process holds the file waits up to ``lock_timeout`` seconds (default: env
    ``RECSTORE_LOCK_TIMEOUT``, else 30; 0 fails at once, ``math.inf`` waits as long as it
    takes), then raises :class:`~recstore.errors.StoreLockedError` naming that process.
    ``on_lock_wait(message)`` is told once per open that has to wait.
    """

    def __init__(self, path: str | os.PathLike | None = None, *,
                 lock_timeout: float | None = None,
                 on_lock_wait: Callable[[str], None] | None = None):
        self.path = Path(path or os.environ.get("RECSTORE_DB") or DEFAULT_DB)
        self.lock_timeout = db.lock_timeout_from_env() if lock_timeout is None else lock_timeout
        self.on_lock_wait = on_lock_wait

    # -- connections --------------------------------------------------------------------------

    @contextmanager
    def writer(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection with the schema up to date (creates the file 0600)."""
        with owner_only_umask():
            created = not self.path.exists()
            con = self._connect(read_only=False)
            try:
                if created:
                    os.chmod(self.path, 0o600)
                db.ensure_schema(con, self.path)
                yield con
            finally:
                con.close()

    @contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection. Upgrades an older store first (briefly as a writer)."""
        if not self.path.exists():
            raise NotFoundError(f"{self.path}: no store here yet (run `recstore ingest` first)")
        con = self._connect(read_only=True)
        try:
            db.check_version(self.path, db.stored_version(con))
            if db.pending_schema_files(con):
                con.close()
                with self.writer():
                    pass
                con = self._connect(read_only=True)
            yield con
        finally:
            con.close()

    def _connect(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        return db.connect(self.path, read_only=read_only, lock_timeout=self.lock_timeout,
                          on_wait=self.on_lock_wait)

    # -- writing ------------------------------------------------------------------------------

    def ingest(
        self,
        paths: Iterable[str],
        tags: dict[str, str] | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        format: str | None = None,
        progress: Progress = NO_PROGRESS,
    ) -> IngestSummary:
        """Store every record under ``paths`` (files, directories, globs, ``-``), every agentuse
        session tree and every OTLP/JSON trace file (both auto-detected, or all paths with
        ``format="agentuse"`` / ``format="otlp"``); ``progress.update(records, None)`` follows
        the records read.

        Raises:
            InputError: a path does not exist or matches nothing (checked before writing).
        """
        trees, paths = agentuse_ingest.split_paths(paths, format)
        sources = list(iter_sources(paths)) if paths or not trees else []
        otlp_files, sources = otlp_io.split_sources(sources, format)
        traces = otlp_io.otlp_sources(otlp_files)  # read before the write lock is taken
        with self.writer() as con:
            writer = BatchWriter(con, tags=tags, batch_size=batch_size, progress=progress)
            for tree in trees:
                agentuse_ingest.ingest_tree(writer, tree)
            return writer.ingest_sources([*traces, *sources])

    def ingest_records(
        self,
        records: Iterable[dict],
        source_uri: str = "records",
        tags: dict[str, str] | None = None,
        lineage: list[dict] | None = None,
    ) -> IngestSummary:
        """Store records given as parsed JSON objects (for replay, sweeps and other layers).

        ``lineage`` rows are attached to the stored runs: each is a dict with ``relation``,
        ``parent_run_key`` and/or ``parent_run_id``, optional ``detail`` (JSON) and optional
        ``child`` (a runId or run key; without it the row applies to every stored record).
        """
        for link in lineage or []:
            if not link.get("relation") or not (
                link.get("parent_run_key") or link.get("parent_run_id")
            ):
                raise InputError("lineage rows need 'relation' and a parent", source=source_uri)
        with self.writer() as con:
            writer = BatchWriter(con, tags=tags)
            return writer.ingest_sources([_RecordsSource(source_uri, records)], lineage)

    def rebuild(self, progress: Progress = NO_PROGRESS) -> int:
        """Recompute every projection from the event log alone; returns the number of runs."""
        with self.writer() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                for table in PROJECTION_TABLES:
                    con.execute(f"DELETE FROM {table}")
                runs = _project_log(con, catalog=None, progress=progress)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return runs

    # -- reading ------------------------------------------------------------------------------

    def last_seq(self) -> int:
        """Highest event sequence number (0 for an empty store)."""
        if not self.path.exists():
            return 0
        with self.reader() as con:
            return con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]

    def resolve_run(self, ref: str) -> str:
        """The run key ``ref`` names: a run key, a run id, or a unique prefix of either.

        Raises:
            NotFoundError: nothing matches. InputError: a prefix matches several runs.
        """
        with self.reader() as con:
            return _resolve(con, ref)

    def get_record(self, run_ref: str, revision: int | None = None) -> dict:
        """The stored record (current revision unless ``revision``), as ingested: canonical-equal
        and with the original key order."""
        with self.reader() as con:
            key = _resolve(con, run_ref)
            if key.startswith("agentuse:"):  # a file-event stream: fold every revision
                return agentuse_ingest.stored_record(con, key, revision)
            if revision is None:
                row = con.execute(
                    "SELECT first_seq, last_seq FROM streams WHERE stream_key = ? "
                    "ORDER BY revision DESC LIMIT 1",
                    [key],
                ).fetchone()
            else:
                row = con.execute(
                    "SELECT first_seq, last_seq FROM streams WHERE stream_key = ? AND revision = ?",
                    [key, revision],
                ).fetchone()
                if row is None:
                    raise NotFoundError(f"run {key} has no revision {revision}")
            rows = con.execute(
                "SELECT type, payload FROM events WHERE seq BETWEEN ? AND ? ORDER BY seq", row
            ).fetchall()
        return events_to_record(rows)

    def load_runs(self, run_keys: list[str]) -> list[StoredRun]:
        """The current revisions of stored runs, in the order given, read in one connection.

        ``get_record`` opens a connection per call (about 0.15 s each); replay batches and
        exports read thousands of runs, so they are reassembled here from one query.

        Raises:
            NotFoundError: a run key is not stored.
        """
        with self.reader() as con:
            identity = {
                row[0]: row[1:]
                for row in con.execute(
                    "SELECT run_key, revision, record_hash, source_uri FROM runs "
                    "WHERE list_contains(?, run_key)",
                    [run_keys],
                ).fetchall()
            }
            missing = [key for key in run_keys if key not in identity]
            if missing:
                raise NotFoundError(f"no stored run {missing[0]}")
            rows = con.execute(
                "SELECT e.stream_key, e.type, e.payload FROM events e JOIN runs r "
                "ON e.stream_key = r.run_key AND e.revision = r.revision "
                "WHERE list_contains(?, r.run_key) ORDER BY e.seq",
                [run_keys],
            ).fetchall()
            # agentuse streams hold file events; their record is the fold of every revision
            folded = {key: agentuse_ingest.stored_record(con, key)
                      for key in run_keys if key.startswith("agentuse:")}
        events: dict[str, list[tuple[str, str]]] = {}
        for key, etype, payload in rows:
            events.setdefault(key, []).append((etype, payload))
        return [
            StoredRun(key, *identity[key],
                      folded[key] if key in folded else events_to_record(events[key]))
            for key in run_keys
        ]

    def runs(self, limit: int = 20) -> list[dict]:
        """The most recently stored runs, newest first (a short list for people)."""
        with self.reader() as con:
            cur = con.execute(
                "SELECT run_key, revision, status, agent, model, started_text, item_count, "
                "tool_call_count, request_count FROM runs ORDER BY last_seq DESC LIMIT ?",
                [limit],
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def run_row(self, run_ref: str) -> dict:
        """The ``runs`` row of a stored run (its current revision): status, agent, duration,
        tags and the other columns ``recstore schema`` lists for ``runs``."""
        with self.reader() as con:
            cur = con.execute("SELECT * FROM runs WHERE run_key = ?", [_resolve(con, run_ref)])
            names = [d[0] for d in cur.description]
            return dict(zip(names, cur.fetchone(), strict=True))

    def rejects(self) -> list[dict]:
        """Every stored reject, oldest first."""
        with self.reader() as con:
            cur = con.execute(
                "SELECT reject_id, source_uri, line, reason, path, raw_text, rejected_at "
                "FROM rejects ORDER BY reject_id"
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def verify(self, progress: Progress = NO_PROGRESS) -> VerifyReport:
        """Check every hash chain and batch, and that a rebuild reproduces the projections
        (``progress`` follows the runs rebuilt).

        The rebuild goes into an in-memory database with the store attached read-only, so
        verify never writes to the store."""
        if not self.path.exists():
            raise NotFoundError(f"{self.path}: no store here yet (run `recstore ingest` first)")
        report = VerifyReport()
        with self.reader():  # upgrades an older store before it is attached read-only
            pass
        con = db.connect_attached(self.path, _STORE_CATALOG, lock_timeout=self.lock_timeout,
                                  on_wait=self.on_lock_wait)
        try:
            report.streams, report.events = con.execute(
                "SELECT count(DISTINCT stream_key), count(*) FROM events"
            ).fetchone()
            report.problems.extend(_chain_problems(con))
            report.problems.extend(_batch_problems(con))
            for table in PROJECTION_TABLES:
                con.execute(f"CREATE TABLE memory.main.{table} AS SELECT * FROM {table} LIMIT 0")
            report.runs = _project_log(con, catalog="memory", log_catalog=_STORE_CATALOG,
                                       progress=progress)
            report.problems.extend(_projection_problems(con))
        finally:
            con.close()
        return report


def _resolve(con: duckdb.DuckDBPyConnection, ref: str) -> str:
    """The stream key ``ref`` names: an exact run key or run id, else a unique prefix of one."""
    matches = con.execute(
        "SELECT DISTINCT stream_key FROM streams WHERE stream_key = ? OR run_id = ?", [ref, ref]
    ).fetchall()
    if len(matches) == 1:
        return matches[0][0]
    if not matches:
        matches = con.execute(
            "SELECT DISTINCT stream_key FROM streams "
            "WHERE starts_with(stream_key, ?) OR starts_with(run_id, ?) ORDER BY 1 LIMIT 6",
            [ref, ref],
        ).fetchall()
    if not matches:
        raise NotFoundError(f"no stored run matches {ref!r}")
    if len(matches) > 1:
        shown = ", ".join(k for (k,) in matches[:5])
        raise InputError(f"{ref!r} matches several runs ({shown}, ...); give more of the id")
    return matches[0][0]


def _project_log(
    con: duckdb.DuckDBPyConnection,
    catalog: str | None,
    log_catalog: str | None = None,
    progress: Progress = NO_PROGRESS,
) -> int:
    """Project the current revision of every stream from its events (in ``log_catalog``, default
    the connection's own) into the projection tables of ``catalog``."""
    cur = con.cursor()  # streams the log while ``con`` inserts
    cur.execute("SET enable_progress_bar = false")  # a cursor does not inherit it
    if log_catalog:
        cur.execute(f"USE {log_catalog}")
    ((total,),) = cur.execute("SELECT count(DISTINCT stream_key) FROM streams").fetchall()
    cur.execute(
        """
        WITH current AS (
            SELECT stream_key, max(revision) AS revision FROM streams GROUP BY stream_key
        )
        SELECT s.stream_key, s.run_id, s.format, s.revision, s.record_hash, b.tags,
               s.source_id, s.source_uri, s.line, s.batch_id, s.first_seq, s.last_seq,
               e.seq, e.type, e.idx, e.turn, e.payload
        FROM streams s
        JOIN current c USING (stream_key, revision)
        JOIN batches b ON b.batch_id = s.batch_id
        JOIN events e ON e.seq BETWEEN s.first_seq AND s.last_seq
        ORDER BY e.seq
        """
    )
    log = con.cursor()  # agentuse streams fold the files of every revision, read through this
    if log_catalog:
        log.execute(f"USE {log_catalog}")
    pending: dict[str, list[dict]] = {table: [] for table in PROJECTION_TABLES}
    columns: dict = {}
    runs = 0
    in_chunk = 0
    for head, events in _group_streams(cur):
        ctx = RunContext(*head)
        if ctx.format == "agentuse":
            rows = agentuse_ingest.project_stream(log, ctx)
        else:
            rows = project_record(events_to_record(events), ctx, events)
        for table, table_rows in rows.items():
            pending[table].extend(table_rows)
        runs += 1
        progress.update(runs, total)
        in_chunk += 1
        if in_chunk >= _REBUILD_CHUNK:
            _flush(con, pending, catalog, columns)
            in_chunk = 0
    _flush(con, pending, catalog, columns)
    cur.close()
    log.close()
    return runs


def _group_streams(cur: duckdb.DuckDBPyConnection) -> Iterator[tuple[tuple, list[Event]]]:
    """Consecutive event rows of one stream revision -> (stream columns, events)."""
    head: tuple | None = None
    events: list[Event] = []
    while batch := cur.fetchmany(10_000):
        for row in batch:
            if head is None or row[10] != head[10]:  # first_seq identifies the revision
                if head is not None:
                    yield head, events
                head, events = row[:12], []
            events.append(Event(row[13], row[14], row[15], row[16]))
    if head is not None:
        yield head, events


def _flush(
    con: duckdb.DuckDBPyConnection,
    pending: dict[str, list[dict]],
    catalog: str | None,
    columns: dict,
) -> None:
    for table, rows in pending.items():
        insert_rows(con, table, rows, catalog, columns_cache=columns)
        rows.clear()


def _chain_problems(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Recompute every event hash in SQL (same text as ingest.event_hash) and check the links."""
    rows = con.execute(
        """
        SELECT seq, stream_key, stream_pos,
               hash <> sha256(concat_ws(chr(31), coalesce(prev_hash, ''), stream_key,
                   stream_pos::VARCHAR, revision::VARCHAR, type, coalesce(idx::VARCHAR, ''),
                   coalesce(turn::VARCHAR, ''), payload::VARCHAR)) AS bad_hash,
               prev_hash IS DISTINCT FROM lag(hash) OVER w AS bad_link,
               stream_pos <> row_number() OVER w - 1 AS bad_pos
        FROM events
        WINDOW w AS (PARTITION BY stream_key ORDER BY stream_pos)
        QUALIFY bad_hash OR bad_link OR bad_pos
        ORDER BY seq
        LIMIT 20
        """
    ).fetchall()
    problems = []
    for seq, key, pos, bad_hash, bad_link, _bad_pos in rows:
        what = "hash does not match its content" if bad_hash else (
            "prev_hash does not link to the previous event" if bad_link else "gap in stream_pos"
        )
        problems.append(f"event seq {seq} ({key} position {pos}): {what}")
    return problems


def _batch_problems(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every event belongs to a committed batch and every revision has all its events."""
    problems = [
        f"events of batch {b} have no batch row (partial batch)"
        for (b,) in con.execute(
            "SELECT DISTINCT batch_id FROM events ANTI JOIN batches USING (batch_id) LIMIT 20"
        ).fetchall()
    ]
    problems.extend(
        f"stream {key} revision {rev}: expected {want} events, found {got}"
        for key, rev, want, got in con.execute(
            """
            SELECT s.stream_key, s.revision, s.event_count, count(e.seq)
            FROM streams s LEFT JOIN events e
              ON e.seq BETWEEN s.first_seq AND s.last_seq AND e.stream_key = s.stream_key
            GROUP BY ALL HAVING count(e.seq) <> s.event_count LIMIT 20
            """
        ).fetchall()
    )
    return problems


def _projection_problems(con: duckdb.DuckDBPyConnection) -> list[str]:
    problems = []
    for table in PROJECTION_TABLES:
        extra, missing = con.execute(
            f"""
            SELECT (SELECT count(*) FROM (SELECT * FROM {_STORE_CATALOG}.main.{table}
                        EXCEPT ALL SELECT * FROM memory.main.{table})),
                   (SELECT count(*) FROM (SELECT * FROM memory.main.{table}
                        EXCEPT ALL SELECT * FROM {_STORE_CATALOG}.main.{table}))
            """
        ).fetchone()
        if extra or missing:
            problems.append(
                f"projection {table}: {extra} stored rows a rebuild does not produce, "
                f"{missing} rebuilt rows missing from the store"
            )
    return problems
