-- name: denied-actions-by-policy-version
-- description: Denied tool calls and handoffs per policy version and resource.
-- param: decision text = deny  Decision to count (deny, require_approval, allow, ...).
SELECT policy_version,
       resource_kind,
       resource_name,
       count(*)                AS decisions,
       count(DISTINCT run_key) AS runs
FROM policy_decisions
WHERE decision = $decision
GROUP BY policy_version, resource_kind, resource_name
ORDER BY decisions DESC, policy_version, resource_kind, resource_name
