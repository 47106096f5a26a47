-- recstore schema 010: bulk comparison (recstore/compare/).
--
-- Features: what the set-based engine compares, per revision, keyed by a feature_id.
--  * A current revision's features are the comparison keys its projections computed at ingest
--    (proj_runs, proj_tool_calls, proj_policy_decisions, proj_guardrail_decisions); its
--    feature_id is proj_runs.first_seq (run_seq in the other tables), which no other revision
--    shares.
--  * A revision that is no longer current (pinned by an explicit pair) gets the same keys
--    computed from its record (recstore.compare.features) the first time a comparison names it,
--    cached in cmp_pinned_* under a negative feature_id, so the two kinds never collide.
--  The cmp_*_features views put both together. A *_key is the first 64 bits (signed) of the
--  sha256 of aioc's canonical JSON of the value (recstore.records.keys, used by both paths), so
--  equal keys mean aioc's equality (up to a 2^-64 chance per compared pair of distinct values).
--  * cmp_field_features: the top-level fields of entries and metadata, which only --ignore of a
--    field needs; computed per revision (either kind of feature_id) when first needed.
-- Comparisons: cmp_comparisons / cmp_pairs / cmp_unpaired record every comparison, its options,
-- filters, pairing rule, the store's last event seq as a snapshot, and one row per pair.
-- Public, queryable views: comparisons, comparison_pairs, comparison_unpaired.

CREATE SEQUENCE IF NOT EXISTS cmp_pinned_seq START 1;   -- feature_id = -nextval(...)
CREATE SEQUENCE IF NOT EXISTS cmp_comparison_seq START 1;

-- Run-level features of pinned revisions: the comparison columns of proj_runs.
CREATE TABLE IF NOT EXISTS cmp_pinned_runs (
    feature_id         BIGINT NOT NULL,       -- negative
    run_key            VARCHAR NOT NULL,
    revision           INTEGER NOT NULL,      -- streams.revision it describes
    status             VARCHAR,
    response_key       BIGINT NOT NULL,
    response_length    INTEGER NOT NULL,
    metadata_key       BIGINT NOT NULL,
    metadata_is_object BOOLEAN NOT NULL,
    tool_call_count    INTEGER NOT NULL,
    policy_count       INTEGER NOT NULL,
    guardrail_count    INTEGER NOT NULL,
    calls_full_key     BIGINT NOT NULL,
    policy_seq_key     BIGINT NOT NULL,
    guardrails_seq_key BIGINT NOT NULL
);

-- One row per extracted tool call of a pinned revision (as proj_tool_calls).
CREATE TABLE IF NOT EXISTS cmp_pinned_calls (
    feature_id  BIGINT NOT NULL,
    call_index  INTEGER NOT NULL,
    name        VARCHAR,
    args_hash   BLOB NOT NULL,
    has_output  BOOLEAN NOT NULL,
    output_key  BIGINT
);

-- One row per policy / guardrail entry of a pinned revision (section = 'policy' | 'guardrails'),
-- as proj_policy_decisions / proj_guardrail_decisions (the outcome: policy entries only).
CREATE TABLE IF NOT EXISTS cmp_pinned_entries (
    feature_id    BIGINT NOT NULL,
    section       VARCHAR NOT NULL,
    entry_index   INTEGER NOT NULL,
    entry_key     BIGINT NOT NULL,
    is_object     BOOLEAN NOT NULL,
    decision      VARCHAR,
    reason        VARCHAR,
    resource_kind VARCHAR,
    resource_name VARCHAR
);

-- Top-level fields of object entries and of metadata (section 'metadata', entry_index 0):
-- what --ignore policy.timestamp / metadata.<key> needs to compare entries minus some fields.
CREATE TABLE IF NOT EXISTS cmp_field_features (
    feature_id  BIGINT NOT NULL,
    section     VARCHAR NOT NULL,
    entry_index INTEGER NOT NULL,
    field       VARCHAR NOT NULL,             -- the key as canonical JSON (a quoted string)
    value_key   BIGINT NOT NULL
);

-- Revisions (feature_id) whose cmp_field_features rows exist (some have none).
CREATE TABLE IF NOT EXISTS cmp_field_revisions (
    feature_id  BIGINT NOT NULL
);

CREATE OR REPLACE VIEW cmp_run_features AS
SELECT first_seq AS feature_id, run_key, revision, status, response_key, response_length,
       metadata_key, metadata_is_object, tool_call_count, policy_count, guardrail_count,
       calls_full_key, policy_seq_key, guardrails_seq_key
FROM proj_runs
UNION ALL
SELECT * FROM cmp_pinned_runs;

CREATE OR REPLACE VIEW cmp_call_features AS
SELECT run_seq AS feature_id, call_index, name, args_hash, has_output, output_key
FROM proj_tool_calls
UNION ALL
SELECT * FROM cmp_pinned_calls;

CREATE OR REPLACE VIEW cmp_entry_features AS
SELECT run_seq AS feature_id, 'policy' AS section, decision_index AS entry_index, entry_key,
       is_object, decision, reason, resource_kind, resource_name
FROM proj_policy_decisions
UNION ALL
SELECT run_seq, 'guardrails', decision_index, entry_key, is_object, NULL, NULL, NULL, NULL
FROM proj_guardrail_decisions
UNION ALL
SELECT * FROM cmp_pinned_entries;

CREATE TABLE IF NOT EXISTS cmp_comparisons (
    comparison_id     BIGINT NOT NULL,
    created_at        TIMESTAMP NOT NULL,
    baseline_filter   VARCHAR,
    candidate_filter  VARCHAR,
    pair_by           VARCHAR NOT NULL,       -- metadata.<path> | question | input_scope | lineage | explicit
    duplicates        VARCHAR NOT NULL,       -- latest | all
    sections          JSON NOT NULL,          -- compared aioc sections
    ignore_paths      JSON NOT NULL,
    classification    JSON NOT NULL,          -- the pass/warn/fail rule used
    snapshot_seq      BIGINT,                 -- the store's last event seq when it ran
    pair_count        INTEGER NOT NULL,
    unpaired_baseline INTEGER NOT NULL,
    unpaired_candidate INTEGER NOT NULL,
    duplicate_runs    INTEGER NOT NULL,
    failed_pairs      INTEGER NOT NULL,
    aggregate         JSON NOT NULL           -- the aggregate report (counts, rates, statistics)
);

-- One row per compared pair. A compared revision is named by its first event seq (streams
-- first_seq), which the log never reuses: the comparison_pairs view reads its run key,
-- revision and record hash from streams, so a pair row holds no text it can get there.
CREATE TABLE IF NOT EXISTS cmp_pairs (
    comparison_id            BIGINT NOT NULL,
    pair_index               INTEGER NOT NULL,
    pair_key                 VARCHAR,
    baseline_seq             BIGINT NOT NULL,
    candidate_seq            BIGINT NOT NULL,
    equal                    BOOLEAN NOT NULL,
    same_final_response      BOOLEAN NOT NULL,
    same_tool_call_shape     BOOLEAN NOT NULL,
    same_policy_decisions    BOOLEAN NOT NULL,
    same_guardrail_decisions BOOLEAN NOT NULL,
    same_metadata            BOOLEAN NOT NULL,
    same_tool_outputs        BOOLEAN NOT NULL,
    response_length_a        INTEGER NOT NULL,
    response_length_b        INTEGER NOT NULL,
    tool_calls_a             INTEGER NOT NULL,
    tool_calls_b             INTEGER NOT NULL,
    matched_tool_calls       INTEGER NOT NULL,
    missing_tool_calls       INTEGER NOT NULL,
    extra_tool_calls         INTEGER NOT NULL,
    difference_count         INTEGER NOT NULL,   -- len(compare_records(...)["differences"])
    first_divergence_index   INTEGER,            -- first tool-call position whose name/args differ
    first_divergence_tool_a  VARCHAR,
    first_divergence_tool_b  VARCHAR,
    status_a                 VARCHAR,
    status_b                 VARCHAR,
    classification           VARCHAR NOT NULL    -- pass | warn | fail
);

-- Runs left out of the pairing, and duplicate runs of one key on one side (with the rule used).
CREATE TABLE IF NOT EXISTS cmp_unpaired (
    comparison_id BIGINT NOT NULL,
    side          VARCHAR NOT NULL,           -- baseline | candidate
    run_key       VARCHAR NOT NULL,
    pair_key      VARCHAR,
    reason        VARCHAR NOT NULL            -- no_match | no_key | duplicate_dropped | duplicate_kept | duplicate_paired
);

CREATE OR REPLACE VIEW comparisons AS SELECT * FROM cmp_comparisons;
CREATE OR REPLACE VIEW comparison_pairs AS
SELECT p.comparison_id, p.pair_index, p.pair_key,
       sa.stream_key AS baseline_run_key, sb.stream_key AS candidate_run_key,
       sa.revision AS baseline_revision, sb.revision AS candidate_revision,
       lower(hex(sa.record_hash)) AS baseline_record_hash,
       lower(hex(sb.record_hash)) AS candidate_record_hash,
       p.* EXCLUDE (comparison_id, pair_index, pair_key, baseline_seq, candidate_seq)
FROM cmp_pairs p
JOIN streams sa ON sa.first_seq = p.baseline_seq
JOIN streams sb ON sb.first_seq = p.candidate_seq;
CREATE OR REPLACE VIEW comparison_unpaired AS SELECT * FROM cmp_unpaired;

-- Column descriptions shown by `recstore schema` (the query layer reads these comments).
COMMENT ON COLUMN comparisons.comparison_id IS 'id of the comparison (comparison_pairs.comparison_id)';
COMMENT ON COLUMN comparisons.created_at IS 'when the comparison ran (UTC)';
COMMENT ON COLUMN comparisons.baseline_filter IS 'DSL filter that selected the baseline runs (NULL: explicit pairs or all runs)';
COMMENT ON COLUMN comparisons.candidate_filter IS 'DSL filter that selected the candidate runs';
COMMENT ON COLUMN comparisons.pair_by IS 'pairing key: metadata.<path> | question | input_scope | lineage | explicit';
COMMENT ON COLUMN comparisons.duplicates IS 'rule for several runs with one key on a side: latest | all';
COMMENT ON COLUMN comparisons.sections IS 'aioc sections compared (JSON array)';
COMMENT ON COLUMN comparisons.ignore_paths IS '--ignore paths in effect (JSON array; [] = exact aioc mode)';
COMMENT ON COLUMN comparisons.classification IS 'pass/warn/fail rule: {failOn: [...], warnOn: [...]}';
COMMENT ON COLUMN comparisons.snapshot_seq IS 'the store''s last event seq when the comparison ran';
COMMENT ON COLUMN comparisons.pair_count IS 'number of pairs compared';
COMMENT ON COLUMN comparisons.unpaired_baseline IS 'baseline runs without a key or a partner';
COMMENT ON COLUMN comparisons.unpaired_candidate IS 'candidate runs without a key or a partner';
COMMENT ON COLUMN comparisons.duplicate_runs IS 'runs sharing a key with another run of their side';
COMMENT ON COLUMN comparisons.failed_pairs IS 'pairs classified fail (non-zero: the CLI exits 1)';
COMMENT ON COLUMN comparisons.aggregate IS 'the aggregate report (flags, drift, divergence, statistics) as JSON';
COMMENT ON COLUMN comparison_pairs.comparison_id IS 'the comparison this pair belongs to';
COMMENT ON COLUMN comparison_pairs.pair_index IS '0-based position of the pair in the comparison';
COMMENT ON COLUMN comparison_pairs.pair_key IS 'the pairing key value shared by both runs';
COMMENT ON COLUMN comparison_pairs.baseline_run_key IS 'baseline run (runs.run_key)';
COMMENT ON COLUMN comparison_pairs.candidate_run_key IS 'candidate run (runs.run_key)';
COMMENT ON COLUMN comparison_pairs.baseline_revision IS 'revision of the baseline run compared (runs.revision when it was current)';
COMMENT ON COLUMN comparison_pairs.candidate_revision IS 'revision of the candidate run compared';
COMMENT ON COLUMN comparison_pairs.baseline_record_hash IS 'record_hash of the baseline revision compared';
COMMENT ON COLUMN comparison_pairs.candidate_record_hash IS 'record_hash of the candidate revision compared';
COMMENT ON COLUMN comparison_pairs.equal IS 'aioc equal: no difference in the compared sections';
COMMENT ON COLUMN comparison_pairs.same_final_response IS 'aioc summary.sameFinalResponse';
COMMENT ON COLUMN comparison_pairs.same_tool_call_shape IS 'aioc summary.sameToolCallShape';
COMMENT ON COLUMN comparison_pairs.same_policy_decisions IS 'aioc summary.samePolicyDecisions';
COMMENT ON COLUMN comparison_pairs.same_guardrail_decisions IS 'aioc summary.sameGuardrailDecisions';
COMMENT ON COLUMN comparison_pairs.same_metadata IS 'no metadata difference (aioc has no summary flag for it)';
COMMENT ON COLUMN comparison_pairs.same_tool_outputs IS 'no toolCalls[i].hasOutput/output difference';
COMMENT ON COLUMN comparison_pairs.response_length_a IS 'aioc metrics.responseLengthA (UTF-16 units)';
COMMENT ON COLUMN comparison_pairs.response_length_b IS 'aioc metrics.responseLengthB';
COMMENT ON COLUMN comparison_pairs.tool_calls_a IS 'aioc metrics.toolCallsA';
COMMENT ON COLUMN comparison_pairs.tool_calls_b IS 'aioc metrics.toolCallsB';
COMMENT ON COLUMN comparison_pairs.matched_tool_calls IS 'aioc metrics.matchedToolCalls (multiset of name+argsHash)';
COMMENT ON COLUMN comparison_pairs.missing_tool_calls IS 'aioc metrics.missingToolCalls';
COMMENT ON COLUMN comparison_pairs.extra_tool_calls IS 'aioc metrics.extraToolCalls';
COMMENT ON COLUMN comparison_pairs.difference_count IS 'length of aioc''s differences list';
COMMENT ON COLUMN comparison_pairs.first_divergence_index IS 'first tool-call position whose presence, name or argsHash differ';
COMMENT ON COLUMN comparison_pairs.first_divergence_tool_a IS 'baseline tool at the first divergence (NULL: none)';
COMMENT ON COLUMN comparison_pairs.first_divergence_tool_b IS 'candidate tool at the first divergence (NULL: none)';
COMMENT ON COLUMN comparison_pairs.status_a IS 'baseline run status';
COMMENT ON COLUMN comparison_pairs.status_b IS 'candidate run status';
COMMENT ON COLUMN comparison_pairs.classification IS 'pass | warn | fail under the comparison''s rule';
COMMENT ON COLUMN comparison_unpaired.comparison_id IS 'the comparison';
COMMENT ON COLUMN comparison_unpaired.side IS 'baseline | candidate';
COMMENT ON COLUMN comparison_unpaired.run_key IS 'the run (runs.run_key)';
COMMENT ON COLUMN comparison_unpaired.pair_key IS 'its pairing key (NULL: it has none)';
COMMENT ON COLUMN comparison_unpaired.reason IS 'no_key | no_match | duplicate_dropped | duplicate_kept | duplicate_paired';
