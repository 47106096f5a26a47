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
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from recstore.errors import InputError, NotFoundError, StoreCorruptError
from recstore.files import owner_only_umask, protect_store_files
from recstore.formats import DEFAULT_MAX_RECORD_BYTES
from recstore.progress import NO_PROGRESS, Progress
from recstore.store import db
from recstore.store.chain import DEFAULT_BATCH_SIZE

if TYPE_CHECKING:
    from recstore.formats.reader import RawInput
    from recstore.store.counts import IngestSummary
    from recstore.store.tagging import TagSummary

# A command that only reads (query, runs, show, rejects, lineage) opens the store without the
# ingest machinery (pydantic models, Arrow staging, worker pools): what writes, rebuilds or
# verifies imports it where it is used.

__all__ = ["DEFAULT_DB", "Store", "StoredEvents", "StoredRun", "VerifyReport", "read_runs"]

DEFAULT_DB = "recstore.duckdb"
READ_CHUNK = 2000  # runs read per query by read_runs


@dataclass
class VerifyReport:
    """Outcome of :meth:`Store.verify`; ``ok`` when ``problems`` is empty."""

    streams: int = 0
    events: int = 0
    runs: int = 0
    problems: list[str] = field(default_factory=list)
    corrupt: bool = False  # the file failed DuckDB's checksums: ``problems`` says where

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return {"ok": self.ok, "streams": self.streams, "events": self.events, "runs": self.runs,
                "problems": self.problems, "corrupt": self.corrupt}


@dataclass(frozen=True)
class StoredRun:
    """The current revision of a stored run: its identity and the record."""

    run_key: str
    revision: int
    record_hash: str
    source_uri: str | None
    record: dict


@dataclass(frozen=True)
class StoredEvents:
    """A stored run as :func:`read_runs` reads it, before its record is reassembled: the
    record's ``(type, payload)`` events (an agentuse run, whose events are files, comes folded
    as ``record``). Small to pickle, so worker processes can reassemble it themselves."""

    run_key: str
    revision: int
    record_hash: str
    source_uri: str | None
    events: list[tuple[str, str]] | None = None
    record: dict | None = None

    def run(self) -> StoredRun:
        """The run with its record reassembled."""
        from recstore.formats.events import events_to_record

        record = self.record if self.record is not None else events_to_record(self.events or [])
        return StoredRun(self.run_key, self.revision, self.record_hash, self.source_uri, record)


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
        from recstore.formats.reader import RawInput

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

    #: Whether its readers come locked down already (``recstore.query.open_reader``).
    locked_down = False
    #: Whether other shells' commands run on it too (``recstore serve``'s store), so a long
    #: command holds it a little at a time (``recstore.replay.batch``).
    serves_others = False

    def __init__(self, path: str | os.PathLike | None = None, *,
                 lock_timeout: float | None = None,
                 on_lock_wait: Callable[[str], None] | None = None):
        self.path = Path(path or os.environ.get("RECSTORE_DB") or DEFAULT_DB)
        protect_store_files(self.path)  # no output of this process may replace it
        self.lock_timeout = db.lock_timeout_from_env() if lock_timeout is None else lock_timeout
        self.on_lock_wait = on_lock_wait

    # -- connections --------------------------------------------------------------------------

    @contextmanager
    def writer(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection with the schema up to date (creates the file 0600)."""
        from recstore.store import migrate
        from recstore.store.rebuild import rebuild

        with owner_only_umask(), self._store_errors():
            con = self._connect(read_only=False)
            try:
                if migrate.is_layout_1(con):
                    migrate.upgrade_layout_1(con, db.apply_schema_files, lambda: rebuild(con))
                db.ensure_schema(con, self.path)
                migrate.finish_upgrade(con, lambda: rebuild(con))
                db.check_readable(con)  # no write into a store that cannot be read back
                yield con
            finally:
                con.close()

    @contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection. Upgrades an older store first (briefly as a writer)."""
        if db.is_new_store(self.path):
            raise NotFoundError(f"{self.path}: no store here yet (run `recstore ingest` first)")
        with self._store_errors():
            yield from self._read()

    def _read(self) -> Iterator[duckdb.DuckDBPyConnection]:
        con = self._connect(read_only=True)
        try:
            if db.upgrade_due(con, self.path):
                con.close()
                with self.writer():
                    pass
                con = self._connect(read_only=True)
            yield con
        finally:
            con.close()

    @contextmanager
    def file_reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection that may write files (``COPY ... TO``: ``recstore export``)."""
        with self.reader() as con:
            yield con

    @contextmanager
    def _store_errors(self) -> Iterator[None]:
        """A full disk or a corrupt block, met anywhere while the store is open, as one line
        naming the store (:func:`recstore.store.db.store_error`)."""
        try:
            yield
        except duckdb.Error as exc:
            problem = db.store_error(exc, self.path)
            if problem is None:
                raise
            raise problem from exc

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
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        workers: int | None = None,
        progress: Progress = NO_PROGRESS,
    ) -> IngestSummary:
        """Store every record under ``paths`` (files, directories, globs, ``-``), every agentuse
        session tree and every OTLP/JSON trace file (both auto-detected, or all paths with
        ``format="agentuse"`` / ``format="otlp"``); ``progress.update(records, None)`` follows
        the records read.

        ``tags`` are added to every run stored or found identical (a ``tags_changed`` event
        where they change its tags). A record larger than ``max_record_bytes`` is rejected
        unread. Records are prepared in ``workers`` processes (None: as many as pay off for the
        input's size; 0: in this process).

        Raises:
            InputError: a path does not exist or matches nothing (checked before writing).
        """
        from recstore.formats.reader import iter_sources
        from recstore.process import worker_pool
        from recstore.store import agentuse_ingest, otlp_io
        from recstore.store.chunks import import_lazy_modules
        from recstore.store.ingest import INGEST_DUCKDB_THREADS, BatchWriter
        from recstore.store.prepare import (
            LOCAL_BYTES,
            WORKER_BYTES,
            Preparer,
            default_workers,
            relaxed_gc,
        )

        trees, paths = agentuse_ingest.split_paths(paths, format)
        sources = (
            list(iter_sources(paths, max_record_bytes=max_record_bytes))
            if paths or not trees
            else []
        )
        otlp_files, sources = otlp_io.split_sources(sources, format)
        traces = otlp_io.otlp_sources(otlp_files)  # read before the write lock is taken
        if workers is None:
            # an input over LOCAL_BYTES is prepared here: a pool would sit idle beside it
            workers = default_workers(
                sum(s.small_input_bytes(LOCAL_BYTES, WORKER_BYTES) for s in sources))
        if workers:
            import_lazy_modules()  # once here, not in every worker
        with relaxed_gc(), worker_pool(workers) as pool, self.writer() as con:
            preparer = Preparer(pool, workers)
            with BatchWriter(
                con, tags=tags, batch_size=batch_size, preparer=preparer, progress=progress,
                duckdb_threads=INGEST_DUCKDB_THREADS,
            ) as writer:
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
        from recstore.store.ingest import BatchWriter

        with self.writer() as con:
            with BatchWriter(con, tags=tags) as writer:
                return writer.ingest_sources([_RecordsSource(source_uri, records)], lineage)

    def tag(
        self,
        run_keys: Iterable[str],
        set_tags: dict[str, str] | None = None,
        remove: Iterable[str] = (),
    ) -> TagSummary:
        """Set and remove tags of stored runs, as ``tags_changed`` events in their streams (runs
        whose tags would not change get none). ``summary.tagged`` counts the runs changed,
        ``summary.changes`` which values each tag went from and to (``recstore.store.tagging``).

        Raises:
            NotFoundError: a run key is not stored.
        """
        from recstore.store.ingest import BatchWriter
        from recstore.store.tagging import tag_runs

        set_tags = dict(set_tags or {})
        remove = sorted(set(remove) - set(set_tags))
        change = {"set": set_tags, **({"remove": remove} if remove else {})}
        with self.writer() as con, BatchWriter(con) as writer:
            return tag_runs(writer, run_keys, change)

    def rebuild(self, progress: Progress = NO_PROGRESS) -> int:
        """Recompute every projection from the event log alone; returns the number of runs."""
        from recstore.store.rebuild import rebuild

        with self.writer() as con:
            return rebuild(con, progress)

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
            return _stored_record(con, _resolve(con, run_ref), revision)

    def record_and_row(self, run_ref: str, revision: int | None = None
                       ) -> tuple[dict[str, Any], dict[str, Any]]:
        """:meth:`get_record` and, for the current revision, :meth:`run_row` (else ``{}``),
        read in one connection: opening the file again costs `show` as much as both reads."""
        from recstore.store.run_detail import read_run_row

        with self.reader() as con:
            key = _resolve(con, run_ref)
            return (_stored_record(con, key, revision),
                    read_run_row(con, key) if revision is None else {})

    def load_runs(self, run_keys: list[str]) -> list[StoredRun]:
        """The current revisions of stored runs, in the order given, read in one connection.

        ``get_record`` opens a connection per call (about 0.15 s each); replay batches and
        exports read thousands of runs, so they are read here a chunk per query
        (:func:`read_runs`).

        Raises:
            NotFoundError: a run key is not stored.
        """
        runs: list[Any] = [None] * len(run_keys)
        with self.reader() as con:
            for pos, stored in read_runs(con, run_keys):
                runs[pos] = stored.run()
        return runs

    def runs(self, limit: int = 20) -> list[dict]:
        """The most recently stored runs, newest first (a short list for people)."""
        with self.reader() as con:
            cur = con.execute(
                "SELECT run_key, revision, status, agent, model, started_text, item_count, "
                "tool_call_count, request_count FROM runs ORDER BY last_seq DESC LIMIT ?",
                [db.row_limit(limit)],
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def run_row(self, run_ref: str) -> dict:
        """The ``runs`` row of a stored run (its current revision): status, agent, duration,
        tags and the other columns ``recstore schema`` lists for ``runs``."""
        from recstore.store.run_detail import read_run_row

        with self.reader() as con:
            return read_run_row(con, _resolve(con, run_ref))

    def run_detail(self, run_ref: str) -> dict[str, Any]:
        """What a run page shows of a stored run, read in one connection: its ``runs`` row, its
        requests, items, visits, tool calls, policy and guardrail decisions, and its lineage as
        child (``parents``) and as parent (``children``); see
        :func:`recstore.store.run_detail.read_run_detail`."""
        from recstore.store.run_detail import read_run_detail

        with self.reader() as con:
            return read_run_detail(con, _resolve(con, run_ref))

    def rejects(self, limit: int | None = None, since: datetime | None = None) -> list[dict]:
        """Stored rejects, oldest first: at most ``limit``, rejected at or after ``since``, each
        with every problem found (``problems``; see :func:`recstore.store.rejects.rejects`)."""
        from recstore.store import rejects

        with self.reader() as con:
            return rejects.rejects(con, limit, since)

    def reject_summary(self, since: datetime | None = None) -> list[dict]:
        """Rejects counted by reason (most frequent first), with their sources and last time."""
        from recstore.store import rejects

        with self.reader() as con:
            return rejects.reject_summary(con, since)

    def verify(self, progress: Progress = NO_PROGRESS) -> VerifyReport:
        """Check the batch hash chain and every reference of the log, and that a rebuild
        reproduces the projections (``progress`` follows the runs rebuilt).

        The rebuild goes into an in-memory database with the store attached read-only, so
        verify never writes to the store."""
        if not self.path.exists():
            raise NotFoundError(f"{self.path}: no store here yet (run `recstore ingest` first)")
        report = VerifyReport()
        try:
            self._verify(report, progress)
        except StoreCorruptError as exc:
            report.problems = [str(exc)]
            report.corrupt = True
        return report

    def _upgrade(self) -> None:
        """Bring an older store's schema up to date (``reader()`` does, briefly as a writer)."""
        with self.reader():
            pass

    def _verify(self, report: VerifyReport, progress: Progress) -> None:
        from recstore.store.rebuild import STORE_CATALOG, check_log

        self._upgrade()  # before it is attached read-only
        with self._store_errors():
            con = db.connect_attached(self.path, STORE_CATALOG, lock_timeout=self.lock_timeout,
                                      on_wait=self.on_lock_wait)
        try:
            check_log(con, report, progress)
        except duckdb.Error as exc:
            problem = db.store_error(exc, self.path)
            if problem is None:
                raise
            raise problem from exc
        finally:
            con.close()


def read_runs(
    con: duckdb.DuckDBPyConnection, run_keys: Sequence[str], chunk: int = READ_CHUNK
) -> Iterator[tuple[int, StoredEvents]]:
    """``(position in run_keys, run)`` for the current revision of each stored run, through
    ``con`` (a reader, or a cursor of the writer that will store what is derived from them).

    Runs come in the order the log holds them, ``chunk`` per query, and each query joins the
    events on the seqs of its runs: a chunk reads one stretch of the log (DuckDB skips the row
    groups outside its seqs) rather than every event of the store.

    Raises:
        NotFoundError: a run key is not stored (before any run is read).
    """
    import pyarrow as pa

    from recstore.store import agentuse_ingest
    from recstore.store.tables import registered

    # Registered rather than found by a replacement scan: a locked-down reader (no external
    # access, as a served store's are) has no replacement scans.
    wanted = pa.table({"pos": pa.array(range(len(run_keys)), pa.int64()),
                       "run_key": pa.array(run_keys, pa.string())})
    with registered(con, "wanted", wanted):
        found = con.execute(
            "SELECT w.pos, w.run_key, r.revision, r.record_hash, r.source_uri, r.first_seq, "
            "r.last_seq FROM wanted w LEFT JOIN runs r USING (run_key) ORDER BY r.first_seq, w.pos"
        ).fetchall()
    missing = next((row[1] for row in found if row[2] is None), None)
    if missing is not None:
        raise NotFoundError(f"no stored run {missing}")
    for start in range(0, len(found), chunk):
        rows = found[start:start + chunk]
        seqs, types, payloads = _events_of_runs(con, {
            (first_seq, last_seq) for _, key, _, _, _, first_seq, last_seq in rows
            if not key.startswith("agentuse:")})
        for pos, key, revision, record_hash, source_uri, first_seq, last_seq in rows:
            if key.startswith("agentuse:"):  # file events: the record folds every revision
                yield pos, StoredEvents(key, revision, record_hash, source_uri,
                                        record=agentuse_ingest.stored_record(con, key))
                continue
            low = bisect_left(seqs, first_seq)
            high = bisect_right(seqs, last_seq, low)
            events = list(zip(types[low:high], payloads[low:high], strict=True))
            yield pos, StoredEvents(key, revision, record_hash, source_uri, events)


def _events_of_runs(con: duckdb.DuckDBPyConnection, spans: set[tuple[int, int]]
                    ) -> tuple[list[int], list[str], list[str]]:
    """The seqs, types and payloads of the events whose seqs lie in ``spans`` (each run's first
    and last seq; a run named twice is one span), in seq order. A run's events are its seqs
    from first to last, so each run's are one stretch of these lists. They come from DuckDB as
    Arrow columns: no Python tuple per event (a fifth of the cost of reading them as rows)."""
    if not spans:
        return [], [], []
    import pyarrow as pa

    from recstore.store.tables import registered

    table = pa.table({"first_seq": pa.array([s[0] for s in spans], pa.int64()),
                      "last_seq": pa.array([s[1] for s in spans], pa.int64())})
    with registered(con, "spans", table):
        columns = con.sql(
            "WITH want AS (SELECT unnest(range(first_seq, last_seq + 1)) AS seq FROM spans) "
            "SELECT e.seq, e.type, e.payload FROM want JOIN events e USING (seq) ORDER BY e.seq"
        ).to_arrow_table().to_pydict()
    return columns["seq"], columns["type"], columns["payload"]


def _stored_record(con: duckdb.DuckDBPyConnection, key: str, revision: int | None
                   ) -> dict[str, Any]:
    """The record of the stream ``key`` (see :meth:`Store.get_record`)."""
    if key.startswith("agentuse:"):  # a file-event stream: fold every revision
        from recstore.store.agentuse_ingest import stored_record

        return stored_record(con, key, revision)
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
    from recstore.formats.events import events_to_record

    return events_to_record(rows)


def _resolve(con: duckdb.DuckDBPyConnection, ref: str) -> str:
    """The stream key ``ref`` names: an exact run key (``aioc:x`` even when another run's id is
    ``aioc:x``), else an exact run id, else a unique prefix of either."""
    # a current run's key (the common case, a link) through the proj_runs index; streams has
    # none, and the OR below scans it (~20 ms at 200k runs)
    if con.execute("SELECT 1 FROM proj_runs WHERE run_key = ?", [ref]).fetchall():
        return ref
    matches = [key for (key,) in con.execute(
        "SELECT DISTINCT stream_key FROM streams WHERE stream_key = ? OR run_id = ? ORDER BY 1",
        [ref, ref]).fetchall()]
    if ref in matches:  # an exact key wins over the runs whose id it is
        return ref
    if not matches:
        matches = [key for (key,) in con.execute(
            "SELECT DISTINCT stream_key FROM streams "
            "WHERE starts_with(stream_key, ?) OR starts_with(run_id, ?) ORDER BY 1 LIMIT 6",
            [ref, ref],
        ).fetchall()]
    if not matches:
        raise NotFoundError(f"no stored run matches {ref!r}")
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise InputError(f"{ref!r} matches several runs ({shown}); give more of the id")
    return matches[0]
