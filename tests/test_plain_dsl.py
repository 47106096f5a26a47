"""The plainest DSL without sqlglot (recstore/query/plain_dsl.py, issue 27.1): for every text it
reads, the SQL is exactly what the DSL compiler prints; everything else is left to the compiler
(None), never an error of its own; and `recstore query` runs such a text without sqlglot."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.query import compile_dsl
from recstore.query.plain_dsl import plain_dsl_sql
from recstore.query.plain_sql import plain_select

from .conftest import imported_modules, run_cli
from .dsl_texts import CATALOG, NOW, conditions, dsl_texts


@settings(max_examples=250, deadline=None)
@given(dsl_texts())
def test_a_plain_dsl_text_is_read_as_the_compiler_writes_it(text):
    sql = plain_dsl_sql(text, CATALOG, NOW)
    assert sql is not None, text
    assert sql == compile_dsl(text, CATALOG, now=NOW).sql


@settings(max_examples=150, deadline=None)
@given(conditions("runs", widened=True))
def test_a_condition_on_runs_is_read_as_the_compiler_writes_it(text):
    """Conditions alone (a query on runs), where relations, times and JSON keys are common."""
    sql = plain_dsl_sql(text, CATALOG, NOW)
    assert sql is not None, text
    assert sql == compile_dsl(text, CATALOG, now=NOW).sql


# The DSL beyond the plain part: each left to the compiler.
_NOT_PLAIN = [
    "status = $s", "run.status = 'failed'", "tool_calls.all(name = 'x')", "args.limit = 1",
    "metadata.x = true", "metadata.x in ('a')", "metadata.x like 'a'", "visits.count() = 'x'",
    "tool_calls.any() = true", "tool_calls.any(run.status = 'x')", "status = -7d",
    "tool_calls.any(visits.any())", "tool_calls where visits.any()", "visits.any", "visits()",
    "started > +99999999w", "started in (-7d)", "tool_calls.count()", "fields visits.count()",
    "meta.`x` = 'a'", "metadata.x.y.z", "status.x = 'a'", "nosuch.any()", "started > 7d",
    "item_count = '3'", "status = 3", "tags = 'x'", 'status = "x"',
    "status = 'x' -- c", "nosuch = 1", "status = 'caf\u00e9'", "status = 1e3",
    "`status` = 'x'", "status = -1", "status =", "limit 1.5", "(status = 'x'",
    "status = 'x' limit 3 limit 4", "tool_calls where run.agent = 'x'", "calls where name = 'x'",
    "status = 'x' fields count()", "item_count = 0x10", "status in (1, 2)",
]


@pytest.mark.parametrize("text", _NOT_PLAIN)
def test_the_rest_of_the_dsl_goes_to_the_compiler(text):
    assert plain_dsl_sql(text, CATALOG) is None


@settings(max_examples=150, deadline=None)
@given(dsl_texts(), st.sampled_from([
    "-", ".", "$", "`", '"', "--", "(", ")", "'", ",", "*", "fields", "order by", "limit", "not",
    "in", "run.", "é", ".any(", ".count()", "-7d", "+1.5h", "7d", ".x", "..", "all(", "true"]),
       st.integers(0, 500))
def test_whatever_it_reads_is_what_the_compiler_writes(text, splice, where):
    """A plain text with a fragment spliced in: None, or the compiler's SQL exactly."""
    cut = where % (len(text) + 1)
    spliced = f"{text[:cut]}{splice}{text[cut:]}"
    sql = plain_dsl_sql(spliced, CATALOG, NOW)
    if sql is not None:
        assert sql == compile_dsl(spliced, CATALOG, now=NOW).sql


def test_the_cli_runs_a_plain_dsl_text_without_sqlglot(fixture_store, tmp_path):
    db = str(fixture_store.path)
    with fixture_store.reader() as con:
        (name,) = con.execute("SELECT min(name) FROM tool_calls").fetchone()
    text = f"tool_calls where name = '{name}' and call_index < 3 fields run_key, name " \
           "order by run_key limit 5"
    env = {**os.environ, "RECSTORE_CACHE_DIR": ""}
    modules = imported_modules("--db", db, "query", text, env=env)
    assert "recstore.query.plain_dsl" in modules
    assert not {m for m in modules if m == "sqlglot" or m.startswith("sqlglot.")}
    done = run_cli(db, "query", text, "--format", "csv", env=env)
    with fixture_store.reader() as con:
        sql = compile_dsl(text, CATALOG).sql
        assert plain_select(sql, CATALOG, con)
        rows = con.execute(sql).fetchall()
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["run_key,name", *(f"{k},{n}" for k, n in rows)]
    assert rows  # a name the store holds: the comparison above compares rows
