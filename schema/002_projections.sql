-- recstore schema 002: projections of the event log (current revision of every stream).
-- Maintained in the same transaction as each append; `recstore rebuild` recomputes them from the
-- events alone and `recstore verify` checks that a rebuild reproduces them.
--
-- Each projection is a physical table proj_<name> holding what is small and typed (ids,
-- indexes, names, statuses, times, counts, comparison keys) and a public view <name> that adds
-- what the event log already holds (item JSON, outputs, hashes written in the record, whole
-- payloads), read from the event the row came from (event_seq). So every text of a record is
-- stored once, in the log, apart from a few short ones queries filter on constantly (question,
-- response, error message, metadata, tool arguments). A payload column of a proj_ table is
-- NULL for aioc runs (the event is the payload) and holds the derived JSON for agentuse runs,
-- whose events are whole files. Times are TIMESTAMP in UTC computed at insert from the *_text
-- column next to them (the original strings). Comparison keys (*_key) are the first 64 bits of
-- the sha256 of aioc's canonical JSON of the value: bulk compare joins on them. A row of a
-- child table names its run by run_seq, the first_seq of the run's revision in proj_runs (an
-- integer that compresses to a byte or two; the run key cost about four per row).

CREATE TABLE IF NOT EXISTS proj_runs (
    run_key            VARCHAR NOT NULL,   -- 'aioc:<runId>' (the view derives run_id from it)
    format             VARCHAR NOT NULL,
    revision           INTEGER NOT NULL,
    status             VARCHAR,
    agent              VARCHAR,            -- record agentName: the final agent
    initial_agent      VARCHAR,
    final_agent        VARCHAR,            -- agent of the last visit
    provider           VARCHAR,
    model              VARCHAR,
    question           VARCHAR USING COMPRESSION zstd,
    response           VARCHAR USING COMPRESSION zstd,
    started            TIMESTAMP,
    completed          TIMESTAMP,
    started_text       VARCHAR,
    completed_text     VARCHAR,
    duration_ms        BIGINT,
    error_name         VARCHAR,
    error_message      VARCHAR,
    input_source       VARCHAR,            -- inputItemCount | requestFingerprint | NULL
    input_item_count   INTEGER,
    item_count         INTEGER NOT NULL,
    request_count      INTEGER NOT NULL,
    tool_call_count    INTEGER NOT NULL,
    handoff_count      INTEGER NOT NULL,   -- handoff policy decisions
    denial_count       INTEGER NOT NULL,   -- policy decisions 'deny'
    approval_count     INTEGER NOT NULL,   -- policy decisions 'require_approval'
    guardrail_trip_count INTEGER NOT NULL, -- guardrail decisions 'triggered'
    visit_count        INTEGER NOT NULL,
    finding_count      INTEGER NOT NULL,
    execution_recording_status VARCHAR,    -- NULL when the record predates the field
    context_redacted   BOOLEAN,
    metadata           JSON,
    tags               JSON NOT NULL,      -- object: the fold of the stream's tags_changed events
    items_key          BIGINT NOT NULL,    -- key of the items array (thread continuations)
    source_id          BIGINT NOT NULL,
    source_line        INTEGER,
    batch_id           BIGINT NOT NULL,
    first_seq          BIGINT NOT NULL,
    last_seq           BIGINT NOT NULL,
    replay_of_run_id   VARCHAR,            -- metadata.replayOfRunId
    -- comparison features (recstore/compare): aioc compareRunRecords as set-based SQL
    response_key       BIGINT NOT NULL,
    response_length    INTEGER NOT NULL,   -- UTF-16 code units, as aioc's metrics count
    metadata_key       BIGINT NOT NULL,    -- key of metadata ?? {}
    metadata_is_object BOOLEAN NOT NULL,
    policy_count       INTEGER NOT NULL,
    guardrail_count    INTEGER NOT NULL,
    calls_full_key     BIGINT NOT NULL,    -- (name, argsHash, hasOutput, output key) of every call
    policy_seq_key     BIGINT NOT NULL,    -- the policy entry keys in order
    guardrails_seq_key BIGINT NOT NULL     -- the guardrail entry keys in order
);

CREATE TABLE IF NOT EXISTS proj_items (
    run_seq      BIGINT NOT NULL, 
    item_index   INTEGER NOT NULL,
    type         VARCHAR,
    role         VARCHAR,
    request_turn INTEGER,                  -- turn of the request whose output holds it; NULL for input
    in_input     BOOLEAN NOT NULL,
    event_seq    BIGINT NOT NULL,
    payload      JSON                      -- agentuse only (see above)
);

CREATE TABLE IF NOT EXISTS proj_tool_calls (
    run_seq           BIGINT NOT NULL,     -- proj_runs.first_seq of the run's revision
    call_index        INTEGER NOT NULL,    -- 0-based position in extractToolCalls order
    ordinal           INTEGER,             -- aioc ExtractedToolCall.turn; NULL for orphan outputs
    call_id           VARCHAR,
    name              VARCHAR,
    item_index        INTEGER,
    output_item_index INTEGER,
    arguments         JSON,
    args_hash         BLOB NOT NULL,       -- aioc argsHash (sha256 of canonical arguments)
    has_output        BOOLEAN NOT NULL,
    output_key        BIGINT,              -- key of the output; NULL without one
    envelope_status   VARCHAR,
    envelope_code     VARCHAR,
    request_turn      INTEGER,
    visit_index       INTEGER,
    agent             VARCHAR,
    is_handoff        BOOLEAN NOT NULL,
    handoff_target    VARCHAR,
    policy_decision   VARCHAR,
    policy_decision_index INTEGER,
    in_input          BOOLEAN NOT NULL,
    output_seq        BIGINT,              -- event of the output item
    output            JSON                 -- agentuse only
);

-- What the record's request fingerprint does not say: the request's place in the run. Its own
-- fields (agent, model, hashes, time, ...) are read from its event by the requests view.
CREATE TABLE IF NOT EXISTS proj_requests (
    run_seq         BIGINT NOT NULL, 
    request_index   INTEGER NOT NULL,
    message_count   INTEGER,               -- a valid count (>= 0), else NULL
    output_start    INTEGER,               -- output interval = items[output_start:output_end]
    output_end      INTEGER,
    visit_index     INTEGER,
    event_seq       BIGINT NOT NULL,
    snapshot_seq    BIGINT                 -- the promptSnapshot of the same turn
);

CREATE TABLE IF NOT EXISTS proj_visits (
    run_seq            BIGINT NOT NULL, 
    visit_index        INTEGER NOT NULL,
    agent              VARCHAR,
    entered_after_turn INTEGER,
    via_call_id        VARCHAR,
    transition         VARCHAR NOT NULL,   -- initial | applied | inferred | unknown
    request_count      INTEGER NOT NULL,
    first_turn         INTEGER,
    last_turn          INTEGER,
    item_start         INTEGER,
    item_end           INTEGER
);

-- Policy and guardrail decisions: what the event does not say (the decision's comparison key,
-- whether a handoff applied) and the few short fields queries filter on or bulk compare reports
-- for every changed entry (a policy decision's reason); the views read every other field of the
-- decision from its event.
CREATE TABLE IF NOT EXISTS proj_policy_decisions (
    run_seq         BIGINT NOT NULL,       -- proj_runs.first_seq of the run's revision
    decision_index  INTEGER NOT NULL,
    decision        VARCHAR,               -- allow | deny | require_approval | ...
    reason          VARCHAR,
    resource_kind   VARCHAR,               -- tool | handoff
    resource_name   VARCHAR,
    policy_version  VARCHAR,
    applied_basis   VARCHAR,               -- recorded | inferred | unknown (handoffs only)
    event_seq       BIGINT NOT NULL,
    entry_key       BIGINT NOT NULL,       -- key of the whole entry (bulk compare)
    is_object       BOOLEAN NOT NULL
);

CREATE TABLE IF NOT EXISTS proj_guardrail_decisions (
    run_seq         BIGINT NOT NULL,
    decision_index  INTEGER NOT NULL,
    guardrail_name  VARCHAR,
    decision        VARCHAR,               -- pass | triggered
    event_seq       BIGINT NOT NULL,
    entry_key       BIGINT NOT NULL,
    is_object       BOOLEAN NOT NULL
);

-- Suspended proposals that are not record events: agentuse approval gates. aioc proposals are
-- read from their events by the suspended_proposals view.
CREATE TABLE IF NOT EXISTS proj_suspended_proposals (
    run_seq         BIGINT NOT NULL, 
    proposal_index  INTEGER NOT NULL,
    turn            INTEGER,
    call_id         VARCHAR,
    kind            VARCHAR,               -- approval_gate
    agent           VARCHAR,
    tool_name       VARCHAR,
    from_agent      VARCHAR,
    to_agent        VARCHAR,
    reason          VARCHAR,
    public_reason   VARCHAR,
    policy_version  VARCHAR,
    expires_at      TIMESTAMP,
    expires_at_text VARCHAR,
    timestamp       TIMESTAMP,
    timestamp_text  VARCHAR,
    event_seq       BIGINT NOT NULL,
    args_canonical  VARCHAR,
    metadata        JSON,
    payload         JSON
);

CREATE TABLE IF NOT EXISTS proj_findings (
    run_seq       BIGINT NOT NULL, 
    finding_index INTEGER NOT NULL,
    code          VARCHAR NOT NULL,
    message       VARCHAR,
    path          VARCHAR
);

-- Key of canonical items[:prefix_len] for every prefix of a run's input scope: a run whose
-- prefix key equals another run's items_key (and item count) continues that run's thread.
CREATE TABLE IF NOT EXISTS proj_input_prefixes (
    run_seq    BIGINT NOT NULL, 
    prefix_len INTEGER NOT NULL,
    prefix_key BIGINT NOT NULL
);
