-- name: tool-usage-by-agent
-- description: Tool calls per agent and tool: calls, runs, calls without output, handoffs.
SELECT agent,
       name                                              AS tool,
       count(*)                                          AS calls,
       count(DISTINCT run_key)                           AS runs,
       sum(CASE WHEN has_output THEN 0 ELSE 1 END)       AS without_output,
       sum(CASE WHEN is_handoff THEN 1 ELSE 0 END)       AS handoffs
FROM tool_calls
GROUP BY agent, name
ORDER BY calls DESC, agent, tool
