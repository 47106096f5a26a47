-- name: slowest-runs
-- description: The 20 slowest runs with agent, model, status and tool-call count.
-- param: since timestamp = 1970-01-01  Only runs that started at or after this time (ISO or -7d).
duration_ms is not null and started >= $since
fields run_key, agent, model, status, duration_ms, tool_call_count, started
order by duration_ms desc, run_key
limit 20
