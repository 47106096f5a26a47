"""Records prepared elsewhere (a worker process) and placed by ``BatchWriter.store_prepared`` are
stored exactly as ``Store.ingest_records`` stores them, lineage rows go with the record they
name; a big input is prepared in the writer's process, in its place among the workers' chunks;
a record's hash and its events' payloads are what the store verifies; ``read_runs`` reads current
revisions a chunk per query, in log order."""

from __future__ import annotations

import copy
import hashlib
import json
import multiprocessing
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

import pytest

import recstore.store.prepare as prepare_module
from recstore.canonical import canonical_bytes
from recstore.errors import NotFoundError
from recstore.formats.events import record_to_events
from recstore.formats.jsontext import dumps_json
from recstore.formats.reader import PENDING, RawInput
from recstore.store import Store
from recstore.store.counts import SourceCounts
from recstore.store.ingest import BatchWriter
from recstore.store.prepare import Prepared, Preparer, Refused, prepare, record_hash
from recstore.store.store import read_runs
from recstore.synth import generate_corpus
from tests.conftest import AGENTUSE_DATA, REPO_ROOT

CORPUS = list(generate_corpus(12, seed=3))  # synth plants odd numbers, keys and surrogates
NOT_A_RECORD = {"runId": "broken", "items": "not a list"}


def _lineage(records: list[dict]) -> list[dict]:
    """A row per record (by child) and one without a child (it goes with every record)."""
    rows = [{"relation": "replay_of", "parent_run_id": f"parent-{i}", "child": r["runId"],
             "detail": {"i": i}} for i, r in enumerate(records)]
    rows.insert(3, {"relation": "derived_from", "parent_run_key": "aioc:origin"})
    return rows


def _prepare_all(raws: list[RawInput]) -> list[Prepared | Refused]:
    return [prepare(raw) for raw in raws]


def _log(store: Store) -> dict[str, list]:
    with store.reader() as con:
        return {
            "streams": con.execute(
                "SELECT stream_key, revision, run_id, format, record_hash, first_seq, last_seq, "
                "event_count, line FROM streams ORDER BY first_seq").fetchall(),
            "events": con.execute(
                "SELECT seq, stream_key, stream_pos, revision, type, idx, turn, payload "
                "FROM events ORDER BY seq").fetchall(),
            "lineage": con.execute(
                "SELECT child_run_key, revision, parent_run_key, parent_run_id, relation, detail "
                "FROM lineage_log ORDER BY child_run_key, relation, parent_run_id").fetchall(),
            "rejects": con.execute("SELECT line, reason, raw_text FROM rejects").fetchall(),
            "runs": con.execute("SELECT * EXCLUDE (source_id, batch_id) FROM runs "
                                "ORDER BY run_key").fetchall(),
        }


def test_records_prepared_in_a_worker_are_stored_as_ingest_stores_them(tmp_path):
    records = [*CORPUS[:6], NOT_A_RECORD, *CORPUS[6:]]
    lineage = _lineage(CORPUS)
    ingested = Store(tmp_path / "ingested.duckdb")
    summary = ingested.ingest_records(records, source_uri="records", lineage=lineage)
    assert (summary.accepted, summary.rejected) == (12, 1)

    raws = [RawInput("records", i, None, record) for i, record in enumerate(records, start=1)]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        prepared = pool.submit(_prepare_all, raws).result()
    placed = Store(tmp_path / "placed.duckdb")
    with placed.writer() as con:
        writer = BatchWriter(con, batch_size=4)  # several batches, committed in the background
        counts = SourceCounts(writer.open_source("records", "records"))
        outcomes = [outcome for start in range(0, len(prepared), 5)
                    for outcome in writer.store_prepared(prepared[start:start + 5], counts, lineage)]
        writer.finish_source(counts)
        writer.flush()
        writer.close()
    assert outcomes == ["accepted"] * 6 + ["rejected"] + ["accepted"] * 6
    assert _log(placed) == _log(ingested)
    assert placed.verify().ok


def test_a_big_input_is_prepared_here_in_its_place_among_the_workers_chunks(monkeypatch):
    # pickling a big input to a worker and its events back held two more copies of it
    lines = [json.dumps(r).encode() + b"\n" for r in CORPUS]
    big = {i for i, line in enumerate(lines, start=1) if len(line) > 4000}
    assert big and len(big) < len(lines)
    monkeypatch.setattr(prepare_module, "LOCAL_BYTES", 4000)
    monkeypatch.setattr(prepare_module, "CHUNK", 2)
    here: list[int | None] = []

    def spy(raw: RawInput, fmt: str = "aioc") -> Prepared | Refused:
        here.append(raw.line)  # the workers (spawned) run the real prepare, never this
        return prepare(raw, fmt)

    monkeypatch.setattr(prepare_module, "prepare", spy)
    raws = [RawInput("records", i, None, PENDING, data=line)
            for i, line in enumerate(lines, start=1)]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        prepared = list(Preparer(pool, workers=1).prepared(raws))
    assert set(here) == big
    assert [(p.line, p.key, p.record_hash) for p in prepared] == [
        (i, f"aioc:{r['runId']}", hashlib.sha256(canonical_bytes(r)).digest())
        for i, r in enumerate(CORPUS, start=1)
    ]


class _ChunkSizes:
    """A worker pool that notes the input sizes of each chunk submitted to it."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self.pool = pool
        self.chunks: list[list[int]] = []

    def submit(self, fn, chunk: list[RawInput], *args):  # noqa: ANN201 - a Future
        self.chunks.append([len(raw.data) for raw in chunk])
        return self.pool.submit(fn, chunk, *args)


def test_a_chunk_sent_to_a_worker_is_bounded_in_bytes(monkeypatch):
    # 200 inputs of a few MB each made one chunk of hundreds of MB, pickled whole both ways
    lines = [json.dumps(r).encode() + b"\n" for r in CORPUS]
    monkeypatch.setattr(prepare_module, "LOCAL_BYTES", max(map(len, lines)) + 1)  # none here
    raws = [RawInput("records", i, None, PENDING, data=line)
            for i, line in enumerate(lines, start=1)]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        counted = _ChunkSizes(pool)
        prepared = list(Preparer(counted, workers=1).prepared(raws))
    assert [p.line for p in prepared] == list(range(1, len(lines) + 1))
    assert sorted(size for chunk in counted.chunks for size in chunk) == sorted(map(len, lines))
    assert len(counted.chunks) > 1
    assert all(sum(chunk[:-1]) < prepare_module.LOCAL_BYTES for chunk in counted.chunks)


def test_record_hash_is_the_hash_of_the_whole_canonical_record():
    for record in [*CORPUS, {**CORPUS[0], "items": []}, {"items": [{}], "runId": "x"}]:
        canons = [canonical_bytes(item) for item in record["items"]]
        assert record_hash(record, canons) == hashlib.sha256(canonical_bytes(record)).digest()


def test_payloads_kept_as_utf8_are_stored_as_their_text_and_verify(tmp_path):
    record = {**CORPUS[0], "items": [
        {"type": "message", "role": "user", "content": "fox \U0001f98a " * 500},
        {"type": "message", "role": "assistant", "content": "plain"},
    ]}
    # as prepared: UTF-8 bytes all the way to Arrow; a big record consumed: the leaner form
    assert [type(e.payload_text) for e in record_to_events(record)[1:3]] == [bytes, bytes]
    consumed = record_to_events(copy.deepcopy(record), consume=True)
    assert [type(e.payload_text) for e in consumed[1:3]] == [bytes, str]
    store = Store(tmp_path / "utf8.duckdb")
    assert store.ingest_records([record]).accepted == 1
    with store.reader() as con:
        stored = con.execute("SELECT payload FROM events WHERE type = 'item_appended' "
                             "ORDER BY seq").fetchall()
    assert stored == [(dumps_json(item),) for item in record["items"]]
    assert store.get_record(record["runId"]) == record
    assert store.verify().ok


def test_placing_again_is_a_duplicate_and_a_change_a_revision(tmp_path):
    store = Store(tmp_path / "again.duckdb")
    record = CORPUS[0]
    changed = {**record, "response": "a later answer"}
    with store.writer() as con:
        writer = BatchWriter(con)
        counts = SourceCounts(writer.open_source("records", "records"))
        first = writer.store_prepared([prepare(RawInput("records", 1, None, record))], counts)
        again = writer.store_prepared([prepare(RawInput("records", 2, None, record)),
                                       prepare(RawInput("records", 3, None, changed))], counts)
        writer.flush()
    assert (first, again) == (["accepted"], ["duplicate", "revised"])
    assert store.get_record(record["runId"]) == changed
    assert store.verify().ok


def test_read_runs_reads_current_revisions_in_log_order(tmp_path):
    store = Store(tmp_path / "read.duckdb")
    store.ingest_records(CORPUS[:8])
    store.ingest([str(AGENTUSE_DATA)])
    revised = {**CORPUS[2], "response": "revised"}
    store.ingest_records([revised])  # its current revision is now the last in the log
    with store.reader() as con:
        agentuse = con.execute("SELECT run_key FROM runs WHERE format = 'agentuse' "
                               "ORDER BY run_key LIMIT 1").fetchone()[0]
        log_order = [k for (k,) in con.execute("SELECT run_key FROM runs ORDER BY first_seq").fetchall()]
    keys = [f"aioc:{r['runId']}" for r in reversed(CORPUS[:8])] + [agentuse]
    with store.reader() as con:
        read = list(read_runs(con, keys, chunk=3))
    assert sorted(pos for pos, _ in read) == list(range(len(keys)))
    assert [run.run_key for _, run in read] == [k for k in log_order if k in keys]
    for pos, stored in read:
        run = stored.run()
        assert run.run_key == keys[pos]
        assert json.dumps(run.record) == json.dumps(store.get_record(keys[pos]))
    by_key = {run.run_key: run for _, run in read}
    assert by_key[f"aioc:{revised['runId']}"].revision == 2
    assert by_key[f"aioc:{revised['runId']}"].run().record == revised


def test_read_runs_names_a_missing_run_before_reading_any(tmp_path):
    store = Store(tmp_path / "missing.duckdb")
    store.ingest_records(CORPUS[:2])
    with store.reader() as con, pytest.raises(NotFoundError, match="aioc:nope"):
        next(read_runs(con, [f"aioc:{CORPUS[0]['runId']}", "aioc:nope"]))


def test_a_big_input_is_prepared_as_a_small_one(monkeypatch):
    """Above LOCAL_BYTES a record's events and rows are copied out of its parsed value (so the
    value's memory goes back to the system): the same events, digests, rows and hash."""
    lines = [json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in CORPUS]
    raws = [RawInput("records", i, None, PENDING, data=line) for i, line in enumerate(lines, 1)]
    small = [prepare(raw) for raw in raws]
    monkeypatch.setattr(prepare_module, "LOCAL_BYTES", 0)
    big = [prepare(raw) for raw in raws]
    assert all(isinstance(p, Prepared) for p in small)
    for s, b in zip(small, big, strict=True):
        assert (b.key, b.record_hash, _as_text(b.events), b.digests) == (
            s.key, s.record_hash, _as_text(s.events), s.digests)
        assert repr(b.projection) == repr(s.projection)


def _as_text(events: list[tuple]) -> list[tuple]:
    """Events with their payloads as ``str`` (a big record keeps each in its leaner form)."""
    return [(*event[:3], p if isinstance(p := event[3], str) else p.decode()) for event in events]


@pytest.mark.parametrize("workers", [0, 2])
def test_chunk_records_placed_in_sql_keep_revisions_duplicates_and_tags_in_one_batch(
        tmp_path, workers):
    # a run stored, revised, found identical and revised again within one batch (the chunk
    # placement drops the earlier revisions' rows), tagged, beside runs of other batches
    path = tmp_path / "runs.ndjson"
    first, second = CORPUS[0], {**CORPUS[0], "response": "second"}
    third = {**CORPUS[0], "response": "third"}
    lines = [first, CORPUS[1], second, second, CORPUS[2], third, first, *CORPUS[3:]]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    store = Store(tmp_path / "placed.duckdb")
    summary = store.ingest([str(path)], tags={"k": "v"}, workers=workers, batch_size=4)
    assert (summary.accepted, summary.revised, summary.duplicate) == (len(CORPUS), 3, 1)
    assert summary.batches > 1
    assert store.get_record(first["runId"]) == first
    assert store.get_record(first["runId"], revision=3) == third
    with store.reader() as con:
        runs = con.execute("SELECT revision, tags::VARCHAR, response FROM runs WHERE run_key = ?",
                           [f"aioc:{first['runId']}"]).fetchall()
        items = con.execute("SELECT count(*) FROM items i JOIN runs r USING (run_key) "
                            "WHERE r.run_key = ?", [f"aioc:{first['runId']}"]).fetchone()[0]
    assert runs == [(4, '{"k":"v"}', first["response"])]
    assert items == len(first["items"])
    assert store.verify().ok
    again = store.ingest([str(path)], tags={"k": "w"}, workers=workers, batch_size=4)
    assert (again.accepted, again.revised, again.tagged) == (0, 3, len(CORPUS))
    assert store.verify().ok


_FIRST_CHUNK = """
import sys
from recstore.formats.jsontext import dumps_json
from recstore.formats.reader import PENDING, RawInput
from recstore.store import Store
from recstore.store.chunks import import_lazy_modules, store_schema
from recstore.store.prepare import _prepare_chunk
from recstore.synth import generate_corpus

raws = [RawInput("r", i, None, PENDING, data=dumps_json(r).encode())
        for i, r in enumerate(generate_corpus(3, seed=1))]
with Store(sys.argv[1]).writer() as con:
    schema = store_schema(con)
import_lazy_modules()  # what Store.ingest does before it forks its workers
def packages():
    return {name.partition(".")[0] for name in sys.modules}
before = packages()
_prepare_chunk(raws, "aioc", schema)  # a worker's first chunk
print(sorted(packages() - before))
"""


def test_a_worker_forked_by_ingest_imports_nothing_at_its_first_chunk(tmp_path):
    """Store.ingest imports what staging a chunk imports lazily before it forks its workers
    (pyarrow's first array from a list imports pandas when it is installed: 0.3-0.4 s of CPU in
    every worker), so a worker's first chunk imports no package."""
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_CHUNK, str(tmp_path / "s.duckdb")], cwd=REPO_ROOT,
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("workers", [0, 2])
def test_store_ingest_imports_them_before_it_forks_its_workers(tmp_path, monkeypatch, workers):
    """The test above checks import_lazy_modules itself; this one that Store.ingest calls it
    when it forks workers, and only then."""
    import recstore.store.chunks as chunks

    calls: list[int] = []
    monkeypatch.setattr(chunks, "import_lazy_modules", lambda: calls.append(1))
    path = tmp_path / "c.ndjson"
    path.write_text("".join(json.dumps(r) + "\n" for r in CORPUS[:4]), encoding="utf-8")
    assert Store(tmp_path / "s.duckdb").ingest([str(path)], workers=workers).accepted == 4
    assert len(calls) == (1 if workers else 0)
