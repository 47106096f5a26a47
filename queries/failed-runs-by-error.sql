-- name: failed-runs-by-error
-- description: Failed runs grouped by error name and message, most frequent first.
-- param: since timestamp = 1970-01-01  Only runs that started at or after this time (ISO or -7d).
SELECT error_name,
       error_message,
       count(*)     AS runs,
       min(started) AS first_seen,
       max(started) AS last_seen
FROM runs
WHERE status = 'failed'
  AND (started IS NULL OR started >= $since)
GROUP BY error_name, error_message
ORDER BY runs DESC, error_name, error_message
