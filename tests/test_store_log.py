"""The event log under stress: what ingest refuses without losing the rest (oversized records,
special files in a folder, numbers JSON cannot hold), rejects kept once, the batch hash chain
and every reference `verify` checks, tags as events, and thread continuations that cannot
form cycles."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from recstore.store import Store
from recstore.store.projection import PROJECTION_TABLES

from .conftest import AIOC_FIXTURES, CORPUS_DEV, stored_events_in_log_order


def _records(n: int) -> list[dict]:
    with gzip.open(CORPUS_DEV / "corpus-baseline.ndjson.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for _, line in zip(range(n), fh, strict=False)]


def _write_ndjson(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _count(store: Store, sql: str):
    with store.reader() as con:
        return con.execute(sql).fetchone()[0]


def test_an_oversized_record_is_rejected_and_the_rest_stored(tmp_path):
    good = _records(3)
    big = dict(good[0], runId="too-big", question="x" * 50_000)
    path = _write_ndjson(tmp_path / "in.ndjson", [good[0], big, good[1], good[2]])
    store = Store(tmp_path / "s.duckdb")
    summary = store.ingest([str(path)], max_record_bytes=40_000)
    assert (summary.accepted, summary.rejected) == (3, 1)
    reason, size, kept = store_reject(store)
    assert "over the 40,000-byte limit" in reason and "`max_record_bytes`" in reason
    assert size == len(json.dumps(big)) + 1 and kept.startswith('{"runId": "too-big"')
    assert store.verify().ok


def store_reject(store: Store) -> tuple[str, int, str]:
    with store.reader() as con:
        return con.execute("SELECT reason, raw_size, raw_text FROM rejects").fetchone()


# root reads files whatever their mode unless it gives up the capabilities that let it
_AS_A_USER = (
    ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all"]
    if os.geteuid() == 0 else []
)


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("setpriv"),
                    reason="root reads every file and setpriv is missing")
def test_an_unreadable_file_is_a_reject(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    _write_ndjson(folder / "good.ndjson", _records(1))
    locked = _write_ndjson(folder / "locked.ndjson", _records(2)[1:])
    locked.chmod(0)
    done = subprocess.run(
        [*_AS_A_USER, sys.executable, "-m", "recstore", "--db", str(tmp_path / "s.duckdb"),
         "ingest", "--json", str(folder)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 1, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["accepted"], summary["rejected"]) == (1, 1)
    assert "Permission denied" in summary["rejects"][0]["reason"]
    assert summary["rejects"][0]["source"].endswith("locked.ndjson")


def test_special_files_in_a_folder_are_skipped_as_rejects_never_opened(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    _write_ndjson(folder / "good.ndjson", _records(1))
    (folder / "dangling.ndjson").symlink_to(tmp_path / "gone.ndjson")
    (folder / "loop.ndjson").symlink_to(folder / "loop.ndjson")
    os.mkfifo(folder / "pipe.ndjson")
    done: dict = {}
    # a FIFO opened for reading blocks until a writer comes: the ingest must not open it
    worker = threading.Thread(
        target=lambda: done.update(s=Store(tmp_path / "s.duckdb").ingest([str(folder)]))
    )
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "ingest blocked on a FIFO"
    summary = done["s"]
    assert (summary.accepted, summary.rejected) == (1, 3)
    reasons = {Path(r["source"]).name: r["reason"] for r in summary.rejects}
    assert "target does not exist" in reasons["dangling.ndjson"]
    assert "loop" in reasons["loop.ndjson"]
    assert "not a regular file" in reasons["pipe.ndjson"]


@pytest.mark.parametrize("number", ["1e400", "-1e999", "1" + "0" * 400])
def test_numbers_javascript_reads_as_infinity_are_rejected(tmp_path, number):
    record = json.dumps(_records(1)[0])
    bad = record.replace('"metadata": {', f'"metadata": {{"huge": {number}, ', 1)
    assert bad != record
    path = tmp_path / "in.ndjson"
    path.write_text(bad + "\n", encoding="utf-8")
    summary = Store(tmp_path / "s.duckdb").ingest([str(path)])
    assert (summary.accepted, summary.rejected) == (0, 1)
    assert "Infinity" in summary.rejects[0]["reason"]


def test_a_bad_file_ingested_twice_is_rejected_once_per_line(tmp_path):
    path = tmp_path / "bad.ndjson"
    path.write_text('{"runId": 1}\n[]\nnot json\n', encoding="utf-8")
    store = Store(tmp_path / "s.duckdb")
    for _ in range(3):
        assert store.ingest([str(path)]).rejected == 3
    assert _count(store, "SELECT count(*) FROM rejects") == 3
    path.write_text('{"runId": 2}\n[]\nnot json\n', encoding="utf-8")  # line 1 changed
    store.ingest([str(path)])
    assert _count(store, "SELECT count(*) FROM rejects") == 4


def test_rejects_are_committed_batch_by_batch(tmp_path):
    path = tmp_path / "bad.ndjson"
    path.write_text("".join(f'{{"runId": {i}}}\n' for i in range(1000)), encoding="utf-8")
    store = Store(tmp_path / "s.duckdb")
    summary = store.ingest([str(path)], batch_size=100)
    # ten batches of rejects, and the last one records what reading the file found
    assert summary.rejected == 1000 and summary.batches == 11
    assert _count(store, "SELECT count(DISTINCT batch_id) FROM rejects") == 10


def test_a_source_row_is_committed_with_its_first_batch(tmp_path):
    records = _records(30)
    path = _write_ndjson(tmp_path / "in.ndjson", records)
    store = Store(tmp_path / "s.duckdb")
    store.ingest([str(path)], batch_size=10)
    with store.reader() as con:
        first_batch, finished = con.execute(
            "SELECT first_batch_id, batch_id FROM sources"
        ).fetchone()
        events_first = con.execute("SELECT min(batch_id) FROM events").fetchone()[0]
    assert first_batch == events_first and finished > first_batch


def _tamper(db: Path, sql: str) -> None:
    con = duckdb.connect(str(db))
    con.execute(sql)
    con.close()


TAMPERING = [
    ("UPDATE events SET payload = replace(payload, 'a', 'b') WHERE seq = 5", "hash does not match"),
    ("DELETE FROM events WHERE seq = 7", "expected"),
    ("UPDATE events SET stream_pos = stream_pos + 1 WHERE seq = 3", "hash does not match"),
    ("UPDATE streams SET record_hash = sha256('x')::BLOB WHERE revision = 1 AND first_seq = 1",
     "hash does not match"),
    ("DELETE FROM source_files", "has no source_files row"),
    ("DELETE FROM batches WHERE batch_id = (SELECT min(batch_id) FROM batches)", "batches row"),
    ("UPDATE batches SET prev_hash = NULL", "does not link"),
]


@pytest.mark.parametrize(("sql", "problem"), TAMPERING, ids=[t[1] for t in TAMPERING])
def test_verify_finds_every_change_to_the_log(tmp_path, sql, problem):
    db = tmp_path / "s.duckdb"
    store = Store(db)
    store.ingest([str(_write_ndjson(tmp_path / "in.ndjson", _records(6)))], batch_size=2)
    assert store.verify().ok
    _tamper(db, sql)
    report = store.verify()
    assert not report.ok
    assert any(problem in p for p in report.problems), report.problems


# Cut the first batch out of the log and relink the next one as if it were the first; the
# projections are rebuilt from what is left, so only the chain can tell.
_DROP_FIRST_BATCH = """
DELETE FROM events WHERE batch_id = 1; DELETE FROM streams WHERE batch_id = 1;
DELETE FROM lineage_log WHERE batch_id = 1; UPDATE source_files SET batch_id = 2;
DELETE FROM batches WHERE batch_id = 1; UPDATE batches SET prev_hash = NULL WHERE batch_id = 2;
"""


def test_verify_finds_a_first_batch_cut_out_and_the_chain_relinked(tmp_path):
    db = tmp_path / "s.duckdb"
    store = Store(db)
    store.ingest([str(_write_ndjson(tmp_path / "in.ndjson", _records(6)))], batch_size=2)
    _tamper(db, _DROP_FIRST_BATCH)
    store.rebuild()
    report = store.verify()
    assert report.problems == ["batch 2: hash does not match its events and streams (changed log)"]


def test_batch_hashes_of_known_records_are_pinned(tmp_path):
    """Literal hashes, so that a change to the hashing that stays self-consistent (verify
    recomputes what ingest wrote) still fails: stores written before it would stop verifying."""
    store = Store(tmp_path / "s.duckdb")
    store.ingest([str(AIOC_FIXTURES / "simple-run.json")])
    store.ingest([str(AIOC_FIXTURES / "tool-allow.json")])
    assert _rows(store, "SELECT batch_id, event_count, hex(hash) FROM batches") == [
        (1, 6, "583E9A3544659EB6B9CEA6B7B2EC97EB3405B9D21B466431825189759DE8BFF7"),
        (2, 11, "ABE530A0C0718BA7F093C9EE184486AF60CCD2204FF051DB63A181EF3B46F9C9"),
    ]


def test_tags_are_events_verify_and_rebuild_reproduce_them(tmp_path):
    path = _write_ndjson(tmp_path / "in.ndjson", _records(4))
    store = Store(tmp_path / "s.duckdb")
    store.ingest([str(path)])
    again = store.ingest([str(path)], tags={"set": "v1"})
    assert (again.duplicate, again.tagged) == (4, 4)
    assert store.ingest([str(path)], tags={"set": "v1"}).tagged == 0  # already tagged
    keys = [k for (k,) in _rows(store, "SELECT run_key FROM runs ORDER BY run_key")]
    store.tag(keys[:2], {"owner": "ci"}, remove=["set"])
    tags = dict(_rows(store, "SELECT run_key, tags::VARCHAR FROM runs"))
    assert json.loads(tags[keys[0]]) == {"owner": "ci"}
    assert json.loads(tags[keys[3]]) == {"set": "v1"}
    assert _count(store, "SELECT count(*) FROM events WHERE type = 'tags_changed'") == 6
    assert store.verify().ok
    store.rebuild()
    assert dict(_rows(store, "SELECT run_key, tags::VARCHAR FROM runs")) == tags
    assert store.get_record(keys[0]) == next(
        r for r in _records(4) if f"aioc:{r['runId']}" == keys[0]
    )


def _rows(store: Store, sql: str) -> list[tuple]:
    with store.reader() as con:
        return con.execute(sql).fetchall()


def _message(text: str) -> dict:
    return {"type": "message", "role": "user", "content": text}


def _run(run_id: str, items: list[dict], inputs: int, started: str) -> dict:
    return {
        "runId": run_id, "startedAt": started, "completedAt": started, "status": "completed",
        "agentName": "A", "question": "q", "response": "", "items": items,
        "inputItemCount": inputs, "promptSnapshots": [], "requestFingerprints": [],
        "policyDecisions": [],
    }


def test_thread_continuations_never_link_input_only_or_identical_runs(tmp_path):
    question = _message("hi")
    answer = {"type": "message", "role": "assistant", "content": "hello"}
    records = [
        # failed attempts holding only the same input: none continues another
        _run("failed-1", [question], 1, "2026-01-01T00:00:01Z"),
        _run("failed-2", [question], 1, "2026-01-01T00:00:02Z"),
        # two identical complete runs: neither continues the other
        _run("done-a", [question, answer], 1, "2026-01-01T00:00:03Z"),
        _run("done-b", [question, answer], 1, "2026-01-01T00:00:04Z"),
        # a follow-up whose input is a complete run's items continues it (and only it)
        _run("follow", [question, answer, _message("more")], 2, "2026-01-01T00:00:05Z"),
    ]
    store = Store(tmp_path / "s.duckdb")
    store.ingest_records(records)
    links = _rows(
        store, "SELECT child_run_key, parent_run_key FROM lineage "
        "WHERE relation = 'thread_continuation' ORDER BY ALL",
    )
    assert links == [("aioc:follow", "aioc:done-a"), ("aioc:follow", "aioc:done-b")]


def test_ingest_with_worker_processes_stores_what_one_process_stores(tmp_path):
    records = _records(120)
    path = _write_ndjson(tmp_path / "in.ndjson", records)
    stores = []
    for workers in (0, 2):
        store = Store(tmp_path / f"w{workers}.duckdb")
        summary = store.ingest([str(path)], workers=workers, batch_size=50)
        assert summary.accepted == 120
        assert store.verify().ok
        stores.append(store)
    for sql in [
        "SELECT * FROM events ORDER BY seq",
        "SELECT * EXCLUDE (ingested_at) FROM streams ORDER BY first_seq",
        *(f"SELECT * FROM {t} ORDER BY ALL" for t in PROJECTION_TABLES),
    ]:
        assert _rows(stores[0], sql) == _rows(stores[1], sql), sql


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recstore", "--db", str(db), *args],
        capture_output=True, text=True, timeout=300,
    )


def test_tag_and_retag_through_the_cli_make_the_compare_flow_work(tmp_path):
    """The README's flow: ingest, then tag the two sets, then compare them by tag."""
    db = tmp_path / "s.duckdb"
    path = _write_ndjson(tmp_path / "in.ndjson", _records(6))
    assert _cli(db, "ingest", str(path)).returncode == 0
    # re-ingesting with --tag tags the identical runs (before: counted as duplicates, untagged)
    again = _cli(db, "ingest", str(path), "--tag", "set=v1", "--json")
    assert json.loads(again.stdout)["tagged"] == 6
    tagged = _cli(db, "tag", "metadata.caseId = 'case-00001'", "set=v2", "team=x", "--json")
    assert tagged.returncode == 0, tagged.stderr
    assert json.loads(tagged.stdout) == {"selected": 1, "tagged": 1, "changes": [
        {"key": "set", "from": "v1", "to": "v2", "runs": 1},
        {"key": "team", "from": None, "to": "x", "runs": 1}]}
    removed = _cli(db, "tag", "tag.team = 'x'", "--remove", "team")
    assert removed.returncode == 0
    assert "tagged 1 of 1 selected runs: team x -> (removed)" in removed.stderr
    counts = _cli(db, "query", "SELECT tags->>'$.set' AS s, count(*) AS n FROM runs "
                  "GROUP BY 1 ORDER BY 1", "--format", "csv")
    assert counts.stdout.split() == ["s,n", "v1,5", "v2,1"]
    assert _cli(db, "verify").returncode == 0
    nothing = _cli(db, "tag", "tag.set = 'nope'", "a=b")
    assert nothing.returncode == 2 and "selects no runs" in nothing.stderr
    assert "Traceback" not in nothing.stderr


def test_tag_says_which_values_it_replaced(tmp_path):
    """Issue 27.10: the README's `recstore tag ... set=v1` overwrote other sets' tags silently."""
    db = tmp_path / "s.duckdb"
    records = _records(6)
    assert _cli(db, "ingest", str(_write_ndjson(tmp_path / "a.ndjson", records[:4])),
                "--tag", "set=baseline").returncode == 0
    assert _cli(db, "ingest", str(_write_ndjson(tmp_path / "b.ndjson", records[4:]))).returncode == 0
    one_way = _cli(db, "tag", "tag.set = 'baseline' and metadata.caseId = 'case-00001'", "set=v1")
    assert one_way.returncode == 0, one_way.stderr
    assert one_way.stderr.strip() == "tagged 1 of 1 selected runs: set baseline -> v1"
    several = _cli(db, "tag", "status = 'completed' or status = 'failed'", "set=v1", "--json")
    assert json.loads(several.stdout) == {"selected": 6, "tagged": 5, "changes": [
        {"key": "set", "from": "baseline", "to": "v1", "runs": 3},
        {"key": "set", "from": None, "to": "v1", "runs": 2}]}
    mixed = _cli(db, "tag", "tag.set = 'v1'", "set=v2", "owner=ci")
    assert mixed.stderr.strip() == "tagged 6 of 6 selected runs: owner (new) -> ci; set v1 -> v2"
    again = _cli(db, "tag", "tag.set = 'v2'", "set=v2")
    assert again.stderr.strip() == "tagged 0 of 6 selected runs (their tags were already so)"


def test_rejects_listing_limits_since_and_summary(tmp_path):
    db = tmp_path / "s.duckdb"
    bad = tmp_path / "bad.ndjson"
    bad.write_text("".join('{"runId": 1}\n' if i % 2 else "nope\n" for i in range(30)))
    assert _cli(db, "ingest", str(bad)).returncode == 1
    listed = _cli(db, "rejects", "--limit", "5", "--json")
    assert len(json.loads(listed.stdout)) == 5
    assert len(json.loads(_cli(db, "rejects", "--limit", "0", "--json").stdout)) == 30
    assert json.loads(_cli(db, "rejects", "--since", "+1d", "--json").stdout) == []
    summary = json.loads(_cli(db, "rejects", "--summary", "--json").stdout)
    assert sorted(row["rejects"] for row in summary) == [15, 15]
    assert all(row["sources"] == 1 for row in summary)
    wrong = _cli(db, "rejects", "--since", "yesterday")
    assert wrong.returncode == 2 and "--since" in wrong.stderr


def test_ingest_max_record_bytes_through_the_cli(tmp_path):
    db = tmp_path / "s.duckdb"
    good = _records(2)
    path = _write_ndjson(tmp_path / "in.ndjson", [dict(good[0], question="x" * 20_000), good[1]])
    done = _cli(db, "ingest", str(path), "--max-record-bytes", "15000")
    assert done.returncode == 1 and "accepted 1" in done.stdout
    assert "over the 15,000-byte limit (raise it with --max-record-bytes)" in done.stderr


def _block_size(store: Store) -> int:
    with store.reader() as con:
        return con.execute("PRAGMA database_size").fetchone()[2]


def test_new_stores_use_small_blocks_and_older_files_keep_theirs(tmp_path):
    records = _records(4)
    new = Store(tmp_path / "new.duckdb")
    new.ingest_records(records[:2])
    assert _block_size(new) == 64 * 1024
    with duckdb.connect(str(tmp_path / "new.duckdb"), read_only=True):  # a user's own connection
        assert _count(new, "SELECT count(*) FROM runs") == 2
    duckdb.connect(str(tmp_path / "old.duckdb")).close()  # DuckDB's default: 256 KiB
    old = Store(tmp_path / "old.duckdb")
    old.ingest_records(records[:2])
    old.ingest_records(records[2:])
    assert _block_size(old) == 256 * 1024
    assert _count(old, "SELECT count(*) FROM runs") == 4 and old.verify().ok


def test_a_batch_stores_its_events_by_family_type_and_index(tmp_path):
    # the order zstd compresses best (chunks.placed_inserts); seqs, the chain and the views
    # do not depend on it, so only the file's own row order shows it
    path = _write_ndjson(tmp_path / "in.ndjson", _records(30))
    for workers in (0, 2):
        store = Store(tmp_path / f"w{workers}.duckdb")
        store.ingest([str(path)], workers=workers, batch_size=100)  # one batch
        stored = _rows(store, "SELECT batch_id, type FROM events")
        assert len({row[0] for row in stored}) == 1 and len(stored) > 300
        assert {row[1] for row in stored} >= {"run_started", "item_appended", "run_finished"}
        with store.reader() as con:
            assert stored_events_in_log_order(con)
        assert store.verify().ok


def test_a_script_without_a_main_guard_can_ingest_with_workers(tmp_path):
    # spawned workers would import the script again and ingest again, each waiting for the lock
    path = _write_ndjson(tmp_path / "in.ndjson", _records(30))
    script = tmp_path / "load.py"
    script.write_text(
        "from recstore.store import Store\n"
        f"summary = Store({str(tmp_path / 's.duckdb')!r}).ingest([{str(path)!r}], workers=2)\n"
        "print(summary.accepted, summary.rejected)\n",
        encoding="utf-8",
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["30", "0"]
    assert _count(Store(tmp_path / "s.duckdb"), "SELECT count(*) FROM runs") == 30
