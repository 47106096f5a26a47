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
-- Public, queryable views: sweeps, sweep_runs, sweep_cases.

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

CREATE OR REPLACE VIEW sweep_runs AS
SELECT r.sweep_run_id,
       r.sweep_name,
       r.spec_hash,
       r.candidate,
       r.trigger,
       r.scheduled_for,
       r.started_at,
       e.ended_at,
       coalesce(e.status, 'unfinished') AS status,
       r.selection_query,
       r.matched_count,
       r.case_count,
       count(c.case_index)::INTEGER AS done_count,
       count(c.case_index) FILTER (WHERE c.outcome = 'pass')::INTEGER AS pass_count,
       count(c.case_index) FILTER (WHERE c.outcome = 'warn')::INTEGER AS warn_count,
       count(c.case_index) FILTER (WHERE c.outcome = 'fail')::INTEGER AS fail_count,
       (r.case_count - count(c.case_index))::INTEGER AS pending_count,
       r.snapshot_seq
FROM sweep_run_starts r
LEFT JOIN sweep_run_ends e USING (sweep_run_id)
LEFT JOIN sweep_case_results c USING (sweep_run_id)
GROUP BY r.sweep_run_id, r.sweep_name, r.spec_hash, r.candidate, r.trigger, r.scheduled_for,
         r.started_at, e.ended_at, e.status, r.selection_query, r.matched_count, r.case_count,
         r.snapshot_seq;

CREATE OR REPLACE VIEW sweeps AS
SELECT sweep_name,
       count(*)::INTEGER AS run_count,
       max(sweep_run_id) AS last_run_id,
       max(started_at) AS last_started_at,
       arg_max(status, sweep_run_id) AS last_status,
       arg_max(spec_hash, sweep_run_id) AS spec_hash,
       arg_max(candidate, sweep_run_id) AS candidate,
       arg_max(pass_count, sweep_run_id) AS last_pass_count,
       arg_max(warn_count, sweep_run_id) AS last_warn_count,
       arg_max(fail_count, sweep_run_id) AS last_fail_count,
       max(scheduled_for) AS last_scheduled_for
FROM sweep_runs
GROUP BY sweep_name;
