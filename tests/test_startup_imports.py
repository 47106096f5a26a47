"""A read command imports what it needs when it needs it (issue 27.1): the real CLI, traced
with ``python -X importtime``, on a real store. How fast they start is measured side by side
with a one-line duckdb script by benchmarks/bench_startup.py, not asserted here."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from recstore.query.api import CompiledQuery, execute
from recstore.query.guard import guard_sql
from recstore.query.output import write_result
from recstore.query.views import default_catalog

from .conftest import imported_modules, run_cli

# What a read never needs: Arrow (and numpy under it), the record models, the ingest stack, and
# the Spark dialect of sqlglot (only `--dialect spark` and the Spark engine print it).
NEVER_ON_READ = {"pyarrow", "numpy", "pandas.core", "pydantic", "recstore.store.ingest",
                 "recstore.store.batches", "recstore.store.prepare", "recstore.store.projection",
                 "recstore.store.agentuse_ingest", "recstore.formats.aioc",
                 "recstore.replay.harness", "sqlglot.dialects.spark", "sqlglot.dialects.spark2",
                 "sqlglot.dialects.hive"}
# `recstore query "SELECT 1"` imported 539 modules before issue 27.1, ~355 after its first pass,
# ~300 when the guard checked every new text, and ~245 now that plain SQL runs without sqlglot
# (recstore.query.plain_sql); SQL outside that subset imports ~305 on its first run (the guard)
# and ~245 when its checked SQL is remembered (recstore.query.checked_cache). The ceilings leave
# room for other Python and library versions, not for sqlglot (~60 modules) on a plain query,
# nor for the ingest stack (~200).
PLAIN_CEILING = 275
QUERY_CEILING = 340
REMEMBERED_CEILING = 275
HELP_CEILING = 200


def _forbidden(modules: set[str], names: set[str]) -> set[str]:
    return {m for m in modules if m in names or any(m.startswith(f"{n}.") for n in names)}


@pytest.fixture(scope="module")
def db(fixture_store) -> str:
    return str(fixture_store.path)


@pytest.fixture(scope="module")
def run_key(fixture_store) -> str:
    with fixture_store.reader() as con:
        return con.execute("SELECT run_key FROM runs ORDER BY run_key LIMIT 1").fetchone()[0]


def _own_cache(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "RECSTORE_CACHE_DIR": str(tmp_path / "cache")}


def test_a_plain_sql_query_imports_neither_sqlglot_nor_arrow_nor_the_ingest(db, tmp_path):
    modules = imported_modules("--db", db, "query", "SELECT agent, count(*) AS n FROM runs "
                               "GROUP BY ALL ORDER BY n DESC", env=_own_cache(tmp_path))
    assert {"duckdb", "recstore.query.plain_sql"} <= modules  # the trace is read right
    assert _forbidden(modules, NEVER_ON_READ | {"sqlglot", "recstore.query.guard",
                                                "recstore.query.dsl"}) == set()
    assert len(modules) <= PLAIN_CEILING


def test_other_sql_imports_the_guard_once_then_runs_what_it_checked(db, tmp_path):
    env = _own_cache(tmp_path)
    text = "WITH t AS (SELECT 1 AS n) SELECT n FROM t"  # a CTE: not plain_sql's to judge
    modules = imported_modules("--db", db, "query", text, env=env)
    assert {"duckdb", "sqlglot", "recstore.query.guard"} <= modules
    assert _forbidden(modules, NEVER_ON_READ | {"recstore.query.dsl",
                                                "recstore.query.dialects"}) == set()
    assert len(modules) <= QUERY_CEILING
    # the same text again runs the SQL the guard checked above: no sqlglot, no guard
    again = imported_modules("--db", db, "query", text, env=env)
    assert {"duckdb", "recstore.query.checked_cache"} <= again
    assert _forbidden(again, NEVER_ON_READ | {"sqlglot", "recstore.query.guard",
                                              "recstore.query.dsl"}) == set()
    assert len(again) <= REMEMBERED_CEILING


def test_a_dsl_query_imports_the_dsl_but_not_the_ingest(db, tmp_path):
    env = _own_cache(tmp_path)
    text = "tool_calls.all(call_index >= 0) fields run_key, agent limit 3"  # beyond plain_dsl
    modules = imported_modules("--db", db, "query", text, env=env)
    assert "recstore.query.dsl" in modules
    assert _forbidden(modules, NEVER_ON_READ) == set()
    again = imported_modules("--db", db, "query", text, env=env)
    assert _forbidden(again, NEVER_ON_READ | {"sqlglot", "recstore.query.dsl"}) == set()


# README's DSL examples, and the docs' visits.count(): the first run needs no sqlglot either
_EVERYDAY_DSL = [
    "status = 'failed' and agent = 'Support' and started > -7d",
    "tool_calls.any(name = 'refund' and args.amount > 100) order by started desc limit 20",
    "tool_calls where envelope_status = 'denied' fields run_key, name, envelope_code",
    "visits.count() >= 3", "metadata.caseId = 'x' or not policy.none(decision = 'deny')",
]


@pytest.mark.parametrize("text", _EVERYDAY_DSL)
def test_an_everyday_dsl_query_runs_without_sqlglot_the_first_time(db, tmp_path, text):
    modules = imported_modules("--db", db, "query", text, env=_own_cache(tmp_path))
    assert "recstore.query.plain_dsl" in modules  # the trace is read right
    assert _forbidden(modules, NEVER_ON_READ | {"sqlglot", "recstore.query.dsl"}) == set()
    assert len(modules) <= PLAIN_CEILING


@pytest.mark.parametrize("command", [["runs"], ["show", "RUN", "--no-pager"], ["rejects"],
                                     ["lineage", "RUN"], ["schema"]], ids=" ".join)
def test_a_read_command_imports_no_query_compiler_and_no_ingest(db, run_key,
                                                                 command):
    args = [run_key if a == "RUN" else a for a in command]
    modules = imported_modules("--db", db, *args)
    assert "duckdb" in modules
    assert _forbidden(modules, NEVER_ON_READ | {"sqlglot"}) == set()


@pytest.mark.parametrize("command", ["query", "runs", "show", "schema", "rejects", "lineage"])
def test_help_of_a_read_command_opens_nothing(command):
    modules = imported_modules(command, "--help")
    assert f"recstore.cli.{'replay' if command == 'lineage' else 'store'}_cmds" in modules or (
        "recstore.cli.query_cmds" in modules)
    assert _forbidden(modules, NEVER_ON_READ | {"duckdb", "sqlglot"}) == set()
    assert len(modules) <= HELP_CEILING


def test_a_small_result_of_timestamps_needs_no_arrow(db, tmp_path):
    """Dates and timestamps Python holds read the same both ways (see api._RowReader); the
    DSL's default fields of runs hold `started`, so every DSL query over runs prints one."""
    modules = imported_modules("--db", db, "query", "status = 'completed' limit 3",
                               env=_own_cache(tmp_path))
    assert "recstore.query.plain_dsl" in modules  # the trace is read right
    assert _forbidden(modules, NEVER_ON_READ | {"sqlglot"}) == set()


def test_a_timestamp_python_cannot_hold_still_streams_arrow_without_pandas(db):
    """A year past 9999 or infinity takes the Arrow path, and the CLI answers pyarrow's pandas
    probe when pyarrow loads that late."""
    modules = imported_modules("--db", db, "query",
                               "SELECT run_key, TIMESTAMP '10000-01-01' AS t FROM runs LIMIT 2")
    assert "pyarrow" in modules
    assert not {m for m in modules if m.startswith("pandas.")}


# One column of each type the row path takes (output.plain_type), with the values that differ
# most easily between DuckDB's and Arrow's conversions.
_PLAIN = ("SELECT * FROM (VALUES "
          "(true, 1::TINYINT, -2::SMALLINT, 3::INTEGER, 9223372036854775807::BIGINT, "
          "255::UTINYINT, 18446744073709551615::UBIGINT, 1.1::FLOAT, 1e300::DOUBLE, "
          "'nan'::DOUBLE, 12345.678::DECIMAL(18,3), 'x\u00e9\u4e2d'::VARCHAR, "
          "'{\"a\": [1, 2]}'::JSON, '\\x00\\xff'::BLOB, [1, NULL, 3], ['a', 'b'], NULL), "
          "(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
          "NULL, NULL, NULL)) t(b, ti, si, i, bi, ut, ub, f, d, nan, dec, s, j, bl, li, ls, n)")


def _plain_query() -> CompiledQuery:
    return CompiledQuery(guard_sql(_PLAIN, default_catalog()), "sql", default_catalog())


# Dates and timestamps: in range they take the row path; a year past 9999, a year before 1 and
# infinity take Arrow's, whose text says what is stored.
_TIMES = ("SELECT * FROM (VALUES (TIMESTAMP '2024-01-02 03:04:05.123', DATE '2024-02-29'), "
          "(TIMESTAMP '1970-01-01', DATE '0001-01-02'), (NULL, NULL)) t(ts, d)")
_ODD_TIMES = ["SELECT TIMESTAMP '10000-01-01' AS t", "SELECT TIMESTAMP 'infinity' AS t",
              "SELECT DATE '-infinity' AS d", "SELECT TIMESTAMP '0000-06-01' AS t",
              "SELECT range AS t FROM range(TIMESTAMP '2024-01-01', TIMESTAMP '2024-01-02', "
              "INTERVAL 1 SECOND)"]  # more rows than a batch: not all checked at once


@pytest.mark.parametrize("sql", [_TIMES, *_ODD_TIMES], ids=lambda sql: sql[:40])
@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_times_without_arrow_write_what_arrow_batches_write(tmp_path, sql, fmt):
    con = duckdb.connect()
    query = CompiledQuery.remembered(sql, "sql", default_catalog(), sql)
    texts = {}
    for arrow in (True, False):
        result = execute(con, query, batch_rows=2000, arrow=arrow)
        assert (result.schema is None) is (not arrow and sql == _TIMES)  # the path it takes
        out = tmp_path / f"{fmt}-{arrow}.txt"
        write_result(result, fmt, out)
        texts[arrow] = out.read_text(encoding="utf-8")
    assert texts[False] == texts[True]


@pytest.mark.parametrize("fmt", ["table", "json", "ndjson", "csv"])
def test_rows_without_arrow_write_what_arrow_batches_write(tmp_path, fmt):
    con = duckdb.connect()
    query = _plain_query()
    texts = {}
    for arrow in (True, False):
        result = execute(con, query, batch_rows=1, arrow=arrow)
        assert (result.schema is None) is not arrow  # each path is the one asked for
        out = tmp_path / f"{fmt}-{arrow}.txt"
        assert write_result(result, fmt, out) == 2
        texts[arrow] = out.read_text(encoding="utf-8")
    assert texts[False] == texts[True]


def test_rows_without_arrow_are_arrow_s_values():
    con = duckdb.connect()
    query = _plain_query()
    rows = {arrow: list(execute(con, query, arrow=arrow).rows()) for arrow in (True, False)}
    assert repr(rows[False]) == repr(rows[True])


def test_a_cli_query_of_plain_columns_prints_as_before(db):
    """--max-rows and --columns work on rows as on Arrow batches."""
    done = run_cli(db, "query", "SELECT agent, count(*) AS n FROM runs GROUP BY ALL "
                   "ORDER BY n DESC, agent", "--max-rows", "1", "--columns", "n",
                   "--format", "csv")
    assert done.returncode == 2, done.stderr
    assert done.stdout.splitlines()[0] == "n" and len(done.stdout.splitlines()) == 2
    assert "stopped at --max-rows 1" in done.stderr
