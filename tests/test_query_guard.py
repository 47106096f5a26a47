"""The read-only guard: hostile input is refused with one line and the store stays unchanged;
DuckDB's own settings hold even when the guard is bypassed."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.errors import InputError
from recstore.query import compile_query, open_reader, run_query

from .hostile_cases import hostile_lines
from .query_support import run_cli, store_fingerprint

HOSTILE = hostile_lines("queries.txt")


def test_enough_hostile_inputs():
    assert len(HOSTILE) >= 30


@pytest.mark.parametrize("template", HOSTILE)
def test_hostile_input_is_refused_with_one_line(template, tmp_path):
    with pytest.raises(InputError) as info:
        compile_query(template.format(out=tmp_path))
    message = str(info.value)
    assert message.startswith("query refused: ") and "\n" not in message


def test_hostile_inputs_leave_store_and_disk_unchanged(fixture_store, tmp_path):
    before = store_fingerprint(fixture_store.path)
    refused = 0
    for template in HOSTILE:
        with pytest.raises(InputError):
            with run_query(fixture_store, template.format(out=tmp_path)) as result:
                list(result.rows())
        refused += 1
    assert refused == len(HOSTILE)
    assert store_fingerprint(fixture_store.path) == before
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("text", "why"), [
    ("DROP TABLE runs", "only queries may run, not DROP"),
    ("SELECT * FROM read_csv('/etc/passwd')",
     "function read_csv() is not allowed in a query: it reads files, the network or the environment"),
    ("SELECT 1; DELETE FROM runs", "expected one statement, found 2"),
    ("SELECT * FROM information_schema.tables", "information_schema.tables is not a public view (see `recstore schema`)"),
])
def test_cli_refuses_with_one_line_and_exit_2(fixture_store, text, why):
    before = store_fingerprint(fixture_store.path)
    result = run_cli("query", text, db=fixture_store.path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f"recstore: error: query refused: {why}\n"
    assert "Traceback" not in result.stderr
    assert store_fingerprint(fixture_store.path) == before


@pytest.mark.parametrize("sql", [
    "SELECT * FROM read_csv('/etc/passwd')",
    "COPY (SELECT 1) TO '{out}/x.csv'",
    "ATTACH '{out}/x.duckdb' AS x",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "INSTALL httpfs",
    "LOAD httpfs",
    "CREATE TABLE t AS SELECT 1",
    "DELETE FROM runs",
])
def test_duckdb_wall_holds_without_the_guard(fixture_store, tmp_path, sql):
    """Raw SQL on the locked-down reader (the guard skipped on purpose) still fails."""
    with open_reader(fixture_store) as con, pytest.raises(duckdb.Error):
        con.execute(sql.format(out=tmp_path)).fetchall()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("sql", [
    "SELECT status, count(*) AS n FROM runs GROUP BY ALL ORDER BY n DESC",
    "FROM runs SELECT run_key LIMIT 1",
    "WITH failed AS (SELECT * FROM runs WHERE status = 'failed') SELECT count(*) FROM failed",
    "SELECT run_key, lag(started) OVER (ORDER BY started) FROM runs",
    "SELECT list_transform([1, 2, 3], x -> x * 2)",
    "SELECT r.agent, count(t.name) FROM runs r JOIN tool_calls t USING (run_key) GROUP BY 1",
    "SELECT run_key FROM runs UNION ALL SELECT child_run_key FROM lineage",
    "SELECT * EXCLUDE (metadata, tags) FROM runs LIMIT 2",
    "SELECT metadata->>'$.caseId' AS case_id FROM runs WHERE metadata IS NOT NULL LIMIT 3",
    "(SELECT 1)",
    "WITH RECURSIVE t AS (SELECT 1 AS n UNION ALL SELECT n + 1 FROM t WHERE n < 5) SELECT * FROM t",
    "WITH runs AS (SELECT * FROM runs WHERE status = 'failed') SELECT count(*) FROM runs",
    "WITH a AS (SELECT 1 AS n), b AS (SELECT n FROM a) SELECT * FROM (WITH a AS (SELECT n FROM b) "
    "SELECT * FROM a)",
])
def test_read_only_queries_run(fixture_store, sql):
    with run_query(fixture_store, sql) as result:
        assert result.columns
        list(result.rows())


_QUERIES = st.sampled_from(["SELECT 1", "SELECT * FROM runs", "FROM tool_calls",
                            "SELECT count(*) FROM visits"])
_WRITES = st.sampled_from(["DELETE FROM runs", "DROP TABLE items", "INSERT INTO runs "
                           "SELECT * FROM runs", "UPDATE runs SET status = 'x'",
                           "CREATE TABLE t (a INT)", "COPY runs TO 'x.csv'"])


@settings(max_examples=60, deadline=None)
@given(_QUERIES, _WRITES, st.sampled_from(["; ", ";\n", "; -- c\n", " /* x */; "]))
def test_a_write_is_refused_however_it_is_attached(query, write, separator):
    for text in (f"{query}{separator}{write}", f"{write}{separator}{query}",
                 f"WITH w AS ({write} RETURNING *) {query}"):
        with pytest.raises(InputError, match="^query refused: "):
            compile_query(text)


def test_store_file_stays_owner_only(fixture_store):
    assert Path(fixture_store.path).stat().st_mode & 0o077 == 0


# --- CTE scoping, checked against DuckDB itself ------------------------------------------------
# A database with a secret table ``meta`` (k = 42) and a public view ``runs`` (k = 1). Random
# nestings of CTEs, recursive CTEs, subqueries and unions over the names below: whenever the
# guard lets a query through, DuckDB must not have read the secret.

_SECRET = 42
_NAMES = st.sampled_from(["meta", "runs", "c"])


def _scoping_queries() -> st.SearchStrategy[str]:
    leaf = st.one_of(_NAMES.map(lambda n: f"SELECT k FROM {n}"), st.just("SELECT 7 AS k"))

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(_NAMES, inner, inner).map(lambda t: f"WITH {t[0]} AS ({t[1]}) {t[2]}"),
            st.tuples(_NAMES, inner, _NAMES, inner, inner).map(
                lambda t: f"WITH {t[0]} AS ({t[1]}), {t[2]} AS ({t[3]}) {t[4]}"),
            st.tuples(_NAMES, inner, inner, inner).map(
                lambda t: f"WITH RECURSIVE {t[0]} AS ({t[1]} UNION {t[2]}) {t[3]}"),
            st.tuples(_NAMES, inner, inner, inner, inner).map(
                lambda t: f"WITH RECURSIVE {t[0]} AS ({t[1]} UNION {t[2]} UNION {t[3]}) {t[4]}"),
            inner.map(lambda q: f"SELECT k FROM ({q})"),
            st.tuples(inner, inner).map(lambda t: f"SELECT k FROM ({t[0]}) UNION SELECT k FROM ({t[1]})"),
            st.tuples(_NAMES, inner).map(lambda t: f"SELECT k FROM {t[0]} WHERE k IN ({t[1]})"),
        )

    return st.recursive(leaf, extend, max_leaves=6)


@pytest.fixture(scope="module")
def secret_db():
    con = duckdb.connect()
    con.execute(f"CREATE TABLE meta AS SELECT {_SECRET} AS k")
    con.execute("CREATE VIEW runs AS SELECT 1 AS k")
    yield con
    con.close()


@settings(max_examples=400, deadline=None)
@given(_scoping_queries())
def test_a_query_the_guard_passes_never_reads_a_table_it_hides(secret_db, sql):
    from recstore.query.views import Catalog, Column, View

    catalog = Catalog({"runs": View("runs", "", (Column("k", "INTEGER", ""),))})
    try:
        compile_query(sql, catalog)
    except InputError:
        return
    try:
        rows = secret_db.execute(sql).fetchall()
    except duckdb.Error:
        return  # DuckDB refused it (a binder error): nothing was read
    assert (_SECRET,) not in rows, sql



# --- nesting deeper than the parsers follow ----------------------------------------------------

NESTED = hostile_lines("nested-queries.txt")


@pytest.mark.parametrize("text", NESTED, ids=lambda text: text[:40])
def test_deep_nesting_is_one_clear_error(text):
    with pytest.raises(InputError, match=r"^query too deeply nested \(") as info:
        compile_query(text)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("extra", [(), ("--explain",), ("--dialect", "spark")])
def test_cli_reports_deep_nesting_in_one_line(fixture_store, extra):
    result = run_cli("query", NESTED[0], *extra, db=fixture_store.path)
    assert result.returncode == 2
    assert result.stderr.startswith("recstore: error: query too deeply nested (")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
