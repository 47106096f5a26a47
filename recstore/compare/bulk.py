"""Library entry points: :func:`bulk_compare` (thousands of pairs, set-based, recorded) and
:func:`compare_stored` (two stored runs, the full aioc differences list).

Example (needs a store with both run sets)::

    from recstore.store import Store
    c = bulk_compare(Store("runs.duckdb"), baseline="tag.set = 'baseline'",
                     candidate="tag.set = 'candidate'", pair_by="metadata.caseId")
    c.aggregate["flags"]["equal"], c.failed   # ({'equal': 12, 'changed': 588}, False)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from recstore.canonical import canonical_json
from recstore.compare.aggregate import DEFAULT_RULE, ClassificationRule, aggregate, classify
from recstore.compare.engine import RESULT_COLUMNS, compare_pairs
from recstore.compare.features import (
    missing_revisions,
    record_features,
    record_fields,
    store_features,
    store_fields,
)
from recstore.compare.ignore import IgnoreSpec, parse_ignore, strip_record
from recstore.compare.pairing import PairBy, pair_explicit, pair_runs
from recstore.errors import EmptySelectionError, InputError, NotFoundError, UnpairedRunsError
from recstore.formats.events import events_to_record
from recstore.progress import NO_PROGRESS, Progress
from recstore.query import select_gate_runs
from recstore.records import compare_records, resolve_sections
from recstore.store import Store
from recstore.store.agentuse_ingest import stored_record

__all__ = [
    "DEFAULT_MAX_UNPAIRED",
    "PAIR_COLUMNS",
    "Comparison",
    "aioc_result",
    "bulk_compare",
    "compare_pair",
    "compare_stored",
]

# Records reduced to features per round trip (bounds memory on large stores).
_FEATURE_CHUNK = 5000
#: The share of a side's runs that may go unpaired before a comparison stops vouching for its
#: selection (``--max-unpaired``). 0: a gate passes only when every selected run was compared.
DEFAULT_MAX_UNPAIRED = 0.0
# Unpaired reasons that mean a run was not compared at all (duplicates are other runs of a key).
_UNPAIRED_REASONS = ("no_key", "no_match")

# Per-pair columns of a comparison, as stored in comparison_pairs and exported.
PAIR_COLUMNS = [
    "pair_index",
    "pair_key",
    "baseline_run_key",
    "candidate_run_key",
    "baseline_record_hash",
    "candidate_record_hash",
    *RESULT_COLUMNS,
    "classification",
]


def aioc_result(row: dict) -> dict:
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
    pairs: pa.Table
    unpaired: list[dict] = field(default_factory=list)
    aggregate: dict = field(default_factory=dict)
    selected: dict[str, int] = field(default_factory=dict)  # runs selected per side

    @property
    def failed(self) -> bool:
        """True when any pair classified as ``fail`` (the CI gate: exit status 1)."""
        return self.aggregate.get("classification", {}).get("fail", 0) > 0

    def unpaired_counts(self) -> dict[str, int]:
        """Runs compared in no pair, per side, and the duplicate runs (``--duplicates``)."""
        counts = {"baseline": 0, "candidate": 0, "duplicates": 0}
        for row in self.unpaired:
            counts[row["side"] if row["reason"] in _UNPAIRED_REASONS else "duplicates"] += 1
        return counts

    def coverage(self) -> dict:
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
        if not self.pairs.num_rows:
            return None
        over = [(side, c) for side, c in self.coverage().items()
                if c["unpairedFraction"] > max_unpaired]
        if not over:
            return None
        sides = "; ".join(f"{c['unpaired']} of {c['selected']} {side} runs "
                          f"({100 * c['unpairedFraction']:.1f}%)" for side, c in over)
        return UnpairedRunsError(
            f"unpaired runs: {sides} have no partner by {self.pair_by}, more than "
            f"--max-unpaired {max_unpaired:g} allows; they were not compared (see the report's "
            "unpaired list)")

    def pair_rows(self) -> list[dict]:
        """Per-pair rows as dicts (``PAIR_COLUMNS``)."""
        return self.pairs.to_pylist()

    def options(self) -> dict:
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

    def to_dict(self, *, include_pairs: bool = True) -> dict:
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


def _resolve_refs(con: Any, refs: Sequence[str]) -> dict[str, str]:
    """Run key of each ref given as a run key or a unique run id (one query for all)."""
    unique = list(dict.fromkeys(refs))
    con.register("_cmp_refs", pa.table({"ref": unique}))
    try:
        rows = con.execute(
            "SELECT f.ref, list(DISTINCT r.run_key) FROM _cmp_refs f "
            "JOIN runs r ON r.run_key = f.ref OR r.run_id = f.ref GROUP BY f.ref"
        ).fetchall()
    finally:
        con.unregister("_cmp_refs")
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


def stored_records(con: Any, revisions: list[tuple[str, str]]) -> Iterator[tuple[str, str, dict]]:
    """``(run_key, record_hash, record)`` for stored revisions, read in one query per chunk.
    aioc records come back without their prompt snapshots, request fingerprints and suspended
    proposals (empty arrays): everything a comparison reads is there."""
    agentuse = [(k, h) for k, h in revisions if k.startswith("agentuse:")]
    for key, digest in agentuse:
        yield key, digest, stored_record(con, key)
    aioc = [(k, h) for k, h in revisions if not k.startswith("agentuse:")]
    if not aioc:
        return
    con.register(
        "_cmp_load",
        pa.table({"run_key": [k for k, _ in aioc], "record_hash": [h for _, h in aioc]}),
    )
    try:
        cursor = con.execute(
            """
            SELECT s.stream_key, s.record_hash, e.type, e.payload
            FROM _cmp_load l
            JOIN streams s ON s.stream_key = l.run_key AND s.record_hash = l.record_hash
            JOIN events e ON e.seq BETWEEN s.first_seq AND s.last_seq
            -- features never read prompt snapshots, request fingerprints or suspended
            -- proposals: leaving them out of the reassembly saves parsing their payloads
            WHERE e.type NOT IN ('prompt_snapshot', 'request_fingerprint', 'suspended_proposal')
            ORDER BY e.seq
            """
        )
        head: tuple[str, str] | None = None
        events: list[tuple[str, str]] = []
        while batch := cursor.fetchmany(10_000):
            for key, digest, etype, payload in batch:
                if head is not None and head != (key, digest):
                    yield head[0], head[1], events_to_record(events)
                    events = []
                head = (key, digest)
                events.append((etype, payload))
        if head is not None:
            yield head[0], head[1], events_to_record(events)
    finally:
        con.unregister("_cmp_load")


def _ensure_features(con: Any, run_keys: Iterable[str], with_fields: bool,
                     progress: Progress = NO_PROGRESS) -> None:
    """Reduce every current revision of ``run_keys`` that has no feature rows yet, and add field
    rows to the reduced ones that lack them when ``with_fields`` (an ignore of fields);
    ``progress`` follows the records reduced (the comparison itself is one SQL pass)."""
    con.register("_cmp_keys", pa.table({"run_key": list(dict.fromkeys(run_keys))}))
    try:
        revisions = con.execute(
            "SELECT r.run_key, r.record_hash FROM _cmp_keys k JOIN runs r USING (run_key)"
        ).fetchall()
    finally:
        con.unregister("_cmp_keys")
    missing = missing_revisions(con, revisions)
    for start in range(0, len(missing), _FEATURE_CHUNK):
        chunk = missing[start : start + _FEATURE_CHUNK]
        features = [
            record_features(record, run_key=key, record_hash=digest, with_fields=with_fields)
            for key, digest, record in list(stored_records(con, chunk))
        ]
        store_features(con, features)
        progress.update(start + len(chunk), len(missing))
    if with_fields:
        _ensure_fields(con, revisions)


def _ensure_fields(con: Any, revisions: list[tuple[str, str]]) -> None:
    con.register(
        "_cmp_revs",
        pa.table({"run_key": [r[0] for r in revisions], "record_hash": [r[1] for r in revisions]}),
    )
    try:
        lacking = con.execute(
            "SELECT f.run_key, f.record_hash, min(f.feature_id) FROM _cmp_revs r "
            "JOIN cmp_run_features f USING (run_key, record_hash) "
            "GROUP BY ALL HAVING NOT bool_or(f.has_fields) ORDER BY ALL"
        ).fetchall()
    finally:
        con.unregister("_cmp_revs")
    ids = {(key, digest): fid for key, digest, fid in lacking}
    for start in range(0, len(lacking), _FEATURE_CHUNK):
        chunk = [(key, digest) for key, digest, _ in lacking[start : start + _FEATURE_CHUNK]]
        rows = [
            (ids[key, digest], *row)
            for key, digest, record in list(stored_records(con, chunk))
            for row in record_fields(record)
        ]
        store_fields(con, rows, [ids[k] for k in chunk])


def _feature_pairs(con: Any) -> None:
    """``_cmp_pairs`` from ``_cmp_pairing``: feature ids of each side's current revision."""
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE _cmp_revision AS
        SELECT r.run_key, r.record_hash, min(f.feature_id) AS feature_id
        FROM runs r JOIN cmp_run_features f USING (run_key, record_hash)
        WHERE r.run_key IN (SELECT a_key FROM _cmp_pairing UNION SELECT b_key FROM _cmp_pairing)
        GROUP BY ALL
        """
    )
    con.execute(
        """
        CREATE OR REPLACE TEMP TABLE _cmp_pairs AS
        SELECT p.pair_index, p.pair_key, p.a_key, p.b_key,
               ra.record_hash AS a_hash, rb.record_hash AS b_hash,
               ra.feature_id AS a_fid, rb.feature_id AS b_fid
        FROM _cmp_pairing p
        JOIN _cmp_revision ra ON ra.run_key = p.a_key
        JOIN _cmp_revision rb ON rb.run_key = p.b_key
        """
    )


def _record(con: Any, comparison: Comparison) -> int:
    """Store the comparison, its pairs and unpaired runs; returns the comparison id."""
    ((comparison_id,),) = con.execute("SELECT nextval('cmp_comparison_seq')").fetchall()
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
            comparison.pairs.num_rows,
            unpaired_counts["baseline"],
            unpaired_counts["candidate"],
            unpaired_counts["duplicates"],
            comparison.aggregate["classification"]["fail"],
            canonical_json(comparison.aggregate),
        ],
    )
    con.execute(
        f"INSERT INTO cmp_pairs (comparison_id, {', '.join(PAIR_COLUMNS)}) "
        f"SELECT ?, {', '.join(PAIR_COLUMNS)} FROM _cmp_pair_rows",
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
    pairs: Sequence[tuple[str, str]] | None = None,
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
    ``(baseline_ref, candidate_ref)`` pairs. Per pair, ``equal``/summary/metrics equal
    ``compare_records`` with the same sections; ``ignore``/``preset`` leave fields out
    (:mod:`recstore.compare.ignore`). With ``record`` the comparison is stored in
    ``comparisons``/``comparison_pairs``/``comparison_unpaired`` with the store's last event seq.

    A gate must not pass on nothing: a side that selects no runs, or sides that form no pair,
    raise :class:`~recstore.errors.EmptySelectionError` unless ``allow_empty``. Runs left unpaired
    are in ``unpaired`` and ``coverage()``; ``unpaired_error(max_unpaired)`` says whether a gate
    should stop on them.

    Raises:
        InputError: bad options or filters. NotFoundError: an explicit pair names no stored run.
        EmptySelectionError: an empty side, or no pairs (unless ``allow_empty``).
    """
    spec = parse_ignore(ignore, preset)
    sections = resolve_sections(include_sections, exclude_sections) - spec.sections
    if pairs is None:
        rule_text = str(PairBy.parse(pair_by))
        selections = [
            select_gate_runs(store, text or "", what=f"the {side} filter", allow_empty=allow_empty)
            for side, text in (("baseline", baseline), ("candidate", candidate))
        ]
    else:
        rule_text, selections = "explicit", None
    with store.writer() as con:
        ((snapshot,),) = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchall()
        if selections is None:
            refs = _resolve_refs(con, [ref for pair in pairs for ref in pair])
            pair_explicit(con, [(refs[a], refs[b]) for a, b in pairs])
        else:
            pair_runs(con, selections[0], selections[1], PairBy.parse(pair_by), duplicates)
            if not allow_empty:
                _require_pairs(con, rule_text, selections)
        keys = con.execute("SELECT a_key FROM _cmp_pairing UNION SELECT b_key FROM _cmp_pairing")
        _ensure_features(con, [k for (k,) in keys.fetchall()], spec.needs_fields(), progress)
        _feature_pairs(con)
        compare_pairs(con, sections, spec)
        classify(con, rule)
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _cmp_pair_rows AS "
            "SELECT p.pair_index, p.pair_key, p.a_key AS baseline_run_key, "
            "p.b_key AS candidate_run_key, p.a_hash AS baseline_record_hash, "
            "p.b_hash AS candidate_record_hash, r.* EXCLUDE (pair_index) "
            "FROM _cmp_pairs p JOIN _cmp_classified r USING (pair_index) ORDER BY p.pair_index"
        )
        comparison = Comparison(
            comparison_id=None,
            baseline_filter=baseline,
            candidate_filter=candidate,
            pair_by=rule_text,
            duplicates=duplicates,
            sections=sorted(sections),
            ignore=spec.paths(),
            rule=rule,
            snapshot_seq=snapshot,
            pairs=con.sql(f"SELECT {', '.join(PAIR_COLUMNS)} FROM _cmp_pair_rows").to_arrow_table(),
            unpaired=_unpaired(con),
            aggregate=aggregate(con),
            selected=_selected_counts(selections, pairs),
        )
        if record:
            comparison.comparison_id = _record(con, comparison)
    return comparison


def _unpaired(con: Any) -> list[dict]:
    cursor = con.execute("SELECT side, run_key, pair_key, reason FROM _cmp_unpaired_runs")
    return [
        dict(zip(("side", "runKey", "pairKey", "reason"), row, strict=True))
        for row in cursor.fetchall()
    ]


def _selected_counts(selections: list[list[str]] | None,
                     pairs: Sequence[tuple[str, str]] | None) -> dict[str, int]:
    if selections is None:  # explicit pairs: every named run is in a pair
        return {side: len({pair[i] for pair in pairs or ()})
                for i, side in enumerate(("baseline", "candidate"))}
    return {"baseline": len(set(selections[0])), "candidate": len(set(selections[1]))}


def _require_pairs(con: Any, pair_by: str, selections: list[list[str]]) -> None:
    """EmptySelectionError when two non-empty sides formed no pair (e.g. a wrong --pair-by)."""
    ((paired,),) = con.execute("SELECT count(*) FROM _cmp_pairing").fetchall()
    if paired:
        return
    reasons = dict(con.execute(
        "SELECT reason, count(*) FROM _cmp_unpaired_runs GROUP BY ALL").fetchall())
    detail = ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
    raise EmptySelectionError(
        f"0 pairs: {len(set(selections[0]))} baseline and {len(set(selections[1]))} candidate runs "
        f"share no {pair_by} value ({detail}); nothing would be compared "
        "(--allow-empty accepts an empty comparison)", what="pairs")


def compare_pair(
    left: dict,
    right: dict,
    *,
    ignore: Iterable[str] = (),
    preset: str | None = None,
    include_sections: Iterable[str] | None = None,
    exclude_sections: Iterable[str] | None = None,
) -> dict:
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
) -> dict:
    """The full aioc comparison (differences list included) of two stored runs."""
    return compare_pair(
        store.get_record(run_a),
        store.get_record(run_b),
        ignore=ignore,
        preset=preset,
        include_sections=include_sections,
        exclude_sections=exclude_sections,
    )
