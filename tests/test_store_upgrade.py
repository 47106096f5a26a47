"""A store written by recstore 0.1 (log layout 1) upgrades in place the first time it is opened:
every record reads back as ingested, the log verifies under the batch hash chain, and nothing
the old store held is dropped. The fixture store was written by recstore 0.1 (commit 4ae4447)
from nine aioc fixture records (tagged suite=v1), the agentuse fixture tree and one bad line."""

from __future__ import annotations

import gzip
import json
import shutil

import duckdb

from recstore.store import Store, db

from .conftest import AIOC_FIXTURES, FIXTURES, stored_events_in_log_order

RECORDS = [
    "simple-run", "tool-allow", "handoff-allow", "handoff-deny", "compare-v1", "compare-v2",
    "v-thread-continuation", "v-approval-and-soft-deny", "v-guardrail-triggered",
]


def _old_store(tmp_path):
    db = tmp_path / "old.duckdb"
    with gzip.open(FIXTURES / "stores" / "layout1-store.duckdb.gz", "rb") as src, \
            open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    db.chmod(0o600)
    return Store(db)


def test_a_layout_1_store_upgrades_and_keeps_everything(tmp_path):
    store = _old_store(tmp_path)
    for name in RECORDS:
        record = json.loads((AIOC_FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
        assert store.get_record(record["runId"]) == record
    report = store.verify()
    assert report.ok, report.problems
    assert report.runs == len(RECORDS) + 1  # and the agentuse session
    with store.reader() as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'layout'").fetchone() == ("2",)
        assert stored_events_in_log_order(con)  # rewritten as a batch of layout 2 stores it
        tags = con.execute(
            "SELECT count(*) FROM runs WHERE tags->>'$.suite' = 'v1'"
        ).fetchone()[0]
        rejects = con.execute("SELECT line, reason FROM rejects").fetchall()
        sources = con.execute("SELECT count(*) FROM sources WHERE status <> 'incomplete'")
        assert sources.fetchone()[0] == 11
    assert tags == len(RECORDS)
    assert len(rejects) == 1 and rejects[0][0] == 1


def test_an_upgraded_store_takes_new_records_and_tags(tmp_path):
    store = _old_store(tmp_path)
    summary = store.ingest([str(AIOC_FIXTURES / "v-handoff-cycle.json")], tags={"suite": "v2"})
    assert summary.accepted == 1
    again = store.ingest([str(AIOC_FIXTURES / "simple-run.json")], tags={"suite": "v2"})
    assert (again.duplicate, again.tagged) == (1, 1)
    assert store.verify().ok


def test_an_upgrade_interrupted_before_its_projections_finishes_on_the_next_open(tmp_path):
    store = _old_store(tmp_path)
    with store.writer() as con:  # upgrade, then pretend the projections were never built
        con.execute("DELETE FROM proj_runs")
        con.execute("INSERT OR REPLACE INTO meta VALUES ('layout', '2-projections-pending')")
    assert store.get_record("simple-run")["runId"] == "simple-run"
    with store.reader() as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == len(RECORDS) + 1
    assert store.verify().ok


def test_recorded_comparisons_keep_their_pairs(tmp_path):
    """A layout-1 pair row named its revisions by run key and record hash; upgraded, it names
    them by first seq and the comparison_pairs view shows the same runs and hashes."""
    store = _old_store(tmp_path)
    with duckdb.connect(str(store.path)) as con:  # the old file, before recstore opens it
        (a, a_hash), (b, b_hash) = con.execute(
            "SELECT stream_key, record_hash FROM streams "
            "WHERE stream_key IN ('aioc:compare-v1', 'aioc:compare-v2') ORDER BY stream_key"
        ).fetchall()
        con.execute(
            "INSERT INTO cmp_pairs VALUES (7, 0, 'case-1', ?, ?, ?, ?, FALSE, FALSE, TRUE, TRUE, "
            "TRUE, TRUE, TRUE, 10, 12, 1, 1, 1, 0, 0, 1, NULL, NULL, NULL, 'completed', "
            "'completed', 'warn')",
            [a, b, a_hash, b_hash],
        )
    with store.reader() as con:
        rows = con.execute(
            "SELECT comparison_id, pair_key, baseline_run_key, baseline_revision, "
            "baseline_record_hash, candidate_run_key, candidate_record_hash, equal, "
            "response_length_b, classification FROM comparison_pairs"
        ).fetchall()
    assert rows == [(7, "case-1", a, 1, a_hash, b, b_hash, False, 12, "warn")]


def test_a_store_from_before_schema_007_gets_the_tool_calls_view_that_skips_unused_events(
        tmp_path):
    # schema 007 only marks that the views must be defined again (003_views.sql joins a call's
    # output event on coalesce(output_seq, -1)); a store that applied the files before it keeps
    # the old view until it is opened, and reads the same tool calls either way
    store = Store(tmp_path / "s.duckdb")
    store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in RECORDS])
    order = "SELECT * FROM tool_calls ORDER BY run_key, call_index"
    con = duckdb.connect(str(store.path))
    expected = con.execute(order).fetchall()
    old_view = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'tool_calls'"
                           ).fetchone()[0].replace("COALESCE(t.output_seq, -1)", "t.output_seq")
    assert "coalesce(t.output_seq, -1)" not in old_view.lower()
    con.execute(old_view.replace("CREATE VIEW", "CREATE OR REPLACE VIEW"))
    con.execute("DELETE FROM schema_migrations WHERE name = '007_tool_calls_output.sql'")
    con.close()
    with store.reader() as reader:  # a reader brings the store up to date first
        assert reader.execute(order).fetchall() == expected
    con = duckdb.connect(str(store.path), read_only=True)
    view = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'tool_calls'"
                       ).fetchone()[0]
    con.close()
    assert "coalesce(t.output_seq, -1)" in view.lower()


def test_a_store_whose_view_sql_is_older_than_shipped_defines_its_views_again(tmp_path):
    # a view change ships no schema file: the store keeps the digest of the view SQL it was
    # defined with, and a reader of a store whose digest differs brings its views up to date
    store = Store(tmp_path / "s.duckdb")
    store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in RECORDS])
    con = duckdb.connect(str(store.path))
    assert con.execute("SELECT value FROM meta WHERE key = 'views_digest'").fetchall() == [
        (db.views_digest(),)]
    expected = con.execute("SELECT * FROM runs ORDER BY run_key").fetchall()
    con.execute("CREATE OR REPLACE VIEW runs AS SELECT 'stale' AS run_key")
    con.execute("UPDATE meta SET value = 'digest of older view SQL' WHERE key = 'views_digest'")
    con.close()
    with store.reader() as reader:
        assert reader.execute("SELECT * FROM runs ORDER BY run_key").fetchall() == expected
        assert reader.execute("SELECT value FROM meta WHERE key = 'views_digest'"
                              ).fetchall() == [(db.views_digest(),)]


def test_a_store_with_the_shipped_views_opens_without_a_writer(tmp_path):
    # the digest check costs a reader nothing more than the meta read it makes already: an
    # up-to-date store is not upgraded, so a reader beside another reader never needs the lock
    store = Store(tmp_path / "s.duckdb")
    store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in RECORDS])
    con = duckdb.connect(str(store.path), read_only=True)
    try:
        assert not db.upgrade_due(con, store.path)
    finally:
        con.close()
