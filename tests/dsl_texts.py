"""Generated filter-DSL texts in the part recstore/query/plain_dsl.py reads without sqlglot:
columns, literals of their kind, times, JSON keys and runs' relations, in conditions, fields,
order by and limit (tests/test_plain_dsl.py and tests/test_plain_sql.py)."""

from __future__ import annotations

from datetime import datetime

from hypothesis import strategies as st

from recstore.query.sqltext import DSL_KEYWORDS, RELATION_ALIASES
from recstore.query.views import default_catalog

CATALOG = default_catalog()
#: The clock both readers of a relative time are given, so their SQL can be compared.
NOW = datetime(2026, 12, 7, 2, 30, 1, 250)
VIEWS = ["runs", "tool_calls", "items"]

STRINGS = st.from_regex(r"'([ -&(-~]|''){0,8}'", fullmatch=True)
NUMBERS = st.from_regex(r"[0-9]{1,4}(\.[0-9]{1,2})?", fullmatch=True)
DURATIONS = st.from_regex(r"[+-][0-9]{1,3}(\.[0-9])?[smhdw]", fullmatch=True)
TIMES = st.sampled_from(["'2024-01-01'", "'2026-12-01 10:00:00'", "'2026-12-07T02:00:00'"])
KEYS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True).filter(
    lambda key: key.lower() not in DSL_KEYWORDS)


def columns(view: str, *kinds: str) -> list[str]:
    """The columns of ``view`` of DuckDB types ``kinds`` (NUMBER: the numeric ones)."""
    found = CATALOG.get(view)
    assert found is not None
    return [c.name for c in found.columns if c.type in kinds
            or "NUMBER" in kinds and c.type in ("INTEGER", "BIGINT", "DOUBLE")]


def _one_of_columns(names: list[str], then: st.SearchStrategy[str]) -> list:
    return [st.tuples(st.sampled_from(names), then).map(" ".join)] if names else []


def predicates(view: str, widened: bool) -> st.SearchStrategy[str]:
    """One predicate over ``view``'s columns (``widened``: times and JSON keys too)."""
    text, number = columns(view, "VARCHAR"), columns(view, "NUMBER")
    boolean, time, json = columns(view, "BOOLEAN"), columns(view, "TIMESTAMP"), \
        columns(view, "JSON")
    cmp = st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">="])
    options = [
        *_one_of_columns(text, st.tuples(cmp, STRINGS).map(" ".join)),
        *_one_of_columns(number, st.tuples(cmp, NUMBERS).map(" ".join)),
        st.tuples(NUMBERS, cmp, st.sampled_from(number)).map(" ".join),
        *_one_of_columns(text + number, st.sampled_from(
            ["is null", "is not null", "= null", "!= null"])),
        st.tuples(st.sampled_from(text), st.sampled_from(["in", "not in"]),
                  st.lists(STRINGS, min_size=1, max_size=3)).map(
            lambda t: f"{t[0]} {t[1]} ({', '.join(t[2])})"),
        *_one_of_columns(text, st.tuples(st.sampled_from(
            ["like", "ilike", "not like", "not ilike"]), STRINGS).map(" ".join)),
        *([st.sampled_from(boolean), st.tuples(st.sampled_from(boolean), st.sampled_from(
            ["= true", "= false"])).map(" ".join)] if boolean else []),
    ]
    if widened:
        options += _one_of_columns(time, st.tuples(cmp, DURATIONS | TIMES).map(" ".join))
        options += [st.tuples(DURATIONS, cmp, st.sampled_from(time)).map(" ".join)] \
            if time else []
        path = st.tuples(st.sampled_from(json + ["args", "meta", "tag"]),
                         st.lists(KEYS, min_size=1, max_size=3)).filter(
            lambda t: t[0] in json or CATALOG.get(view).column(  # type: ignore[union-attr]
                {"args": "arguments", "meta": "metadata", "tag": "tags"}[t[0]])).map(
            lambda t: ".".join([t[0], *t[1]]))
        options += [st.tuples(path, st.sampled_from(
            ["is null", "is not null", "= null"]) | st.tuples(cmp, STRINGS | NUMBERS).map(
            " ".join)).map(" ".join)] if json else []
    return st.one_of(options)


def conditions(view: str, widened: bool) -> st.SearchStrategy[str]:
    """Predicates joined by and / or, negated and in parentheses (``widened`` on runs:
    relations' any / none / count, their conditions over the related view)."""
    leaf = predicates(view, widened)
    if widened and view == "runs":
        leaf = leaf | relations()
    return st.recursive(leaf, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["and", "or", "AND", "Or"]), inner).map(" ".join),
        inner.map(lambda c: f"not {c}"), inner.map(lambda c: f"({c})")), max_leaves=5)


def relations() -> st.SearchStrategy[str]:
    children = CATALOG.run_children() + list(RELATION_ALIASES)

    @st.composite
    def relation(draw) -> str:
        name = draw(st.sampled_from(children))
        child = RELATION_ALIASES.get(name, name)
        inner = draw(st.none() | conditions(child, True)) if child in VIEWS else None
        method = draw(st.sampled_from(["any", "none", "count"]))
        call = f"{name}.{method}({inner or ''})"
        if method != "count":
            return call
        number = draw(NUMBERS)
        op = draw(st.sampled_from(["=", "<", ">=", "!="]))
        return draw(st.sampled_from([f"{call} {op} {number}", f"{number} {op} {call}"]))
    return relation()


@st.composite
def dsl_texts(draw, widened: bool = True) -> str:
    """A whole query: a view, its condition, fields, order by and limit, each maybe."""
    view = draw(st.sampled_from(VIEWS))
    any_col = st.sampled_from([c.name for c in CATALOG.get(view).columns])  # type: ignore[union-attr]
    parts = []
    filtered = draw(st.booleans())
    if view != "runs" or draw(st.booleans()):  # a view then a condition needs its "where"
        parts.append(view + (" where" if filtered else draw(st.sampled_from(["", " where"]))))
    if filtered:
        parts.append(draw(conditions(view, widened)))
    if draw(st.booleans()):
        parts.append("fields " + draw(st.sampled_from(["*"]) | st.lists(
            any_col, min_size=1, max_size=3).map(", ".join)))
    if draw(st.booleans()):
        parts.append("order by " + ", ".join(draw(st.lists(st.tuples(any_col, st.sampled_from(
            ["", " asc", " desc"])).map("".join), min_size=1, max_size=2))))
    if draw(st.booleans()):
        parts.append(f"limit {draw(st.integers(0, 10**21))}")
    return " ".join(parts)
