-- recstore schema 041: the views over sweep runs (tables: schema 040), with runs numbered per
-- sweep. sweep_run_id is the store-wide id (one sequence for every sweep, so the first run of a
-- new sweep could be "run 3"); run_number counts the runs of one sweep name from 1, in start
-- order, and is what people see and type (`recstore sweep report NAME#N`). Stores made before
-- this file replace their schema-040 views here.

CREATE OR REPLACE VIEW sweep_runs AS
SELECT r.sweep_run_id,
       (row_number() OVER (PARTITION BY r.sweep_name ORDER BY r.sweep_run_id))::INTEGER AS run_number,
       r.sweep_name,
       r.spec_hash,
       r.candidate,
       r.trigger,
       r.scheduled_for,
       r.started_at,
       e.ended_at,
       coalesce(e.status, 'unfinished') AS status,
       r.selection_query,
       r.matched_count,
       r.case_count,
       count(c.case_index)::INTEGER AS done_count,
       count(c.case_index) FILTER (WHERE c.outcome = 'pass')::INTEGER AS pass_count,
       count(c.case_index) FILTER (WHERE c.outcome = 'warn')::INTEGER AS warn_count,
       count(c.case_index) FILTER (WHERE c.outcome = 'fail')::INTEGER AS fail_count,
       (r.case_count - count(c.case_index))::INTEGER AS pending_count,
       r.snapshot_seq
FROM sweep_run_starts r
LEFT JOIN sweep_run_ends e USING (sweep_run_id)
LEFT JOIN sweep_case_results c USING (sweep_run_id)
GROUP BY r.sweep_run_id, r.sweep_name, r.spec_hash, r.candidate, r.trigger, r.scheduled_for,
         r.started_at, e.ended_at, e.status, r.selection_query, r.matched_count, r.case_count,
         r.snapshot_seq;

CREATE OR REPLACE VIEW sweeps AS
SELECT sweep_name,
       count(*)::INTEGER AS run_count,
       max(sweep_run_id) AS last_run_id,
       max(run_number) AS last_run_number,
       max(started_at) AS last_started_at,
       arg_max(status, sweep_run_id) AS last_status,
       arg_max(spec_hash, sweep_run_id) AS spec_hash,
       arg_max(candidate, sweep_run_id) AS candidate,
       arg_max(pass_count, sweep_run_id) AS last_pass_count,
       arg_max(warn_count, sweep_run_id) AS last_warn_count,
       arg_max(fail_count, sweep_run_id) AS last_fail_count,
       max(scheduled_for) AS last_scheduled_for
FROM sweep_runs
GROUP BY sweep_name;
