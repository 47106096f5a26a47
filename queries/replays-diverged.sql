-- name: replays-diverged
-- description: Replays whose status, response or tool-call sequence differs from the source run.
WITH pairs AS (
    SELECT child_run_key AS replay_run, parent_run_key AS source_run
    FROM lineage
    WHERE relation = 'replay_of' AND parent_run_key IS NOT NULL
),
call_mismatches AS (
    -- source calls the replay did not repeat at the same position with the same arguments
    SELECT p.replay_run, count(*) AS mismatched_calls
    FROM pairs p
    JOIN tool_calls s ON s.run_key = p.source_run
    LEFT JOIN tool_calls r ON r.run_key = p.replay_run AND r.call_index = s.call_index
    WHERE r.name IS DISTINCT FROM s.name OR r.args_hash IS DISTINCT FROM s.args_hash
    GROUP BY p.replay_run
)
SELECT p.source_run,
       p.replay_run,
       s.status                          AS source_status,
       r.status                          AS replay_status,
       s.tool_call_count                 AS source_calls,
       r.tool_call_count                 AS replay_calls,
       coalesce(m.mismatched_calls, 0)   AS mismatched_calls,
       s.response = r.response           AS same_response
FROM pairs p
JOIN runs s ON s.run_key = p.source_run
JOIN runs r ON r.run_key = p.replay_run
LEFT JOIN call_mismatches m ON m.replay_run = p.replay_run
WHERE s.status IS DISTINCT FROM r.status
   OR s.response IS DISTINCT FROM r.response
   OR s.tool_call_count <> r.tool_call_count
   OR coalesce(m.mismatched_calls, 0) > 0
ORDER BY mismatched_calls DESC, p.source_run, p.replay_run
