-- name: guardrail-trips
-- description: Guardrails that triggered, per guardrail and agent of the run.
SELECT g.guardrail_name,
       r.agent,
       count(*)                  AS trips,
       count(DISTINCT g.run_key) AS runs
FROM guardrail_decisions g
JOIN runs r ON r.run_key = g.run_key
WHERE g.decision = 'triggered'
GROUP BY g.guardrail_name, r.agent
ORDER BY trips DESC, g.guardrail_name, r.agent
