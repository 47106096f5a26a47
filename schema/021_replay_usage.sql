-- recstore schema 021: the replays view (schema 020) with each replay's model usage, from the
-- 'usage' of its replay_of lineage detail: HTTP model requests, retries, 429 answers, and the
-- prompt/completion/total tokens the provider reported (NULL for replays that called no HTTP
-- model: recorded and scripted providers, external replayers). Stores made before this file
-- replace their schema-020 view here.

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
       CAST(json_extract(l.detail, '$.usage.requests') AS INTEGER)         AS model_requests,
       CAST(json_extract(l.detail, '$.usage.retries') AS INTEGER)          AS model_retries,
       CAST(json_extract(l.detail, '$.usage.rateLimited') AS INTEGER)      AS rate_limited,
       CAST(json_extract(l.detail, '$.usage.promptTokens') AS BIGINT)      AS prompt_tokens,
       CAST(json_extract(l.detail, '$.usage.completionTokens') AS BIGINT)  AS completion_tokens,
       CAST(json_extract(l.detail, '$.usage.totalTokens') AS BIGINT)       AS total_tokens,
       l.source_id,
       l.batch_id
FROM lineage_log l
LEFT JOIN runs r ON r.run_key = l.child_run_key
LEFT JOIN runs p ON l.parent_run_key IS NULL AND p.run_id = l.parent_run_id AND p.format = 'aioc'
WHERE l.relation = 'replay_of';
