"""What changed across all pairs of a comparison, computed in SQL over the engine's temp tables.

:func:`classify` adds a pass/warn/fail ``classification`` to ``_cmp_result`` (view ``_cmp_classified``) with a
:class:`ClassificationRule`; the default is aioc's ``summarizeRunRegressionResults`` rule (without
a judge): **fail** when the candidate run failed, else **warn** when the comparison is not equal,
else **pass** (docs/aioc-runrecord.md §7.1) — with one exception: a pair whose two runs failed
the same way (both ``failed``, no difference under the compare options: an exact reproduction of
a failed run) is **still_failing**, counted apart from pass/warn/fail and not failing the gate,
since reproducing a failure is not a regression. ``--fail-on candidateFailed`` (every candidate
failure fails, as aioc) or ``stillFailing`` restores failing them. A configurable rule names the
signals that fail or warn (``--fail-on``, ``--warn-on``; :data:`SIGNALS`); a pair no rule fails
that is still failing stays ``still_failing``.

:func:`aggregate` returns the report: pairs equal/changed per summary flag, status flips, per-tool
drift (calls added, removed, with changed arguments), the first point of divergence of the
tool-call sequence, the response change rate, policy outcome changes by resource and reason, the
classification counts, and paired statistics (McNemar on pass/fail flips, the Wilson 95% interval
of the change rate, none for 0 pairs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recstore.compare.connection import CompareConnection
from recstore.compare.stats import mcnemar_exact, wilson_interval
from recstore.errors import InputError

__all__ = ["CLASSES", "DEFAULT_RULE", "SIGNALS", "ClassificationRule", "aggregate", "classify"]

# Both runs failed and the comparison found no difference: the failure reproduced exactly.
_STILL_FAILING = "status_a = 'failed' AND status_b = 'failed' AND equal"
#: A pair's classification, worst first.
CLASSES = ("fail", "still_failing", "warn", "pass")

# Signal name -> SQL over a _cmp_result row. The first four are aioc's regression signals.
SIGNALS: dict[str, str] = {
    "statusChanged": "status_a IS DISTINCT FROM status_b",
    "toolsChanged": "NOT same_tool_call_shape",
    "policyChanged": "NOT same_policy_decisions",
    "finalOutputChanged": "NOT same_final_response",
    "guardrailsChanged": "NOT same_guardrail_decisions",
    "outputsChanged": "NOT same_tool_outputs",
    "metadataChanged": "NOT same_metadata",
    "changed": "NOT equal",
    "candidateFailed": "status_b = 'failed'",
    "newFailure": f"status_b = 'failed' AND NOT ({_STILL_FAILING})",
    "stillFailing": _STILL_FAILING,
    "regressed": "status_a = 'completed' AND status_b = 'failed'",
}

# (summary column, report name) for the per-flag equal/changed counts.
_FLAGS = [
    ("equal", "equal"),
    ("same_final_response", "sameFinalResponse"),
    ("same_tool_call_shape", "sameToolCallShape"),
    ("same_policy_decisions", "samePolicyDecisions"),
    ("same_guardrail_decisions", "sameGuardrailDecisions"),
    ("same_tool_outputs", "sameToolOutputs"),
    ("same_metadata", "sameMetadata"),
]


@dataclass(frozen=True)
class ClassificationRule:
    """Signals that make a pair ``fail`` (checked first) or ``warn``; otherwise ``pass``."""

    fail_on: tuple[str, ...] = ("newFailure",)
    warn_on: tuple[str, ...] = ("changed",)

    @classmethod
    def parse(cls, fail_on: str | None = None, warn_on: str | None = None) -> ClassificationRule:
        """From comma-separated signal lists (``None`` keeps the default for that level)."""

        def names(text: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
            if text is None:
                return default
            found = tuple(n.strip() for n in text.split(",") if n.strip())
            for name in found:
                if name not in SIGNALS:
                    raise InputError(
                        f"unknown classification signal {name!r} (known: {', '.join(SIGNALS)})"
                    )
            return found

        return cls(names(fail_on, cls.fail_on), names(warn_on, cls.warn_on))

    def sql(self) -> str:
        """CASE expression over a ``_cmp_result`` row giving one of :data:`CLASSES`."""

        def any_of(signals: tuple[str, ...]) -> str:
            return " OR ".join(f"({SIGNALS[s]})" for s in signals) or "FALSE"

        return (
            f"CASE WHEN coalesce({any_of(self.fail_on)}, FALSE) THEN 'fail' "
            f"WHEN coalesce({_STILL_FAILING}, FALSE) THEN 'still_failing' "
            f"WHEN coalesce({any_of(self.warn_on)}, FALSE) THEN 'warn' ELSE 'pass' END"
        )

    def to_dict(self) -> dict[str, list[str]]:
        return {"failOn": list(self.fail_on), "warnOn": list(self.warn_on)}


DEFAULT_RULE = ClassificationRule()


def classify(con: CompareConnection, rule: ClassificationRule = DEFAULT_RULE) -> None:
    """``_cmp_classified``: ``_cmp_result`` plus its ``classification`` column (a view)."""
    con.execute(
        "CREATE OR REPLACE TEMP VIEW _cmp_classified AS "
        f"SELECT *, {rule.sql()} AS classification FROM _cmp_result"
    )


def _rows(con: CompareConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _tool_drift(con: CompareConnection) -> list[dict[str, Any]]:
    """Per tool: calls on each side over all pairs; added, removed and changed-argument calls
    from the pairs whose call sequences differ (the others contribute no drift)."""
    return _rows(
        con,
        """
        WITH calls AS (
            SELECT name, sum(a)::BIGINT AS calls_baseline, sum(b)::BIGINT AS calls_candidate
            FROM (SELECT c.name, 1 AS a, 0 AS b
                  FROM _cmp_pairs p JOIN cmp_call_features c ON c.feature_id = p.a_fid
                  UNION ALL
                  SELECT c.name, 0, 1
                  FROM _cmp_pairs p JOIN cmp_call_features c ON c.feature_id = p.b_fid)
            GROUP BY name
        ),
        drift AS (
            SELECT name, sum(greatest(calls_b - calls_a, 0))::BIGINT AS added,
                   sum(greatest(calls_a - calls_b, 0))::BIGINT AS removed
            FROM _cmp_multiset GROUP BY name
        ),
        changed AS (
            SELECT name_a AS name, count(*) AS changed_args FROM _cmp_call_pos
            WHERE args_diff AND NOT name_diff
            GROUP BY name_a
        )
        SELECT coalesce(t.name, '') AS tool, t.calls_baseline, t.calls_candidate,
               coalesce(d.added, 0)::BIGINT AS added, coalesce(d.removed, 0)::BIGINT AS removed,
               coalesce(c.changed_args, 0)::BIGINT AS changed_args
        FROM calls t
        LEFT JOIN drift d ON d.name IS NOT DISTINCT FROM t.name
        LEFT JOIN changed c ON c.name IS NOT DISTINCT FROM t.name
        -- the output columns (the joined ones are NULL for a tool without drift)
        ORDER BY coalesce(d.added, 0) + coalesce(d.removed, 0) + coalesce(c.changed_args, 0) DESC,
                 tool
        """,
    )


def _divergence(con: CompareConnection, limit: int) -> dict[str, Any]:
    by_index = _rows(
        con,
        "SELECT first_divergence_index AS index, count(*) AS pairs FROM _cmp_classified "
        "WHERE first_divergence_index IS NOT NULL GROUP BY ALL ORDER BY index",
    )
    by_tool = _rows(
        con,
        "SELECT first_divergence_tool_a AS baseline_tool, first_divergence_tool_b AS "
        "candidate_tool, count(*) AS pairs FROM _cmp_classified "
        "WHERE first_divergence_index IS NOT NULL GROUP BY ALL "
        f"ORDER BY pairs DESC, baseline_tool NULLS FIRST, candidate_tool NULLS FIRST LIMIT {limit}",
    )
    diverged = sum(row["pairs"] for row in by_index)
    return {"pairs": diverged, "byIndex": by_index, "byTools": by_tool}


def _policy_changes(con: CompareConnection, limit: int) -> list[dict[str, Any]]:
    """Differing policy positions whose decision or reason changed (or that one side lacks), by
    resource and outcome."""
    return _rows(
        con,
        f"""
        SELECT coalesce(resource_kind_a, resource_kind_b) AS resource_kind,
               coalesce(resource_name_a, resource_name_b) AS resource_name,
               decision_a AS baseline_decision, reason_a AS baseline_reason,
               decision_b AS candidate_decision, reason_b AS candidate_reason,
               count(*) AS changes
        FROM _cmp_entry_diff
        WHERE section = 'policy'
          AND (NOT (in_a AND in_b) OR decision_a IS DISTINCT FROM decision_b
               OR reason_a IS DISTINCT FROM reason_b)
        GROUP BY ALL
        ORDER BY changes DESC, resource_kind, resource_name, baseline_decision NULLS FIRST,
                 candidate_decision NULLS FIRST, baseline_reason NULLS FIRST,
                 candidate_reason NULLS FIRST
        LIMIT {limit}
        """,
    )


def aggregate(con: CompareConnection, *, limit: int = 50) -> dict[str, Any]:
    """The aggregate report of ``_cmp_classified`` (JSON-ready dict)."""
    flag_sql = ", ".join(f"count(*) FILTER (WHERE {col}) AS {col}" for col, _ in _FLAGS)
    totals = _rows(
        con,
        f"""
        SELECT count(*) AS pairs, {flag_sql},
               count(*) FILTER (WHERE classification = 'pass') AS passed,
               count(*) FILTER (WHERE classification = 'warn') AS warned,
               count(*) FILTER (WHERE classification = 'fail') AS failed,
               count(*) FILTER (WHERE classification = 'still_failing') AS still_failing,
               count(*) FILTER (WHERE status_a = 'completed' AND status_b = 'failed') AS regressed,
               count(*) FILTER (WHERE status_a = 'failed' AND status_b = 'completed') AS fixed
        FROM _cmp_classified
        """,
    )[0]
    pairs = totals["pairs"]
    flags = {name: {"equal": totals[col], "changed": pairs - totals[col]} for col, name in _FLAGS}
    status_flips = _rows(
        con,
        "SELECT status_a AS baseline, status_b AS candidate, count(*) AS pairs FROM _cmp_classified "
        "WHERE status_a IS DISTINCT FROM status_b GROUP BY ALL "
        "ORDER BY pairs DESC, baseline NULLS FIRST, candidate NULLS FIRST",
    )
    changed = pairs - totals["equal"]
    response_changed = flags["sameFinalResponse"]["changed"]
    change_ci = wilson_interval(changed, pairs)
    return {
        "pairs": pairs,
        "flags": flags,
        "classification": {
            "pass": totals["passed"],
            "warn": totals["warned"],
            "fail": totals["failed"],
            "still_failing": totals["still_failing"],
        },
        "statusFlips": status_flips,
        "changeRate": {
            "rate": changed / pairs if pairs else 0.0,
            "ci95": None if change_ci is None else list(change_ci),
            "interval": "wilson",
        },
        "responseChangeRate": response_changed / pairs if pairs else 0.0,
        "mcnemar": {
            "baselinePassedCandidateFailed": totals["regressed"],
            "baselineFailedCandidatePassed": totals["fixed"],
            "pValue": mcnemar_exact(totals["regressed"], totals["fixed"]),
            "outcome": "run status: completed = pass, failed = fail",
        },
        "tools": _tool_drift(con),
        "firstDivergence": _divergence(con, limit),
        "policyOutcomeChanges": _policy_changes(con, limit),
    }
