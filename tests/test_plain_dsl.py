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
from recstore.query.views import default_catalog

from .conftest import imported_modules, run_cli

CATALOG = default_catalog()
_VIEWS = ["runs", "tool_calls", "items"]


def _columns(view: str, kinds: tuple[str, ...]) -> list[str]:
    found = CATALOG.get(view)
    assert found is not None
    return [c.name for c in found.columns if c.type in kinds
            or "NUMBER" in kinds and c.type in ("INTEGER", "BIGINT", "DOUBLE")]


_STRINGS = st.from_regex(r"'([ -&(-~]|''){0,8}'", fullmatch=True)
_NUMBERS = st.from_regex(r"[0-9]{1,4}(\.[0-9]{1,2})?", fullmatch=True)


@st.composite
def plain_dsl(draw) -> str:
    view = draw(st.sampled_from(_VIEWS))
    text_cols = _columns(view, ("VARCHAR",))
    number_cols = _columns(view, ("NUMBER",))
    bool_cols = _columns(view, ("BOOLEAN",))

    def predicate() -> st.SearchStrategy[str]:
        options = [
            st.tuples(st.sampled_from(text_cols), st.sampled_from(["=", "!=", "<>", "<", ">="]),
                      _STRINGS).map(" ".join),
            st.tuples(st.sampled_from(number_cols), st.sampled_from(["=", "<", "<=", ">"]),
                      _NUMBERS).map(" ".join),
            st.tuples(_NUMBERS, st.sampled_from(["<", ">=", "="]),
                      st.sampled_from(number_cols)).map(" ".join),
            st.tuples(st.sampled_from(text_cols + number_cols),
                      st.sampled_from(["is null", "is not null", "= null", "!= null"])
                      ).map(" ".join),
            st.tuples(st.sampled_from(text_cols), st.sampled_from(["in", "not in"]),
                      st.lists(_STRINGS, min_size=1, max_size=3)).map(
                lambda t: f"{t[0]} {t[1]} ({', '.join(t[2])})"),
            st.tuples(st.sampled_from(text_cols),
                      st.sampled_from(["like", "ilike", "not like", "not ilike"]),
                      _STRINGS).map(" ".join),
        ]
        if bool_cols:
            options.append(st.sampled_from(bool_cols))
            options.append(st.tuples(st.sampled_from(bool_cols), st.sampled_from(["true",
                                                                                   "false"])
                                     ).map(lambda t: f"{t[0]} = {t[1]}"))
        return st.one_of(options)

    condition = st.recursive(predicate(), lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["and", "or", "AND", "Or"]), inner).map(" ".join),
        inner.map(lambda c: f"not {c}"), inner.map(lambda c: f"({c})")), max_leaves=5)
    any_col = st.sampled_from([c.name for c in CATALOG.get(view).columns])  # type: ignore[union-attr]
    parts = []
    filtered = draw(st.booleans())
    if view != "runs" or draw(st.booleans()):  # a view then a condition needs its "where"
        parts.append(view + (" where" if filtered else draw(st.sampled_from(["", " where"]))))
    if filtered:
        parts.append(draw(condition))
    if draw(st.booleans()):
        parts.append("fields " + draw(st.sampled_from(["*"]) | st.lists(
            any_col, min_size=1, max_size=3).map(", ".join)))
    if draw(st.booleans()):
        parts.append("order by " + ", ".join(draw(st.lists(st.tuples(any_col, st.sampled_from(
            ["", " asc", " desc"])).map("".join), min_size=1, max_size=2))))
    if draw(st.booleans()):
        parts.append(f"limit {draw(st.integers(0, 10**21))}")
    return " ".join(parts)


@settings(max_examples=200, deadline=None)
@given(plain_dsl())
def test_a_plain_dsl_text_is_read_as_the_compiler_writes_it(text):
    sql = plain_dsl_sql(text, CATALOG)
    assert sql is not None, text
    assert sql == compile_dsl(text, CATALOG).sql


# The DSL beyond the plain part: each left to the compiler.
_NOT_PLAIN = [
    "started > -7d", "status = $s", "args.amount > 100", "metadata.caseId = 'x'",
    "tool_calls.any(name = 'refund')", "visits.count() >= 3", "run.status = 'failed'",
    "item_count = '3'", "status = 3", "started > '2024-01-01'", "tags = 'x'", 'status = "x"',
    "status = 'x' -- c", "nosuch = 1", "status = 'caf\u00e9'", "status = 1e3",
    "`status` = 'x'", "status = -1", "status =", "limit 1.5", "(status = 'x'",
    "status = 'x' limit 3 limit 4", "tool_calls where run.agent = 'x'", "calls where name = 'x'",
    "status = 'x' fields count()", "item_count = 0x10", "status in (1, 2)",
]


@pytest.mark.parametrize("text", _NOT_PLAIN)
def test_the_rest_of_the_dsl_goes_to_the_compiler(text):
    assert plain_dsl_sql(text, CATALOG) is None


@settings(max_examples=150, deadline=None)
@given(plain_dsl(), st.sampled_from(["-", ".", "$", "`", '"', "--", "(", ")", "'", ",", "*",
                                     "fields", "order by", "limit", "not", "in", "run.", "é"]),
       st.integers(0, 500))
def test_whatever_it_reads_is_what_the_compiler_writes(text, splice, where):
    """A plain text with a fragment spliced in: None, or the compiler's SQL exactly."""
    cut = where % (len(text) + 1)
    spliced = f"{text[:cut]}{splice}{text[cut:]}"
    sql = plain_dsl_sql(spliced, CATALOG)
    if sql is not None:
        assert sql == compile_dsl(spliced, CATALOG).sql


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
