-- recstore schema 001: the append-only event log and its bookkeeping (docs/DESIGN.md).
-- Rows in events, streams, batches, sources, source_results, lineage_log and rejects are only
-- ever inserted, never updated or deleted. Projections (002) are derived from these tables and
-- can be rebuilt from them alone.

-- Key/value facts about the store itself: 'schema_version' is the highest applied schema file,
-- 'layout' the physical layout of the log (2: batch hash chain, zstd payloads).
CREATE TABLE IF NOT EXISTS meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
INSERT OR IGNORE INTO meta VALUES ('layout', '2');

-- One row per schema file applied (001_log.sql, 002_projections.sql, ... from every layer).
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER NOT NULL,
    name       VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL
);

-- One row per committed write transaction. An ingest command (ingest_id) writes one or more
-- batches. hash = sha256(prev_hash || batch_id, event_count, events digest, streams digest):
-- the digests cover every event and stream row of the batch (recstore.store.chain), so
-- rewriting, dropping or reordering anything in the log breaks the chain `recstore verify`
-- walks.
CREATE TABLE IF NOT EXISTS batches (
    batch_id     BIGINT NOT NULL,
    ingest_id    VARCHAR NOT NULL,
    started_at   TIMESTAMP NOT NULL,
    committed_at TIMESTAMP NOT NULL,
    tags         JSON NOT NULL,          -- tags given to the command that wrote the batch
    pid          INTEGER,
    accepted     INTEGER NOT NULL,       -- new streams (first revision)
    revised      INTEGER NOT NULL,       -- new revisions of known streams
    duplicate    INTEGER NOT NULL,       -- identical records, nothing appended
    rejected     INTEGER NOT NULL,
    event_count  INTEGER NOT NULL,
    first_seq    BIGINT,                 -- NULL when the batch appended no event
    last_seq     BIGINT,
    prev_hash    BLOB,                   -- hash of the previous batch (NULL for the first)
    hash         BLOB NOT NULL
);

-- One row per input read (file, stdin, agentuse tree, or an in-process caller such as replay),
-- written with the first batch that refers to it, so no committed row points at a missing
-- source. What reading it found is in source_results, written when it has been read whole.
CREATE TABLE IF NOT EXISTS source_files (
    source_id   BIGINT NOT NULL,
    uri         VARCHAR NOT NULL,
    format      VARCHAR NOT NULL,        -- json | ndjson | records | agentuse | otlp
    compression VARCHAR,                 -- gzip | NULL
    batch_id    BIGINT NOT NULL,         -- first batch that refers to it
    opened_at   TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS source_results (
    source_id    BIGINT NOT NULL,
    sha256       VARCHAR,                -- of the bytes as read (NULL for in-process records)
    size_bytes   BIGINT,
    status       VARCHAR NOT NULL,       -- ok | partial (some rejects) | rejected (nothing usable)
    record_count INTEGER NOT NULL,
    accepted     INTEGER NOT NULL,
    revised      INTEGER NOT NULL,
    duplicate    INTEGER NOT NULL,
    rejected     INTEGER NOT NULL,
    batch_id     BIGINT NOT NULL,        -- batch that finished reading it
    finished_at  TIMESTAMP NOT NULL
);

-- Input that could not be accepted. Recorded once per (source URI, line, reason, content): a
-- re-ingest of the same bad file adds nothing.
CREATE TABLE IF NOT EXISTS rejects (
    reject_id   BIGINT NOT NULL,
    source_id   BIGINT NOT NULL,
    source_uri  VARCHAR NOT NULL,
    line        INTEGER,                -- 1-based line in the source (NULL for whole-file inputs)
    reason      VARCHAR NOT NULL,
    path        VARCHAR,                -- JSON path of the problem when known, e.g. $.items[3].callId
    raw_text    VARCHAR USING COMPRESSION zstd,  -- the text as read (invalid UTF-8 as U+FFFD)
    raw_bytes   BLOB,                   -- the exact bytes, when they were not valid UTF-8
    raw_sha256  BLOB NOT NULL,          -- sha256 of the bytes as read (the dedupe key)
    raw_size    BIGINT NOT NULL,        -- their size; raw_text holds at most a prefix of huge ones
    batch_id    BIGINT NOT NULL,
    rejected_at TIMESTAMP NOT NULL
);

-- One row per stored revision of a stream (a recorded run). stream_key is the run key,
-- e.g. 'aioc:<runId>'; revision 1 is the first version seen, each changed record adds one.
-- The revision's record events are exactly seq first_seq..last_seq.
CREATE TABLE IF NOT EXISTS streams (
    stream_key  VARCHAR NOT NULL,
    revision    INTEGER NOT NULL,
    run_id      VARCHAR NOT NULL,
    format      VARCHAR NOT NULL,       -- aioc | agentuse
    record_hash BLOB NOT NULL,          -- sha256 of the canonical JSON of the whole record
    first_seq   BIGINT NOT NULL,
    last_seq    BIGINT NOT NULL,
    event_count INTEGER NOT NULL,
    source_id   BIGINT NOT NULL,
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
-- stream across all its revisions. Within a batch, rows are stored grouped by kind (run events,
-- items, other record entries, files), then by type and array index (seq order within each), so
-- a scan of one kind decompresses little else and alike payloads sit together; payloads are
-- zstd-compressed (DuckDB picks no compression for mid-sized JSON text by itself).
CREATE TABLE IF NOT EXISTS events (
    seq        BIGINT NOT NULL,
    stream_key VARCHAR NOT NULL,
    stream_pos INTEGER NOT NULL,
    revision   INTEGER NOT NULL,
    type       VARCHAR NOT NULL,        -- run_started | item_appended | prompt_snapshot |
                                        -- request_fingerprint | policy_decision |
                                        -- guardrail_decision | suspended_proposal | run_finished |
                                        -- tags_changed | agentuse_file
    idx        INTEGER,                 -- position in its record array (items[idx], ...)
    turn       INTEGER,                 -- the record's turn, where the payload has one
    payload    VARCHAR NOT NULL USING COMPRESSION zstd,  -- JSON text, key order as read
    source_id  BIGINT NOT NULL,
    batch_id   BIGINT NOT NULL
);

-- Sources as one row each (what `recstore schema` documents as `sources`).
CREATE OR REPLACE VIEW sources AS
SELECT f.source_id, f.uri, r.sha256, r.size_bytes, f.format, f.compression,
       coalesce(r.status, 'incomplete') AS status,
       coalesce(r.record_count, 0) AS record_count, coalesce(r.accepted, 0) AS accepted,
       coalesce(r.revised, 0) AS revised, coalesce(r.duplicate, 0) AS duplicate,
       coalesce(r.rejected, 0) AS rejected,
       f.batch_id AS first_batch_id, r.batch_id, f.opened_at, r.finished_at AS ingested_at
FROM source_files f LEFT JOIN source_results r USING (source_id);
