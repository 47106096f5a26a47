"""Worker processes hand each chunk's Arrow rows to the writer through a spool file in memory
(``recstore.store.spool``): the rows the writer maps equal those made in one process, nothing is left
behind, a spool that cannot be written falls back to the pipe, and what a killed ingest left is
removed by the next writer."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa

import recstore.store.prepare as prepare_module
from recstore.formats.reader import PENDING, RawInput
from recstore.store import Store
from recstore.store.chunks import store_schema
from recstore.store.prepare import Prepared, Preparer
from recstore.store.spool import SPOOL_PREFIX, Spooled, spool_base, spool_prefix
from recstore.synth import generate_corpus

CORPUS = list(generate_corpus(12, seed=5))


def _raws() -> list[RawInput]:
    return [RawInput("records", i, None, PENDING, data=json.dumps(r).encode() + b"\n")
            for i, r in enumerate(CORPUS, start=1)]


def _schema(tmp_path: Path) -> dict:
    with Store(tmp_path / "schema.duckdb").writer() as con:
        return store_schema(con)


def _own_spools() -> list[str]:
    return [name for name in os.listdir(spool_base())
            if name.startswith(spool_prefix(os.getpid()))]


def _rows_of(prepared: list) -> list[tuple[str, pa.Table]]:
    """Each chunk's tables (events first), in chunk order."""
    chunks = list({id(p.rows): p.rows for p in prepared if isinstance(p, Prepared)}.values())
    return [(name, table) for rows in chunks
            for name, table in [("events", rows.events), *sorted(rows.tables.items())]]


class _Kept:
    """A worker pool that keeps the futures submitted to it."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self.pool = pool
        self.futures: list = []

    def submit(self, fn, *args):  # noqa: ANN201 - a Future
        self.futures.append(self.pool.submit(fn, *args))
        return self.futures[-1]


def test_worker_rows_come_through_the_spool_equal_to_rows_made_here(tmp_path, monkeypatch):
    monkeypatch.setattr(prepare_module, "CHUNK", 5)
    schema = _schema(tmp_path)
    raws = _raws()
    here = [p for start in range(0, len(raws), 5)
            for p in prepare_module._prepare_chunk(raws[start:start + 5], "aioc", schema)]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        kept = _Kept(pool)
        preparer = Preparer(kept, workers=1)
        preparer.schema = schema
        prepared, spools_seen = [], set()
        for p in preparer.prepared(raws):
            spools_seen.update(_own_spools())
            prepared.append(p)
    assert len(kept.futures) == 3
    assert all(isinstance(f.result(), Spooled) for f in kept.futures)
    assert len(spools_seen) == 1 and _own_spools() == []  # one spool, removed at the end
    assert [(p.key, p.record_hash, p.digests, p.rec, p.first_event, p.event_count)
            for p in prepared] == [
        (p.key, p.record_hash, p.digests, p.rec, p.first_event, p.event_count) for p in here]
    theirs, ours = _rows_of(prepared), _rows_of(here)
    assert [name for name, _ in theirs] == [name for name, _ in ours]
    assert all(a.equals(b) for (_, a), (_, b) in zip(theirs, ours, strict=True))


def test_rows_go_through_the_pipe_when_the_spool_cannot_be_written(tmp_path):
    schema = _schema(tmp_path)
    raws = _raws()
    sent = prepare_module._prepare_in_worker(raws, "aioc", schema, str(tmp_path / "gone"))
    assert isinstance(sent, list)
    here = prepare_module._prepare_chunk(raws, "aioc", schema)
    assert all(a.equals(b) for (_, a), (_, b) in
               zip(_rows_of(sent), _rows_of(here), strict=True))


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          check=True, capture_output=True, text=True)
    return int(done.stdout)


def test_a_writer_removes_only_the_spools_of_writers_no_longer_running(tmp_path):
    base = Path(spool_base())
    stale = base / f"{spool_prefix(_dead_pid())}test"
    live = base / f"{spool_prefix(os.getpid())}test"
    # a dead pid of another pid namespace (a container sharing /dev/shm) may be running there
    foreign = base / f"{SPOOL_PREFIX}1-{_dead_pid()}-test"
    for spool in (stale, live, foreign):
        spool.mkdir()
        (spool / "chunk.arrow").write_bytes(b"rows")
    try:
        (tmp_path / "r.json").write_text(json.dumps(CORPUS[0]))
        assert Store(tmp_path / "s.duckdb").ingest([str(tmp_path / "r.json")]).accepted == 1
        assert not stale.exists()
        assert (live / "chunk.arrow").read_bytes() == b"rows"
        assert (foreign / "chunk.arrow").read_bytes() == b"rows"
    finally:
        for spool in (stale, live, foreign):
            for child in spool.glob("*"):
                child.unlink()
            if spool.exists():
                spool.rmdir()


def test_the_spool_of_an_ingest_killed_with_sigkill_is_removed_by_the_next(tmp_path):
    data = tmp_path / "big.ndjson"
    data.write_text("".join(json.dumps(r) + "\n" for r in generate_corpus(1500, seed=7)))
    db = tmp_path / "s.duckdb"
    cmd = [sys.executable, "-m", "recstore", "--db", str(db), "ingest", str(data)]
    proc = subprocess.Popen([*cmd, "--workers", "2"], stderr=subprocess.PIPE)
    spool = spool_prefix(proc.pid)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if any(name.startswith(spool) for name in os.listdir(spool_base())):
            break
        time.sleep(0.02)
    assert proc.poll() is None, "ingest finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert any(name.startswith(spool) for name in os.listdir(spool_base()))  # left behind

    again = subprocess.run([*cmd, "--json"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["accepted"] + summary["duplicate"] == 1500
    assert not any(name.startswith(spool) for name in os.listdir(spool_base()))
    verify = subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), "verify"],
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr
