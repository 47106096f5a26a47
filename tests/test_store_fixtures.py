"""The store on the shared fixtures: the 13 aioc records and the 1,200 corpus-dev records ingest
with zero rejects, stored hashes equal aioc's, §8.2 visits/intervals come out of the projections,
records come back exactly, and re-ingesting appends nothing."""

from __future__ import annotations

import gzip
import json
from datetime import datetime

import pytest

from recstore.canonical import canonical_json
from recstore.store import Store

from .conftest import AIOC_FIXTURES, AIOC_RECORD_NAMES, CORPUS_DEV

CORPUS_FILES = [CORPUS_DEV / "corpus-baseline.ndjson.gz", CORPUS_DEV / "corpus-candidate.ndjson.gz"]


def _record_files() -> list[str]:
    return [str(AIOC_FIXTURES / f"{name}.json") for name in AIOC_RECORD_NAMES]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    store = Store(tmp_path_factory.mktemp("store") / "fixtures.duckdb")
    summary = store.ingest(_record_files() + [str(p) for p in CORPUS_FILES], tags={"suite": "dev"})
    assert (summary.accepted, summary.rejected, summary.revised) == (1213, 0, 0), summary.rejects
    return store


def _query(store: Store, sql: str, params: list | None = None) -> list[tuple]:
    with store.reader() as con:
        return con.execute(sql, params or []).fetchall()


def test_stored_hashes_equal_aioc_oracles(store, expected_aioc):
    stored = dict(_query(store, "SELECT run_id, record_hash FROM runs"))
    with gzip.open(CORPUS_DEV / "oracle-hashes.ndjson.gz", "rt", encoding="utf-8") as fh:
        oracle = [json.loads(line) for line in fh]
    checked = 0
    for row in oracle:
        if row["set"] in ("baseline", "candidate"):
            assert stored[row["runId"]] == row["recordCanonicalSha256"], row["runId"]
            checked += 1
    assert checked == 1200
    fixture_hashes = expected_aioc["recordCanonicalSha256"]
    for name in AIOC_RECORD_NAMES:
        run_id = json.loads((AIOC_FIXTURES / f"{name}.json").read_text())["runId"]
        assert stored[run_id] == fixture_hashes[name], name


def test_every_fixture_record_comes_back_exactly(store, aioc_records):
    for name, original in aioc_records.items():
        back = store.get_record(original["runId"])
        assert canonical_json(back) == canonical_json(original), name
        # same key order at every depth, same number spelling
        assert json.dumps(back) == json.dumps(original), name


def test_corpus_records_come_back_exactly(store):
    with gzip.open(CORPUS_FILES[0], "rb") as fh:
        for line in list(fh)[:60]:  # a reader per get_record: keep it short
            original = json.loads(line)
            back = store.get_record(original["runId"])
            assert json.dumps(back) == json.dumps(original)


def _visits(store: Store, run_id: str) -> list[tuple]:
    return _query(
        store,
        "SELECT v.agent, v.entered_after_turn, v.via_call_id, v.first_turn, v.last_turn, "
        "v.request_count FROM visits v JOIN runs r USING (run_key) WHERE r.run_id = ? "
        "ORDER BY v.visit_index",
        [run_id],
    )


def _intervals(store: Store, run_id: str) -> list[tuple]:
    return _query(
        store,
        "SELECT q.turn, q.output_start, q.output_end FROM requests q JOIN runs r USING (run_key) "
        "WHERE r.run_id = ? ORDER BY q.request_index",
        [run_id],
    )


def test_visits_and_intervals_match_section_8_2(store):
    assert _visits(store, "handoff-allow") == [
        ("Triage Agent", None, None, 1, 1, 1),
        ("Finance Specialist", 1, "handoff-call-allow-1", 2, 2, 1),
    ]
    assert _intervals(store, "handoff-allow") == [(1, 1, 3), (2, 3, 4)]
    assert _visits(store, "handoff-deny") == [("Triage Agent", None, None, 1, 2, 2)]
    cycle = _visits(store, "v-handoff-cycle")
    assert [(a, first, last) for a, _, _, first, last, _ in cycle] == [
        ("Alpha", 1, 1),
        ("Beta", 2, 2),
        ("Alpha", 3, 4),
    ]
    assert [via for _, _, via, *_ in cycle] == [None, "h1", "h2"]
    two = _visits(store, "v-two-handoffs-one-turn")
    assert [(a, via, n) for a, _, via, _, _, n in two] == [
        ("Alpha", None, 1),
        ("Beta", "h1", 0),
        ("Gamma", "h2", 1),
    ]
    assert _intervals(store, "v-two-handoffs-one-turn")[0] == (1, 1, 7)
    assert _intervals(store, "v-thread-continuation") == [(1, 5, 11), (2, 11, 12)]
    assert _query(
        store, "SELECT input_item_count FROM runs WHERE run_id = 'v-thread-continuation'"
    ) == [(5,)]
    assert _visits(store, "reported-runrecord-1") == [("explainer", None, None, None, None, 0)]
    assert _intervals(store, "reported-runrecord-1") == []


def test_lookup_call_after_handoff_belongs_to_old_agent(store):
    rows = _query(
        store,
        "SELECT t.name, t.agent, t.request_turn FROM tool_calls t JOIN runs r USING (run_key) "
        "WHERE r.run_id = 'v-two-handoffs-one-turn' AND t.name = 'lookup'",
    )
    assert rows == [("lookup", "Alpha", 1)]


def test_run_row_carries_counts_times_and_tags(store):
    (row,) = _query(
        store,
        "SELECT status, initial_agent, final_agent, handoff_count, tool_call_count, started, "
        "duration_ms, tags->>'$.suite', source_uri LIKE '%handoff-allow.json' "
        "FROM runs WHERE run_id = 'handoff-allow'",
    )
    status, initial, final, handoffs, calls, started, duration, suite, from_file = row
    assert (status, initial, final, handoffs, calls) == (
        "completed",
        "Triage Agent",
        "Finance Specialist",
        1,
        1,
    )
    # handoff-allow.json: startedAt 11:00:00.000Z, completedAt 11:00:30.000Z
    assert (started, duration) == (datetime(2026, 1, 15, 11, 0, 0), 30_000)
    assert suite == "dev" and from_file


def test_thread_continuation_lineage(store):
    # v-thread-continuation's input history is not another stored run, so no link to it;
    # every lineage row must point at runs that exist.
    dangling = _query(
        store,
        "SELECT count(*) FROM lineage l WHERE l.relation = 'thread_continuation' "
        "AND l.parent_run_key NOT IN (SELECT run_key FROM runs)",
    )
    assert dangling == [(0,)]


def test_reingest_appends_nothing(store):
    before = _query(store, "SELECT count(*), max(seq) FROM events")
    summary = store.ingest(_record_files() + [str(p) for p in CORPUS_FILES])
    assert (summary.accepted, summary.duplicate, summary.revised) == (0, 1213, 0)
    assert _query(store, "SELECT count(*), max(seq) FROM events") == before


def test_verify_passes_and_rebuild_is_identical(store):
    report = store.verify()
    assert report.ok, report.problems
    assert report.runs == 1213
    before = _query(store, "SELECT count(*), sum(hash(record_hash, item_count)) FROM runs")
    assert store.rebuild() == 1213
    assert _query(store, "SELECT count(*), sum(hash(record_hash, item_count)) FROM runs") == before
