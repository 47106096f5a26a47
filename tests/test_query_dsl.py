"""The filter DSL: documented examples compile to the SQL shown and run; errors point at the
position with did-you-mean; any() keeps same-row semantics on a real store."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.errors import InputError
from recstore.query import compile_dsl, compile_query, dsl, run_query
from recstore.query import select_run_keys as select_keys
from recstore.query.api import run_key_tree
from recstore.store import Store

from .conftest import REPO_ROOT
from .query_support import DOCS_NOW_TEXT

DOCS = REPO_ROOT / "docs" / "queries.md"
DOCS_NOW = datetime.fromisoformat(DOCS_NOW_TEXT)
_PAIR = re.compile(r"```dsl\n(?P<dsl>.*?)\n```\s*```sql\n(?P<sql>.*?)\n```", re.DOTALL)



def documented_examples() -> list[tuple[str, str]]:
    pairs = [(m.group("dsl"), m.group("sql")) for m in _PAIR.finditer(DOCS.read_text("utf-8"))]
    assert len(pairs) >= 12, "docs/queries.md lost its DSL examples"
    return pairs


@pytest.mark.parametrize(("text", "expected_sql"), documented_examples())
def test_documented_example_compiles_to_shown_sql_and_runs(fixture_store, text, expected_sql):
    assert compile_dsl(text, now=DOCS_NOW).sql == expected_sql
    with run_query(fixture_store, text, now=DOCS_NOW) as result:
        rows = list(result.rows())
    assert all(len(row) == len(result.columns) for row in rows)


@pytest.mark.parametrize(("text", "expected_sql"), documented_examples())
def test_a_selection_without_hash_or_source_selects_what_runs_holds(fixture_store, text,
                                                                     expected_sql):
    """Run selections read run_rows (the runs view without the joins that add record_hash and
    source_uri) unless the filter names one of those: the same runs, in the same order."""
    keys = run_key_tree(compile_dsl(text, now=DOCS_NOW)).sql(dialect="duckdb")
    via_runs = keys.replace("FROM run_rows AS runs", "FROM runs")
    assert ("FROM run_rows AS runs" in keys) == (
        "FROM runs" in expected_sql and not re.search(r"record_hash|source_uri", text)
    )
    with fixture_store.reader() as con:
        assert con.execute(keys).fetchall() == con.execute(via_runs).fetchall()


def test_a_selection_naming_hash_or_source_reads_the_runs_view():
    for text in ("record_hash = 'ab'", "status = 'failed' order by source_uri"):
        assert " FROM runs " in run_key_tree(compile_dsl(text)).sql(dialect="duckdb") + " "


# (query, rows expected on the fixture store) -- pins that the examples select the right rows.
KNOWN_COUNTS = [
    ("tag.suite = 'nightly'", 600),
    ("metadata.caseId = 'case-00005'", None),  # at least one (a baseline and its replays)
    ("visits.count() >= 3", None),
    ("policy.any(decision = 'deny')", None),
]


@pytest.mark.parametrize(("text", "count"), KNOWN_COUNTS)
def test_examples_select_what_sql_selects(fixture_store, text, count):
    with run_query(fixture_store, text) as result:
        dsl_keys = sorted(row[result.columns.index("run_key")] for row in result.rows())
    assert dsl_keys, text
    if count is not None:
        assert len(dsl_keys) == count
    direct = {
        "metadata.caseId = 'case-00005'":
            "SELECT run_key FROM runs WHERE json_extract_string(metadata, '$.caseId') = 'case-00005'",
        "visits.count() >= 3":
            "SELECT run_key FROM runs WHERE visit_count >= 3",
        "policy.any(decision = 'deny')":
            "SELECT run_key FROM runs WHERE denial_count > 0",
        "tag.suite = 'nightly'":
            "SELECT run_key FROM runs WHERE tags->>'suite' = 'nightly'",
    }[text]
    with fixture_store.reader() as con:
        expected = sorted(r[0] for r in con.execute(direct).fetchall())
    assert dsl_keys == expected


# (query, message fragment, 1-based column of the caret)
ERRORS = [
    ("stauts = 'failed'", "unknown field 'stauts' in runs (did you mean 'status'?)", 1),
    ("status = 'failed' and agnet = 'x'", "did you mean 'agent'?", 23),
    ("tool_calls.any(nme = 'refund')", "unknown field 'nme' in tool_calls (did you mean 'name'?)",
     16),
    ("toolcalls.any(name = 'x')", "did you mean 'tool_calls'?", 1),
    ("visits = 3", "visits is a related table", 1),
    ("duration_ms > 'slow'", "this field is a number", 15),
    ("status > 5", "this field is text; quote the value", 10),
    ("agent > -7d", "a relative time compares only with timestamp fields", 9),
    ("status = ", "expected a field or a value, found end of query", 10),
    ("status = 'x' limit 'a'", "expected a row count after limit", 20),
    ("status = 'x' extra", "unexpected 'extra'", 14),
    ("status ~ 'x'", "unexpected character '~'", 8),
    ("status", "expected a comparison after 'status'", 7),
    ("tool_calls.some(name = 'x')", "unknown function some()", 12),
    ("status = $who", "no value for parameter $who", 10),
    ("run_id.x = 1", "run_id is VARCHAR, not JSON", 8),
    ("(status = 'x'", "expected ')'", 14),
    ("tool_calls where run = 'x'", "run needs a field", 18),
]


@pytest.mark.parametrize(("text", "fragment", "column"), ERRORS)
def test_error_points_at_position(text, fragment, column):
    with pytest.raises(dsl.DslError) as info:
        compile_dsl(text)
    message = str(info.value)
    first, line, caret = message.split("\n")
    assert fragment in first
    assert f"(at column {column})" in first
    assert line == f"  {text}"
    assert caret.index("^") - 2 == column - 1


def test_multi_line_error_names_line_and_column():
    with pytest.raises(dsl.DslError, match=r"at line 2, column 5"):
        compile_dsl("status = 'failed'\nand stat = 'x'")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    "status", "agent", "=", "!=", ">", "'x'", "3", "-7d", "and", "or", "not", "(", ")",
    "tool_calls", ".", "any", "count", "metadata", "caseId", "in", ",", "is", "null", "fields",
    "order", "by", "limit", "desc", "visits", "where", "run", "started", "$p", "like", "~", "*",
]), max_size=12))
def test_any_token_soup_compiles_or_fails_with_a_positioned_error(words):
    text = " ".join(words)
    try:
        query = compile_dsl(text)
    except InputError as exc:
        assert "(at " in str(exc) or "query refused" in str(exc)
        return
    # Whatever compiles is a single read-only query over known views.
    assert compile_query(query.sql).sql


# -- same-row semantics on a real store ------------------------------------------------------

def _record(run_id: str, calls: list[tuple[str, int]]) -> dict:
    items: list[dict] = [{"type": "message", "role": "user", "content": "q"}]
    for i, (name, amount) in enumerate(calls):
        call_id = f"{run_id}-c{i}"
        items.append({"type": "tool_call_item", "callId": call_id, "name": name,
                      "arguments": {"amount": amount}})
        items.append({"type": "tool_call_output_item", "callId": call_id,
                      "output": {"status": "ok", "code": None, "publicReason": None,
                                 "data": {}}})
    items.append({"type": "message", "role": "assistant", "content": "a"})
    return {"runId": run_id, "startedAt": "2026-05-01T00:00:00.000Z",
            "completedAt": "2026-05-01T00:00:01.000Z", "status": "completed",
            "agentName": "A", "providerName": "P", "model": "m", "question": "q",
            "response": "a", "items": items, "contextSnapshot": {}, "contextRedacted": False,
            "promptSnapshots": [], "requestFingerprints": [], "policyDecisions": []}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.tuples(st.sampled_from(["refund", "lookup"]),
                                   st.integers(0, 200)), max_size=4), min_size=1, max_size=6))
def test_any_applies_all_conditions_to_the_same_call(tmp_path_factory, runs):
    store = Store(tmp_path_factory.mktemp("same-row") / "s.duckdb")
    summary = store.ingest_records([_record(f"r{i}", calls) for i, calls in enumerate(runs)],
                                   source_uri="generated")
    assert summary.accepted == len(runs)
    selected = select_keys(store, "tool_calls.any(name = 'refund' and args.amount > 100)")
    expected = sorted(f"aioc:r{i}" for i, calls in enumerate(runs)
                      if any(name == "refund" and amount > 100 for name, amount in calls))
    assert selected == expected
    # The per-field reading (some refund call, some call over 100) is a different question.
    loose = select_keys(store, "tool_calls.any(name = 'refund') and tool_calls.any(args.amount > "
                               "100)")
    assert set(selected) <= set(loose)


def test_same_row_counterexample_is_not_selected(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    store.ingest_records([_record("split", [("refund", 5), ("lookup", 500)]),
                          _record("same", [("refund", 500)])], source_uri="generated")
    assert select_keys(store, "tool_calls.any(name = 'refund' and args.amount > 100)") == \
        ["aioc:same"]
    assert select_keys(store, "tool_calls.any(name = 'refund') and tool_calls.any(args.amount > "
                              "100)") == ["aioc:same", "aioc:split"]


def test_select_run_keys_keeps_order_and_accepts_sql(fixture_store):
    newest = select_keys(fixture_store, "tag.suite = 'nightly' order by started desc limit 5")
    with fixture_store.reader() as con:
        expected = [r[0] for r in con.execute(
            "SELECT run_key FROM runs WHERE tags->>'suite' = 'nightly' "
            "ORDER BY started DESC LIMIT 5").fetchall()]
    assert newest == expected
    failed_calls = select_keys(fixture_store, "tool_calls where envelope_status = 'error'")
    via_sql = select_keys(fixture_store,
                          "SELECT run_key FROM tool_calls WHERE envelope_status = 'error'")
    assert failed_calls == via_sql and failed_calls == sorted(set(failed_calls))


def test_dsl_may_start_with_a_parenthesis():
    query = compile_query("(status = 'failed' or status = 'completed') and visits.count() >= 3")
    assert query.language == "dsl"
    assert " FROM runs WHERE (runs.status = 'failed' OR " in query.sql
    assert compile_query("(SELECT 1)").language == "sql"
