"""The bulk-comparison contract (tests/compare_contract.py) on a DuckDB store of the dev corpus;
test_spark_compare_contract.py runs the same suite on a Spark layout of the same files."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from recstore.compare.features import resolve_features
from recstore.progress import NO_PROGRESS
from recstore.query.api import select_gate_run_sets
from recstore.store import Store

from .compare_contract import CompareEngineContract


class StoreEngine:
    """The DuckDB engine as bulk_compare drives it: sides selected, then one writer connection."""

    def __init__(self, store: Store):
        self.store = store
        # read up front: a reader cannot open beside the writer a comparison holds
        with store.reader() as con:
            keys = [key for (key,) in con.execute("SELECT run_key FROM runs").fetchall()]
        self.records = {run.run_key: run.record for run in store.load_runs(keys)}

    @contextmanager
    def open(self, baseline: str, candidate: str) -> Iterator:
        selections = select_gate_run_sets(
            self.store, [("the baseline filter", baseline), ("the candidate filter", candidate)])
        with self.store.writer() as con:
            yield con, selections

    def prepare_features(self, con) -> None:
        resolve_features(con, False, NO_PROGRESS)

    def record(self, run_key: str) -> dict:
        return self.records[run_key]


@pytest.fixture(scope="module")
def engine(spark_inputs, tmp_path_factory: pytest.TempPathFactory) -> StoreEngine:
    store = Store(tmp_path_factory.mktemp("contract") / "runs.duckdb")
    store.ingest(sorted(str(p) for p in spark_inputs.iterdir()))
    return StoreEngine(store)


class TestStoreEngine(CompareEngineContract):
    """DuckDB."""
