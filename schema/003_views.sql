-- recstore schema 003: the public views over the projections (002) and the event log (001).
-- A view adds to its proj_ table what the log holds once: JSON read from the event a row came
-- from. Views expand proj_* columns with `*`, so columns later schema files add (030 agentuse)
-- appear in them without redefining the view.

-- Event payload text as DuckDB's JSON functions accept it: they refuse lone-surrogate escapes,
-- which JSON (and aioc) allow, so those (the rare payloads that hold one) read as U+FFFD here.
-- The log keeps the exact text.
CREATE OR REPLACE MACRO rs_json(t) AS
    CASE WHEN contains(t, '\ud') THEN regexp_replace(t, '\\u[dD][89a-fA-F][0-9a-fA-F]{2}', '\\ufffd', 'g')
         ELSE t END;

-- A JSON member as JSON, NULL when absent or null (as the projections always showed it).
CREATE OR REPLACE MACRO rs_member(t, path) AS
    CASE WHEN coalesce(json_type(t, path), 'NULL') = 'NULL' THEN NULL
         ELSE json_extract(t, path) END;
-- Typed members, NULL unless the JSON value has that type: a string, an integral number that
-- fits INTEGER (2 or 2.0, not 2.5 or true), a boolean, a time written as an ISO string.
CREATE OR REPLACE MACRO rs_str(t, path) AS
    CASE WHEN json_type(t, path) = 'VARCHAR' THEN t ->> path END;
CREATE OR REPLACE MACRO rs_int(t, path) AS
    CASE WHEN json_type(t, path) IN ('BIGINT', 'UBIGINT', 'DOUBLE')
          AND TRY_CAST(t ->> path AS DOUBLE) = floor(TRY_CAST(t ->> path AS DOUBLE))
         THEN TRY_CAST(TRY_CAST(t ->> path AS DOUBLE) AS INTEGER) END;
CREATE OR REPLACE MACRO rs_bool(t, path) AS
    CASE WHEN json_type(t, path) = 'BOOLEAN' THEN (t ->> path)::BOOLEAN END;
CREATE OR REPLACE MACRO rs_time(t, path) AS
    timezone('UTC', try_cast(rs_str(t, path) AS TIMESTAMPTZ));

-- Events of one type that belong to the current revision of their run, payload ready for JSON.
CREATE OR REPLACE MACRO current_events(event_type) AS TABLE
    SELECT r.run_key, e.seq, e.idx, e.turn, rs_json(e.payload) AS p
    FROM proj_runs r
    JOIN events e ON e.stream_key = r.run_key AND e.seq BETWEEN r.first_seq AND r.last_seq
    WHERE e.type = event_type;

-- A run's projection row with its run id: the runs view but for the two joins that add the
-- record hash and the source URI (what run selections that need neither read, and lineage).
CREATE OR REPLACE VIEW run_rows AS
SELECT *, substr(run_key, length(format) + 2) AS run_id FROM proj_runs;

CREATE OR REPLACE VIEW runs AS
SELECT r.run_key, r.run_id, r.format, r.revision,
       lower(hex(s.record_hash)) AS record_hash,
       r.* EXCLUDE (run_key, run_id, format, revision, items_key, response_key, response_length,
                    metadata_key, metadata_is_object, policy_count, guardrail_count,
                    calls_full_key, policy_seq_key, guardrails_seq_key),
       f.uri AS source_uri
FROM run_rows r
JOIN streams s ON s.stream_key = r.run_key AND s.revision = r.revision
LEFT JOIN source_files f ON f.source_id = r.source_id;

CREATE OR REPLACE VIEW items AS
SELECT run_key, item_index, type, role, item ->> '$.callId' AS call_id, item ->> '$.name' AS name,
       request_turn, in_input, item ->> '$.content' AS content, item::JSON AS payload, event_seq
FROM (
    SELECT r.run_key, i.* EXCLUDE (run_seq, payload), coalesce(i.payload::VARCHAR, e.item) AS item
    FROM proj_items i
    JOIN proj_runs r ON r.first_seq = i.run_seq
    LEFT JOIN (SELECT seq, rs_json(payload) AS item FROM events WHERE type = 'item_appended') e
           ON e.seq = i.event_seq AND i.payload IS NULL
);

CREATE OR REPLACE VIEW tool_calls AS
SELECT r.run_key, t.call_index, t.ordinal, t.call_id, t.name, t.item_index, t.output_item_index,
       t.arguments, lower(hex(t.args_hash)) AS args_hash, t.has_output,
       CASE WHEN t.has_output THEN coalesce(t.output, rs_member(o.item, '$.output')) END AS output,
       t.* EXCLUDE (run_seq, call_index, ordinal, call_id, name, item_index,
                    output_item_index, arguments, args_hash, has_output, output_key, output_seq,
                    output)
FROM proj_tool_calls t
JOIN proj_runs r ON r.first_seq = t.run_seq
-- coalesce: with every selected call's output_seq NULL (calls without an output) DuckDB pushes
-- no seq range into the events scan and reads every item event (~200 ms at 200k runs for one
-- run's calls); -1 is no seq, so the join result is the same and the scan skips to nothing
LEFT JOIN (SELECT seq, rs_json(payload) AS item FROM events WHERE type = 'item_appended') o
       ON o.seq = coalesce(t.output_seq, -1) AND t.output IS NULL;

CREATE OR REPLACE VIEW requests AS
SELECT r.run_key, q.request_index, f.turn, f.p ->> '$.agentName' AS agent,
       f.p ->> '$.providerName' AS provider, f.p ->> '$.model' AS model, q.message_count,
       q.output_start, q.output_end, q.visit_index,
       f.p ->> '$.requestHash' AS request_hash,
       f.p ->> '$.systemPromptHash' AS system_prompt_hash,
       f.p ->> '$.messagesHash' AS messages_hash,
       f.p ->> '$.toolsHash' AS tools_hash,
       f.p ->> '$.modelSettingsHash' AS model_settings_hash,
       s.p ->> '$.promptHash' AS prompt_hash,
       s.p ->> '$.promptVersion' AS prompt_version,
       rs_int(f.p, '$.toolCount') AS tool_count,
       f.p ->> '$.runtimeVersion' AS runtime_version,
       rs_time(f.p, '$.timestamp') AS timestamp,
       rs_str(f.p, '$.timestamp') AS timestamp_text,
       q.event_seq
FROM proj_requests q
JOIN proj_runs r ON r.first_seq = q.run_seq
JOIN (SELECT seq, turn, rs_json(payload) AS p FROM events WHERE type = 'request_fingerprint') f
  ON f.seq = q.event_seq
LEFT JOIN (SELECT seq, rs_json(payload) AS p FROM events WHERE type = 'prompt_snapshot') s
       ON s.seq = q.snapshot_seq;

CREATE OR REPLACE VIEW visits AS
SELECT r.run_key, v.* EXCLUDE (run_seq)
FROM proj_visits v JOIN proj_runs r ON r.first_seq = v.run_seq;

CREATE OR REPLACE VIEW policy_decisions AS
SELECT r.run_key, d.decision_index, e.turn,
       e.p ->> '$.callId' AS call_id,
       d.decision,
       d.reason,
       e.p ->> '$.publicReason' AS public_reason,
       e.p ->> '$.resultMode' AS result_mode,
       d.policy_version,
       d.resource_kind,
       d.resource_name,
       rs_time(e.p, '$.expiresAt') AS expires_at,
       rs_str(e.p, '$.expiresAt') AS expires_at_text,
       rs_bool(e.p, '$.handoffApplied') AS handoff_applied,
       d.applied_basis,
       rs_time(e.p, '$.timestamp') AS timestamp,
       rs_str(e.p, '$.timestamp') AS timestamp_text,
       rs_member(e.p, '$.metadata') AS metadata,
       e.p::JSON AS payload,
       d.event_seq
FROM proj_policy_decisions d
JOIN proj_runs r ON r.first_seq = d.run_seq
JOIN (SELECT seq, turn, rs_json(payload) AS p FROM events WHERE type = 'policy_decision') e
  ON e.seq = d.event_seq;

CREATE OR REPLACE VIEW guardrail_decisions AS
SELECT r.run_key, d.decision_index, e.turn,
       d.guardrail_name,
       d.decision,
       e.p ->> '$.reason' AS reason,
       rs_time(e.p, '$.timestamp') AS timestamp,
       rs_str(e.p, '$.timestamp') AS timestamp_text,
       rs_member(e.p, '$.metadata') AS metadata,
       e.p::JSON AS payload,
       d.event_seq
FROM proj_guardrail_decisions d
JOIN proj_runs r ON r.first_seq = d.run_seq
JOIN (SELECT seq, turn, rs_json(payload) AS p FROM events WHERE type = 'guardrail_decision') e
  ON e.seq = d.event_seq;

CREATE OR REPLACE VIEW prompt_snapshots AS
SELECT run_key, idx AS snapshot_index, turn,
       p ->> '$.agentName' AS agent,
       p ->> '$.model' AS model,
       p ->> '$.promptVersion' AS prompt_version,
       p ->> '$.promptHash' AS prompt_hash,
       json_exists(p, '$.promptText') AS has_prompt_text,
       rs_time(p, '$.timestamp') AS timestamp,
       rs_str(p, '$.timestamp') AS timestamp_text,
       p::JSON AS payload,
       seq AS event_seq
FROM current_events('prompt_snapshot');

CREATE OR REPLACE VIEW suspended_proposals AS
SELECT run_key, idx AS proposal_index, turn,
       p ->> '$.callId' AS call_id,
       p ->> '$.kind' AS kind,
       p ->> '$.agentName' AS agent,
       p ->> '$.toolName' AS tool_name,
       p ->> '$.fromAgentName' AS from_agent,
       p ->> '$.toAgentName' AS to_agent,
       p ->> '$.proposalHash' AS proposal_hash,
       p ->> '$.reason' AS reason,
       p ->> '$.publicReason' AS public_reason,
       p ->> '$.policyVersion' AS policy_version,
       rs_time(p, '$.expiresAt') AS expires_at,
       rs_str(p, '$.expiresAt') AS expires_at_text,
       coalesce(p ->> '$.argsCanonicalJson', p ->> '$.payloadCanonicalJson') AS args_canonical,
       rs_time(p, '$.timestamp') AS timestamp,
       rs_str(p, '$.timestamp') AS timestamp_text,
       rs_member(p, '$.metadata') AS metadata,
       p::JSON AS payload,
       seq AS event_seq
FROM current_events('suspended_proposal')
UNION ALL
SELECT r.run_key, s.proposal_index, s.turn, s.call_id, s.kind, s.agent, s.tool_name,
       s.from_agent, s.to_agent, CAST(NULL AS VARCHAR) AS proposal_hash, s.reason,
       s.public_reason, s.policy_version, s.expires_at, s.expires_at_text, s.args_canonical,
       s.timestamp, s.timestamp_text, s.metadata, s.payload, s.event_seq
FROM proj_suspended_proposals s JOIN proj_runs r ON r.first_seq = s.run_seq;

CREATE OR REPLACE VIEW findings AS
SELECT r.run_key, f.* EXCLUDE (run_seq)
FROM proj_findings f JOIN proj_runs r ON r.first_seq = f.run_seq;

-- Public lineage: replays named by metadata.replayOfRunId, rows callers attached at ingest
-- (lineage_log), and thread continuations. A run continues the thread of an earlier run whose
-- whole item list is the longest prefix of its input, when that run produced items beyond its
-- own input, the child adds items beyond it and did not start earlier: item counts grow
-- strictly along a thread, so the links can form no cycle, and runs holding only the same input
-- never link. Parents are
-- resolved by run id, so a parent stored later still links.
CREATE OR REPLACE VIEW lineage AS
WITH pr AS (SELECT * FROM run_rows)
SELECT r.run_key AS child_run_key,
       p.run_key AS parent_run_key,
       r.replay_of_run_id AS parent_run_id,
       'replay_of' AS relation,
       CAST(NULL AS JSON) AS detail,
       r.source_id
FROM pr r
LEFT JOIN pr p ON p.run_id = r.replay_of_run_id AND p.format = r.format
WHERE r.replay_of_run_id IS NOT NULL
  -- a replay stored with its own provenance row (lineage_log) is listed once, with that row
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
LEFT JOIN pr p ON l.parent_run_key IS NULL AND p.run_id = l.parent_run_id AND p.format = 'aioc'
LEFT JOIN pr p2 ON l.parent_run_key IS NOT NULL AND p2.run_key = l.parent_run_key
UNION ALL
SELECT child_run_key, parent_run_key, parent_run_id, 'thread_continuation', detail, source_id
FROM (
    SELECT c.run_key AS child_run_key,
           p.run_key AS parent_run_key,
           p.run_id  AS parent_run_id,
           json_object('prefixItems', x.prefix_len) AS detail,
           c.source_id,
           rank() OVER (PARTITION BY c.run_key ORDER BY x.prefix_len DESC) AS nearest
    FROM proj_input_prefixes x
    JOIN pr p ON p.items_key = x.prefix_key AND p.item_count = x.prefix_len
    JOIN pr c ON c.first_seq = x.run_seq
    WHERE p.run_key <> c.run_key
      AND p.item_count < c.item_count
      AND p.item_count > coalesce(p.input_item_count, 0)
      AND coalesce(p.started <= c.started, p.first_seq < c.first_seq)
)
WHERE nearest = 1;
