"""The real CLI in a subprocess over a real store: replay one run or a selection (workers, one
writer), store replays (failed ones too) with lineage, query the lineage, print the tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from recstore.store import Store

from .conftest import AIOC_FIXTURES, AIOC_RECORD_NAMES, REPO_ROOT, ProgressLog


def recstore(db, *args, env=None):
    return subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), *args], capture_output=True,
                          text=True, cwd=REPO_ROOT, env=env, timeout=300)


def query(db, sql):
    result = recstore(db, "query", sql, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    db = tmp_path_factory.mktemp("replay") / "store.duckdb"
    Store(db).ingest([str(AIOC_FIXTURES / f"{name}.json") for name in AIOC_RECORD_NAMES])
    return db


def source_hashes(db):
    rows = query(db, "SELECT run_key, record_hash FROM runs WHERE run_key NOT IN (SELECT replay_run_key FROM replays)")
    return {row["run_key"]: row["record_hash"] for row in rows}


def test_replay_one_run_from_source_and_its_lineage(store_path):
    before = source_hashes(store_path)
    result = recstore(store_path, "replay", "v-handoff-cycle", "--from-source", "--mode", "strict", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["status"] == "completed"
    assert report["replayStats"] == {"recordedToolCalls": 3, "replayedFromRecord": 1, "missingToolCalls": 0,
                                     "liveFallbackCalls": 0, "inputSource": "inputItemCount"}
    assert report["calls"][0]["provenance"]["sourceRunId"] == "v-handoff-cycle"
    replay_key = report["replayRunKey"]
    row = query(store_path, f"SELECT * FROM replays WHERE replay_run_key = '{replay_key}'")[0]
    assert row["source_run_key"] == "aioc:v-handoff-cycle" and row["source_revision"] == 1
    assert row["source_record_hash"] == before["aioc:v-handoff-cycle"]
    assert row["mode"] == "strict" and row["input_mode"] == "recorded" and row["report_status"] == "completed"
    assert row["harness_hash"].startswith("sha256:") and row["replayed_from_record"] == 1
    calls = query(store_path, f"SELECT * FROM replay_calls WHERE replay_run_key = '{replay_key}'")
    assert [(c["tool_name"], c["resolution"], c["source_output_item_index"]) for c in calls] == [("lookup", "recorded", 6)]
    text = recstore(store_path, "replay", "v-handoff-cycle", "--from-source")
    assert text.returncode == 0 and "COMPLETED" in text.stdout and "stored as aioc:" in text.stdout
    tree = recstore(store_path, "lineage", "v-handoff-cycle")
    assert tree.returncode == 0 and tree.stdout.startswith("aioc:v-handoff-cycle [completed]")
    assert replay_key in tree.stdout and "(replay_of strict completed)" in tree.stdout
    assert source_hashes(store_path) == before  # the source is never modified


def test_replay_selection_with_two_workers_one_writer(store_path):
    before = source_hashes(store_path)
    result = recstore(store_path, "replay", "--select", "run_id like 'v-%' or run_id like '%-allow' or run_id like '%-deny'",
                      "--from-source", "--workers", "2", "--json")
    assert result.returncode == 0, result.stderr
    reports = json.loads(result.stdout)
    assert len(reports) == 9 and {r["status"] for r in reports} == {"completed"}
    assert "[" not in result.stderr  # no progress bar when stderr is not a terminal
    keys = [r["replayRunKey"] for r in reports]
    rows = query(store_path, "SELECT l.child_run_key, l.parent_run_key, p.source_uri FROM lineage l "
                             "JOIN runs p ON p.run_key = l.parent_run_key WHERE l.relation = 'replay_of'")
    links = {r["child_run_key"]: r for r in rows}
    for report in reports:
        link = links[report["replayRunKey"]]
        assert link["parent_run_key"] == report["sourceRunKey"]
        assert link["source_uri"] == str(AIOC_FIXTURES / f"{report['sourceRunId']}.json")
    assert len(set(keys)) == 9
    assert source_hashes(store_path) == before


def test_failed_replay_is_stored_with_its_reason_and_exits_1(store_path, tmp_path):
    harness = tmp_path / "no-policies.toml"
    harness.write_text('[runtime]\nentry_agent = "a"\n[agents.a]\nname = "Finance Reporter"\n'
                       'tools = ["get_finance_report"]\n[tools.get_finance_report]\n', encoding="utf-8")
    result = recstore(store_path, "replay", "tool-allow", "--harness", str(harness), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["status"] == "incomplete"
    assert "policy_not_configured" in report["reason"]
    row = query(store_path, f"SELECT * FROM replays WHERE replay_run_key = '{report['replayRunKey']}'")[0]
    assert row["report_status"] == "incomplete" and row["replay_status"] == "failed"
    assert row["replay_error_name"] == "ToolCallPolicyDeniedError" and "policy_not_configured" in row["reason"]


def test_strict_miss_with_a_harness_is_stored_and_names_the_call(store_path, tmp_path):
    harness = tmp_path / "changed.toml"
    harness.write_text(
        '[runtime]\nentry_agent = "a"\n[agents.a]\nname = "Finance Reporter"\ntools = ["get_finance_report"]\n'
        '[tools.get_finance_report]\nparameters = { type = "object", properties = { reportId = { type = "string", enum = ["Q1-2026"] }, region = { type = "string", default = "EU" } } }\n'
        '[policies]\n[[policies.rules]]\ndecision = "allow"\nreason = "ok"\n', encoding="utf-8")
    result = recstore(store_path, "replay", "tool-allow", "--harness", str(harness))
    assert result.returncode == 1
    assert "INCOMPLETE" in result.stdout and "REPLAY_INPUT_MISSING" in result.stdout
    assert '"region":"EU"' in result.stdout


@pytest.mark.parametrize("args, message", [
    (["tool-allow"], "give --harness FILE, --from-source or --command"),
    (["tool-allow", "--from-source", "--harness", "x.toml"], "(exactly one)"),
    (["--from-source"], "give a RUN or --select DSL"),
    (["no-such-run", "--from-source"], "no-such-run"),
    (["tool-allow", "--harness", "missing.toml"], "missing.toml"),
    (["tool-allow", "--from-source", "--provider", "scripted"], "--provider scripted needs --script"),
])
def test_bad_input_is_one_line_without_traceback(store_path, args, message):
    result = recstore(store_path, "replay", *args)
    assert result.returncode == 2
    assert result.stderr.startswith("recstore: error:") and message in result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_openai_provider_without_key_is_a_reported_error(store_path):
    env = {k: v for k, v in os.environ.items() if k != "RECSTORE_NO_SUCH_KEY"}
    result = recstore(store_path, "replay", "simple-run", "--from-source", "--provider", "openai",
                      "--api-key-env", "RECSTORE_NO_SUCH_KEY", "--no-store", "--json", env=env)
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["status"] == "error" and "RECSTORE_NO_SUCH_KEY is not set" in report["reason"]
    assert report["replayRunKey"] is None


def test_batches_read_and_write_in_chunks_in_order(tmp_path, monkeypatch):
    from recstore.replay import batch, lineage

    monkeypatch.setattr(batch, "READ_CHUNK", 5)
    monkeypatch.setattr(lineage, "PLACE_CHUNK", 3)
    monkeypatch.setattr(lineage, "STORE_BATCH", 2)
    store = Store(tmp_path / "chunks.duckdb")
    store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in AIOC_RECORD_NAMES])
    keys = sorted(f"aioc:{name}" for name in AIOC_RECORD_NAMES)
    progress = ProgressLog()
    results = batch.replay_stored(store, keys, batch.ReplayJob(), workers=2, progress=progress)
    seen = progress.seen
    assert [r.source_run_key for r in results] == keys
    assert {r.report.status for r in results} == {"completed"}
    assert seen[-1] == (13, 13) and len(seen) == 13
    with store.reader() as con:
        stored = con.execute("SELECT source_run_key, replay_run_key FROM replays ORDER BY source_run_key").fetchall()
        # one writer for the selection: one source, its replays committed in batches of 2
        sources, batches = con.execute(
            "SELECT count(DISTINCT source_id), count(DISTINCT batch_id) FROM streams "
            "WHERE stream_key IN (SELECT replay_run_key FROM replays)").fetchone()
    assert stored == [(r.source_run_key, r.replay_run_key) for r in results]
    assert (sources, batches) == (1, 7)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_batch_imports_lazy_modules_before_it_forks_and_keeps_order_in_small_tasks(
        tmp_path, monkeypatch, workers):
    """replay_stored imports what pyarrow's first list imports before it forks workers (as
    Store.ingest does; each worker would import pandas, 0.3-0.4 s), and only then; tasks of
    any size (here 1 to 4 sources, few in flight) still give every replay in selection order."""
    from contextlib import contextmanager

    from recstore.replay import batch

    calls: list[str] = []
    real_pool = batch.worker_pool

    @contextmanager
    def pool(n):  # records when the workers fork, beside the import
        calls.append(f"fork {n}")
        with real_pool(n) as forked:
            yield forked

    monkeypatch.setattr(batch, "worker_pool", pool)
    monkeypatch.setattr(batch, "import_lazy_modules", lambda: calls.append("import"))
    monkeypatch.setattr(batch, "CHUNK", 4)
    monkeypatch.setattr(batch, "MIN_CHUNK", 1)
    monkeypatch.setattr(batch, "IN_FLIGHT_SOURCES", 1)
    store = Store(tmp_path / "s.duckdb")
    store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in AIOC_RECORD_NAMES])
    keys = sorted(f"aioc:{name}" for name in AIOC_RECORD_NAMES)[::-1]
    results = batch.replay_stored(store, keys, batch.ReplayJob(), workers=workers)
    assert [r.source_run_key for r in results] == keys
    assert {r.report.status for r in results} == {"completed"}
    assert calls == (["import", "fork 2"] if workers > 1 else ["fork 0"])


def test_replays_survive_a_rebuild_from_the_log(store_path):
    before = query(store_path, "SELECT * FROM replays ORDER BY replay_run_key")
    calls = query(store_path, "SELECT * FROM replay_calls ORDER BY replay_run_key, call_index")
    assert before, "earlier tests stored replays"
    result = recstore(store_path, "rebuild")
    assert result.returncode == 0, result.stderr
    assert query(store_path, "SELECT * FROM replays ORDER BY replay_run_key") == before
    assert query(store_path, "SELECT * FROM replay_calls ORDER BY replay_run_key, call_index") == calls
