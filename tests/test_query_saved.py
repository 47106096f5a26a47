"""Saved queries (queries/*.sql|*.dsl): headers, listing, typed and injection-safe parameters;
and the views reference (`recstore schema`) kept equal to docs/queries.md."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from recstore.errors import InputError, NotFoundError
from recstore.query import compile_query, list_saved, load_saved, run_query
from recstore.query.saved import parse_saved
from recstore.store import Store

from .conftest import REPO_ROOT
from .query_support import run_cli

STARTERS = {"failed-runs-by-error", "tool-usage-by-agent", "denied-actions-by-policy-version",
            "handoff-paths", "replays-diverged", "slowest-runs", "guardrail-trips"}



def _run(store: Store, name: str, **values: str) -> list[tuple]:
    saved = load_saved(name)
    query = compile_query(saved.text, params=saved.bind(values), language=saved.language)
    with run_query(store, query.sql) as result:
        return list(result.rows())


def test_starter_set_is_listed_with_headers():
    saved = {q.name: q for q in list_saved()}
    assert STARTERS <= set(saved)
    for query in saved.values():
        assert query.description, query.name
        assert query.path.name.startswith(query.name)


@pytest.mark.parametrize("name", sorted(STARTERS))
def test_every_starter_runs_and_finds_rows(fixture_store, name):
    rows = _run(fixture_store, name)
    assert rows, f"@{name} finds nothing on the fixture store"
    saved = load_saved(name)
    assert compile_query(saved.text, params=saved.bind({}), language=saved.language).to("spark")


def test_cli_lists_saved_queries_as_json():
    result = run_cli("queries", "--json")
    assert result.returncode == 0, result.stderr
    listed = {q["name"]: q for q in json.loads(result.stdout)}
    assert STARTERS <= set(listed)
    assert listed["failed-runs-by-error"]["params"][0]["name"] == "since"
    assert listed["slowest-runs"]["language"] == "dsl"


def test_timestamp_parameter_accepts_iso_and_relative_times(fixture_store):
    everything = sum(r[2] for r in _run(fixture_store, "failed-runs-by-error"))
    since_may = sum(r[2] for r in _run(fixture_store, "failed-runs-by-error",
                                       since="2026-05-01"))
    with fixture_store.reader() as con:
        expected = con.execute("SELECT count(*) FROM runs WHERE status = 'failed' AND "
                               "(started IS NULL OR started >= TIMESTAMP '2026-05-01')"
                               ).fetchone()[0]
    assert since_may == expected < everything
    saved = load_saved("failed-runs-by-error")
    bound = saved.bind({"since": "-7d"}, now=datetime(2026, 6, 1))
    assert bound["since"] == datetime(2026, 5, 25)


def test_parameter_values_are_literals_not_sql(fixture_store):
    hostile = "deny' OR '1'='1"
    assert _run(fixture_store, "denied-actions-by-policy-version", decision=hostile) == []
    saved = load_saved("denied-actions-by-policy-version")
    sql = compile_query(saved.text, params=saved.bind({"decision": hostile})).sql
    assert "WHERE decision = 'deny'' OR ''1''=''1'" in sql


@pytest.mark.parametrize(("values", "message"), [
    ({"since": "yesterday"}, "parameter since='yesterday' is not a valid timestamp"),
    ({"until": "2026-01-01"}, "@failed-runs-by-error has no parameter 'until' (parameters: since)"),
])
def test_bad_parameters_are_named(values, message):
    with pytest.raises(InputError, match=re.escape(message)):
        load_saved("failed-runs-by-error").bind(values)


def test_unknown_saved_query_suggests_the_nearest():
    with pytest.raises(NotFoundError, match=r"no saved query @slowest-run \(did you mean "
                                            r"@slowest-runs\?\)"):
        load_saved("@slowest-run")


def test_header_without_default_requires_the_parameter(tmp_path):
    path = tmp_path / "by-agent.dsl"
    path.write_text("-- name: by-agent\n-- description: Runs of one agent.\n"
                    "-- param: who text  Agent name.\n-- param: n int = 5  Unused.\n"
                    "agent = $who limit 3\n", encoding="utf-8")
    saved = load_saved("by-agent", tmp_path)
    assert [(p.name, p.type, p.default) for p in saved.params] == [("who", "text", None),
                                                                   ("n", "int", "5")]
    with pytest.raises(InputError, match=r"`params`: @by-agent needs who=<text> in `params`"
                       ) as caught:
        saved.bind({})
    assert caught.value.param == "params"
    query = compile_query(saved.text, params=saved.bind({"who": "Support"}),
                          language=saved.language)
    assert query.sql == compile_query("agent = 'Support' limit 3").sql
    bad = tmp_path / "bad.sql"
    bad.write_text("-- param: x date\nSELECT 1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.sql:1: bad param header 'x date'"):
        parse_saved(bad)


def test_cli_runs_saved_query_with_param(fixture_store):
    result = run_cli("query", "@slowest-runs", "--param", "since=2026-05-01", "--format",
                     "ndjson", db=fixture_store.path)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert 0 < len(rows) <= 20
    assert all(r["started"] >= "2026-05-01" for r in rows)
    durations = [r["duration_ms"] for r in rows]
    assert durations == sorted(durations, reverse=True)
    bad = run_cli("query", "@slowest-runs", "--param", "since", db=fixture_store.path)
    assert bad.returncode == 2
    assert bad.stderr == "recstore: error: --param: expected NAME=VALUE, got 'since'\n"


# -- the views reference ----------------------------------------------------------------------

def _docs_block() -> str:
    text = (REPO_ROOT / "docs" / "queries.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- schema:begin -->\n```text\n(.*?)```\n<!-- schema:end -->", text,
                      re.DOTALL)
    assert match, "docs/queries.md lost its schema markers"
    return match.group(1)


def test_schema_command_matches_docs_page():
    result = run_cli("--db", "/nonexistent/none.duckdb", "schema")
    assert result.returncode == 0, result.stderr
    assert result.stdout == _docs_block(), (
        "docs/queries.md views reference is out of date: paste the output of "
        "`recstore schema` between the schema markers")


def test_schema_json_matches_the_store(fixture_store, tmp_path):
    result = run_cli("schema", "--json", db=fixture_store.path)
    assert result.returncode == 0, result.stderr
    views = {v["name"]: v for v in json.loads(result.stdout)}
    required = {"runs", "items", "tool_calls", "requests", "visits", "policy_decisions",
                "guardrail_decisions", "prompt_snapshots", "lineage", "sources", "rejects"}
    assert required <= set(views)
    with fixture_store.reader() as con:
        for name in required:
            described = con.execute(f"DESCRIBE {name}").fetchall()
            assert [(c["name"], c["type"]) for c in views[name]["columns"]] == \
                [(row[0], row[1]) for row in described]
            assert views[name]["description"]
    runs = {c["name"]: c["type"] for c in views["runs"]["columns"]}
    assert runs["started"] == "TIMESTAMP" and runs["metadata"] == "JSON"
    assert all(c["description"] for v in required for c in views[v]["columns"])
