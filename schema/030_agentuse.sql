-- recstore schema 030: agentuse session trees (recstore/store/agentuse_ingest.py).
-- A session tree is a stream of 'agentuse_file' events (one per file version; a re-scan appends
-- only changed files). Its projections use the same tables as aioc runs; these columns carry
-- what only agentuse records. They stay NULL for aioc runs, so one query covers both formats.

ALTER TABLE runs ADD COLUMN IF NOT EXISTS trigger VARCHAR;            -- manual | scheduled | slack | api | ...
ALTER TABLE runs ADD COLUMN IF NOT EXISTS mock BOOLEAN;               -- test run (mock, replay, result test)
ALTER TABLE runs ADD COLUMN IF NOT EXISTS error_code VARCHAR;         -- session.error.code
ALTER TABLE runs ADD COLUMN IF NOT EXISTS tokens_input BIGINT;        -- tree totals: every visit's own usage
ALTER TABLE runs ADD COLUMN IF NOT EXISTS tokens_output BIGINT;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS tokens_reasoning BIGINT;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS tokens_cache_read BIGINT;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS tokens_cache_write BIGINT;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS result_of_run_id VARCHAR;   -- config.resultSourceSessionId

ALTER TABLE visits ADD COLUMN IF NOT EXISTS session_id VARCHAR;       -- agentuse session of the visit
ALTER TABLE visits ADD COLUMN IF NOT EXISTS parent_visit_index INTEGER;
ALTER TABLE visits ADD COLUMN IF NOT EXISTS parent_link VARCHAR;      -- parentSessionID | nesting
ALTER TABLE visits ADD COLUMN IF NOT EXISTS link_confidence DOUBLE;   -- 1.0 recorded, < 1 inferred
ALTER TABLE visits ADD COLUMN IF NOT EXISTS depth INTEGER;
ALTER TABLE visits ADD COLUMN IF NOT EXISTS status VARCHAR;
ALTER TABLE visits ADD COLUMN IF NOT EXISTS model VARCHAR;
ALTER TABLE visits ADD COLUMN IF NOT EXISTS tokens_input BIGINT;
ALTER TABLE visits ADD COLUMN IF NOT EXISTS tokens_output BIGINT;

ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS part_id VARCHAR;
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS status VARCHAR;       -- completed | error | running | pending | abandoned
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS error VARCHAR;
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS started TIMESTAMP;
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS started_text VARCHAR;
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS ended TIMESTAMP;
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS ended_text VARCHAR;
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS duration_ms BIGINT;
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS arguments_normalised JSON;  -- without intent/recovers
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS artifact_path VARCHAR;      -- full output of a clamped result
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS child_session_id VARCHAR;   -- subagent session it started
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS child_link VARCHAR;         -- resumePayload | inferred
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS child_link_confidence DOUBLE;

-- Newer session.json fields (agentuse after v0.15; NULL when a session predates them).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS error_history JSON;         -- errorHistory: earlier attempts' errors
ALTER TABLE runs ADD COLUMN IF NOT EXISTS verification JSON;          -- verification {status, redoCount, critique?, time}
ALTER TABLE runs ADD COLUMN IF NOT EXISTS verification_status VARCHAR; -- passed | failed | error
ALTER TABLE runs ADD COLUMN IF NOT EXISTS owner_pid BIGINT;           -- owner.pid of the executing process
ALTER TABLE runs ADD COLUMN IF NOT EXISTS execution JSON;             -- time.execution [{start, end?}] across resumes
ALTER TABLE runs ADD COLUMN IF NOT EXISTS execution_ms BIGINT;        -- sum of the closed execution intervals
ALTER TABLE runs ADD COLUMN IF NOT EXISTS execution_budget JSON;      -- executionBudget
ALTER TABLE runs ADD COLUMN IF NOT EXISTS channels JSON;              -- channels (slack anchors)
ALTER TABLE runs ADD COLUMN IF NOT EXISTS dismissed_at TIMESTAMP;     -- dismissedAt: a reviewer waved the run off
ALTER TABLE runs ADD COLUMN IF NOT EXISTS dismissed_at_text VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS reviewed_at TIMESTAMP;      -- reviewedAt: a reviewer opened the run
ALTER TABLE runs ADD COLUMN IF NOT EXISTS reviewed_at_text VARCHAR;

ALTER TABLE visits ADD COLUMN IF NOT EXISTS assistant_error JSON;     -- message assistant.error {message, type?, stack?}
ALTER TABLE visits ADD COLUMN IF NOT EXISTS assistant_summary BOOLEAN; -- message assistant.summary

ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS superseded BOOLEAN;    -- part of a rewound attempt (not model history)
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS parent_call_id VARCHAR; -- the Code Mode code_exec call that dispatched it
ALTER TABLE tool_calls ADD COLUMN IF NOT EXISTS raw_approved_input JSON; -- the signed value an approval covered
