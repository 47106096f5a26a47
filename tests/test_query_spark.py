"""Parquet export and the Spark path: the export is hive-partitioned zstd Parquet Spark can read,
and every starter saved query gives the same rows on DuckDB (the store) and on Spark (the
export)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from recstore.query import compile_query, list_saved, run_query
from recstore.query.export import export_views
from recstore.query.spark import INSTALL_HINT, run_on_spark, spark_session
from recstore.store import Store

from .conftest import REPO_ROOT
from .query_support import DOCS_NOW_TEXT

# DSL queries that exercise the DSL → Spark SQL path beyond the saved set.
DSL_CONFORMANCE = [
    "tool_calls.any(name = 'search_docs' and args.limit > 5) fields run_key, agent, status",
    "visits.count() >= 3 fields run_key, visit_count",
    "tool_calls where run.status = 'failed' and envelope_status = 'denied' "
    "fields run_key, call_index, name",
    "metadata.caseId = 'case-00005' fields run_key, started",
    "status = 'failed' and started > -60d fields run_key, error_name",
]



@pytest.fixture(scope="session")
def exported(fixture_store: Store, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("export")
    export_views(fixture_store, directory)
    return directory


def test_export_layout_types_and_counts(fixture_store, exported):
    runs_days = sorted(p.name for p in (exported / "runs").iterdir())
    assert runs_days and all(d.startswith("day=") for d in runs_days)
    assert (exported / "tool_calls").glob("day=*/*.parquet")
    assert list((exported / "sources").glob("*.parquet")), "unpartitioned views are one file"
    files = list(exported.rglob("*.parquet"))
    for path in files[:40]:
        meta = pq.ParquetFile(path)
        assert meta.metadata.row_group(0).column(0).compression == "ZSTD"
        for field in meta.schema_arrow:
            assert "uuid" not in str(field.type).lower()
    metadata_type = pq.ParquetFile(next((exported / "runs").rglob("*.parquet"))).schema_arrow \
        .field("metadata").type
    assert str(metadata_type) == "string"  # JSON as text, readable by any engine
    con = duckdb.connect()
    with fixture_store.reader() as store_con:
        for view in ("runs", "tool_calls", "events", "lineage"):
            stored = store_con.execute(f"SELECT count(*) FROM {view}").fetchone()[0]
            read_back = con.execute(
                f"SELECT count(*) FROM read_parquet('{exported / view}/**/*.parquet', "
                "hive_partitioning = true)").fetchone()[0]
            assert read_back == stored, view


def test_export_partitions_hold_the_runs_of_that_day(fixture_store, exported):
    con = duckdb.connect()
    mismatched = con.execute(
        f"SELECT count(*) FROM read_parquet('{exported}/runs/**/*.parquet', "
        "hive_partitioning = true) WHERE coalesce(strftime(started, '%Y-%m-%d'), 'unknown') "
        "<> CAST(day AS VARCHAR)").fetchone()[0]
    assert mismatched == 0
    # Child rows sit in their run's day.
    orphaned = con.execute(
        f"SELECT count(*) FROM read_parquet('{exported}/tool_calls/**/*.parquet', "
        f"hive_partitioning = true) t JOIN read_parquet('{exported}/runs/**/*.parquet', "
        "hive_partitioning = true) r USING (run_key) WHERE CAST(t.day AS VARCHAR) <> "
        "CAST(r.day AS VARCHAR)").fetchone()[0]
    assert orphaned == 0


def test_missing_pyspark_gives_install_hint(fixture_store, exported):
    code = ("import sys; sys.modules['pyspark'] = None; from recstore.cli import main; "
            f"sys.argv = ['recstore', '--db', {str(fixture_store.path)!r}, 'query', "
            f"'@slowest-runs', '--engine', 'spark', '--parquet', {str(exported)!r}]; main()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"recstore: error: pyspark is not installed; install it with: {INSTALL_HINT}"]


def _normal(value):
    if isinstance(value, float | Decimal):
        value = float(value)
        return None if math.isnan(value) else round(value, 6)
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    return value


def _rows(result) -> list[tuple]:
    return sorted((tuple(_normal(v) for v in row) for row in result.rows()), key=repr)


def _conformance_cases() -> list[tuple[str, str, dict]]:
    cases = [(f"@{q.name}", q.text, {"language": q.language, "params": q.bind({})})
             for q in list_saved()]
    cases += [(text, text, {"language": "dsl", "params": {}}) for text in DSL_CONFORMANCE]
    return cases


@pytest.mark.slow
@pytest.mark.parametrize(("label", "text", "options"), _conformance_cases(),
                         ids=[c[0][:40] for c in _conformance_cases()])
def test_duckdb_and_spark_agree(fixture_store, exported, spark, label, text, options):
    now = datetime.fromisoformat(DOCS_NOW_TEXT)
    query = compile_query(text, params=options["params"], now=now, language=options["language"])
    with run_query(fixture_store, query.sql, now=now) as result:
        duck_columns, duck_rows = result.columns, _rows(result)
    spark_result = run_on_spark(query, exported)
    assert spark_result.columns == duck_columns
    spark_rows = _rows(spark_result)
    assert duck_rows, f"{label} selects nothing on the fixture store; the comparison is empty"
    assert spark_rows == duck_rows


def test_the_library_uses_the_test_runs_one_spark_session(spark):
    assert spark_session() is spark


@pytest.mark.slow
def test_cli_engine_spark_matches_the_store(fixture_store, exported, spark):
    """``recstore query --engine spark`` gives the rows the store gives. The Spark side runs the
    real command in-process (click's runner) so it uses the test run's one Spark session instead
    of starting a second JVM; test_missing_pyspark_gives_install_hint covers the same command in
    a subprocess."""
    from click.testing import CliRunner

    from recstore.cli import cli

    from .query_support import run_cli

    on_store = run_cli("query", "@guardrail-trips", "--format", "json", db=fixture_store.path)
    on_spark = CliRunner().invoke(cli, ["--db", str(fixture_store.path), "query",
                                        "@guardrail-trips", "--engine", "spark", "--parquet",
                                        str(exported), "--format", "json"])
    assert on_store.returncode == 0 and on_spark.exit_code == 0, on_spark.output
    store_rows, spark_rows = json.loads(on_store.stdout), json.loads(on_spark.stdout)
    assert store_rows and sorted(map(repr, spark_rows)) == sorted(map(repr, store_rows))


def test_a_failing_spark_job_is_one_error_line(fixture_store, exported, spark):
    """A query Spark fails at run time (ANSI casts: 'aioc:…' is not a number) is one line
    naming Spark's error class and exit status 2, not a Py4J traceback."""
    from click.testing import CliRunner

    from recstore.cli import cli

    result = CliRunner().invoke(cli, ["--db", str(fixture_store.path), "query",
                                      "SELECT CAST(run_key AS INT) AS n FROM runs", "--engine",
                                      "spark", "--parquet", str(exported)])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("recstore: error: Spark failed: [CAST_INVALID_INPUT]")
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_a_local_session_sizes_its_driver_to_the_machine(spark):
    """Spark's default 1 GiB heap runs out of memory building ~200,000 runs; a local session
    gets half the machine (1-16 GiB) unless --conf says otherwise."""
    from recstore.query.spark import local_driver_memory

    size = local_driver_memory()
    assert spark.sparkContext.getConf().get("spark.driver.memory") == size
    assert 1 <= int(size.removesuffix("g")) <= 16


def test_a_local_sessions_python_workers_run_this_interpreter(spark):
    """The UDFs need recstore and pyarrow: a local session's workers are the Python that runs
    recstore, not whichever `python3` is on PATH (a venv that is not activated), unless
    PYSPARK_PYTHON says otherwise."""
    assert spark.sparkContext.pythonExec == os.environ.get("PYSPARK_PYTHON", sys.executable)


def test_a_stopped_spark_jvm_is_one_error_with_the_memory_hint():
    """When Spark's JVM dies (out of memory at ~200,000 runs with a 1 GiB heap), Py4J's last
    word is a refused connection; the error says the JVM stopped and how to give it memory."""
    # py4j comes with the spark extra: without it (pip install '.[test]') this test skips
    Py4JNetworkError = pytest.importorskip("py4j.protocol").Py4JNetworkError  # noqa: N806

    from recstore.query.spark import SparkFailed, spark_failures

    with pytest.raises(SparkFailed, match=r"JVM stopped .*spark.driver.memory=8g in `conf`"):
        with spark_failures():
            try:
                raise Py4JNetworkError("Answer from Java side is empty")
            except Py4JNetworkError:
                raise ConnectionRefusedError(111, "Connection refused") from None
