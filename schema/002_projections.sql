-- recstore schema 002: projections of the event log (current revision of every stream).
-- Maintained in the same transaction as each append; `recstore rebuild` recomputes them from the
-- events alone and `recstore verify` checks that a rebuild reproduces them. Every row carries
-- run_key (= events.stream_key) and, where it comes from one event, that event's seq.
-- Times are TIMESTAMP in UTC; the original strings are kept in the *_text columns.

CREATE TABLE IF NOT EXISTS runs (
    run_key            VARCHAR NOT NULL,   -- 'aioc:<runId>'
    run_id             VARCHAR NOT NULL,
    format             VARCHAR NOT NULL,
    revision           INTEGER NOT NULL,
    record_hash        VARCHAR NOT NULL,
    status             VARCHAR,
    agent              VARCHAR,            -- record agentName: the final agent
    initial_agent      VARCHAR,
    final_agent        VARCHAR,            -- agent of the last visit
    provider           VARCHAR,
    model              VARCHAR,
    question           VARCHAR,
    response           VARCHAR,
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
    tags               JSON NOT NULL,      -- object: tags of the batch that stored this revision
    items_hash         VARCHAR NOT NULL,   -- sha256 of canonical JSON of the items array
    source_id          BIGINT NOT NULL,
    source_uri         VARCHAR,
    source_line        INTEGER,
    batch_id           BIGINT NOT NULL,
    first_seq          BIGINT NOT NULL,
    last_seq           BIGINT NOT NULL,
    replay_of_run_id   VARCHAR             -- metadata.replayOfRunId
);

CREATE TABLE IF NOT EXISTS items (
    run_key      VARCHAR NOT NULL,
    item_index   INTEGER NOT NULL,
    type         VARCHAR,
    role         VARCHAR,
    call_id      VARCHAR,
    name         VARCHAR,
    request_turn INTEGER,                  -- turn of the request whose output holds it; NULL for input
    in_input     BOOLEAN NOT NULL,
    content      VARCHAR,                  -- message text (JSON text when not a string)
    payload      JSON NOT NULL,
    event_seq    BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS tool_calls (
    run_key           VARCHAR NOT NULL,
    call_index        INTEGER NOT NULL,    -- 0-based position in extractToolCalls order
    ordinal           INTEGER,             -- aioc ExtractedToolCall.turn; NULL for orphan outputs
    call_id           VARCHAR,
    name              VARCHAR,
    item_index        INTEGER,
    output_item_index INTEGER,
    arguments         JSON,
    args_canonical    VARCHAR,
    args_hash         VARCHAR,
    has_output        BOOLEAN NOT NULL,
    output            JSON,
    envelope_status   VARCHAR,
    envelope_code     VARCHAR,
    request_turn      INTEGER,
    visit_index       INTEGER,
    agent             VARCHAR,
    is_handoff        BOOLEAN NOT NULL,
    handoff_target    VARCHAR,
    policy_decision   VARCHAR,
    policy_decision_index INTEGER,
    in_input          BOOLEAN NOT NULL
);

CREATE TABLE IF NOT EXISTS requests (
    run_key             VARCHAR NOT NULL,
    request_index       INTEGER NOT NULL,
    turn                INTEGER,
    agent               VARCHAR,
    provider            VARCHAR,
    model               VARCHAR,
    message_count       INTEGER,
    output_start        INTEGER,           -- output interval = items[output_start:output_end]
    output_end          INTEGER,
    visit_index         INTEGER,
    request_hash        VARCHAR,
    system_prompt_hash  VARCHAR,
    messages_hash       VARCHAR,
    tools_hash          VARCHAR,
    model_settings_hash VARCHAR,
    prompt_hash         VARCHAR,           -- from the promptSnapshot of the same turn
    prompt_version      VARCHAR,
    tool_count          INTEGER,
    runtime_version     VARCHAR,
    timestamp           TIMESTAMP,
    timestamp_text      VARCHAR,
    event_seq           BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS visits (
    run_key            VARCHAR NOT NULL,
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

CREATE TABLE IF NOT EXISTS policy_decisions (
    run_key         VARCHAR NOT NULL,
    decision_index  INTEGER NOT NULL,
    turn            INTEGER,
    call_id         VARCHAR,
    decision        VARCHAR,
    reason          VARCHAR,
    public_reason   VARCHAR,
    result_mode     VARCHAR,
    policy_version  VARCHAR,
    resource_kind   VARCHAR,
    resource_name   VARCHAR,
    expires_at      TIMESTAMP,
    expires_at_text VARCHAR,
    handoff_applied BOOLEAN,               -- recorded handoffApplied, else NULL
    applied_basis   VARCHAR,               -- recorded | inferred | unknown (handoffs only)
    timestamp       TIMESTAMP,
    timestamp_text  VARCHAR,
    metadata        JSON,
    payload         JSON NOT NULL,
    event_seq       BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS guardrail_decisions (
    run_key         VARCHAR NOT NULL,
    decision_index  INTEGER NOT NULL,
    turn            INTEGER,
    guardrail_name  VARCHAR,
    decision        VARCHAR,               -- pass | triggered
    reason          VARCHAR,
    timestamp       TIMESTAMP,
    timestamp_text  VARCHAR,
    metadata        JSON,
    payload         JSON NOT NULL,
    event_seq       BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS prompt_snapshots (
    run_key         VARCHAR NOT NULL,
    snapshot_index  INTEGER NOT NULL,
    turn            INTEGER,
    agent           VARCHAR,
    model           VARCHAR,
    prompt_version  VARCHAR,
    prompt_hash     VARCHAR,
    has_prompt_text BOOLEAN NOT NULL,
    timestamp       TIMESTAMP,
    timestamp_text  VARCHAR,
    payload         JSON NOT NULL,
    event_seq       BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS suspended_proposals (
    run_key         VARCHAR NOT NULL,
    proposal_index  INTEGER NOT NULL,
    turn            INTEGER,
    call_id         VARCHAR,
    kind            VARCHAR,               -- tool | handoff
    agent           VARCHAR,
    tool_name       VARCHAR,
    from_agent      VARCHAR,
    to_agent        VARCHAR,
    proposal_hash   VARCHAR,
    reason          VARCHAR,
    public_reason   VARCHAR,
    policy_version  VARCHAR,
    expires_at      TIMESTAMP,
    expires_at_text VARCHAR,
    args_canonical  VARCHAR,               -- argsCanonicalJson or payloadCanonicalJson
    timestamp       TIMESTAMP,
    timestamp_text  VARCHAR,
    metadata        JSON,
    payload         JSON NOT NULL,
    event_seq       BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS findings (
    run_key       VARCHAR NOT NULL,
    finding_index INTEGER NOT NULL,
    code          VARCHAR NOT NULL,
    message       VARCHAR,
    path          VARCHAR
);

-- sha256 of canonical JSON of items[:prefix_len] for every prefix of a run's input scope;
-- a run whose prefix hash equals another run's runs.items_hash continues that run's thread.
CREATE TABLE IF NOT EXISTS run_input_prefixes (
    run_key     VARCHAR NOT NULL,
    prefix_len  INTEGER NOT NULL,
    prefix_hash VARCHAR NOT NULL
);

-- Public lineage: replays named by metadata.replayOfRunId, rows callers attached at ingest
-- (lineage_log), and thread continuations (each child linked to the runs whose whole item list is
-- its longest input prefix). Parents are resolved by run id, so a parent stored later still links.
CREATE OR REPLACE VIEW lineage AS
SELECT r.run_key AS child_run_key,
       p.run_key AS parent_run_key,
       r.replay_of_run_id AS parent_run_id,
       'replay_of' AS relation,
       CAST(NULL AS JSON) AS detail,
       r.source_id
FROM runs r
LEFT JOIN runs p ON p.run_id = r.replay_of_run_id AND p.format = r.format
WHERE r.replay_of_run_id IS NOT NULL
  -- a replay stored with its own provenance row (lineage_log) is listed once, with that row
  AND NOT EXISTS (SELECT 1 FROM lineage_log x
                  WHERE x.child_run_key = r.run_key AND x.relation = 'replay_of')
  -- recstore's own replays carry a richer 'replay_of' row in lineage_log (schema 020); one row each
  AND NOT EXISTS (SELECT 1 FROM lineage_log x
                  WHERE x.child_run_key = r.run_key AND x.relation = 'replay_of')
UNION ALL
SELECT l.child_run_key,
       coalesce(l.parent_run_key, p.run_key) AS parent_run_key,
       coalesce(l.parent_run_id, p2.run_id) AS parent_run_id,
       l.relation,
       l.detail,
       l.source_id
FROM lineage_log l
LEFT JOIN runs p ON l.parent_run_key IS NULL AND p.run_id = l.parent_run_id AND p.format = 'aioc'
LEFT JOIN runs p2 ON l.parent_run_key IS NOT NULL AND p2.run_key = l.parent_run_key
UNION ALL
SELECT child_run_key, parent_run_key, parent_run_id, 'thread_continuation', detail, source_id
FROM (
    SELECT c.run_key AS child_run_key,
           p.run_key AS parent_run_key,
           p.run_id  AS parent_run_id,
           json_object('prefixItems', x.prefix_len) AS detail,
           c.source_id,
           rank() OVER (PARTITION BY c.run_key ORDER BY x.prefix_len DESC) AS nearest
    FROM run_input_prefixes x
    JOIN runs p ON p.items_hash = x.prefix_hash AND p.item_count = x.prefix_len
    JOIN runs c ON c.run_key = x.run_key
    WHERE p.run_key <> c.run_key
)
WHERE nearest = 1;
