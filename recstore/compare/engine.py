"""Set-based per-pair comparison: aioc ``compareRunRecords`` as DuckDB SQL over feature rows.

Input is a temp table ``_cmp_pairs(pair_index, a_fid, b_fid)`` of feature ids
(:mod:`recstore.compare.features`). :func:`compare_pairs` creates three temp tables:

* ``_cmp_call_pos`` — tool calls aligned by position (one row per index of either side);
* ``_cmp_entry_pos`` — policy and guardrail entries aligned by position;
* ``_cmp_result`` — one row per pair: the summary flags, metrics and ``difference_count`` that
  ``compare_records`` gives for the same pair (``equal`` is ``difference_count = 0``), plus the
  first divergence of the tool-call sequence and both run statuses.

Every join is on hashes of canonical JSON, so equality is aioc's; there is no per-record Python.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from recstore.canonical import canonical_json
from recstore.compare.ignore import IgnoreSpec

__all__ = ["RESULT_COLUMNS", "compare_pairs"]

# Columns of _cmp_result besides pair_index, in the order comparison_pairs stores them.
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


def _sql_bool(flag: bool) -> str:
    return "TRUE" if flag else "FALSE"


def _field_list(fields: Iterable[str]) -> str:
    """A SQL list literal of field names as stored (canonical JSON strings)."""
    quoted = ("'" + canonical_json(f).replace("'", "''") + "'" for f in sorted(fields))
    return "[" + ", ".join(quoted) + "]::VARCHAR[]"


def _align_calls(con: Any, compare_outputs: bool) -> None:
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE _cmp_call_pos AS
        WITH a AS (SELECT p.pair_index, c.* FROM _cmp_pairs p
                   JOIN cmp_call_features c ON c.feature_id = p.a_fid),
             b AS (SELECT p.pair_index, c.* FROM _cmp_pairs p
                   JOIN cmp_call_features c ON c.feature_id = p.b_fid)
        SELECT coalesce(a.pair_index, b.pair_index) AS pair_index,
               coalesce(a.call_index, b.call_index) AS call_index,
               a.call_index IS NOT NULL AS in_a,
               b.call_index IS NOT NULL AS in_b,
               a.name AS name_a, b.name AS name_b,
               a.args_hash AS args_a, b.args_hash AS args_b,
               a.has_output AS has_output_a, b.has_output AS has_output_b,
               a.output_hash AS output_a, b.output_hash AS output_b
        FROM a FULL OUTER JOIN b
          ON a.pair_index = b.pair_index AND a.call_index = b.call_index
        """
    )
    # Derived per-position flags, in aioc's order of checks (§5 step 4).
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _cmp_call_pos AS
        SELECT *,
               in_a AND in_b AND name_a IS DISTINCT FROM name_b AS name_diff,
               in_a AND in_b AND args_a <> args_b AS args_diff,
               in_a AND in_b AND has_output_a <> has_output_b AS has_output_diff,
               {_sql_bool(compare_outputs)} AND in_a AND in_b AND has_output_a AND has_output_b
                   AND output_a <> output_b AS output_diff,
               NOT (in_a AND in_b) OR name_a IS DISTINCT FROM name_b OR args_a <> args_b
                   AS diverged
        FROM _cmp_call_pos
        """
    )


def _fingerprints(section_fields: dict[str, frozenset[str]]) -> str:
    """SQL for entry fingerprints with ignored top-level fields left out.

    Two objects are canonically equal exactly when they have the same keys with canonically
    equal values, so an md5 over the sorted (key, value hash) pairs that remain decides equality
    of the entries minus the ignored fields. Non-object entries keep their whole-entry hash.
    """
    filters = " OR ".join(
        f"(section = '{section}' AND NOT list_contains({_field_list(fields)}, field))"
        for section, fields in section_fields.items()
    )
    return f"""
        SELECT feature_id, section, entry_index,
               md5(string_agg(field || ':' || value_hash, ',' ORDER BY field)) AS fp
        FROM cmp_field_features
        WHERE feature_id IN (SELECT a_fid FROM _cmp_pairs UNION SELECT b_fid FROM _cmp_pairs)
          AND ({filters})
        GROUP BY ALL
    """


def _align_entries(con: Any, ignore: IgnoreSpec) -> None:
    ignored = {
        s: f
        for s, f in (("policy", ignore.policy_fields), ("guardrails", ignore.guardrail_fields))
        if f
    }
    if ignored:
        sections = ", ".join(f"'{s}'" for s in ignored)
        entries = f"""
            SELECT e.*, CASE WHEN e.is_object AND e.section IN ({sections})
                             THEN coalesce(f.fp, md5('')) ELSE e.entry_hash END AS fp
            FROM cmp_entry_features e
            LEFT JOIN ({_fingerprints(ignored)}) f USING (feature_id, section, entry_index)
        """
    else:
        entries = "SELECT *, entry_hash AS fp FROM cmp_entry_features"
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _cmp_entry_pos AS
        WITH e AS ({entries}),
             a AS (SELECT p.pair_index, e.* FROM _cmp_pairs p JOIN e ON e.feature_id = p.a_fid),
             b AS (SELECT p.pair_index, e.* FROM _cmp_pairs p JOIN e ON e.feature_id = p.b_fid)
        SELECT coalesce(a.pair_index, b.pair_index) AS pair_index,
               coalesce(a.section, b.section) AS section,
               coalesce(a.entry_index, b.entry_index) AS entry_index,
               a.entry_index IS NOT NULL AS in_a,
               b.entry_index IS NOT NULL AS in_b,
               a.entry_index IS NOT NULL AND b.entry_index IS NOT NULL AND a.fp <> b.fp
                   AS mismatch,
               a.decision AS decision_a, b.decision AS decision_b,
               a.reason AS reason_a, b.reason AS reason_b,
               coalesce(a.resource_kind, b.resource_kind) AS resource_kind,
               coalesce(a.resource_name, b.resource_name) AS resource_name
        FROM a FULL OUTER JOIN b
          ON a.pair_index = b.pair_index AND a.section = b.section
         AND a.entry_index = b.entry_index
        """
    )


def _metadata_fingerprints(ignore: IgnoreSpec) -> str:
    if not ignore.metadata_keys:
        return "SELECT feature_id, metadata_hash AS fp FROM cmp_run_features"
    return f"""
        SELECT r.feature_id,
               CASE WHEN r.metadata_is_object THEN coalesce(f.fp, md5(''))
                    ELSE r.metadata_hash END AS fp
        FROM cmp_run_features r
        LEFT JOIN ({_fingerprints({"metadata": ignore.metadata_keys})}) f USING (feature_id)
    """


def compare_pairs(
    con: Any,
    sections: set[str],
    ignore: IgnoreSpec | None = None,
    response_match_mode: str = "exact",
) -> None:
    """Compare every pair of ``_cmp_pairs`` and write ``_cmp_result`` (see module docstring).

    ``sections`` is the resolved set of compared aioc sections (``resolve_sections``); sections in
    ``ignore.sections`` are dropped too. With an empty ``ignore`` the result equals
    ``compare_records``; otherwise it equals ``compare_records`` on ``strip_record`` copies.
    """
    ignore = ignore or IgnoreSpec()
    on = {
        s: s in sections and s not in ignore.sections
        for s in ("response", "toolCalls", "policy", "guardrails", "metadata")
    }
    on["response"] = on["response"] and response_match_mode == "exact"
    _align_calls(con, compare_outputs=not ignore.tool_output)
    _align_entries(con, ignore)
    calls, policy, guards, meta, resp = (
        _sql_bool(on[s]) for s in ("toolCalls", "policy", "guardrails", "metadata", "response")
    )
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
                   min(call_index) FILTER (WHERE diverged) AS first_divergence_index
            FROM _cmp_call_pos GROUP BY pair_index
        ),
        multiset AS (
            SELECT pair_index, sum(least(l, r)) AS matched
            FROM (SELECT pair_index, name, args, sum(in_a_n) AS l, sum(in_b_n) AS r
                  FROM (SELECT pair_index, name_a AS name, args_a AS args, 1 AS in_a_n, 0 AS in_b_n
                        FROM _cmp_call_pos WHERE in_a
                        UNION ALL
                        SELECT pair_index, name_b, args_b, 0, 1 FROM _cmp_call_pos WHERE in_b)
                  GROUP BY pair_index, name, args)
            GROUP BY pair_index
        ),
        entries AS (
            SELECT pair_index,
                   count(*) FILTER (WHERE section = 'policy' AND (mismatch OR NOT (in_a AND in_b)))
                       AS policy_diffs,
                   count(*) FILTER (WHERE section = 'guardrails'
                                    AND (mismatch OR NOT (in_a AND in_b))) AS guardrail_diffs
            FROM _cmp_entry_pos GROUP BY pair_index
        ),
        meta AS ({_metadata_fingerprints(ignore)}),
        flags AS (
            SELECT p.pair_index,
                   ra.response_length AS response_length_a, rb.response_length AS response_length_b,
                   ra.tool_call_count AS tool_calls_a, rb.tool_call_count AS tool_calls_b,
                   coalesce(ms.matched, 0)::INTEGER AS matched_tool_calls,
                   {resp} AND ra.response_hash <> rb.response_hash AS response_diff,
                   {calls} AND ra.tool_call_count <> rb.tool_call_count AS calls_length_diff,
                   {calls} AND coalesce(pos.missing_positions + pos.name_diffs + pos.args_diffs, 0)
                       > 0 AS calls_shape_diff,
                   CASE WHEN {calls} THEN coalesce(pos.missing_positions + pos.name_diffs
                        + pos.args_diffs + pos.has_output_diffs + pos.output_diffs, 0)
                        ELSE 0 END AS call_position_diffs,
                   {calls} AND coalesce(pos.has_output_diffs + pos.output_diffs, 0) > 0
                       AS outputs_diff,
                   {policy} AND ra.policy_count <> rb.policy_count AS policy_length_diff,
                   CASE WHEN {policy} THEN coalesce(en.policy_diffs, 0) ELSE 0 END AS policy_diffs,
                   {guards} AND ra.guardrail_count <> rb.guardrail_count AS guardrail_length_diff,
                   CASE WHEN {guards} THEN coalesce(en.guardrail_diffs, 0) ELSE 0 END
                       AS guardrail_diffs,
                   {meta} AND ma.fp <> mb.fp AS metadata_diff,
                   pos.first_divergence_index,
                   ra.status AS status_a, rb.status AS status_b
            FROM _cmp_pairs p
            JOIN cmp_run_features ra ON ra.feature_id = p.a_fid
            JOIN cmp_run_features rb ON rb.feature_id = p.b_fid
            JOIN meta ma ON ma.feature_id = p.a_fid
            JOIN meta mb ON mb.feature_id = p.b_fid
            LEFT JOIN pos USING (pair_index)
            LEFT JOIN multiset ms USING (pair_index)
            LEFT JOIN entries en USING (pair_index)
        )
        SELECT f.pair_index,
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
               c.name_a AS first_divergence_tool_a,
               c.name_b AS first_divergence_tool_b,
               f.status_a, f.status_b
        FROM flags f
        LEFT JOIN _cmp_call_pos c
          ON c.pair_index = f.pair_index AND c.call_index = f.first_divergence_index
        ORDER BY f.pair_index
        """
    )
