-- recstore schema 040: replay sweeps (recstore/sweep/).
--
-- A sweep run is recorded as append-only facts, never updated:
--   sweep_run_starts   the run began: its spec (canonical JSON and hash), trigger, snapshot seq;
--   sweep_selection    the fixed list of source runs it covers (stored once, so a resumed or
--                      audited run uses exactly the same cases);
--   sweep_case_results one row per finished case (primary key: a case is recorded at most once);
--   sweep_run_ends     the run finished, or was superseded by `sweep run --rerun`.
-- Lineage: sweep run -> case (sweep_selection) -> replay run (sweep_case_results.replay_run_key,
-- and a 'sweep_case' row in lineage_log naming the source) -> source run. How each replay was
-- served (per-call provenance) is the replay layer's: views replays and replay_calls.
-- Public, queryable views: sweep_cases (here), sweep_runs and sweeps (schema 041).

CREATE SEQUENCE IF NOT EXISTS sweep_run_seq START 1;

CREATE TABLE IF NOT EXISTS sweep_run_starts (
    sweep_run_id    BIGINT PRIMARY KEY,
    sweep_name      VARCHAR NOT NULL,
    spec_hash       VARCHAR NOT NULL,       -- 'sha256:' of the canonical spec JSON
    spec            JSON NOT NULL,          -- the spec as run (paths resolved)
    spec_path       VARCHAR,
    candidate       VARCHAR NOT NULL,       -- label of the candidate (harness, source, command)
    trigger         VARCHAR NOT NULL,       -- manual | schedule
    scheduled_for   TIMESTAMP,              -- the cron slot (UTC) of a scheduled run
    started_at      TIMESTAMP NOT NULL,
    snapshot_seq    BIGINT,                 -- the store's last event seq when the selection ran
    selection_query VARCHAR NOT NULL,
    matched_count   INTEGER NOT NULL,       -- runs the query matched, before sampling
    case_count      INTEGER NOT NULL,
    pid             INTEGER
);

CREATE TABLE IF NOT EXISTS sweep_selection (
    sweep_run_id       BIGINT NOT NULL,
    case_index         INTEGER NOT NULL,
    source_run_key     VARCHAR NOT NULL,
    source_revision    INTEGER,
    source_record_hash VARCHAR,
    PRIMARY KEY (sweep_run_id, case_index)
);

CREATE TABLE IF NOT EXISTS sweep_case_results (
    sweep_run_id      BIGINT NOT NULL,
    case_index        INTEGER NOT NULL,
    source_run_key    VARCHAR NOT NULL,
    replay_run_key    VARCHAR,              -- NULL when the candidate produced no record
    outcome           VARCHAR NOT NULL,     -- pass | warn | fail
    replay_status     VARCHAR,              -- the replay report's status (completed | error | ...)
    source_status     VARCHAR,
    candidate_status  VARCHAR,              -- status of the replay record
    signals           JSON NOT NULL,        -- signal names raised (docs/sweeps.md)
    drift             JSON NOT NULL,        -- {tool: {source_calls, replay_calls, added, removed, changed_args}}
    error             VARCHAR,              -- why the replay (or judge) did not complete
    comparison        JSON,                 -- compare_records result {equal, summary, metrics, differences}
    judge             JSON,                 -- the judge's verdict, when the spec has a judge
    duration_ms       DOUBLE,
    finished_at       TIMESTAMP NOT NULL,
    PRIMARY KEY (sweep_run_id, case_index)
);

CREATE TABLE IF NOT EXISTS sweep_run_ends (
    sweep_run_id BIGINT PRIMARY KEY,
    ended_at     TIMESTAMP NOT NULL,
    status       VARCHAR NOT NULL,          -- finished | superseded
    reason       VARCHAR
);

CREATE OR REPLACE VIEW sweep_cases AS
SELECT s.sweep_run_id,
       r.sweep_name,
       s.case_index,
       s.source_run_key,
       s.source_revision,
       s.source_record_hash,
       coalesce(c.outcome, 'pending') AS status,
       c.replay_run_key,
       c.replay_status,
       c.source_status,
       c.candidate_status,
       c.signals,
       c.drift,
       c.error,
       c.comparison,
       c.judge,
       c.duration_ms,
       c.finished_at
FROM sweep_selection s
JOIN sweep_run_starts r USING (sweep_run_id)
LEFT JOIN sweep_case_results c USING (sweep_run_id, case_index);
