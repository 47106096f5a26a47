"""Compare features through a real store: the projections' keys equal ``record_features``, a
pinned older revision gets the same features it had while current, and bulk compare (current and
pinned revisions) equals ``compare_records`` pair by pair."""

from __future__ import annotations

import copy
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.canonical import canonical_json, sha256_canonical
from recstore.compare import aioc_result, bulk_compare, compare_pair
from recstore.compare.features import record_features
from recstore.errors import InputError, NotFoundError
from recstore.records import SECTIONS
from recstore.store import Store

from .record_strategies import record_pairs, run_records

RUN_COLUMNS = (
    "status, response_key, response_length, metadata_key, metadata_is_object, policy_count, "
    "guardrail_count, tool_call_count, calls_full_key, policy_seq_key, guardrails_seq_key"
)
PINNED_TABLES = ("cmp_pinned_runs", "cmp_pinned_calls", "cmp_pinned_entries")
SLOW_EXAMPLES = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    return Store(tmp_path_factory.mktemp("features") / "features.duckdb")


def _ingest(store: Store, record: dict) -> str:
    summary = store.ingest_records([record], source_uri="hypothesis")
    assert summary.rejected == 0, summary.rejects
    return f"aioc:{record['runId']}"


def _features(store: Store, feature_id: int) -> dict:
    """What the engine reads for one feature id, through the cmp_*_features views."""
    with store.reader() as con:
        run = con.execute(
            f"SELECT {RUN_COLUMNS} FROM cmp_run_features WHERE feature_id = ?", [feature_id]
        ).fetchall()
        calls = con.execute(
            "SELECT call_index, name, args_hash, has_output, output_key FROM cmp_call_features "
            "WHERE feature_id = ? ORDER BY call_index",
            [feature_id],
        ).fetchall()
        entries = con.execute(
            "SELECT section, entry_index, entry_key, is_object, decision, reason, "
            "resource_kind, resource_name FROM cmp_entry_features WHERE feature_id = ? "
            "ORDER BY section DESC, entry_index",
            [feature_id],
        ).fetchall()
    return {"run": run, "calls": calls, "entries": entries}


def _feature_id(store: Store, pair: tuple) -> int:
    """Feature id bulk compare used for the baseline side of a one-pair comparison."""
    bulk_compare(store, pairs=[pair], record=False)
    with store.reader() as con:
        key, revision = pair[0] if isinstance(pair[0], tuple) else (pair[0], None)
        if revision is None:
            sql = "SELECT first_seq FROM proj_runs WHERE run_key = ?"
            return con.execute(sql, [key]).fetchone()[0]
        sql = "SELECT feature_id FROM cmp_pinned_runs WHERE run_key = ? AND revision = ?"
        return con.execute(sql, [key, revision]).fetchone()[0]


def _pinned_rows(store: Store) -> int:
    with store.reader() as con:
        return sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in PINNED_TABLES)


@SLOW_EXAMPLES
@given(record=run_records(valid=True), edited=st.sampled_from(["response", "status", "items"]))
def test_projection_features_equal_record_features_and_pinned_ones(store, record, edited):
    record["runId"] = f"feat-{uuid.uuid4()}"
    key = _ingest(store, record)
    current = _features(store, _feature_id(store, (key, key)))
    want = record_features(record)
    assert current["run"] == [tuple(want.run.values())]
    assert current["calls"] == want.calls
    assert current["entries"] == want.entries

    # A new revision makes this one pinned: its features, now computed from the record read
    # back from the log, are the ones the projections held.
    changed = copy.deepcopy(record)
    changed[edited] = {"response": "edited", "status": "x", "items": []}[edited]
    if changed == record:
        changed["response"] += " (edited)"
    _ingest(store, changed)
    pinned_id = _feature_id(store, ((key, 1), key))
    assert pinned_id < 0
    assert _features(store, pinned_id) == current


@SLOW_EXAMPLES
@given(
    pairs=st.lists(record_pairs(valid=True), min_size=1, max_size=4),
    pins=st.lists(st.sampled_from(["current", "pinned", "both_pinned"]), min_size=4, max_size=4),
    include=st.one_of(st.none(), st.lists(st.sampled_from(SECTIONS), unique=True, min_size=1)),
    ignore=st.lists(
        st.sampled_from(
            ["policy.timestamp", "policy.callId", "guardrails.timestamp", "metadata.build",
             "toolCalls.output"]
        ),
        unique=True,
        max_size=2,
    ),
)
def test_bulk_compare_through_a_store_equals_compare_records(store, pairs, pins, include, ignore):
    """Current revisions (features from the projections) and pinned ones (features from the
    record): each pair's result is compare_records' on the two records."""
    explicit, compared = [], []
    for (a, b), pin in zip(pairs, pins, strict=False):
        a, b = copy.deepcopy(a), copy.deepcopy(b)
        if pin == "current":  # two runs
            a["runId"], b["runId"] = f"a-{uuid.uuid4()}", f"b-{uuid.uuid4()}"
            explicit.append((_ingest(store, a), _ingest(store, b)))
        else:  # one run: a is revision 1, b the current revision (when it differs from a)
            a["runId"] = b["runId"] = f"p-{uuid.uuid4()}"
            key = _ingest(store, a)
            _ingest(store, b)
            explicit.append(((key, 1), (key, 1) if pin == "both_pinned" else key))
            b = a if pin == "both_pinned" else b
        compared.append((a, b))
    comparison = bulk_compare(
        store, pairs=explicit, ignore=ignore, include_sections=include, record=False
    )
    rows = comparison.pair_rows()
    assert len(rows) == len(explicit)
    for (a, b), row in zip(compared, rows, strict=True):
        want = compare_pair(a, b, ignore=ignore, include_sections=include)
        assert canonical_json(aioc_result(row)) == canonical_json(
            {k: want[k] for k in ("equal", "summary", "metrics")}
        ), (a, b)
        assert row["difference_count"] == len(want["differences"])


def test_a_first_comparison_computes_no_features(tmp_path, aioc_records):
    """Current revisions are compared from their projections: nothing is reduced or cached."""
    store = Store(tmp_path / "first.duckdb")
    store.ingest_records(list(aioc_records.values()))
    keys = [f"aioc:{r['runId']}" for r in aioc_records.values()]
    comparison = bulk_compare(store, pairs=[(a, b) for a in keys for b in keys])
    assert comparison.pairs.num_rows == len(keys) ** 2
    assert _pinned_rows(store) == 0


def test_a_pinned_revision_is_reduced_once(tmp_path, aioc_records):
    store = Store(tmp_path / "pinned.duckdb")
    record = aioc_records["compare-v1"]
    store.ingest_records([record])
    store.ingest_records([{**record, "response": "changed"}])
    key = f"aioc:{record['runId']}"
    first = bulk_compare(store, pairs=[((key, 1), key)], record=False)
    cached = _pinned_rows(store)
    again = bulk_compare(store, pairs=[((key, 1), key), ((key, 1), (key, 2))], record=False)
    assert cached > 0 and _pinned_rows(store) == cached
    (row,) = first.pair_rows()
    assert not row["same_final_response"]
    assert (row["baseline_revision"], row["candidate_revision"]) == (1, 2)
    assert [r["equal"] for r in again.pair_rows()] == [False, False]
    assert again.pair_rows()[1]["candidate_run_key"] == key

    recorded = bulk_compare(store, pairs=[((key, 1), key)])
    with store.reader() as con:
        stored = con.execute(
            "SELECT baseline_run_key, baseline_revision, baseline_record_hash, candidate_run_key, "
            "candidate_revision, candidate_record_hash, same_final_response "
            "FROM comparison_pairs WHERE comparison_id = ?",
            [recorded.comparison_id],
        ).fetchall()
    hashes = [sha256_canonical(store.get_record(key, revision=r)) for r in (1, 2)]
    assert stored == [(key, 1, hashes[0], key, 2, hashes[1], False)]


def test_bad_pinned_sides_are_named(tmp_path, aioc_records):
    store = Store(tmp_path / "bad.duckdb")
    store.ingest_records([aioc_records["simple-run"]])
    key = f"aioc:{aioc_records['simple-run']['runId']}"
    with pytest.raises(NotFoundError, match=f"run {key} has no revision 2"):
        bulk_compare(store, pairs=[((key, 2), key)])
    with pytest.raises(InputError, match="run reference or"):
        bulk_compare(store, pairs=[((key, "1"), key)])
    with pytest.raises(InputError, match="run reference or"):
        bulk_compare(store, pairs=[((key, 0), key)])
