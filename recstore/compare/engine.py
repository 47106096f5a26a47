"""Set-based per-pair comparison: aioc ``compareRunRecords`` as DuckDB SQL over feature rows.

Input is a temp table ``_cmp_pairs(pair_index, a_fid, b_fid, ...)`` of feature ids: the ids of
the views ``cmp_run_features``, ``cmp_call_features``, ``cmp_entry_features`` (a current
revision's ``first_seq``, or a pinned revision's negative id: :mod:`recstore.compare.features`);
its other columns are carried through to the result. :func:`compare_pairs` creates these temp tables:

* ``_cmp_pair_runs`` — each pair with both runs' run-level features;
* ``_cmp_call_pos`` — tool calls aligned by position (one row per index of either side), for
  the pairs whose call sequences differ;
* ``_cmp_multiset`` — for those pairs, calls per (name, argsHash) on each side;
* ``_cmp_entry_diff`` — the policy and guardrail positions that differ, with both entries'
  outcome (decision, reason, resource);
* ``_cmp_result`` — one row per pair: the columns of ``_cmp_pairs``, then
  :data:`RESULT_COLUMNS`: the summary flags, metrics and ``difference_count`` that
  ``compare_records`` gives for the same pair (``equal`` is ``difference_count = 0``), the
  first divergence of the tool-call sequence and both run statuses.

Every comparison is on keys of canonical JSON (:mod:`recstore.compare.features`), so equality is
aioc's; there is no per-record Python.
"""

from __future__ import annotations

from collections.abc import Iterable

from recstore.canonical import canonical_json
from recstore.compare.connection import CompareConnection
from recstore.compare.ignore import IgnoreSpec

__all__ = ["RESULT_COLUMNS", "compare_pairs"]

# Columns of _cmp_result after those of _cmp_pairs, in the order comparison_pairs stores them.
RESULT_COLUMNS = [
    "equal",
    "same_final_response",
    "same_tool_call_shape",
    "same_policy_decisions",
    "same_guardrail_decisions",
    "same_metadata",
    "same_tool_outputs",
    "response_length_a",
    "response_length_b",
    "tool_calls_a",
    "tool_calls_b",
    "matched_tool_calls",
    "missing_tool_calls",
    "extra_tool_calls",
    "difference_count",
    "first_divergence_index",
    "first_divergence_tool_a",
    "first_divergence_tool_b",
    "status_a",
    "status_b",
]


# What the aggregate report shows of a policy entry that changed (NULL for guardrails).
_OUTCOME = ("decision", "reason", "resource_kind", "resource_name")


def _sql_bool(flag: bool) -> str:
    return "TRUE" if flag else "FALSE"


def _field_list(fields: Iterable[str]) -> str:
    """A SQL list literal of field names as stored (canonical JSON strings)."""
    quoted = ("'" + canonical_json(f).replace("'", "''") + "'" for f in sorted(fields))
    return "[" + ", ".join(quoted) + "]::VARCHAR[]"


def _align_calls(con: CompareConnection, compare_outputs: bool) -> None:
    """Tool calls of both sides by position, with aioc's per-position checks (§5 step 4)."""
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _cmp_call_pos AS
        WITH a AS (SELECT p.pair_index, c.call_index, c.name, c.args_hash, c.has_output,
                          c.output_key
                   FROM _cmp_pair_runs p JOIN cmp_call_features c ON c.feature_id = p.a_fid
                   WHERE p.calls_differ),
             b AS (SELECT p.pair_index, c.call_index, c.name, c.args_hash, c.has_output,
                          c.output_key
                   FROM _cmp_pair_runs p JOIN cmp_call_features c ON c.feature_id = p.b_fid
                   WHERE p.calls_differ),
             pos AS (
                SELECT coalesce(a.pair_index, b.pair_index) AS pair_index,
                       coalesce(a.call_index, b.call_index) AS call_index,
                       a.call_index IS NOT NULL AS in_a, b.call_index IS NOT NULL AS in_b,
                       a.name AS name_a, b.name AS name_b, a.args_hash AS args_a,
                       b.args_hash AS args_b, a.has_output AS has_output_a,
                       b.has_output AS has_output_b, a.output_key AS output_a,
                       b.output_key AS output_b
                FROM a FULL OUTER JOIN b
                  ON a.pair_index = b.pair_index AND a.call_index = b.call_index)
        SELECT pair_index, call_index, in_a, in_b, name_a, name_b, args_a, args_b,
               in_a AND in_b AND name_a IS DISTINCT FROM name_b AS name_diff,
               in_a AND in_b AND args_a <> args_b AS args_diff,
               in_a AND in_b AND has_output_a <> has_output_b AS has_output_diff,
               {_sql_bool(compare_outputs)} AND in_a AND in_b AND has_output_a AND has_output_b
                   AND output_a <> output_b AS output_diff,
               NOT (in_a AND in_b) OR name_a IS DISTINCT FROM name_b OR args_a <> args_b
                   AS diverged
        FROM pos
        """
    )


def _fingerprints(section_fields: dict[str, frozenset[str]]) -> str:
    """SQL for entry fingerprints with ignored top-level fields left out.

    Two objects are canonically equal exactly when they have the same keys with canonically
    equal values, so a fingerprint of the sorted (key, value key) pairs that remain decides
    equality of the entries minus the ignored fields. Non-object entries keep their entry key.
    """
    filters = " OR ".join(
        f"(section = '{section}' AND NOT list_contains({_field_list(fields)}, field))"
        for section, fields in section_fields.items()
    )
    return f"""
        SELECT feature_id, section, entry_index,
               hash(string_agg(field || ':' || value_key, ',' ORDER BY field)) AS fp
        FROM cmp_field_features
        WHERE feature_id IN (SELECT a_fid FROM _cmp_pairs UNION SELECT b_fid FROM _cmp_pairs)
          AND ({filters})
        GROUP BY ALL
    """


def _entry_diff(section: str, fields: frozenset[str]) -> str:
    """Differing positions of one section, by a positional full outer join of both sides'
    entries: exact, an entry is its key, and only pairs whose whole sequences differ are
    aligned; with ignored fields, an object entry is the fingerprint of its other fields and
    every pair with entries is aligned. Each row keeps both entries' outcome (policy only)."""
    if fields:
        fingerprint = """CASE WHEN e.is_object THEN coalesce(f.fp, hash(''))
                              ELSE hash(e.entry_key) END"""
        fields_join = f"""LEFT JOIN ({_fingerprints({section: fields})}) f
                          USING (feature_id, section, entry_index)"""
        count = "policy_count" if section == "policy" else "guardrail_count"
        detail = f"{count}_a + {count}_b > 0"
    else:
        fingerprint, fields_join, detail = "e.entry_key", "", f"{section}_differ"
    return f"""
        SELECT * FROM (
            WITH detail AS (SELECT pair_index, a_fid, b_fid FROM _cmp_pair_runs WHERE {detail}),
            e AS (
                SELECT e.feature_id, e.entry_index, {fingerprint} AS fp,
                       {", ".join(f"e.{c}" for c in _OUTCOME)}
                FROM cmp_entry_features e {fields_join}
                WHERE e.section = '{section}'
                  AND e.feature_id IN (SELECT a_fid FROM detail UNION SELECT b_fid FROM detail)
            ),
            a AS (SELECT p.pair_index, e.* FROM detail p JOIN e ON e.feature_id = p.a_fid),
            b AS (SELECT p.pair_index, e.* FROM detail p JOIN e ON e.feature_id = p.b_fid)
            SELECT coalesce(a.pair_index, b.pair_index) AS pair_index,
                   '{section}' AS section,
                   coalesce(a.entry_index, b.entry_index) AS entry_index,
                   a.entry_index IS NOT NULL AS in_a,
                   b.entry_index IS NOT NULL AS in_b,
                   {", ".join(f"a.{c} AS {c}_a, b.{c} AS {c}_b" for c in _OUTCOME)}
            FROM a FULL OUTER JOIN b
              ON a.pair_index = b.pair_index AND a.entry_index = b.entry_index
            WHERE a.entry_index IS NULL OR b.entry_index IS NULL OR a.fp <> b.fp
        )
    """


def _align_entries(con: CompareConnection, ignore: IgnoreSpec) -> None:
    """``_cmp_entry_diff``: policy and guardrail positions that differ (missing on one side,
    or unequal), per section by keys (exact) or by field fingerprints (fields ignored)."""
    parts = [
        _entry_diff("policy", ignore.policy_fields),
        _entry_diff("guardrails", ignore.guardrail_fields),
    ]
    con.execute("CREATE OR REPLACE TEMP TABLE _cmp_entry_diff AS " + " UNION ALL ".join(parts))


def _metadata_fingerprints(keys: frozenset[str]) -> str:
    """Metadata minus the ignored top-level keys (non-object metadata keeps its key)."""
    return f"""
        SELECT r.feature_id,
               CASE WHEN r.metadata_is_object THEN coalesce(f.fp, hash(''))
                    ELSE hash(r.metadata_key) END AS fp
        FROM cmp_run_features r
        LEFT JOIN ({_fingerprints({"metadata": keys})}) f USING (feature_id)
        WHERE r.feature_id IN (SELECT a_fid FROM _cmp_pairs UNION SELECT b_fid FROM _cmp_pairs)
    """


def _multiset(con: CompareConnection) -> None:
    """Per pair and (name, argsHash): calls on each side (aioc's multiset metrics, tool drift)."""
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE _cmp_multiset AS
        SELECT pair_index, name, args, sum(a)::INTEGER AS calls_a, sum(b)::INTEGER AS calls_b
        FROM (SELECT pair_index, name_a AS name, args_a AS args, 1 AS a, 0 AS b
              FROM _cmp_call_pos WHERE in_a
              UNION ALL
              SELECT pair_index, name_b, args_b, 0, 1 FROM _cmp_call_pos WHERE in_b)
        GROUP BY pair_index, name, args
        """
    )


def _pair_runs(con: CompareConnection) -> None:
    """``_cmp_pair_runs``: each pair (every column of ``_cmp_pairs``) with both runs' run-level
    features side by side."""
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE _cmp_pair_runs AS
        SELECT p.*,
               ra.status AS status_a, rb.status AS status_b,
               ra.response_length AS response_length_a, rb.response_length AS response_length_b,
               ra.tool_call_count AS tool_calls_a, rb.tool_call_count AS tool_calls_b,
               ra.policy_count AS policy_count_a, rb.policy_count AS policy_count_b,
               ra.guardrail_count AS guardrail_count_a, rb.guardrail_count AS guardrail_count_b,
               ra.response_key <> rb.response_key AS response_differs,
               ra.metadata_key <> rb.metadata_key AS metadata_differs,
               ra.calls_full_key <> rb.calls_full_key AS calls_differ,
               ra.policy_seq_key <> rb.policy_seq_key AS policy_differ,
               ra.guardrails_seq_key <> rb.guardrails_seq_key AS guardrails_differ
        FROM _cmp_pairs p
        JOIN cmp_run_features ra ON ra.feature_id = p.a_fid
        JOIN cmp_run_features rb ON rb.feature_id = p.b_fid
        """
    )


def compare_pairs(
    con: CompareConnection,
    sections: set[str],
    ignore: IgnoreSpec | None = None,
    response_match_mode: str = "exact",
) -> None:
    """Compare every pair of ``_cmp_pairs`` and write ``_cmp_result`` (see module docstring).

    ``sections`` is the resolved set of compared aioc sections (``resolve_sections``); sections in
    ``ignore.sections`` are dropped too. With an empty ``ignore`` the result equals
    ``compare_records``; otherwise it equals ``compare_records`` on ``strip_record`` copies.
    Pairs whose whole tool-call (or policy, guardrail) sequences have equal keys skip the
    positional comparison of that section: they have no differences there.
    """
    ignore = ignore or IgnoreSpec()
    carried = [d[0] for d in con.execute("SELECT * FROM _cmp_pairs LIMIT 0").description]
    on = {
        s: s in sections and s not in ignore.sections
        for s in ("response", "toolCalls", "policy", "guardrails", "metadata")
    }
    on["response"] = on["response"] and response_match_mode == "exact"
    _pair_runs(con)
    _align_calls(con, compare_outputs=not ignore.tool_output)
    _multiset(con)
    _align_entries(con, ignore)
    calls, policy, guards, meta, resp = (
        _sql_bool(on[s]) for s in ("toolCalls", "policy", "guardrails", "metadata", "response")
    )
    metadata_diff = "f.metadata_differs"
    if ignore.metadata_keys:
        metadata_diff = "ma.fp <> mb.fp"
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _cmp_result AS
        WITH pos AS (
            SELECT pair_index,
                   count(*) FILTER (WHERE NOT (in_a AND in_b)) AS missing_positions,
                   count(*) FILTER (WHERE name_diff) AS name_diffs,
                   count(*) FILTER (WHERE args_diff) AS args_diffs,
                   count(*) FILTER (WHERE has_output_diff) AS has_output_diffs,
                   count(*) FILTER (WHERE output_diff) AS output_diffs,
                   min(call_index) FILTER (WHERE diverged) AS first_divergence_index,
                   arg_min_null(name_a, call_index) FILTER (WHERE diverged)
                       AS first_divergence_tool_a,
                   arg_min_null(name_b, call_index) FILTER (WHERE diverged)
                       AS first_divergence_tool_b
            FROM _cmp_call_pos GROUP BY pair_index
        ),
        multiset AS (
            SELECT pair_index, sum(least(calls_a, calls_b)) AS matched
            FROM _cmp_multiset GROUP BY pair_index
        ),
        entries AS (
            SELECT pair_index,
                   count(*) FILTER (WHERE section = 'policy') AS policy_diffs,
                   count(*) FILTER (WHERE section = 'guardrails') AS guardrail_diffs
            FROM _cmp_entry_diff GROUP BY pair_index
        ),
        {
            "meta AS (" + _metadata_fingerprints(ignore.metadata_keys) + "),"
            if ignore.metadata_keys
            else ""
        }
        flags AS (
            SELECT f.*,
                   (CASE WHEN f.calls_differ THEN coalesce(ms.matched, 0) ELSE f.tool_calls_a END)
                       ::INTEGER AS matched_tool_calls,
                   {resp} AND f.response_differs AS response_diff,
                   {calls} AND f.tool_calls_a <> f.tool_calls_b AS calls_length_diff,
                   {calls} AND coalesce(pos.missing_positions + pos.name_diffs + pos.args_diffs, 0)
                       > 0 AS calls_shape_diff,
                   CASE WHEN {calls} THEN coalesce(pos.missing_positions + pos.name_diffs
                        + pos.args_diffs + pos.has_output_diffs + pos.output_diffs, 0)
                        ELSE 0 END AS call_position_diffs,
                   {calls} AND coalesce(pos.has_output_diffs + pos.output_diffs, 0) > 0
                       AS outputs_diff,
                   {policy} AND f.policy_count_a <> f.policy_count_b AS policy_length_diff,
                   CASE WHEN {policy} THEN coalesce(en.policy_diffs, 0) ELSE 0 END AS policy_diffs,
                   {guards} AND f.guardrail_count_a <> f.guardrail_count_b
                       AS guardrail_length_diff,
                   CASE WHEN {guards} THEN coalesce(en.guardrail_diffs, 0) ELSE 0 END
                       AS guardrail_diffs,
                   {meta} AND {metadata_diff} AS metadata_diff,
                   pos.first_divergence_index, pos.first_divergence_tool_a,
                   pos.first_divergence_tool_b
            FROM _cmp_pair_runs f
            {
            "JOIN meta ma ON ma.feature_id = f.a_fid JOIN meta mb ON mb.feature_id = f.b_fid"
            if ignore.metadata_keys
            else ""
        }
            LEFT JOIN pos USING (pair_index)
            LEFT JOIN multiset ms USING (pair_index)
            LEFT JOIN entries en USING (pair_index)
        )
        SELECT {", ".join(f"f.{name}" for name in carried)},
               (f.response_diff::INTEGER + f.calls_length_diff::INTEGER + f.call_position_diffs
                + f.policy_length_diff::INTEGER + f.policy_diffs
                + f.guardrail_length_diff::INTEGER + f.guardrail_diffs
                + f.metadata_diff::INTEGER) = 0 AS equal,
               NOT f.response_diff AS same_final_response,
               NOT (f.calls_length_diff OR f.calls_shape_diff) AS same_tool_call_shape,
               NOT (f.policy_length_diff OR f.policy_diffs > 0) AS same_policy_decisions,
               NOT (f.guardrail_length_diff OR f.guardrail_diffs > 0) AS same_guardrail_decisions,
               NOT f.metadata_diff AS same_metadata,
               NOT f.outputs_diff AS same_tool_outputs,
               f.response_length_a, f.response_length_b, f.tool_calls_a, f.tool_calls_b,
               f.matched_tool_calls,
               (f.tool_calls_a - f.matched_tool_calls)::INTEGER AS missing_tool_calls,
               (f.tool_calls_b - f.matched_tool_calls)::INTEGER AS extra_tool_calls,
               (f.response_diff::INTEGER + f.calls_length_diff::INTEGER + f.call_position_diffs
                + f.policy_length_diff::INTEGER + f.policy_diffs
                + f.guardrail_length_diff::INTEGER + f.guardrail_diffs
                + f.metadata_diff::INTEGER)::INTEGER AS difference_count,
               f.first_divergence_index::INTEGER AS first_divergence_index,
               f.first_divergence_tool_a, f.first_divergence_tool_b,
               f.status_a, f.status_b
        FROM flags f
        """
    )
