"""The bulk-comparison contract (tests/compare_contract.py) on a Spark layout: the shared Spark
build of the dev corpus (conftest's ``spark_built``), through a SparkConnection as
``compare --engine spark`` drives it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from recstore.compare.features import define_pairs
from recstore.spark.compare import _select
from recstore.spark.connection import SparkConnection

from .compare_contract import CompareEngineContract


class SparkEngine:
    """The Spark engine as spark_compare drives it."""

    def __init__(self, spark, built):
        self.spark, self.built = spark, built
        with built.store.reader() as con:
            keys = [key for (key,) in con.execute("SELECT run_key FROM runs").fetchall()]
        self.records = {run.run_key: run.record for run in built.store.load_runs(keys)}

    @contextmanager
    def open(self, baseline: str, candidate: str) -> Iterator:
        with SparkConnection(self.spark, self.built.build) as con:
            selections = [_select(con, f"the {side} filter", text, False)
                          for side, text in (("baseline", baseline), ("candidate", candidate))]
            try:
                yield con, selections
            finally:
                for selection in selections:
                    selection.frame.unpersist()

    def prepare_features(self, con) -> None:
        # a layout has no pinned revisions (spark_compare does the same)
        con.execute("CREATE OR REPLACE TEMP TABLE _cmp_pinned (run_key VARCHAR, "
                    "revision INTEGER, first_seq BIGINT, feature_id BIGINT)")
        define_pairs(con)

    def record(self, run_key: str) -> dict:
        # the layout is built from the files the store ingested: the store's record is the
        # layout's (test_spark_build checks the views equal row for row)
        return self.records[run_key]


@pytest.fixture(scope="module")
def engine(spark, spark_built) -> SparkEngine:
    return SparkEngine(spark, spark_built)


class TestSparkEngine(CompareEngineContract):
    """Spark, local."""
