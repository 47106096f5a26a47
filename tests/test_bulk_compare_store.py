"""Bulk comparison through a real store: aioc oracles, pairing rules, recorded comparisons."""

from __future__ import annotations

import collections
import itertools

import pytest

from recstore.canonical import canonical_json
from recstore.compare import ClassificationRule, aioc_result, bulk_compare, compare_stored
from recstore.errors import InputError, NotFoundError
from recstore.query import run_query
from recstore.records import compare_records, input_scope
from recstore.records.keys import key_of
from recstore.store import Store

from .conftest import AIOC_FIXTURES, AIOC_RECORD_NAMES, CORPUS_DEV, read_ndjson_gz

BASELINE = "tag.set = 'baseline'"
CANDIDATE = "tag.set = 'candidate'"
EXCLUDED = ["policy", "guardrails", "metadata"]


def query_rows(store: Store, text: str) -> list[tuple]:
    """Rows of a query through the public query layer (read-only views)."""
    with run_query(store, text) as result:
        return list(result.rows())


def head(result: dict) -> str:
    return canonical_json({k: result[k] for k in ("equal", "summary", "metrics")})


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory) -> Store:
    store = Store(tmp_path_factory.mktemp("corpus") / "corpus.duckdb")
    store.ingest([str(CORPUS_DEV / "corpus-baseline.ndjson.gz")], tags={"set": "baseline"})
    store.ingest([str(CORPUS_DEV / "corpus-candidate.ndjson.gz")], tags={"set": "candidate"})
    replays = [
        r["replayRunRecord"] for r in read_ndjson_gz(CORPUS_DEV / "corpus-replays.ndjson.gz")
    ]
    store.ingest_records(replays, source_uri="corpus-replays", tags={"set": "replay"})
    return store


@pytest.fixture(scope="module")
def oracle() -> dict[str, dict]:
    return {row["caseId"]: row for row in read_ndjson_gz(CORPUS_DEV / "oracle-compare.ndjson.gz")}


@pytest.mark.parametrize(
    ("option_set", "exclude"), [("default", None), ("excludePolicyGuardrailsMetadata", EXCLUDED)]
)
def test_corpus_dev_pairs_match_oracle(corpus_store, oracle, option_set, exclude):
    comparison = bulk_compare(
        corpus_store, BASELINE, CANDIDATE, pair_by="metadata.caseId", exclude_sections=exclude
    )
    rows = comparison.pair_rows()
    assert len(rows) == 600 and comparison.unpaired == []
    for row in rows:
        want = oracle[row["pair_key"]]
        assert row["baseline_run_key"] == f"aioc:{want['baselineRunId']}"
        assert row["candidate_run_key"] == f"aioc:{want['candidateRunId']}"
        assert canonical_json(aioc_result(row)) == head(want[option_set]), row["pair_key"]
        assert row["difference_count"] == len(want[option_set]["differences"])
    expected_fail = sum(1 for r in rows if r["status_b"] == "failed"
                        and not (r["status_a"] == "failed" and r["equal"]))  # newFailure
    assert comparison.aggregate["classification"]["fail"] == expected_fail
    assert comparison.failed == (expected_fail > 0)


def test_169_fixture_pairs_match_expected(tmp_path, expected_aioc):
    store = Store(tmp_path / "fixtures.duckdb")
    store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in AIOC_RECORD_NAMES])
    pairs = list(itertools.product(AIOC_RECORD_NAMES, repeat=2))
    comparison = bulk_compare(store, pairs=pairs)
    rows = comparison.pair_rows()
    assert len(rows) == 169
    want = {
        (c["left"], c["right"]): c["result"]
        for c in expected_aioc["compare"]
        if c["options"] is None
    }
    assert len(want) == 169
    for (left, right), row in zip(pairs, rows, strict=True):
        assert (row["baseline_run_key"], row["candidate_run_key"]) == (
            f"aioc:{left}",
            f"aioc:{right}",
        )
        assert canonical_json(aioc_result(row)) == head(want[left, right]), (left, right)
        assert row["difference_count"] == len(want[left, right]["differences"])
    assert sum(r["equal"] for r in rows) >= 13  # every record equals itself


def test_compare_stored_gives_full_differences(corpus_store, oracle):
    case = oracle["case-00001"]
    result = compare_stored(corpus_store, case["baselineRunId"], f"aioc:{case['candidateRunId']}")
    assert canonical_json(result) == canonical_json(case["default"])


def test_semantic_preset_and_ignore_match_pairwise(corpus_store):
    exact = bulk_compare(corpus_store, BASELINE, CANDIDATE, record=False)
    semantic = bulk_compare(corpus_store, BASELINE, CANDIDATE, preset="semantic", record=False)
    # Timestamps and callIds never repeat across two runs: ignoring them can only add equal pairs.
    assert (
        semantic.aggregate["flags"]["samePolicyDecisions"]["equal"]
        > exact.aggregate["flags"]["samePolicyDecisions"]["equal"]
    )
    assert semantic.ignore == [
        "guardrails.timestamp",
        "metadata",
        "policy.callId",
        "policy.expiresAt",
        "policy.timestamp",
    ]
    for row in semantic.pair_rows()[:40]:
        pairwise = compare_stored(
            corpus_store, row["baseline_run_key"], row["candidate_run_key"], preset="semantic"
        )
        assert canonical_json(aioc_result(row)) == head(pairwise)
        assert row["difference_count"] == len(pairwise["differences"])


def test_lineage_pairs_replays_with_their_sources(corpus_store):
    """Some sources were replayed twice (strict and hybrid): duplicates "all" keeps both."""
    comparison = bulk_compare(
        corpus_store, BASELINE, "tag.set = 'replay'", pair_by="lineage", duplicates="all"
    )
    rows = comparison.pair_rows()
    replays = read_ndjson_gz(CORPUS_DEV / "corpus-replays.ndjson.gz")
    assert {(r["baseline_run_key"], r["candidate_run_key"]) for r in rows} == {
        (f"aioc:{r['sourceRunId']}", f"aioc:{r['replayRunRecord']['runId']}") for r in replays
    }
    per_source = collections.Counter(r["sourceRunId"] for r in replays)
    reasons = collections.Counter((u["side"], u["reason"]) for u in comparison.unpaired)
    assert reasons == {
        ("baseline", "no_match"): 600 - len(per_source),
        ("candidate", "duplicate_paired"): sum(n for n in per_source.values() if n > 1),
    }
    ((stored,),) = query_rows(
        corpus_store,
        "SELECT count(*) FROM comparison_unpaired "
        f"WHERE comparison_id = {comparison.comparison_id}",
    )
    assert stored == len(comparison.unpaired)
    latest = bulk_compare(
        corpus_store, BASELINE, "tag.set = 'replay'", pair_by="lineage", record=False
    )
    assert latest.pairs.num_rows == len(per_source)
    row = rows[0]
    pairwise = compare_records(
        corpus_store.get_record(row["baseline_run_key"]),
        corpus_store.get_record(row["candidate_run_key"]),
    )
    assert canonical_json(aioc_result(row)) == head(pairwise)


@pytest.mark.parametrize("duplicates", ["latest", "all"])
def test_pairing_reports_every_run(corpus_store, duplicates):
    """Paired by question, some cases share a question: every run is paired or reported."""
    comparison = bulk_compare(
        corpus_store, BASELINE, CANDIDATE, pair_by="question", duplicates=duplicates, record=False
    )
    rows = comparison.pair_rows()
    keys = {side: collections.Counter() for side in ("baseline", "candidate")}
    for key, side in query_rows(
        corpus_store, "SELECT question, tags->>'$.set' FROM runs WHERE tags->>'$.set' <> 'replay'"
    ):
        keys[side][key] += 1
    shared = set(keys["baseline"]) & set(keys["candidate"])
    duplicated = sum(n for side in keys.values() for q, n in side.items() if n > 1)
    assert duplicated > 0, "the corpus should contain repeated questions"
    if duplicates == "all":
        assert len(rows) == sum(keys["baseline"][q] * keys["candidate"][q] for q in shared)
    else:
        assert len(rows) == len(shared)
        assert len({r["baseline_run_key"] for r in rows}) == len(rows)
    paired = {("baseline", r["baseline_run_key"]) for r in rows} | {
        ("candidate", r["candidate_run_key"]) for r in rows
    }
    reported = {(u["side"], u["runKey"]): u["reason"] for u in comparison.unpaired}
    dropped = {k for k, reason in reported.items() if reason in ("no_match", "duplicate_dropped")}
    assert not dropped & paired
    assert len(paired | dropped) == sum(sum(c.values()) for c in keys.values())


def test_input_scope_pairs_runs_with_equal_inputs(corpus_store):
    comparison = bulk_compare(
        corpus_store, BASELINE, CANDIDATE, pair_by="input_scope", duplicates="all", record=False
    )
    rows = comparison.pair_rows()
    assert rows, "baseline and candidate runs of a case share their input"

    def scope_hash(run_key: str) -> str:
        record = corpus_store.get_record(run_key)
        count = input_scope(record).count
        return str(key_of(record["items"][:count]))

    for row in rows[:25]:
        assert row["pair_key"] == scope_hash(row["baseline_run_key"])
        assert row["pair_key"] == scope_hash(row["candidate_run_key"])
    paired = {r["baseline_run_key"] for r in rows} | {r["candidate_run_key"] for r in rows}
    reported = {u["runKey"] for u in comparison.unpaired if u["reason"] != "duplicate_paired"}
    assert len(paired | reported) == 1200


def test_recorded_comparison_is_queryable(corpus_store):
    rule = ClassificationRule.parse(fail_on="regressed", warn_on="toolsChanged")
    comparison = bulk_compare(corpus_store, BASELINE, CANDIDATE, rule=rule)
    cid = comparison.comparison_id
    (row,) = query_rows(
        corpus_store,
        f"SELECT pair_by, duplicates, snapshot_seq, pair_count, failed_pairs, classification "
        f"FROM comparisons WHERE comparison_id = {cid}",
    )
    assert row[:5] == (
        "metadata.caseId",
        "latest",
        corpus_store.last_seq(),
        600,
        comparison.aggregate["classification"]["fail"],
    )
    counts = dict(
        query_rows(
            corpus_store,
            f"SELECT classification, count(*) FROM comparison_pairs WHERE comparison_id = {cid} "
            "GROUP BY ALL",
        )
    )
    assert counts == {k: v for k, v in comparison.aggregate["classification"].items() if v}
    regressed = sum(
        1
        for r in comparison.pair_rows()
        if r["status_a"] == "completed" and r["status_b"] == "failed"
    )
    assert comparison.aggregate["classification"]["fail"] == regressed


def test_recorded_pairs_are_read_back_as_computed(corpus_store):
    """A recorded comparison's rows come from the store on first use; they are the rows an
    unrecorded one holds."""
    recorded = bulk_compare(corpus_store, BASELINE, CANDIDATE, preset="semantic")
    computed = bulk_compare(corpus_store, BASELINE, CANDIDATE, preset="semantic", record=False)
    assert recorded.rows is None and computed.rows is not None
    assert recorded.pairs.equals(computed.pairs)
    assert recorded.pair_count == computed.pairs.num_rows == 600


def test_bad_options_are_input_errors(corpus_store):
    with pytest.raises(InputError, match="`pair_by`"):
        bulk_compare(corpus_store, BASELINE, CANDIDATE, pair_by="colour")
    with pytest.raises(InputError, match="ignore"):
        bulk_compare(corpus_store, BASELINE, CANDIDATE, ignore=["policy.resource.kind"])
    with pytest.raises(InputError, match="duplicates"):
        bulk_compare(corpus_store, BASELINE, CANDIDATE, duplicates="first")
    with pytest.raises(NotFoundError):
        bulk_compare(corpus_store, pairs=[("no-such-run", "no-such-run")])
