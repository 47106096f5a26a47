"""DSL default fields: every entity has a short list of real columns (run-scoped ones lead with
run_key), a query without ``fields`` shows exactly that list, ``fields *`` shows every column,
and docs/queries.md lists the same defaults."""

from __future__ import annotations

import re

import pytest

from recstore.query import compile_dsl, run_query, select_run_keys
from recstore.query.views import (
    DEFAULT_FIELDS,
    PUBLIC_VIEWS,
    catalog_from_connection,
    default_catalog,
)

from .conftest import REPO_ROOT

_DOC_ROW = re.compile(r"^\| `(?P<view>\w+)` \| (?P<columns>[\w, ]+) \|$", re.MULTILINE)



def test_every_view_has_default_fields_that_are_real_columns():
    catalog = default_catalog()
    assert set(DEFAULT_FIELDS) == set(PUBLIC_VIEWS)
    for name, view in catalog.views.items():
        fields = DEFAULT_FIELDS[name]
        assert fields, name
        assert len(set(fields)) == len(fields), f"{name}: a default field twice"
        missing = [f for f in fields if view.column(f) is None]
        assert not missing, f"{name}: default fields {missing} are not columns of the view"
        assert len(fields) < len(view.columns) or len(view.columns) <= 5, name
        assert view.default_fields == fields
        if view.column("run_key"):
            assert fields[0] == "run_key", f"{name}: run-scoped defaults must lead with run_key"


@pytest.mark.parametrize("view", PUBLIC_VIEWS)
def test_no_fields_shows_defaults_and_star_shows_every_column(fixture_store, view):
    with fixture_store.reader() as con:
        columns = catalog_from_connection(con).get(view).column_names
    with run_query(fixture_store, f"{view} limit 2") as result:
        list(result.rows())
        assert result.columns == list(DEFAULT_FIELDS[view])
    with run_query(fixture_store, f"{view} fields * limit 2") as result:
        list(result.rows())
        assert result.columns == columns


def test_star_with_a_condition_and_order(fixture_store):
    text = "tool_calls where name = 'search_docs' fields * order by run_key limit 5"
    assert compile_dsl(text).sql.startswith("SELECT tool_calls.* FROM tool_calls WHERE ")
    with run_query(fixture_store, text) as result:
        rows = list(result.rows())
    assert rows and len(result.columns) == len(default_catalog().get("tool_calls").columns)


def test_run_keys_are_the_same_with_defaults_and_star(fixture_store):
    for text in ("status = 'failed'", "tool_calls where name = 'search_docs' and not has_output",
                 "visits where visit_index >= 1"):
        keys = select_run_keys(fixture_store, text)
        assert keys, text
        assert keys == select_run_keys(fixture_store, text + " fields *")


def test_docs_list_the_same_default_fields():
    text = (REPO_ROOT / "docs" / "queries.md").read_text("utf-8")
    documented = {m["view"]: tuple(c.strip() for c in m["columns"].split(","))
                  for m in _DOC_ROW.finditer(text)}
    assert documented == DEFAULT_FIELDS
