-- name: handoff-paths
-- description: Agent-to-agent transitions (one visit to the next) with how they happened.
SELECT v.agent                 AS from_agent,
       n.agent                 AS to_agent,
       n.transition,
       count(*)                AS transitions,
       count(DISTINCT v.run_key) AS runs
FROM visits v
JOIN visits n ON n.run_key = v.run_key AND n.visit_index = v.visit_index + 1
GROUP BY v.agent, n.agent, n.transition
ORDER BY transitions DESC, from_agent, to_agent, n.transition
