-- recstore schema 001: the append-only event log and its bookkeeping.
-- Rows in events, streams, batches, sources and rejects are only ever inserted, never updated or
-- deleted. Projections (002) are derived from these tables and can be rebuilt from them alone.

-- Key/value facts about the store itself; 'schema_version' is the highest applied schema file.
CREATE TABLE IF NOT EXISTS meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);

-- One row per schema file applied (001_log.sql, 002_projections.sql, ... from every layer).
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER NOT NULL,
    name       VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL
);

-- One row per committed ingest transaction. An ingest command (ingest_id) writes one or more
-- batches; tags given on the command line are attached to every batch it writes.
CREATE TABLE IF NOT EXISTS batches (
    batch_id    BIGINT NOT NULL,
    ingest_id   VARCHAR NOT NULL,
    started_at  TIMESTAMP NOT NULL,
    committed_at TIMESTAMP NOT NULL,
    tags        JSON NOT NULL,          -- object {key: value}
    pid         INTEGER,
    accepted    INTEGER NOT NULL,       -- new streams (first revision)
    revised     INTEGER NOT NULL,       -- new revisions of known streams
    duplicate   INTEGER NOT NULL,       -- identical records, nothing appended
    rejected    INTEGER NOT NULL
);

-- One row per input read (file, stdin, or an in-process caller such as replay).
-- Written in the batch that finishes reading it, with its counts.
CREATE TABLE IF NOT EXISTS sources (
    source_id    BIGINT NOT NULL,
    uri          VARCHAR NOT NULL,
    sha256       VARCHAR,               -- of the bytes as read (NULL for in-process records)
    size_bytes   BIGINT,
    format       VARCHAR NOT NULL,      -- json | ndjson | records
    compression  VARCHAR,               -- gzip | NULL
    status       VARCHAR NOT NULL,      -- ok | partial (some rejects) | rejected (nothing usable)
    record_count INTEGER NOT NULL,
    accepted     INTEGER NOT NULL,
    revised      INTEGER NOT NULL,
    duplicate    INTEGER NOT NULL,
    rejected     INTEGER NOT NULL,
    batch_id     BIGINT NOT NULL,
    ingested_at  TIMESTAMP NOT NULL
);

-- Input that could not be accepted, kept whole.
CREATE TABLE IF NOT EXISTS rejects (
    reject_id   BIGINT NOT NULL,
    source_id   BIGINT NOT NULL,
    source_uri  VARCHAR NOT NULL,
    line        INTEGER,                -- 1-based line in the source (NULL for whole-file inputs)
    reason      VARCHAR NOT NULL,
    path        VARCHAR,                -- JSON path of the problem when known, e.g. $.items[3].callId
    raw_text    VARCHAR,                -- the text as read (invalid UTF-8 decoded with U+FFFD)
    raw_bytes   BLOB,                   -- the exact bytes, when they were not valid UTF-8
    batch_id    BIGINT NOT NULL,
    rejected_at TIMESTAMP NOT NULL
);

-- One row per stored revision of a stream (a recorded run). stream_key is the run key,
-- e.g. 'aioc:<runId>'; revision 1 is the first version seen, each changed record adds one.
CREATE TABLE IF NOT EXISTS streams (
    stream_key  VARCHAR NOT NULL,
    revision    INTEGER NOT NULL,
    run_id      VARCHAR NOT NULL,
    format      VARCHAR NOT NULL,       -- aioc | agentuse
    record_hash VARCHAR NOT NULL,       -- sha256 of the canonical JSON of the whole record
    first_seq   BIGINT NOT NULL,
    last_seq    BIGINT NOT NULL,
    event_count INTEGER NOT NULL,
    source_id   BIGINT NOT NULL,
    source_uri  VARCHAR,
    line        INTEGER,
    batch_id    BIGINT NOT NULL,
    ingested_at TIMESTAMP NOT NULL
);

-- Lineage a caller attached at ingest (replay provenance, 'subagent', 'sweep_case', ...).
-- parent_run_key is NULL when only the parent's run id is known.
CREATE TABLE IF NOT EXISTS lineage_log (
    child_run_key  VARCHAR NOT NULL,
    revision       INTEGER NOT NULL,
    parent_run_key VARCHAR,
    parent_run_id  VARCHAR,
    relation       VARCHAR NOT NULL,
    detail         JSON,
    source_id      BIGINT NOT NULL,
    batch_id       BIGINT NOT NULL
);

-- The event log. seq is global and gap-free in commit order; stream_pos counts from 0 within a
-- stream across all its revisions. hash = sha256(prev_hash | stream_key | stream_pos | revision |
-- type | idx | turn | payload) chains every event to the previous one of its stream.
CREATE TABLE IF NOT EXISTS events (
    seq        BIGINT NOT NULL,
    stream_key VARCHAR NOT NULL,
    stream_pos INTEGER NOT NULL,
    revision   INTEGER NOT NULL,
    type       VARCHAR NOT NULL,        -- run_started | item_appended | prompt_snapshot |
                                        -- request_fingerprint | policy_decision |
                                        -- guardrail_decision | suspended_proposal | run_finished
    idx        INTEGER,                 -- position in its record array (items[idx], ...)
    turn       INTEGER,                 -- the record's turn, where the payload has one
    payload    VARCHAR NOT NULL,        -- JSON text, key order and numbers as read (VARCHAR:
                                        -- exact even where DuckDB's JSON type is not)
    source_id  BIGINT NOT NULL,
    batch_id   BIGINT NOT NULL,
    prev_hash  VARCHAR,                 -- NULL for the first event of a stream
    hash       VARCHAR NOT NULL
);
