"""Pair baseline runs with candidate runs, in SQL over the store's run projections and lineage.

A pairing rule (:class:`PairBy`) gives every run a key; runs with equal keys on the two sides
form pairs. Nothing is dropped silently: runs without a key, runs whose key has no partner on the
other side, and duplicates of one key on one side are all reported (``Unpaired`` rows) together
with the duplicates rule used:

* ``latest`` keeps, per side and key, the run that started last (ties: the one stored last) and
  reports the others as ``duplicate_dropped``;
* ``all`` pairs every baseline duplicate with every candidate duplicate and reports them as
  ``duplicate_paired``.

With ``latest`` the run kept from a group of duplicates is reported as ``duplicate_kept``.

Keys: ``metadata.<path>`` (e.g. ``metadata.caseId``), ``question``, ``input_scope`` (sha256 of
the canonical JSON of the run's input items), ``lineage`` (a derived run, e.g. a replay, paired
with the run it was derived from).

Example:
    >>> PairBy.parse("metadata.caseId").json_path
    '$."caseId"'
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from recstore.compare.connection import CompareConnection
from recstore.errors import InputError
from recstore.records.keys import key_of
from recstore.store.tables import registered

__all__ = ["DUPLICATE_RULES", "PairBy", "pair_explicit", "pair_runs"]

DUPLICATE_RULES = ("latest", "all")
_EMPTY_SCOPE_KEY = key_of([])  # the input-scope key of a run with no input items
# Lineage relations that mean "derived from that run" (not thread continuations or subagents).
_DERIVED_RELATIONS = ("replay_of", "sweep_case")


@dataclass(frozen=True)
class PairBy:
    """A pairing rule: ``kind`` is metadata | question | input_scope | lineage | explicit."""

    kind: str
    path: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> PairBy:
        """Parse ``--pair-by``. Raises InputError naming the value on anything unknown."""
        head, _, rest = text.strip().partition(".")
        if head == "metadata" and rest:
            return cls("metadata", tuple(rest.split(".")))
        normalized = text.strip().replace("-", "_")
        if normalized in ("question", "input_scope", "lineage"):
            return cls(normalized)
        if normalized in ("inputScope", "input_scope_hash"):
            return cls("input_scope")
        raise InputError(
            f"`pair_by` {text!r}: use metadata.<path>, question, input_scope or lineage",
            param="pair_by")

    def __str__(self) -> str:
        return ".".join(("metadata", *self.path)) if self.kind == "metadata" else self.kind

    @property
    def json_path(self) -> str:
        """DuckDB JSON path of a metadata key (each step quoted, so any key works)."""
        return "$." + ".".join(json.dumps(step) for step in self.path)

    def key_sql(self, side: str) -> str:
        """SQL for the pairing key of run ``r`` on ``side`` (NULL = the run has no key)."""
        if self.kind == "metadata":
            return "json_extract_string(r.metadata, " + _literal(self.json_path) + ")"
        if self.kind == "question":
            return "r.question"
        if self.kind == "input_scope":
            return (
                f"CASE WHEN r.input_item_count = 0 THEN '{_EMPTY_SCOPE_KEY}' "
                "ELSE (SELECT x.prefix_key::VARCHAR FROM proj_input_prefixes x "
                "WHERE x.run_seq = r.first_seq AND x.prefix_len = r.input_item_count) END"
            )
        if side == "baseline":  # lineage: a baseline run is its own key ...
            return "r.run_key"
        relations = ", ".join(_literal(rel) for rel in _DERIVED_RELATIONS)
        return (  # ... and a candidate run carries the key of the run it was derived from
            "(SELECT min(l.parent_run_key) FROM lineage l WHERE l.child_run_key = r.run_key "
            f"AND l.relation IN ({relations}))"
        )


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def pair_runs(
    con: CompareConnection,
    baseline: pa.Table,
    candidate: pa.Table,
    pair_by: PairBy,
    duplicates: str = "latest",
) -> None:
    """Pair two run-key sets (one-column ``run_key`` Arrow tables of distinct keys); writes
    temp tables ``_cmp_pairing(pair_index, pair_key, a_key, b_key, a_rev, b_rev, a_current,
    b_current, a_current_rev, b_current_rev)`` (``*_rev``: a pinned revision, NULL here;
    ``*_current``: the first seq of the run's current revision, ``*_current_rev`` its number)
    and ``_cmp_unpaired_runs(side, run_key, pair_key, reason)``."""
    if duplicates not in DUPLICATE_RULES:
        raise InputError(f"`duplicates` {duplicates!r}: use latest or all", param="duplicates")
    # Keys are computed before the join (the metadata JSON then does not travel through it),
    # once when both sides use the same rule.
    baseline_key, candidate_key = pair_by.key_sql("baseline"), pair_by.key_sql("candidate")
    if candidate_key == baseline_key:
        keys, pair_key = f"{baseline_key} AS pair_key", "r.pair_key"
    else:
        keys = f"{baseline_key} AS baseline_key, {candidate_key} AS candidate_key"
        pair_key = "CASE WHEN s.side = 'baseline' THEN r.baseline_key ELSE r.candidate_key END"
    with registered(con, "_cmp_baseline_in", baseline), registered(
        con, "_cmp_candidate_in", candidate
    ):
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE _cmp_keyed AS
            WITH sides AS (SELECT 'baseline' AS side, run_key FROM _cmp_baseline_in
                           UNION ALL
                           SELECT 'candidate' AS side, run_key FROM _cmp_candidate_in),
            runs AS (
                SELECT run_key, {keys}, started_text, first_seq, last_seq, revision
                FROM proj_runs r
            )
            SELECT s.side, s.run_key, {pair_key} AS pair_key,
                   r.started_text, r.first_seq, r.last_seq, r.revision
            FROM sides s JOIN runs r USING (run_key)
            """
        )
    # Keys that are not one run on each side: the only ones with duplicates or without a
    # partner (usually few, so what follows them costs little).
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE _cmp_odd_keys AS
        SELECT pair_key, count(*) FILTER (WHERE side = 'baseline') AS baseline_runs,
               count(*) FILTER (WHERE side = 'candidate') AS candidate_runs
        FROM _cmp_keyed WHERE pair_key IS NOT NULL GROUP BY pair_key
        HAVING baseline_runs <> 1 OR candidate_runs <> 1
        """
    )
    latest = duplicates == "latest"
    # Runs the latest rule leaves out: all but the one that started last of their side and key.
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _cmp_dropped AS
        SELECT side, run_key FROM (
            SELECT k.side, k.run_key,
                   row_number() OVER (PARTITION BY k.side, k.pair_key
                                      ORDER BY k.started_text DESC NULLS LAST, k.last_seq DESC)
                       AS rank
            FROM _cmp_keyed k SEMI JOIN _cmp_odd_keys USING (pair_key)
            WHERE {"TRUE" if latest else "FALSE"}
        ) WHERE rank > 1
        """
    )
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE _cmp_pairing AS
        SELECT (row_number() OVER (ORDER BY a.pair_key, a.run_key, b.run_key) - 1)::INTEGER
                   AS pair_index,
               a.pair_key, a.run_key AS a_key, b.run_key AS b_key,
               NULL::INTEGER AS a_rev, NULL::INTEGER AS b_rev,
               a.first_seq AS a_current, b.first_seq AS b_current,
               a.revision AS a_current_rev, b.revision AS b_current_rev
        FROM (SELECT * FROM _cmp_keyed ANTI JOIN _cmp_dropped USING (side, run_key)
              WHERE side = 'baseline') a
        JOIN (SELECT * FROM _cmp_keyed ANTI JOIN _cmp_dropped USING (side, run_key)
              WHERE side = 'candidate') b
          ON a.pair_key = b.pair_key
        """
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _cmp_unpaired_runs AS
        SELECT side, run_key, pair_key,
               CASE WHEN pair_key IS NULL THEN 'no_key'
                    WHEN dropped THEN 'duplicate_dropped'
                    WHEN others = 0 THEN 'no_match'
                    ELSE '{"duplicate_kept" if latest else "duplicate_paired"}'
               END AS reason
        FROM (
            SELECT k.side, k.run_key, k.pair_key,
                   CASE WHEN k.side = 'baseline' THEN c.baseline_runs ELSE c.candidate_runs END
                       AS copies,
                   CASE WHEN k.side = 'baseline' THEN c.candidate_runs ELSE c.baseline_runs END
                       AS others,
                   d.run_key IS NOT NULL AS dropped
            FROM _cmp_keyed k JOIN _cmp_odd_keys c USING (pair_key)
            LEFT JOIN _cmp_dropped d ON d.side = k.side AND d.run_key = k.run_key
            UNION ALL
            SELECT side, run_key, NULL, 0, 0, FALSE FROM _cmp_keyed WHERE pair_key IS NULL
        )
        WHERE pair_key IS NULL OR copies > 1 OR others = 0
        ORDER BY side, pair_key, run_key
        """
    )


def pair_explicit(
    con: CompareConnection, pairs: Sequence[tuple[tuple[str, int | None], tuple[str, int | None]]]
) -> None:
    """Pairs given as ``((baseline_run_key, revision), (candidate_run_key, revision))``
    (revision ``None``: the current one), kept in the given order (the same run may appear in
    several pairs, on either side); writes ``_cmp_pairing`` as :func:`pair_runs` does, with no
    pairing key and no unpaired runs."""
    explicit = pa.table(
        {
            "pair_index": list(range(len(pairs))),
            "a_key": [a for (a, _), _ in pairs],
            "b_key": [b for _, (b, _) in pairs],
            "a_rev": [rev for (_, rev), _ in pairs],
            "b_rev": [rev for _, (_, rev) in pairs],
        },
        schema=pa.schema(
            [
                ("pair_index", pa.int32()),
                ("a_key", pa.string()),
                ("b_key", pa.string()),
                ("a_rev", pa.int32()),
                ("b_rev", pa.int32()),
            ]
        ),
    )
    with registered(con, "_cmp_explicit_in", explicit):
        con.execute(
            """
            CREATE OR REPLACE TEMP TABLE _cmp_pairing AS
            SELECT p.pair_index, NULL::VARCHAR AS pair_key, p.a_key, p.b_key, p.a_rev, p.b_rev,
                   ra.first_seq AS a_current, rb.first_seq AS b_current,
                   ra.revision AS a_current_rev, rb.revision AS b_current_rev
            FROM _cmp_explicit_in p
            JOIN proj_runs ra ON ra.run_key = p.a_key
            JOIN proj_runs rb ON rb.run_key = p.b_key
            """
        )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _cmp_unpaired_runs (side VARCHAR, run_key VARCHAR, "
        "pair_key VARCHAR, reason VARCHAR)"
    )
