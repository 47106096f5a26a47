-- recstore schema 010: bulk comparison (recstore/compare/).
--
-- Two groups of tables:
--  * cmp_*_features: per stored revision (run_key, record_hash), the keys the set-based engine
--    compares. They are a cache derived from the records (rebuildable: delete the rows and the
--    next comparison recomputes them). A *_key is the first 64 bits (signed) of the sha256 of
--    exactly the text recstore.canonical.canonical_json produces, so equal keys mean aioc's
--    equality (up to a 2^-64 chance per compared pair of distinct values).
--  * cmp_comparisons / cmp_pairs / cmp_unpaired: every recorded comparison, its options,
--    filters, pairing rule, the store's last event seq as a snapshot, and one row per pair.
-- Public, queryable views: comparisons, comparison_pairs, comparison_unpaired.

CREATE SEQUENCE IF NOT EXISTS cmp_feature_seq START 1;
CREATE SEQUENCE IF NOT EXISTS cmp_comparison_seq START 1;

CREATE TABLE IF NOT EXISTS cmp_run_features (
    feature_id         BIGINT NOT NULL,       -- surrogate key used by the per-pair joins
    run_key            VARCHAR NOT NULL,
    record_hash        VARCHAR NOT NULL,      -- runs.record_hash of the revision it describes
    run_id             VARCHAR,
    status             VARCHAR,
    response_key       BIGINT NOT NULL,       -- key of the response string
    response_length    INTEGER NOT NULL,      -- UTF-16 code units, as aioc's metrics count
    metadata_key       BIGINT NOT NULL,       -- key of metadata ?? {}
    metadata_is_object BOOLEAN NOT NULL,
    has_fields         BOOLEAN NOT NULL,      -- cmp_field_features rows exist (needed by --ignore)
    tool_call_count    INTEGER NOT NULL,
    policy_count       INTEGER NOT NULL,
    guardrail_count    INTEGER NOT NULL,
    -- whole sequences: equal ones let a pair skip the positional comparison
    calls_full_key     BIGINT NOT NULL,       -- (name, argsHash, hasOutput, output key) of every call
    policy_keys        BIGINT[] NOT NULL,     -- entry keys of policyDecisions, in order
    guardrails_keys    BIGINT[] NOT NULL,     -- entry keys of guardrailDecisions, in order
    policy_seq_key     BIGINT NOT NULL,       -- key of policy_keys (cheap inequality test)
    guardrails_seq_key BIGINT NOT NULL        -- key of guardrails_keys
);

-- One row per extracted tool call (aioc extractToolCalls order, orphans included).
CREATE TABLE IF NOT EXISTS cmp_call_features (
    feature_id  BIGINT NOT NULL,
    call_index  INTEGER NOT NULL,
    name        VARCHAR,
    args_key    BIGINT NOT NULL,              -- 64-bit prefix of aioc's argsHash
    has_output  BOOLEAN NOT NULL,
    output_key  BIGINT                        -- NULL without output; "[undefined]" when the key is absent
);

-- One row per policy / guardrail decision entry (section = 'policy' | 'guardrails').
CREATE TABLE IF NOT EXISTS cmp_entry_features (
    feature_id    BIGINT NOT NULL,
    section       VARCHAR NOT NULL,
    entry_index   INTEGER NOT NULL,
    entry_key     BIGINT NOT NULL,            -- key of the whole entry
    is_object     BOOLEAN NOT NULL,
    decision      VARCHAR,                    -- outcome fields, for the aggregate report
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

CREATE TABLE IF NOT EXISTS cmp_pairs (
    comparison_id            BIGINT NOT NULL,
    pair_index               INTEGER NOT NULL,
    pair_key                 VARCHAR,
    baseline_run_key         VARCHAR NOT NULL,
    candidate_run_key        VARCHAR NOT NULL,
    baseline_record_hash     VARCHAR NOT NULL,
    candidate_record_hash    VARCHAR NOT NULL,
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
CREATE OR REPLACE VIEW comparison_pairs AS SELECT * FROM cmp_pairs;
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
