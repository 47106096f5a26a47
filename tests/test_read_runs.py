"""read_runs: what replays (and Store.load_runs, compare) reassemble their sources from."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.store import Store
from recstore.store.store import read_runs

from .conftest import AGENTUSE_DATA, AIOC_FIXTURES, AIOC_RECORD_NAMES


@pytest.fixture(scope="module")
def store_and_records():
    """A store of the aioc fixtures, one of them revised, and the agentuse sessions; with each
    run's record as ``Store.get_record`` reassembles it."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "s.duckdb")
        store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in AIOC_RECORD_NAMES]
                     + [str(AGENTUSE_DATA)])
        revised = json.loads((AIOC_FIXTURES / "tool-allow.json").read_text(encoding="utf-8"))
        revised["status"] = "revised"
        store.ingest_records([revised], source_uri="revision")
        with store.reader() as con:
            keys = [k for (k,) in con.execute("SELECT run_key FROM runs ORDER BY run_key").fetchall()]
        assert any(k.startswith("agentuse:") for k in keys)
        yield store, {key: store.get_record(key) for key in keys}


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_each_run_is_its_current_record_whatever_the_order_repeats_and_chunks(
        store_and_records, data):
    """Every position gets its run's current record, keys in any order, a key named twice (it
    once came back with every event twice), any number of runs per query."""
    store, records = store_and_records
    keys = data.draw(st.lists(st.sampled_from(sorted(records)), min_size=1, max_size=30))
    chunk = data.draw(st.integers(min_value=1, max_value=8))
    with store.reader() as con:
        got = dict(read_runs(con, keys, chunk))
    assert sorted(got) == list(range(len(keys)))
    for pos, key in enumerate(keys):
        assert got[pos].run_key == key
        assert got[pos].run().record == records[key]
