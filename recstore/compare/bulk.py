"""Library entry points: :func:`bulk_compare` (thousands of pairs, set-based, recorded),
:func:`stored_pairs` (a recorded comparison's rows) and :func:`compare_stored` (two stored runs,
the full aioc differences list).

Example (needs a store with both run sets)::

    from recstore.store import Store
    c = bulk_compare(Store("runs.duckdb"), baseline="tag.set = 'baseline'",
                     candidate="tag.set = 'candidate'", pair_by="metadata.caseId")
    c.aggregate["flags"]["equal"], c.failed   # ({'equal': 12, 'changed': 588}, False)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from recstore.canonical import canonical_json
from recstore.compare.aggregate import DEFAULT_RULE, ClassificationRule, aggregate, classify
from recstore.compare.connection import CompareConnection
from recstore.compare.engine import RESULT_COLUMNS, compare_pairs
from recstore.compare.features import resolve_features
from recstore.compare.ignore import IgnoreSpec, parse_ignore, strip_record
from recstore.compare.pairing import PairBy, pair_explicit, pair_runs
from recstore.errors import EmptySelectionError, InputError, NotFoundError, UnpairedRunsError
from recstore.progress import NO_PROGRESS, Progress
from recstore.query import select_gate_run_sets
from recstore.records import compare_records, resolve_sections
from recstore.store import Store
from recstore.store.tables import registered

__all__ = [
    "DEFAULT_MAX_UNPAIRED",
    "PAIR_COLUMNS",
    "Comparison",
    "aioc_result",
    "bulk_compare",
    "compare_pair",
    "compare_stored",
    "stored_pairs",
]

#: The share of a side's runs that may go unpaired before a comparison stops vouching for its
#: selection (``--max-unpaired``). 0: a gate passes only when every selected run was compared.
DEFAULT_MAX_UNPAIRED = 0.0
# Unpaired reasons that mean a run was not compared at all (duplicates are other runs of a key).
_UNPAIRED_REASONS = ("no_key", "no_match")

# One side of an explicit pair: a run reference (its current revision) or (reference, revision).
RunSide = str | tuple[str, int]

# Per-pair columns of a comparison, as the comparison_pairs view shows them and exports write.
PAIR_COLUMNS = [
    "pair_index",
    "pair_key",
    "baseline_run_key",
    "candidate_run_key",
    "baseline_revision",
    "candidate_revision",
    "baseline_record_hash",
    "candidate_record_hash",
    *RESULT_COLUMNS,
    "classification",
]
# What cmp_pairs stores of a result besides the pair's identity (its revisions are seqs).
_STORED_RESULTS = ", ".join([*RESULT_COLUMNS, "classification"])


def aioc_result(row: dict[str, Any]) -> dict[str, Any]:
    """A per-pair row in ``compare_records``' shape: ``{equal, summary, metrics}``."""
    return {
        "equal": row["equal"],
        "summary": {
            "sameFinalResponse": row["same_final_response"],
            "sameToolCallShape": row["same_tool_call_shape"],
            "samePolicyDecisions": row["same_policy_decisions"],
            "sameGuardrailDecisions": row["same_guardrail_decisions"],
        },
        "metrics": {
            "responseLengthA": row["response_length_a"],
            "responseLengthB": row["response_length_b"],
            "toolCallsA": row["tool_calls_a"],
            "toolCallsB": row["tool_calls_b"],
            "matchedToolCalls": row["matched_tool_calls"],
            "missingToolCalls": row["missing_tool_calls"],
            "extraToolCalls": row["extra_tool_calls"],
        },
    }


@dataclass
class Comparison:
    """A finished bulk comparison: options, pairing outcome, per-pair rows and the aggregate."""

    comparison_id: int | None
    baseline_filter: str | None
    candidate_filter: str | None
    pair_by: str
    duplicates: str
    sections: list[str]
    ignore: list[str]
    rule: ClassificationRule
    snapshot_seq: int
    pair_count: int
    unpaired: list[dict[str, Any]] = field(default_factory=list)
    aggregate: dict[str, Any] = field(default_factory=dict)
    selected: dict[str, int] = field(default_factory=dict)  # runs selected per side
    # The per-pair rows: given, or (a recorded comparison) read from the store on first use.
    rows: pa.Table | None = field(default=None, repr=False)
    store: Store | None = field(default=None, repr=False)

    @property
    def pairs(self) -> pa.Table:
        """Per-pair rows (:data:`PAIR_COLUMNS`) in pair order, as an Arrow table. A recorded
        comparison keeps them in the store until they are first asked for."""
        if self.rows is None:
            if self.store is None or self.comparison_id is None:
                raise ValueError("this comparison has neither its pair rows nor a store")
            self.rows = stored_pairs(self.store, self.comparison_id)
        return self.rows

    @property
    def failed(self) -> bool:
        """True when any pair classified as ``fail`` (the CI gate: exit status 1)."""
        return bool(self.aggregate.get("classification", {}).get("fail", 0) > 0)

    def unpaired_counts(self) -> dict[str, int]:
        """Runs compared in no pair, per side, and the duplicate runs (``--duplicates``)."""
        counts = {"baseline": 0, "candidate": 0, "duplicates": 0}
        for row in self.unpaired:
            counts[row["side"] if row["reason"] in _UNPAIRED_REASONS else "duplicates"] += 1
        return counts

    def coverage(self) -> dict[str, Any]:
        """Per side: runs selected, runs left unpaired and their share (0.0 when none)."""
        counts = self.unpaired_counts()
        return {
            side: {
                "selected": self.selected.get(side, 0),
                "unpaired": counts[side],
                "unpairedFraction": counts[side] / self.selected[side]
                if self.selected.get(side) else 0.0,
            }
            for side in ("baseline", "candidate")
        }

    def unpaired_error(self, max_unpaired: float = DEFAULT_MAX_UNPAIRED) -> UnpairedRunsError | None:
        """The error a gate raises when a side left more than ``max_unpaired`` (a fraction) of its
        runs unpaired, else None. A comparison without pairs returns None: it exists only when
        ``bulk_compare(allow_empty=True)`` accepted it."""
        if not self.pair_count:
            return None
        over = [(side, c) for side, c in self.coverage().items()
                if c["unpairedFraction"] > max_unpaired]
        if not over:
            return None
        sides = "; ".join(f"{c['unpaired']} of {c['selected']} {side} runs "
                          f"({100 * c['unpairedFraction']:.1f}%)" for side, c in over)
        return UnpairedRunsError(
            f"unpaired runs: {sides} have no partner by {self.pair_by}, more than "
            f"`max_unpaired` {max_unpaired:g} allows; they were not compared (see the report's "
            "unpaired list)", param="max_unpaired")

    def pair_rows(self) -> list[dict[str, Any]]:
        """Per-pair rows as dicts (``PAIR_COLUMNS``)."""
        rows: list[dict[str, Any]] = self.pairs.to_pylist()
        return rows

    def options(self) -> dict[str, Any]:
        """What was compared and how (recorded with the comparison)."""
        return {
            "baselineFilter": self.baseline_filter,
            "candidateFilter": self.candidate_filter,
            "pairBy": self.pair_by,
            "duplicates": self.duplicates,
            "sections": self.sections,
            "ignore": self.ignore,
            "classification": self.rule.to_dict(),
            "snapshotSeq": self.snapshot_seq,
        }

    def to_dict(self, *, include_pairs: bool = True) -> dict[str, Any]:
        """JSON-ready summary (``--json``)."""
        out = {
            "comparisonId": self.comparison_id,
            "options": self.options(),
            "aggregate": self.aggregate,
            "coverage": self.coverage(),
            "unpaired": self.unpaired,
        }
        if include_pairs:
            out["pairs"] = self.pair_rows()
        return out


def _resolve_refs(con: CompareConnection, refs: Sequence[str]) -> dict[str, str]:
    """Run key of each ref given as a run key or a unique run id (one query for all)."""
    unique = list(dict.fromkeys(refs))
    with registered(con, "_cmp_refs", pa.table({"ref": unique})):
        rows = con.execute(
            "SELECT f.ref, list(DISTINCT r.run_key) FROM _cmp_refs f "
            "JOIN runs r ON r.run_key = f.ref OR r.run_id = f.ref GROUP BY f.ref"
        ).fetchall()
    found = {ref: keys for ref, keys in rows}
    resolved = {}
    for ref in unique:
        keys = found.get(ref)
        if not keys:
            raise NotFoundError(f"no stored run matches {ref!r}")
        if len(keys) > 1 and ref not in keys:
            raise InputError(f"{ref!r} matches several runs ({', '.join(sorted(keys)[:5])})")
        resolved[ref] = ref if ref in keys else keys[0]
    return resolved


def _side(side: RunSide) -> tuple[str, int | None]:
    """``(ref, revision)`` of one side of an explicit pair (``None``: the current revision)."""
    if isinstance(side, str):
        return side, None
    if (
        isinstance(side, tuple)
        and len(side) == 2
        and isinstance(side[0], str)
        and type(side[1]) is int
        and side[1] >= 1
    ):
        return side
    raise InputError(f"a pair side is a run reference or (run reference, revision), not {side!r}")


def _explicit_pairs(con: CompareConnection, pairs: Sequence[tuple[RunSide, RunSide]]) -> None:
    """Resolve explicit pairs (refs to run keys, pinned revisions checked) into
    ``_cmp_pairing``."""
    sides = [_side(side) for a, b in pairs for side in (a, b)]
    keys = _resolve_refs(con, [ref for ref, _ in sides])
    resolved = [(keys[ref], revision) for ref, revision in sides]
    pinned = sorted({side for side in resolved if side[1] is not None})
    if pinned:
        wanted = pa.table({"key": [k for k, _ in pinned], "revision": [r for _, r in pinned]})
        with registered(con, "_cmp_wanted", wanted):
            stored = con.execute(
                "SELECT w.key, w.revision FROM _cmp_wanted w JOIN streams s "
                "ON s.stream_key = w.key AND s.revision = w.revision"
            ).fetchall()
        missing = sorted(set(pinned) - set(stored))
        if missing:
            raise NotFoundError(f"run {missing[0][0]} has no revision {missing[0][1]}")
    pair_explicit(con, list(zip(resolved[::2], resolved[1::2], strict=True)))


def _record(con: CompareConnection, comparison: Comparison) -> int:
    """Store the comparison, its pairs and unpaired runs; returns the comparison id."""
    ((comparison_id,),) = con.execute("SELECT nextval('cmp_comparison_seq')").fetchall()
    assert isinstance(comparison_id, int)
    unpaired_counts = comparison.unpaired_counts()
    con.execute(
        "INSERT INTO cmp_comparisons VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            comparison_id,
            datetime.now(UTC).replace(tzinfo=None),
            comparison.baseline_filter,
            comparison.candidate_filter,
            comparison.pair_by,
            comparison.duplicates,
            json.dumps(comparison.sections),
            json.dumps(comparison.ignore),
            json.dumps(comparison.rule.to_dict()),
            comparison.snapshot_seq,
            comparison.pair_count,
            unpaired_counts["baseline"],
            unpaired_counts["candidate"],
            unpaired_counts["duplicates"],
            comparison.aggregate["classification"]["fail"],
            canonical_json(comparison.aggregate),
        ],
    )
    con.execute(
        f"INSERT INTO cmp_pairs (comparison_id, pair_index, pair_key, baseline_seq, "
        f"candidate_seq, {_STORED_RESULTS}) "
        f"SELECT ?, pair_index, pair_key, a_seq, b_seq, {_STORED_RESULTS} "
        "FROM _cmp_classified JOIN _cmp_pairing USING (pair_index)",
        [comparison_id],
    )
    con.execute(
        "INSERT INTO cmp_unpaired SELECT ?, side, run_key, pair_key, reason FROM _cmp_unpaired_runs",
        [comparison_id],
    )
    return comparison_id


def bulk_compare(
    store: Store,
    baseline: str | None = None,
    candidate: str | None = None,
    *,
    pair_by: str = "metadata.caseId",
    pairs: Sequence[tuple[RunSide, RunSide]] | None = None,
    ignore: Iterable[str] = (),
    preset: str | None = None,
    include_sections: Iterable[str] | None = None,
    exclude_sections: Iterable[str] | None = None,
    duplicates: str = "latest",
    rule: ClassificationRule = DEFAULT_RULE,
    record: bool = True,
    allow_empty: bool = False,
    progress: Progress = NO_PROGRESS,
) -> Comparison:
    """Compare a baseline run set with a candidate run set, pair by pair, in SQL.

    The sets are DSL filters (``recstore.query``; ``None`` = every run) paired by ``pair_by``
    (``metadata.<path>``, ``question``, ``input_scope`` or ``lineage``), or an explicit list of
    ``(baseline, candidate)`` pairs, each side a run reference (run key or run id: its current
    revision) or ``(reference, revision)``, which pins an older revision. Per pair,
    ``equal``/summary/metrics equal ``compare_records`` with the same sections;
    ``ignore``/``preset`` leave fields out (:mod:`recstore.compare.ignore`). With ``record`` the
    comparison is stored in ``comparisons``/``comparison_pairs``/``comparison_unpaired`` with the
    store's last event seq, and its pair rows are read back from there when first asked for.

    A gate must not pass on nothing: a side that selects no runs, or sides that form no pair,
    raise :class:`~recstore.errors.EmptySelectionError` unless ``allow_empty``. Runs left unpaired
    are in ``unpaired`` and ``coverage()``; ``unpaired_error(max_unpaired)`` says whether a gate
    should stop on them.

    Raises:
        InputError: bad options or filters. NotFoundError: an explicit pair names no stored run
        or revision. EmptySelectionError: an empty side, or no pairs (unless ``allow_empty``).
    """
    spec, sections = compared_sections(ignore, preset, include_sections, exclude_sections)
    if pairs is None:
        rule_text = str(PairBy.parse(pair_by))
        selections = select_gate_run_sets(
            store,
            [(f"the {side} filter", text or "")
             for side, text in (("baseline", baseline), ("candidate", candidate))],
            allow_empty=allow_empty,
        )
    else:
        rule_text, selections = "explicit", None
    with store.writer() as con:
        # Every statement below handles at most a few hundred thousand rows, mostly one row
        # group each: a second thread costs DuckDB more than it brings (at 100k pairs, 0.85 s
        # of CPU with one thread against 1.01 s with two, and less wall time too).
        con.execute("SET threads = 1")
        if selections is None:
            assert pairs is not None
            _explicit_pairs(con, pairs)
        else:
            pair_selected(con, selections, pair_by, duplicates, allow_empty)
        resolve_features(con, spec.needs_fields(), progress)
        comparison = compare_paired(
            con,
            baseline,
            candidate,
            pair_by=rule_text,
            duplicates=duplicates,
            sections=sections,
            spec=spec,
            rule=rule,
            selected=_selected_counts(selections, pairs),
        )
        if record:
            comparison.comparison_id = _record(con, comparison)
            comparison.store = store
        else:
            comparison.rows = pair_rows(con)
    return comparison


def compared_sections(ignore: Iterable[str], preset: str | None,
                      include_sections: Iterable[str] | None,
                      exclude_sections: Iterable[str] | None) -> tuple[IgnoreSpec, set[str]]:
    """The ignore spec of ``ignore``/``preset`` and the aioc sections a comparison compares
    (those included, less those excluded or ignored whole): what both engines start from."""
    spec = parse_ignore(ignore, preset)
    return spec, resolve_sections(include_sections, exclude_sections) - spec.sections


def pair_selected(con: CompareConnection, selections: Sequence[Any], pair_by: str, duplicates: str,
                  allow_empty: bool) -> None:
    """Pair the run sets ``selections`` (baseline, candidate: relations of run keys ``con``
    registers, each with ``num_rows``) into ``_cmp_pairing``; raise EmptySelectionError when
    they form no pair, unless ``allow_empty``."""
    rule = PairBy.parse(pair_by)
    pair_runs(con, selections[0], selections[1], rule, duplicates)
    if not allow_empty:
        _require_pairs(con, str(rule), selections)


def compare_paired(
    con: CompareConnection,
    baseline: str | None,
    candidate: str | None,
    *,
    pair_by: str,
    duplicates: str,
    sections: set[str],
    spec: IgnoreSpec,
    rule: ClassificationRule,
    selected: dict[str, int],
) -> Comparison:
    """Compare and classify the pairs of ``_cmp_pairs`` on ``con`` (a DuckDB connection to a
    store, or a :class:`recstore.spark.connection.SparkConnection`): the part of a comparison
    both engines run. The result has no pair rows yet (:func:`pair_rows`) and is not recorded."""
    ((snapshot,),) = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()
    compare_pairs(con, sections, spec)
    classify(con, rule)
    return Comparison(
        comparison_id=None,
        baseline_filter=baseline,
        candidate_filter=candidate,
        pair_by=pair_by,
        duplicates=duplicates,
        sections=sorted(sections),
        ignore=spec.paths(),
        rule=rule,
        snapshot_seq=snapshot,
        pair_count=con.execute("SELECT count(*) FROM _cmp_classified").fetchone()[0],
        unpaired=_unpaired(con),
        aggregate=aggregate(con),
        selected=selected,
    )


def pair_rows(con: CompareConnection) -> pa.Table:
    """Every pair's row (:data:`PAIR_COLUMNS`) in pair order; the record hashes are read from
    the log."""
    return con.sql(
        f"""
        SELECT pair_index, pair_key, a_key AS baseline_run_key, b_key AS candidate_run_key,
               a_revision AS baseline_revision, b_revision AS candidate_revision,
               lower(hex(sa.record_hash)) AS baseline_record_hash,
               lower(hex(sb.record_hash)) AS candidate_record_hash, {_STORED_RESULTS}
        FROM _cmp_classified JOIN _cmp_pairing USING (pair_index)
        JOIN streams sa ON sa.first_seq = a_seq
        JOIN streams sb ON sb.first_seq = b_seq
        ORDER BY pair_index
        """
    ).to_arrow_table()


def stored_pairs(store: Store, comparison_id: int) -> pa.Table:
    """The per-pair rows (:data:`PAIR_COLUMNS`) of a recorded comparison, in pair order."""
    with store.reader() as con:
        return con.sql(
            f"SELECT {', '.join(PAIR_COLUMNS)} FROM comparison_pairs WHERE comparison_id = ? "
            "ORDER BY pair_index",
            params=[comparison_id],
        ).to_arrow_table()


def _unpaired(con: CompareConnection) -> list[dict[str, Any]]:
    cursor = con.execute("SELECT side, run_key, pair_key, reason FROM _cmp_unpaired_runs")
    return [
        dict(zip(("side", "runKey", "pairKey", "reason"), row, strict=True))
        for row in cursor.fetchall()
    ]


def _selected_counts(selections: Sequence[Any] | None,
                     pairs: Sequence[tuple[RunSide, RunSide]] | None) -> dict[str, int]:
    if selections is None:  # explicit pairs: every named run is in a pair
        return {side: len({pair[i] for pair in pairs or ()})
                for i, side in enumerate(("baseline", "candidate"))}
    return {"baseline": selections[0].num_rows, "candidate": selections[1].num_rows}


def _require_pairs(con: CompareConnection, pair_by: str, selections: Sequence[Any]) -> None:
    """EmptySelectionError when two non-empty sides formed no pair (e.g. a wrong --pair-by)."""
    ((paired,),) = con.execute("SELECT count(*) FROM _cmp_pairing").fetchall()
    if paired:
        return
    reasons = dict(con.execute(
        "SELECT reason, count(*) FROM _cmp_unpaired_runs GROUP BY ALL").fetchall())
    detail = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
    raise EmptySelectionError(
        f"0 pairs: {selections[0].num_rows} baseline and {selections[1].num_rows} candidate runs "
        f"share no {pair_by} value ({detail}); nothing would be compared "
        "(`allow_empty` accepts an empty comparison)", what="pairs")


def compare_pair(
    left: dict[str, Any],
    right: dict[str, Any],
    *,
    ignore: Iterable[str] = (),
    preset: str | None = None,
    include_sections: Iterable[str] | None = None,
    exclude_sections: Iterable[str] | None = None,
) -> dict[str, Any]:
    """``compare_records`` with ignore options: the pairwise meaning of every bulk option."""
    spec: IgnoreSpec = parse_ignore(ignore, preset)
    return compare_records(
        strip_record(left, spec),
        strip_record(right, spec),
        include_sections=include_sections,
        exclude_sections=set(exclude_sections or ()) | spec.sections,
    )


def compare_stored(
    store: Store,
    run_a: str,
    run_b: str,
    *,
    ignore: Iterable[str] = (),
    preset: str | None = None,
    include_sections: Iterable[str] | None = None,
    exclude_sections: Iterable[str] | None = None,
) -> dict[str, Any]:
    """The full aioc comparison (differences list included) of two stored runs."""
    return compare_pair(
        store.get_record(run_a),
        store.get_record(run_b),
        ignore=ignore,
        preset=preset,
        include_sections=include_sections,
        exclude_sections=exclude_sections,
    )
