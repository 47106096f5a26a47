"""One contract suite for every bulk-comparison engine (recstore/compare/connection.py).

An engine's test module subclasses :class:`CompareEngineContract` once and gives it an
``engine`` fixture: an adapter that opens a connection with the two sides selected, prepares the
comparison features as that engine does, and reads back the stored records the comparison is
checked against. The suite then holds every engine to the same contract: the connection
satisfies :class:`CompareConnection`, each step leaves the tables :data:`CONTRACT_TABLES` names
with their columns, and every pair's verdict equals aioc's ``compareRunRecords``
(:func:`recstore.compare_records`) on the two records. test_compare_contract.py runs it on a
DuckDB store, test_spark_compare_contract.py on a Spark layout of the same files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import pyarrow as pa
import pytest

from recstore import compare_records
from recstore.compare.aggregate import DEFAULT_RULE
from recstore.compare.bulk import (
    aioc_result,
    compare_paired,
    compared_sections,
    pair_rows,
    pair_selected,
)
from recstore.compare.connection import CONTRACT_TABLES, CompareConnection

# the dev corpus's two arms (tests/spark_corpus.py writes them with an edge file of duplicates,
# revisions and rejects, which these filters leave out)
BASELINE = "source_uri LIKE '%1-baseline%'"
CANDIDATE = "source_uri LIKE '%2-candidate%'"
PAIR_BY = "metadata.caseId"
# the dev corpus pairs its 600 cases; the edge file revises two baseline runs, whose current
# revisions then come from it (so the baseline filter leaves them out)
PAIRS = 598


class Engine(Protocol):
    """What an engine's test module gives the suite."""

    def open(self, baseline: str, candidate: str) -> AbstractContextManager[
            tuple[CompareConnection, list[Any]]]:
        """A connection with the two sides selected (each with ``num_rows``)."""

    def prepare_features(self, con: CompareConnection) -> None:
        """Leave ``_cmp_pairs`` for the pairs of ``_cmp_pairing``, as the engine's caller does."""

    def record(self, run_key: str) -> dict:
        """The stored record of ``run_key`` (its current revision)."""


_OUTPUT_PATH = re.compile(r"toolCalls\[\d+\]\.(hasOutput|output)")


def difference_flags(differences: list[dict]) -> dict[str, bool]:
    """The engine's flags that aioc's result does not carry, from compare_records' differences:
    ``same_tool_outputs`` (no call's output or hasOutput differs) and ``same_metadata``."""
    paths = [d["path"] for d in differences]
    return {"same_tool_outputs": not any(_OUTPUT_PATH.fullmatch(p) for p in paths),
            "same_metadata": "metadata" not in paths}


def _columns(con: CompareConnection, table: str) -> list[str]:
    return con.sql(f"SELECT * FROM {table} LIMIT 0").to_arrow_table().column_names


class CompareEngineContract:
    """Subclass with an ``engine`` fixture (an :class:`Engine`)."""

    @pytest.fixture
    def paired(self, engine: Engine) -> Iterator[tuple[CompareConnection, list[Any]]]:
        with engine.open(BASELINE, CANDIDATE) as (con, selections):
            pair_selected(con, selections, PAIR_BY, "latest", False)
            yield con, selections

    @pytest.fixture
    def compared(self, engine: Engine, paired: tuple[CompareConnection, list[Any]]):
        con, selections = paired
        engine.prepare_features(con)
        spec, sections = compared_sections((), None, None, None)
        comparison = compare_paired(
            con, BASELINE, CANDIDATE, pair_by=PAIR_BY, duplicates="latest", sections=sections,
            spec=spec, rule=DEFAULT_RULE,
            selected={"baseline": selections[0].num_rows, "candidate": selections[1].num_rows})
        return con, comparison

    def test_the_connection_satisfies_the_protocol(self, paired) -> None:
        con, _ = paired
        assert isinstance(con, CompareConnection)
        assert con.execute("SELECT 40 + ?", [2]).fetchall() == [(42,)]
        assert con.sql("SELECT 1 AS x").to_arrow_table().column_names == ["x"]

    def test_a_registered_table_is_readable_until_unregistered(self, paired) -> None:
        con, _ = paired
        con.register("_contract_rows", pa.table({"x": [1, 2, 3]}))
        assert con.execute("SELECT sum(x) FROM _contract_rows").fetchall() == [(6,)]
        con.unregister("_contract_rows")
        with pytest.raises(Exception):  # noqa: B017 - each engine raises its own kind
            con.execute("SELECT * FROM _contract_rows").fetchall()

    def test_pairing_leaves_its_tables(self, paired) -> None:
        con, selections = paired
        for table in ("_cmp_pairing", "_cmp_unpaired_runs"):
            assert set(CONTRACT_TABLES[table]) <= set(_columns(con, table)), table
        ((pairs, distinct),) = con.execute(
            "SELECT count(*), count(DISTINCT pair_key) FROM _cmp_pairing").fetchall()
        ((unpaired,),) = con.execute("SELECT count(*) FROM _cmp_unpaired_runs").fetchall()
        # every selected run is paired or said unpaired
        assert pairs == distinct == PAIRS, (pairs, distinct)
        assert 2 * pairs + unpaired == sum(s.num_rows for s in selections)

    def test_every_pair_is_classified_as_compare_records_says(self, engine, compared) -> None:
        con, comparison = compared
        for table in ("_cmp_pairs", "_cmp_classified"):
            assert set(CONTRACT_TABLES[table]) <= set(_columns(con, table)), table
        rows = pair_rows(con).to_pylist()
        assert len(rows) == comparison.pair_count == PAIRS
        for row in rows:
            expected = compare_records(engine.record(row["baseline_run_key"]),
                                       engine.record(row["candidate_run_key"]))
            assert aioc_result(row) == {key: expected[key] for key in aioc_result(row)}, row
            flags = difference_flags(expected["differences"])
            assert {key: row[key] for key in flags} == flags, row
        assert {row["classification"] for row in rows} >= {"pass", "fail"}
