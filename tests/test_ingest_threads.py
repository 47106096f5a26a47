"""A bulk ingest runs DuckDB's inserts and commits on one thread (``INGEST_DUCKDB_THREADS``:
its thread pool only added CPU to the writer, issue 28) and gives the database its own setting
back when the writer closes, so later queries on that database run as configured."""

from __future__ import annotations

import duckdb

from recstore.formats.jsontext import dumps_json
from recstore.formats.reader import PENDING, RawInput, parse_input
from recstore.store import Store
from recstore.store.counts import SourceCounts
from recstore.store.ingest import INGEST_DUCKDB_THREADS, BatchWriter
from recstore.store.prepare import prepare
from recstore.synth import generate_corpus


def _threads(con: duckdb.DuckDBPyConnection) -> int:
    with con.cursor() as cur:  # a cursor: the commit thread asks while it commits
        return int(cur.execute("SELECT current_setting('threads')").fetchone()[0])


def test_the_writer_commits_on_its_threads_and_restores_the_setting(tmp_path):
    records = list(generate_corpus(30, seed=5))
    raws = [parse_input(RawInput("mem", i + 1, None, PENDING,
                                 data=dumps_json(r).encode("utf-8", "surrogatepass")))
            for i, r in enumerate(records)]
    seen = []
    with Store(tmp_path / "s.duckdb").writer() as con:
        con.execute("SET threads = 3")
        with BatchWriter(con, batch_size=10, duckdb_threads=INGEST_DUCKDB_THREADS,
                         on_committed=lambda _: seen.append(_threads(con))) as writer:
            assert _threads(con) == INGEST_DUCKDB_THREADS == 1
            counts = SourceCounts(writer.open_source("mem", "ndjson"))
            writer.store_prepared([prepare(raw) for raw in raws], counts)
            writer.flush()
        assert _threads(con) == 3
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 30
    assert seen == [1, 1, 1]  # every batch committed while the setting was 1


def test_a_writer_not_told_leaves_the_setting(tmp_path):
    with Store(tmp_path / "s.duckdb").writer() as con:
        con.execute("SET threads = 2")
        with BatchWriter(con):
            assert _threads(con) == 2
        assert _threads(con) == 2
