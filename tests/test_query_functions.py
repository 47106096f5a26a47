"""The function allow-list of the query guard (issue 24.6): every function a query calls must be
reviewed as safe. The review itself is checked against the installed DuckDB, so a function a new
DuckDB adds fails here until it is put on schema/query-functions-allowed.txt or -denied.txt."""

from __future__ import annotations

import json
import re
from typing import Any

import duckdb
import pytest

from recstore.query.functions import (
    BARE_WORD_CALLS,
    allowed_functions,
    called_functions,
    denied_functions,
)
from recstore.query.views import schema_connection

from .conftest import AIOC_FIXTURES
from .hostile_cases import hostile_lines
from .query_support import run_cli

CATALOG_CASES = hostile_lines("catalog-functions.txt")
_REFUSED = re.compile(r"recstore: error: query refused: function (\S+)\(\) is not allowed in a "
                      r"query: [^\n]+\n")


def _catalog(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str | None]]]:
    """``{lower-case name: [(function type, macro definition)]}`` of ``duckdb_functions()``."""
    found: dict[str, list[tuple[str, str | None]]] = {}
    rows = con.execute("SELECT lower(function_name), function_type, macro_definition "
                       "FROM duckdb_functions()").fetchall()
    for name, kind, definition in rows:
        found.setdefault(name, []).append((kind, definition))
    return found


@pytest.fixture(scope="module")
def catalog() -> dict[str, list[tuple[str, str | None]]]:
    """DuckDB's own functions and the ones the shipped schema adds (recstore's macros)."""
    with schema_connection() as con:
        return _catalog(con)


def test_every_function_of_duckdb_is_reviewed(catalog):
    reviewed = allowed_functions() | set(denied_functions())
    unreviewed = sorted(set(catalog) - reviewed)
    assert not unreviewed, (
        f"functions of DuckDB {duckdb.__version__} not reviewed: {unreviewed}; add each to "
        "schema/query-functions-allowed.txt (it only computes on its arguments) or to a section "
        "of schema/query-functions-denied.txt")


def test_no_function_is_both_allowed_and_denied():
    assert allowed_functions() & set(denied_functions()) == set()
    assert all(denied_functions().values()), "every denied function has a [reason] section"


def test_recstore_macros_are_reviewed_too(catalog):
    with duckdb.connect() as con:
        ours = set(catalog) - set(_catalog(con))
    assert ours >= {"rs_json", "current_events"}
    assert ours <= set(denied_functions())


def _duckdb_parse(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])
    assert not tree["error"], (sql, tree)
    return tree


def _tables(node: Any) -> list[str]:
    """Every table or table function a parsed statement reads."""
    if isinstance(node, list):
        return [t for child in node for t in _tables(child)]
    if not isinstance(node, dict):
        return []
    here = [node.get("table_name") or "table function"] if node.get("type") in (
        "BASE_TABLE", "TABLE_FUNCTION") else []
    return here + [t for child in node.values() for t in _tables(child)]


def test_an_allowed_macro_only_calls_allowed_functions(catalog):
    """A macro is a call by name that DuckDB expands later (pg_get_viewdef reads duckdb_views()):
    an allowed macro must expand to allowed calls and read no table."""
    allowed = allowed_functions()
    checked = 0
    with duckdb.connect() as con:
        for name, forms in sorted(catalog.items()):
            for kind, definition in forms:
                if name not in allowed or kind != "macro":
                    continue
                sql = f"SELECT {definition}"
                assert _tables(_duckdb_parse(con, sql)) == [], (name, definition)
                assert set(called_functions(sql)) <= allowed, (name, definition)
                checked += 1
    assert checked > 50


def test_bare_words_that_duckdb_binds_as_calls_are_known(catalog):
    """``SELECT current_schema`` has no parentheses but is a call: DuckDB binds a few bare words
    as functions when no column has the name. The guard maps exactly those words."""
    words = {n for n in catalog if re.fullmatch(r"[a-z_][a-z0-9_]*", n)} | set(BARE_WORD_CALLS)
    bound = set()
    with duckdb.connect() as con:
        for word in sorted(words):
            try:
                con.execute(f'SELECT "{word}"').fetchall()
            except duckdb.Error:
                continue
            bound.add(word)
    assert bound == set(BARE_WORD_CALLS)
    assert set(BARE_WORD_CALLS.values()) <= set(catalog)


@pytest.mark.parametrize("sql", [
    "SELECT strpos('abc', 'b'), 'a' LIKE 'b', [1, 2], {'k': 1}, now() - INTERVAL 1 DAY",
    "SELECT count(*), count_if(x > 1), list_transform([1], lambda y: y + 1) FROM (SELECT 1 AS x)",
    "SELECT current_date, current_timestamp, localtime",
])
def test_ordinary_calls_are_named_as_duckdb_names_them_and_allowed(sql):
    calls = called_functions(sql)
    assert calls and set(calls) <= allowed_functions()


def test_enough_catalog_cases():
    assert len(CATALOG_CASES) >= 40


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("functions") / "runs.duckdb"
    assert run_cli("ingest", str(AIOC_FIXTURES / "simple-run.json"), db=db).returncode == 0
    return db


@pytest.mark.parametrize("sql", CATALOG_CASES, ids=lambda sql: sql[:50])
def test_cli_refuses_a_call_outside_the_allow_list(small_store, sql):
    result = run_cli("query", sql, db=small_store)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    refused = _REFUSED.fullmatch(result.stderr)
    assert refused, result.stderr
    assert refused.group(1) in sql.lower(), "the line names a function the query calls"
