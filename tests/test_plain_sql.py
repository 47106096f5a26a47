"""The plain-SQL fast path (recstore/query/plain_sql.py, issue 27.1): what it accepts runs as
written without sqlglot, so it must accept only what the full guard passes, to the same rows;
everything hostile goes to the full guard; and when DuckDB refuses an accepted text, the user
sees the full guard's message."""

from __future__ import annotations

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.errors import InputError
from recstore.query import compile_query, open_reader
from recstore.query.api import execute
from recstore.query.guard import guard_sql
from recstore.query.plain_dsl import plain_dsl_sql
from recstore.query.plain_sql import FUNCTIONS, MAX_DEPTH, MAX_NOTS, MAX_TOKENS, plain_select
from recstore.query.views import catalog_from_connection, default_catalog

from .dsl_texts import NOW, conditions, dsl_texts
from .hostile_cases import hostile_lines
from .query_support import run_cli


class _Reader(tuple):
    """(locked-down reader, its catalogue), shown short in hypothesis' reports."""

    def __repr__(self) -> str:
        return "reader"


@pytest.fixture(scope="module")
def reader(fixture_store):
    with open_reader(fixture_store) as con:
        yield _Reader((con, catalog_from_connection(con)))


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[str] | str:
    """The rows of ``sql`` as text, sorted (a query without ORDER BY has no order), or DuckDB's
    error class."""
    try:
        return sorted(repr(row) for row in con.execute(sql).fetchall())
    except duckdb.Error as exc:
        return type(exc).__name__


# --- generated plain queries: accepted, passed by the guard, same rows -------------------------

_TEXT = ["status", "agent", "model", "error_name", "run_key"]
_NUMBER = ["item_count", "tool_call_count", "duration_ms", "request_count"]
_STRINGS = st.sampled_from(["'completed'", "'failed'", "'Triage'", "'it''s'", "''", "'%a%'"]) | \
    st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=6).map(
        lambda text: "'" + text.replace("'", "''") + "'")  # backslashes, quotes, any script
_NUMBERS = st.integers(-5, 2000).map(str) | st.sampled_from(["0.5", "1.25"])


def _predicates() -> st.SearchStrategy[str]:
    text = st.tuples(st.sampled_from(_TEXT), st.sampled_from(["=", "<>", "!=", "<", ">="]),
                     _STRINGS).map(" ".join)
    number = st.tuples(st.sampled_from(_NUMBER), st.sampled_from(["=", "<", "<=", ">", "<>"]),
                       _NUMBERS).map(" ".join)
    other = st.one_of(
        st.sampled_from(_TEXT + _NUMBER).map(lambda c: f"{c} IS NULL"),
        st.sampled_from(_TEXT).map(lambda c: f"{c} IS NOT NULL"),
        st.tuples(st.sampled_from(_TEXT), _STRINGS).map(lambda t: f"{t[0]} LIKE {t[1]}"),
        st.tuples(st.sampled_from(_TEXT), _STRINGS, _STRINGS).map(
            lambda t: f"{t[0]} IN ({t[1]}, {t[2]})"),
        st.tuples(st.sampled_from(_NUMBER), _NUMBERS, _NUMBERS).map(
            lambda t: f"{t[0]} BETWEEN {t[1]} AND {t[2]}"),
        st.sampled_from(_NUMBER).map(lambda c: f"{c} % 2 = 1"),
        st.sampled_from(_TEXT).map(lambda c: f"lower({c}) = upper({c})"),
    )
    leaf = text | number | other
    return st.recursive(leaf, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(" ".join),
        inner.map(lambda p: f"NOT ({p})")), max_leaves=4)


def _items() -> st.SearchStrategy[str]:
    column = st.sampled_from(_TEXT + _NUMBER)
    aggregate = st.tuples(st.sampled_from(["sum", "avg", "min", "max"]),
                          st.sampled_from(_NUMBER)).map(lambda t: f"{t[0]}({t[1]})")
    computed = st.one_of(
        st.tuples(st.sampled_from(_NUMBER), st.sampled_from(["+", "-", "*", "/"]),
                  st.sampled_from(_NUMBER)).map(" ".join),
        st.tuples(st.sampled_from(_TEXT), st.sampled_from(_TEXT)).map(
            lambda t: f"lower({t[0]}) || '-' || {t[1]}"),
        st.sampled_from(_NUMBER).map(lambda c: f"CASE WHEN {c} > 3 THEN 'many' ELSE 'few' END"),
        st.sampled_from(_NUMBER).map(lambda c: f"round({c} / 3, 1)"),
    )
    return st.one_of(column, computed), aggregate


@st.composite
def plain_queries(draw) -> str:
    plain_items, aggregates = _items()
    where = draw(st.none() | _predicates())
    grouped = draw(st.booleans())
    if grouped:
        keys = draw(st.lists(st.sampled_from(_TEXT), min_size=1, max_size=2, unique=True))
        select = ", ".join([*keys, "count(*) AS n", draw(aggregates) + " AS x"])
        tail = draw(st.sampled_from(["GROUP BY ALL", f"GROUP BY {', '.join(keys)}"]))
        tail += draw(st.sampled_from(["", " HAVING count(*) > 1", " ORDER BY n DESC"]))
    else:
        items = draw(st.lists(plain_items, min_size=1, max_size=3))
        select = draw(st.sampled_from(["", "DISTINCT "])) + ", ".join(items)
        tail = draw(st.sampled_from(["", "ORDER BY ALL", "ORDER BY 1 DESC NULLS LAST"]))
        if tail == "ORDER BY ALL" and draw(st.booleans()):  # a LIMIT after ties picks any
            tail += f" LIMIT {draw(st.integers(0, 50))}"
    table = draw(st.sampled_from(["runs", "runs r", "runs AS r"]))
    return " ".join(p for p in (f"SELECT {select} FROM {table}",
                                f"WHERE {where}" if where else "", tail) if p)


def _same_as_the_guard(con, catalog, sql: str) -> None:
    checked = guard_sql(sql, catalog).sql(dialect="duckdb", comments=False)
    assert _rows(con, sql) == _rows(con, checked), (sql, checked)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plain_queries())
def test_a_plain_query_is_accepted_and_runs_as_the_guard_s(reader, sql):
    con, catalog = reader
    assert plain_select(sql, catalog, con), sql
    _same_as_the_guard(con, catalog, sql)


_JOINS = [
    "SELECT r.agent, count(t.name) AS calls FROM runs r JOIN tool_calls t ON r.run_key = "
    "t.run_key GROUP BY ALL ORDER BY calls DESC",
    "SELECT t.name, r.status FROM tool_calls t LEFT JOIN runs r ON r.run_key = t.run_key "
    "AND r.status = 'failed' WHERE t.call_index < 2",
    "SELECT count(*) FROM runs a, lineage l WHERE a.run_key = l.child_run_key",
    "SELECT 1", "SELECT -1, 2 * -3, 'x' || 'y'", "SELECT * FROM runs ORDER BY run_key LIMIT 3",
    "SELECT agent, count(*) FROM runs GROUP BY ALL",
    "select Status, COUNT(*) as N from RUNS group by all order by n",
    "SELECT lower(status) AS s, count(*) AS n FROM runs GROUP BY s ORDER BY s",
]


@pytest.mark.parametrize("sql", _JOINS)
def test_joins_and_literals_are_accepted_and_run_as_the_guard_s(reader, sql):
    con, catalog = reader
    assert plain_select(sql, catalog, con)
    _same_as_the_guard(con, catalog, sql)


# The deepest forms plain_sql takes, at its limits: the guard must still parse them (it recurses
# per level where DuckDB does not), or a text would run here that the guard refuses as too deep.
_DEEPEST = {
    "NOTs": "SELECT " + "NOT " * MAX_NOTS + "true",
    "signs": "SELECT " + "- " * (MAX_TOKENS - 2) + "1",
    "ORs": "SELECT 1 FROM runs WHERE " + " OR ".join(["item_count = 1"] * 38),
    "sums": "SELECT " + " + ".join(["1"] * (MAX_TOKENS // 2 - 1)),
    "CASEs": "SELECT " + "CASE WHEN true THEN " * 26 + "1" + " END" * 26,
    "calls": "SELECT " + "lower(" * MAX_DEPTH + "'a'" + ")" * MAX_DEPTH,
    "parentheses": "SELECT " + "NOT (" * MAX_DEPTH + "true" + ")" * MAX_DEPTH,
}


@pytest.mark.parametrize("sql", _DEEPEST.values(), ids=_DEEPEST.keys())
def test_the_deepest_plain_query_is_one_the_guard_parses(reader, sql):
    con, catalog = reader
    assert plain_select(sql, catalog, con)
    _same_as_the_guard(con, catalog, sql)
    deeper = sql.replace("SELECT ", "SELECT NOT " * MAX_NOTS + "(", 1) + ")"
    assert not plain_select(deeper, catalog, con)  # one step past a limit: the guard's


# Fragments that change what SQL means, spliced into plain queries at any token boundary.
_SPLICES = st.sampled_from([
    ";", "; DROP TABLE runs", "--", "/*", "*/", "->>'$..x'", "->", "::VARCHAR", "$x", "?",
    '"status"', "read_csv('/etc/passwd')", "meta", "information_schema.tables", "main.runs",
    "E'a'", "x'41'", "DATE '2024-01-01'", "(SELECT 1)", "UNION SELECT run_key FROM runs",
    "WITH", "FILTER (WHERE true)", "OVER ()", "r", "n", "\\", "[1]", "{'a': 1}", "@", "'",
    "current_setting('threads')", "getenv('HOME')", "count(*) n", "EXCLUDE (status)", "**",
    "SELECT", "FROM runs", "AS status", "1e5", "1.", "query_table('runs')", "lineage",
])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plain_queries(), _SPLICES, st.integers(0, 200), st.booleans())
def test_whatever_it_accepts_the_guard_passes_to_the_same_rows(reader, sql, splice, where,
                                                               spaced):
    """A plain query with a hostile fragment spliced in: refused here (the full guard then
    decides), or passed by the guard and run to the same rows."""
    con, catalog = reader
    text = _spliced(sql, splice, where, spaced, " ")
    if plain_select(text, catalog, con):
        _same_as_the_guard(con, catalog, text)


# --- the DSL's time, JSON-key and relation forms: read only in SQL plain_dsl wrote ------------

_DSL_TEXTS = dsl_texts() | conditions("runs", widened=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DSL_TEXTS)
def test_the_sql_plain_dsl_writes_is_accepted_and_runs_as_the_guard_s(reader, text):
    con, catalog = reader
    sql = plain_dsl_sql(text, catalog, NOW)
    assert sql is not None
    if ".* FROM" in sql:  # `fields *`: the guard expands a table's star (see below)
        assert not plain_select(sql, catalog, con, dsl=True)
        return
    assert plain_select(sql, catalog, con, dsl=True), (text, sql)
    _same_as_the_guard(con, catalog, sql)


_DSL_FORMS = [
    "SELECT runs.run_key FROM runs WHERE runs.started > CAST('2026-01-01' AS TIMESTAMP)",
    "SELECT runs.run_key FROM runs WHERE (runs.metadata ->> '$.caseId') = 'x'",
    "SELECT runs.run_key FROM runs WHERE EXISTS(SELECT 1 FROM tool_calls AS tc WHERE "
    "tc.run_key = runs.run_key AND TRY_CAST(tc.arguments ->> '$.amount' AS DOUBLE) > 100)",
    "SELECT runs.run_key FROM runs WHERE (SELECT COUNT(*) FROM visits AS v WHERE "
    "v.run_key = runs.run_key) >= 3",
]


@pytest.mark.parametrize("sql", _DSL_FORMS)
def test_the_dsl_forms_typed_as_sql_go_to_the_full_guard(reader, sql):
    con, catalog = reader
    assert plain_select(sql, catalog, con, dsl=True)
    assert not plain_select(sql, catalog, con)


_EXISTS = "SELECT runs.run_key FROM runs WHERE EXISTS(SELECT 1 FROM {view} AS {alias} WHERE " \
    "{alias}.run_key = runs.run_key{rest})"
_NOT_DSL_FORMS = [
    _EXISTS.format(view="tool_calls", alias="tc", rest=" AND tc.name IN (SELECT key FROM meta)"),
    _EXISTS.format(view="tool_calls", alias="tc", rest=" AND tc.name = (SELECT 'x')"),
    _EXISTS.format(view="tool_calls", alias="tc", rest=" AND tc.nosuch = 1"),
    _EXISTS.format(view="tool_calls", alias="tc", rest=" AND tc.name = runs.status"),
    _EXISTS.format(view="tool_calls", alias="tc", rest=" OR true"),
    _EXISTS.format(view="tool_calls", alias="tc", rest=" AND"),
    _EXISTS.format(view="tool_calls", alias="runs", rest=""),
    _EXISTS.format(view="tool_calls", alias="select", rest=""),
    _EXISTS.format(view="meta", alias="m", rest=""),
    _EXISTS.format(view="sources", alias="s", rest=""),
    _EXISTS.format(view="runs", alias="r", rest=""),
    "SELECT runs.run_key FROM runs WHERE EXISTS(SELECT 1 FROM tool_calls AS tc WHERE "
    "tc.run_key = runs.run_key",
    "SELECT runs.run_key FROM runs WHERE (runs.metadata ->> '$..caseId') = 'x'",
    "SELECT runs.run_key FROM runs WHERE (runs.metadata ->> '$.a[0]') = 'x'",
    "SELECT runs.run_key FROM runs WHERE (runs.metadata -> '$.a') = 'x'",
    "SELECT runs.run_key FROM runs WHERE TRY_CAST(runs.status AS DOUBLE) > 1",
    "SELECT runs.run_key FROM runs WHERE runs.started > CAST(runs.status AS TIMESTAMP)",
    "SELECT runs.run_key FROM runs WHERE runs.started > CAST('x' AS BLOB)",
]


@pytest.mark.parametrize("sql", _NOT_DSL_FORMS)
def test_what_is_not_exactly_a_dsl_form_goes_to_the_full_guard(reader, sql):
    con, catalog = reader
    assert not plain_select(sql, catalog, con, dsl=True)


@st.composite
def _dsl_sql(draw) -> str:
    return plain_dsl_sql(draw(_DSL_TEXTS), default_catalog(), NOW) or "SELECT 1"


_DSL_SPLICES = _SPLICES | st.sampled_from([
    "->> '$.a'", "->>'$..x'", "->> '$[0]'", "CAST('x' AS TIMESTAMP)", "CAST(status AS DATE)",
    "TRY_CAST(", "AS DOUBLE)", "EXISTS(SELECT 1 FROM meta AS m WHERE m.run_key = runs.run_key)",
    "(SELECT COUNT(*) FROM runs AS r WHERE r.run_key = runs.run_key)", "AND tc.name = 'x'",
    "SELECT 1 FROM", "AS tc", "tc.run_key", "runs.run_key", ")", "(", "EXISTS(", "COUNT(*)",
    "OR EXISTS(SELECT 1 FROM tool_calls AS tc WHERE tc.run_key = runs.run_key)",
])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_dsl_sql(), _DSL_SPLICES, st.integers(0, 400), st.booleans())
def test_whatever_it_accepts_as_dsl_the_guard_passes_to_the_same_rows(reader, sql, splice,
                                                                      where, spaced):
    """plain_dsl's SQL with a fragment spliced in, read with the DSL forms: refused here, or
    passed by the guard and run to the same rows."""
    con, catalog = reader
    text = _spliced(sql, splice, where, spaced, " (")
    if plain_select(text, catalog, con, dsl=True):
        _same_as_the_guard(con, catalog, text)


def _spliced(sql: str, splice: str, where: int, spaced: bool, before: str) -> str:
    """``splice`` put into ``sql`` before one of its characters in ``before`` (or at its end),
    spaced or not."""
    cuts = [i for i, ch in enumerate(sql) if ch in before] + [len(sql)]
    cut = cuts[where % len(cuts)]
    glue = " " if spaced else ""
    return f"{sql[:cut]}{glue}{splice}{glue}{sql[cut:]}"


# --- hostile queries always go to the full guard -----------------------------------------------

_GUARD_TESTS = [
    "SELECT * FROM read_csv('/etc/passwd')", "SELECT 1; DELETE FROM runs", "DROP TABLE runs",
    "SELECT * FROM information_schema.tables", "WITH meta AS (SELECT * FROM meta) SELECT 1",
    "SELECT metadata->>'$..caseId' FROM runs", "SELECT json_extract(metadata, '$[1:2]') FROM runs",
    "SELECT current_setting('threads')", "SELECT * FROM meta", "SELECT * FROM main.runs",
    "SELECT current_schema", "SELECT user", "SELECT * FROM runs, meta",
]


_HOSTILE = [t.format(out="/tmp/recstore-never") for t in hostile_lines("queries.txt")] + \
    hostile_lines("catalog-functions.txt") + hostile_lines("nested-queries.txt") + _GUARD_TESTS


@pytest.mark.parametrize("text", _HOSTILE, ids=lambda text: text[:50])
def test_hostile_queries_go_to_the_full_guard(reader, text):
    con, catalog = reader
    assert not plain_select(text, catalog, con)
    assert not plain_select(text, catalog, con, dsl=True)


def test_names_the_guard_would_refuse_go_to_it(reader):
    con, catalog = reader
    for sql in ("SELECT nosuch FROM runs", "SELECT r.nosuch FROM runs r",
                "SELECT x.status FROM runs r", "SELECT status FROM nosuch",
                "SELECT count(*) AS status FROM runs", "SELECT 1 AS n FROM runs WHERE n > 0",
                "SELECT replace(status, 'a', 'b') FROM runs", "SELECT runs.* FROM runs",
                "SELECT status FROM runs status", "SELECT 1 AS n FROM runs HAVING n > 0"):
        assert not plain_select(sql, catalog, con), sql
    for sql in ("SELECT coalesce(status, agent) FROM runs", "SELECT nullif(status, '') FROM runs"):
        assert not plain_select(sql, catalog, con), sql  # keywords with a grammar of their own
    assert FUNCTIONS <= {"count", "sum", "avg", "min", "max", "lower", "upper", "length",
                         "round", "abs"}


# --- DuckDB's refusal of an accepted text: the full guard's message ----------------------------

@pytest.mark.parametrize("sql", [
    "SELECT item_count + 'a' FROM runs",
    "SELECT run_key FROM runs r JOIN tool_calls t ON r.run_key = t.run_key",  # guard: qualify
    "SELECT status, count(*) FROM runs GROUP BY agent",
    "SELECT status FROM runs WHERE item_count = 'x'",
])
def test_duckdb_s_refusal_shows_the_checked_query_s_error(fixture_store, reader, sql):
    con, catalog = reader
    assert plain_select(sql, catalog, con)
    with pytest.raises(InputError) as checked:  # what a query checked by the guard says
        list(execute(con, compile_query(sql, catalog)).rows())
    done = run_cli("query", sql, db=fixture_store.path)
    assert done.returncode == 2 and done.stderr == f"recstore: error: {checked.value}\n"


def test_an_ambiguous_join_is_explained_by_the_guard_not_by_duckdb(reader):
    """The case above that fails without the fallback: DuckDB's own words differ."""
    con, catalog = reader
    sql = "SELECT run_key FROM runs r JOIN tool_calls t ON r.run_key = t.run_key"
    with pytest.raises(duckdb.BinderException, match="Ambiguous reference"):
        con.execute(sql)
    with pytest.raises(InputError, match="^query refused: Column 'run_key' could not be"):
        compile_query(sql, catalog)


def test_the_cli_answers_a_plain_query_as_the_guard_does(fixture_store, reader):
    sql = "SELECT status, count(*) AS n FROM runs GROUP BY ALL ORDER BY n DESC, status"
    done = run_cli("query", sql, "--format", "csv", db=fixture_store.path)
    con, catalog = reader
    rows = con.execute(guard_sql(sql, catalog).sql(dialect="duckdb")).fetchall()
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["status,n", *(f"{s},{n}" for s, n in rows)]
