"""Upgrading a store written by recstore 0.1 (log layout 1) to the current layout (2).

Layout 1 chained a hash through every event (two hex hashes per event row), kept sources and
their counts in one row written at the end of the input, copied record texts into full-width
projection tables and left payloads uncompressed. Layout 2 chains one hash per batch, splits a
source into the row written with its first batch and the row written when it was read, keeps
payloads zstd-compressed and projects into narrow ``proj_*`` tables behind views (see
docs/DESIGN.md). The upgrade rewrites the log row for row (nothing is dropped: every event,
stream, source, reject, batch and lineage row keeps its ids), recomputes the batch chain over
it, and rebuilds the projections, in one transaction, the first time a writer opens the store.
Comparison feature caches are dropped (the projections hold the features); recorded comparison
pairs are kept, naming their revisions by first seq.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from recstore.formats.jsontext import dumps_json, loads_json
from recstore.store.batches import EVENT_COLUMNS
from recstore.store.chain import (
    EMPTY_DIGEST,
    EVENTS_DIGEST_SQL,
    STREAM_LINE_SQL,
    Digest,
    batch_hash,
    line_digests,
)
from recstore.store.db import UPGRADE_PENDING_LAYOUT as _PENDING
from recstore.store.db import transaction
from recstore.store.ingest import TAGS_EVENT
from recstore.store.tables import insert_columns

__all__ = ["finish_upgrade", "is_layout_1", "upgrade_layout_1", "upgrade_pending"]

# Projection tables of layout 1 (replaced by proj_* tables and views of the same names).
_OLD_PROJECTIONS = (
    "runs", "items", "tool_calls", "requests", "visits", "policy_decisions",
    "guardrail_decisions", "prompt_snapshots", "suspended_proposals", "findings",
    "run_input_prefixes",
)
_OLD_LOG = ("events", "streams", "sources", "rejects", "batches")
# Comparison feature caches of layout 1 (its feature views take these names now).
_OLD_COMPARE_CACHES = (
    "cmp_run_features", "cmp_call_features", "cmp_entry_features", "cmp_field_features",
)
# What a layout-1 pair row named its revisions by.
_V1_PAIR_IDENTITY = (
    "comparison_id", "pair_index", "pair_key", "baseline_run_key", "candidate_run_key",
    "baseline_record_hash", "candidate_record_hash",
)


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    return {
        name for (name,) in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "AND table_schema = 'main' AND table_catalog = current_database()",
            [table],
        ).fetchall()
    }


def is_layout_1(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store behind ``con`` is a layout-1 store (its events carry hashes)."""
    return "hash" in _columns(con, "events")


def upgrade_layout_1(
    con: duckdb.DuckDBPyConnection,
    apply_schema: Callable[[duckdb.DuckDBPyConnection], None],
    rebuild: Callable[[], int],
) -> None:
    """Rewrite a layout-1 store in place. ``apply_schema`` creates the current tables and views
    (every schema file, all idempotent); ``rebuild`` projects the log (in a transaction of its
    own: it reads through other cursors, which see committed rows only). The log is rewritten
    in one transaction that marks the store as waiting for its projections, so a store killed
    before they are built rebuilds them when next opened (:func:`finish_upgrade`)."""
    with transaction(con):
        _set_aside(con)
        apply_schema(con)
        _copy_log(con)
        last_hash = _chain_batches(con)
        _carry_tags(con, last_hash)
        _carry_comparisons(con)
        for table in _OLD_LOG:
            con.execute(f"DROP TABLE v1_{table}")
        con.execute(f"INSERT OR REPLACE INTO meta VALUES ('layout', '{_PENDING}')")
    finish_upgrade(con, rebuild)


def upgrade_pending(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store's log was upgraded but its projections not built yet."""
    rows = con.execute("SELECT value FROM meta WHERE key = 'layout'").fetchall()
    return rows == [(_PENDING,)]


def finish_upgrade(con: duckdb.DuckDBPyConnection, rebuild: Callable[[], int]) -> None:
    """Build the projections of an upgraded log, if that is what the store is waiting for."""
    if not upgrade_pending(con):
        return
    rebuild()
    con.execute("INSERT OR REPLACE INTO meta VALUES ('layout', '2')")


def _set_aside(con: duckdb.DuckDBPyConnection) -> None:
    """Rename the log tables (and the recorded comparison pairs) out of the way, and drop the
    old projections, their views and the old comparison feature caches (the projections hold
    the features now)."""
    con.execute("DROP VIEW IF EXISTS lineage")
    for table in _OLD_PROJECTIONS + _OLD_COMPARE_CACHES:
        con.execute(f"DROP TABLE IF EXISTS {table}")
    con.execute("DROP SEQUENCE IF EXISTS cmp_feature_seq")
    con.execute("DROP VIEW IF EXISTS comparison_pairs")
    for table in _OLD_LOG:
        con.execute(f"ALTER TABLE {table} RENAME TO v1_{table}")
    if _columns(con, "cmp_pairs"):
        con.execute("ALTER TABLE cmp_pairs RENAME TO v1_cmp_pairs")


def _carry_comparisons(con: duckdb.DuckDBPyConnection) -> None:
    """Recorded pairs name their revisions by first seq now (they named run key and record
    hash): every pair is kept, its revisions found in the copied log."""
    if not _columns(con, "v1_cmp_pairs"):
        return
    con.execute(
        f"""
        INSERT INTO cmp_pairs
        SELECT p.comparison_id, p.pair_index, p.pair_key, sa.first_seq, sb.first_seq,
               p.* EXCLUDE ({", ".join(_V1_PAIR_IDENTITY)})
        FROM v1_cmp_pairs p
        JOIN streams sa ON sa.stream_key = p.baseline_run_key
                       AND sa.record_hash = unhex(p.baseline_record_hash)
        JOIN streams sb ON sb.stream_key = p.candidate_run_key
                       AND sb.record_hash = unhex(p.candidate_record_hash)
        """
    )
    con.execute("DROP TABLE v1_cmp_pairs")


def _copy_log(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        INSERT INTO events
        SELECT seq, stream_key, stream_pos, revision, type, idx, turn, payload, source_id, batch_id
        FROM v1_events
        ORDER BY batch_id,
                 CASE WHEN type = 'item_appended' THEN 1
                      WHEN type IN ('run_started', 'run_finished') THEN 0
                      WHEN type = 'agentuse_file' THEN 3 ELSE 2 END,
                 type, idx, seq  -- as a batch stores them (chunks.placed_inserts)
        """
    )
    con.execute(
        """
        INSERT INTO streams
        SELECT stream_key, revision, run_id, format, unhex(record_hash), first_seq, last_seq,
               event_count, source_id, line, batch_id, ingested_at
        FROM v1_streams ORDER BY first_seq
        """
    )
    # a layout-1 source row was written when its input had been read: its batch is both
    con.execute(
        "INSERT INTO source_files SELECT source_id, uri, format, compression, batch_id, "
        "ingested_at FROM v1_sources ORDER BY source_id"
    )
    con.execute(
        "INSERT INTO source_results SELECT source_id, sha256, size_bytes, status, record_count, "
        "accepted, revised, duplicate, rejected, batch_id, ingested_at FROM v1_sources "
        "ORDER BY source_id"
    )
    con.execute(
        """
        INSERT INTO rejects
        SELECT reject_id, source_id, source_uri, line, reason, path, raw_text, raw_bytes,
               unhex(sha256(coalesce(raw_bytes, encode(coalesce(raw_text, ''))))),
               octet_length(coalesce(raw_bytes, encode(coalesce(raw_text, '')))),
               batch_id, rejected_at
        FROM v1_rejects ORDER BY reject_id
        """
    )


def _chain_batches(con: duckdb.DuckDBPyConnection) -> bytes | None:
    """The batches again, each with its event range and the hash chain over the copied log;
    returns the last batch's hash."""
    batches = con.execute(
        """
        SELECT b.*, e.n, e.first_seq, e.last_seq
        FROM v1_batches b
        LEFT JOIN (SELECT batch_id, count(*) AS n, min(seq) AS first_seq, max(seq) AS last_seq
                   FROM events GROUP BY batch_id) e USING (batch_id)
        ORDER BY batch_id
        """
    ).fetchall()
    previous: bytes | None = None
    for (batch_id, ingest_id, started, committed, tags, pid, accepted, revised, duplicate,
         rejected, count, first_seq, last_seq) in batches:
        events_digest = con.execute(
            f"SELECT {EVENTS_DIGEST_SQL} FROM events WHERE batch_id = ?", [batch_id]
        ).fetchone()[0]
        streams_digest = con.execute(
            f"SELECT sha256(string_agg({STREAM_LINE_SQL}, '' ORDER BY first_seq)) "
            "FROM streams WHERE batch_id = ?",
            [batch_id],
        ).fetchone()[0]
        digest = batch_hash(
            previous, batch_id, count or 0, events_digest or EMPTY_DIGEST,
            streams_digest or EMPTY_DIGEST,
        )
        con.execute(
            "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [batch_id, ingest_id, started, committed, tags, pid, accepted, revised, duplicate,
             rejected, count or 0, first_seq, last_seq, previous, digest],
        )
        previous = digest
    return previous


def _carry_tags(con: duckdb.DuckDBPyConnection, previous: bytes | None) -> None:
    """Layout 1 showed each run with the tags of the batch that stored its current revision;
    layout 2 folds a run's ``tags_changed`` events. One batch appends, for every run whose
    tags were not empty, the event that gives it the same tags."""
    rows = con.execute(
        """
        WITH current AS (
            SELECT stream_key, max(revision) AS revision FROM streams GROUP BY stream_key
        )
        SELECT s.stream_key, s.revision, s.source_id, b.tags::VARCHAR,
               (SELECT max(stream_pos) + 1 FROM events e WHERE e.stream_key = s.stream_key)
        FROM streams s JOIN current USING (stream_key, revision)
        JOIN v1_batches b USING (batch_id)
        WHERE b.tags::VARCHAR <> '{}'
        ORDER BY s.first_seq
        """
    ).fetchall()
    if not rows:
        return
    batch_id = con.execute("SELECT max(batch_id) + 1 FROM batches").fetchone()[0]
    first = con.execute("SELECT max(seq) + 1 FROM events").fetchone()[0]
    events, digests = [], Digest()
    for offset, (key, revision, source_id, tags, pos) in enumerate(rows):
        payload = dumps_json({"set": loads_json(tags)})
        events.append((first + offset, key, pos, revision, TAGS_EVENT, None, None, payload,
                       source_id, batch_id))
        digests.add_joined(line_digests(key, revision, [(TAGS_EVENT, None, None, payload)], pos),
                           1)
    insert_columns(con, "events", EVENT_COLUMNS, events)
    digest = batch_hash(previous, batch_id, len(events), digests.hexdigest(), EMPTY_DIGEST)
    con.execute(
        "INSERT INTO batches VALUES (?, 'upgrade-to-layout-2', now()::TIMESTAMP, "
        "now()::TIMESTAMP, '{}', NULL, 0, 0, 0, 0, ?, ?, ?, ?, ?)",
        [batch_id, len(events), first, first + len(events) - 1, previous, digest],
    )
