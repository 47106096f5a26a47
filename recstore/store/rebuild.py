"""Projecting the log again (``recstore rebuild``) and checking it (``recstore verify``).

Both read every event of the store, so they live apart from :class:`~recstore.store.Store`'s
reading: a command that only reads does not import the projection machinery.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import duckdb

from recstore.formats.events import Event, events_to_record
from recstore.formats.jsontext import dumps_json, loads_json
from recstore.progress import NO_PROGRESS, Progress
from recstore.store import agentuse_ingest, db
from recstore.store.chain import EMPTY_DIGEST, EVENTS_DIGEST_SQL, STREAM_LINE_SQL, batch_hash
from recstore.store.ingest import TAGS_EVENT
from recstore.store.projection import (
    PROJECTION_TABLES,
    RunContext,
    columns_for,
    fold_tags,
    project_record,
)
from recstore.store.tables import insert_columns

if TYPE_CHECKING:
    from recstore.store.store import VerifyReport

__all__ = ["STORE_CATALOG", "check_log", "project_log", "rebuild"]

#: The name the store is attached under while verify rebuilds it into memory.
STORE_CATALOG = "store"
_REBUILD_CHUNK = 2000


def rebuild(con: duckdb.DuckDBPyConnection, progress: Progress = NO_PROGRESS) -> int:
    """Replace every projection row by a projection of the log, in one transaction."""
    with db.transaction(con):
        for table in PROJECTION_TABLES:
            con.execute(f"DELETE FROM {table}")
        runs = project_log(con, catalog=None, progress=progress)
    return runs


def project_log(
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
    tags = dict(
        cur.execute(
            "SELECT stream_key, list(payload ORDER BY seq) FROM events WHERE type = ? GROUP BY 1",
            [TAGS_EVENT],
        ).fetchall()
    )
    ((total,),) = cur.execute("SELECT count(DISTINCT stream_key) FROM streams").fetchall()
    cur.execute(
        """
        WITH current AS (
            SELECT stream_key, max(revision) AS revision FROM streams GROUP BY stream_key
        )
        SELECT s.stream_key, s.run_id, s.format, s.revision, s.source_id, s.line, s.batch_id,
               s.first_seq, s.last_seq, e.seq, e.type, e.idx, e.turn, e.payload
        FROM streams s
        JOIN current c USING (stream_key, revision)
        JOIN events e ON e.seq BETWEEN s.first_seq AND s.last_seq
        ORDER BY e.seq
        """
    )
    log = con.cursor()  # agentuse streams fold the files of every revision, read through this
    if log_catalog:
        log.execute(f"USE {log_catalog}")
    pending: dict[tuple[str, int], list[tuple]] = {}
    columns: dict = {}
    runs = 0
    for head, events in _group_streams(cur):
        key, run_id, fmt, revision, source_id, line, batch_id, first_seq, last_seq = head
        changes = [loads_json(p) for p in tags.get(key, ())]
        ctx = RunContext(
            key, run_id, fmt, revision, dumps_json(fold_tags(changes)), source_id, line,
            batch_id, first_seq, last_seq,
        )
        if fmt == "agentuse":
            rows = agentuse_ingest.project_stream(log, ctx)
        else:
            rows = project_record(events_to_record(events), ctx)
        for table, table_rows in rows.items():
            for row in table_rows:
                pending.setdefault((table, len(row)), []).append(row)
        runs += 1
        progress.update(runs, total)
        if runs % _REBUILD_CHUNK == 0:
            _flush(con, pending, catalog, columns)
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
            if head is None or row[7] != head[7]:  # first_seq identifies the revision
                if head is not None:
                    yield head, events
                head, events = row[:9], []
            events.append(Event(row[10], row[11], row[12], row[13]))
    if head is not None:
        yield head, events


def _flush(
    con: duckdb.DuckDBPyConnection,
    pending: dict[tuple[str, int], list[tuple]],
    catalog: str | None,
    columns: dict,
) -> None:
    for (table, width), rows in pending.items():
        insert_columns(con, table, columns_for(table, width), rows, catalog, columns_cache=columns)
        rows.clear()


def check_log(con: duckdb.DuckDBPyConnection, report: VerifyReport, progress: Progress) -> None:
    """Fill ``report`` for the store attached read-only to ``con`` as ``store`` (an in-memory
    database, so verify never writes to the store): the batch chain, every reference, and the
    projections rebuilt into ``memory`` against the stored ones."""
    report.streams, report.events = con.execute(
        "SELECT count(DISTINCT stream_key), count(*) FROM events"
    ).fetchone()
    report.problems.extend(_chain_problems(con))
    report.problems.extend(_batch_problems(con))
    for table in PROJECTION_TABLES:
        con.execute(f"CREATE TABLE memory.main.{table} AS SELECT * FROM {table} LIMIT 0")
    report.runs = project_log(con, catalog="memory", log_catalog=STORE_CATALOG,
                              progress=progress)
    report.problems.extend(_projection_problems(con))


def _chain_problems(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Walk the batch hash chain: recompute each batch's digests in SQL and its hash here."""
    problems: list[str] = []
    batches = con.execute(
        "SELECT batch_id, event_count, prev_hash, hash FROM batches ORDER BY batch_id"
    ).fetchall()
    previous: bytes | None = None
    for batch_id, event_count, prev_hash, digest in batches:
        found, events_digest = con.execute(
            f"SELECT count(*), {EVENTS_DIGEST_SQL} "
            "FROM events WHERE batch_id = ?",
            [batch_id],
        ).fetchone()
        (streams_digest,) = con.execute(
            f"SELECT sha256(string_agg({STREAM_LINE_SQL}, '' ORDER BY first_seq)) "
            "FROM streams WHERE batch_id = ?",
            [batch_id],
        ).fetchone()
        if (None if prev_hash is None else bytes(prev_hash)) != previous:
            problems.append(f"batch {batch_id}: does not link to the batch before it")
        if found != event_count:
            problems.append(f"batch {batch_id}: expected {event_count} events, found {found}")
        expected = batch_hash(
            previous, batch_id, found, events_digest or EMPTY_DIGEST,
            streams_digest or EMPTY_DIGEST,
        )
        if expected != bytes(digest):
            problems.append(
                f"batch {batch_id}: hash does not match its events and streams (changed log)"
            )
        previous = bytes(digest)
        if len(problems) >= 20:
            break
    return problems


# (table, column, referenced table, referenced column): every reference the log holds.
_REFERENCES = [
    (table, column, target, column)
    for table in ("events", "streams", "rejects", "lineage_log", "source_results")
    for column, target in (("source_id", "source_files"), ("batch_id", "batches"))
] + [("source_files", "batch_id", "batches", "batch_id")]


def _batch_problems(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every row of the log points at a committed batch and a recorded source, and every
    revision has all its events."""
    problems = []
    for table, column, target, target_column in _REFERENCES:
        problems.extend(
            f"{table}: {column} {value} has no {target} row"
            for (value,) in con.execute(
                f"SELECT DISTINCT {column} FROM {table} "
                f"WHERE {column} NOT IN (SELECT {target_column} FROM {target}) LIMIT 5"
            ).fetchall()
        )
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
            SELECT (SELECT count(*) FROM (SELECT * FROM {STORE_CATALOG}.main.{table}
                        EXCEPT ALL SELECT * FROM memory.main.{table})),
                   (SELECT count(*) FROM (SELECT * FROM memory.main.{table}
                        EXCEPT ALL SELECT * FROM {STORE_CATALOG}.main.{table}))
            """
        ).fetchone()
        if extra or missing:
            problems.append(
                f"projection {table.removeprefix('proj_')}: {extra} stored rows a rebuild does "
                f"not produce, {missing} rebuilt rows missing from the store"
            )
    return problems
