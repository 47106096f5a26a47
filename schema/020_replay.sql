-- recstore schema 020: replays (recstore/replay/).
-- A replay run is an ordinary stored run (its record carries metadata.replayOfRunId and
-- metadata.harness). What recstore knows about how it was produced is the detail of its
-- 'replay_of' row in lineage_log, written in the same transaction as the run, so these views
-- are derived from the append-only log alone and survive `recstore rebuild`.

-- One row per stored replay: source run (key, revision, record hash, file), mode, input, harness,
-- the report's verdict and aioc's replayStats.
CREATE OR REPLACE VIEW replays AS
SELECT l.child_run_key                                              AS replay_run_key,
       l.revision                                                   AS replay_revision,
       r.run_id                                                     AS replay_run_id,
       coalesce(l.parent_run_key, p.run_key)                        AS source_run_key,
       l.parent_run_id                                              AS source_run_id,
       CAST(json_extract(l.detail, '$.sourceRevision') AS INTEGER)  AS source_revision,
       json_extract_string(l.detail, '$.sourceRecordHash')          AS source_record_hash,
       json_extract_string(l.detail, '$.sourceUri')                 AS source_uri,
       json_extract_string(l.detail, '$.mode')                      AS mode,
       json_extract_string(l.detail, '$.inputMode')                 AS input_mode,
       json_extract_string(l.detail, '$.replayStats.inputSource')   AS input_source,
       json_extract_string(l.detail, '$.harnessHash')               AS harness_hash,
       json_extract_string(l.detail, '$.provider')                  AS provider,
       json_extract_string(l.detail, '$.status')                    AS report_status,
       json_extract_string(l.detail, '$.reason')                    AS reason,
       r.status                                                     AS replay_status,
       r.error_name                                                 AS replay_error_name,
       CAST(json_extract(l.detail, '$.replayStats.recordedToolCalls') AS INTEGER)  AS recorded_tool_calls,
       CAST(json_extract(l.detail, '$.replayStats.replayedFromRecord') AS INTEGER) AS replayed_from_record,
       CAST(json_extract(l.detail, '$.replayStats.missingToolCalls') AS INTEGER)   AS missing_tool_calls,
       CAST(json_extract(l.detail, '$.replayStats.liveFallbackCalls') AS INTEGER)  AS live_fallback_calls,
       CAST(json_extract(l.detail, '$.unconsumedRecordedOutputs') AS INTEGER)      AS unconsumed_recorded_outputs,
       json_extract(l.detail, '$.harness')                          AS harness,
       l.source_id,
       l.batch_id
FROM lineage_log l
LEFT JOIN runs r ON r.run_key = l.child_run_key
LEFT JOIN runs p ON l.parent_run_key IS NULL AND p.run_id = l.parent_run_id AND p.format = 'aioc'
WHERE l.relation = 'replay_of';

-- One row per tool execution of a stored replay: how its output was obtained (recorded,
-- use_output, live, missing) and, for recorded outputs, which source item it came from.
CREATE OR REPLACE VIEW replay_calls AS
SELECT l.child_run_key                                                        AS replay_run_key,
       CAST(t.i AS INTEGER)                                                   AS call_index,
       CAST(json_extract(l.detail, '$.calls[' || t.i || '].turn') AS INTEGER) AS turn,
       json_extract_string(l.detail, '$.calls[' || t.i || '].callId')         AS call_id,
       json_extract_string(l.detail, '$.calls[' || t.i || '].agent')          AS agent,
       json_extract_string(l.detail, '$.calls[' || t.i || '].name')           AS tool_name,
       json_extract_string(l.detail, '$.calls[' || t.i || '].argsHash')       AS args_hash,
       json_extract_string(l.detail, '$.calls[' || t.i || '].resolution')     AS resolution,
       json_extract_string(l.detail, '$.calls[' || t.i || '].provenance.sourceRunId')  AS source_run_id,
       json_extract_string(l.detail, '$.calls[' || t.i || '].provenance.callId')       AS source_call_id,
       CAST(json_extract(l.detail, '$.calls[' || t.i || '].provenance.callItemIndex') AS INTEGER)   AS source_call_item_index,
       CAST(json_extract(l.detail, '$.calls[' || t.i || '].provenance.outputItemIndex') AS INTEGER) AS source_output_item_index
FROM lineage_log l,
     range(CAST(coalesce(json_array_length(l.detail, '$.calls'), 0) AS BIGINT)) AS t(i)
WHERE l.relation = 'replay_of';
