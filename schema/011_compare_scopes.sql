-- recstore schema 011: the input-scope key of every current run, as a comparison feature view.
-- `compare --pair-by input_scope` pairs runs by the key of their canonical input items, which a
-- store keeps in proj_input_prefixes (the prefix as long as the run's input). A Parquet layout
-- (`recstore export`, `recstore spark build`) holds this view, so `compare --engine spark` pairs
-- by it too. A run without input items has no row (its key is that of the empty list).
CREATE OR REPLACE VIEW cmp_input_scopes AS
SELECT x.run_seq AS feature_id, x.prefix_len, x.prefix_key
FROM proj_runs r
JOIN proj_input_prefixes x ON x.run_seq = r.first_seq AND x.prefix_len = r.input_item_count;
