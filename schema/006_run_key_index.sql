-- recstore schema 006: an index on proj_runs.run_key.
-- Every public view reaches a run's rows by joining proj_runs on run_key; run keys are random
-- (UUIDs), so without an index each `WHERE run_key = ...` scanned every row group of proj_runs
-- (~15 ms per view at 200k runs, nine views per run page). With it the lookup is an index scan
-- and DuckDB's join filter skips to the run's row groups in the other projections.
CREATE INDEX IF NOT EXISTS proj_runs_run_key ON proj_runs (run_key);
