"""--dialect output as data: (DuckDB query, target, expected SQL). Each row pins a construct that
sqlglot alone transpiles wrongly, or the DSL's JSON, time and quantifier output per engine."""

from __future__ import annotations

import pytest

from recstore.errors import InputError
from recstore.query import compile_query

from .query_support import run_cli

CASES = [
    # len(list) is string LENGTH to sqlglot; engines reject LENGTH on an array.
    ("SELECT len(list(name)) FROM tool_calls", "spark",
     "SELECT SIZE(COLLECT_LIST(name)) FROM tool_calls"),
    ("SELECT len(list(name)) FROM tool_calls", "trino",
     "SELECT CARDINALITY(ARRAY_AGG(name)) FROM tool_calls"),
    ("SELECT len(list(name)) FROM tool_calls", "postgres",
     "SELECT ARRAY_LENGTH(ARRAY_AGG(name), 1) FROM tool_calls"),
    ("SELECT len(list(name)) FROM tool_calls", "clickhouse",
     "SELECT LENGTH(ARRAY_AGG(name)) FROM tool_calls"),
    ("SELECT len([1, 2, 3])", "spark", "SELECT SIZE(ARRAY(1, 2, 3))"),
    # ... while len(text) stays a string length.
    ("SELECT len(run_key) FROM runs", "spark", "SELECT LENGTH(run_key) FROM runs"),
    ("SELECT len(run_key) FROM runs", "clickhouse", "SELECT CHAR_LENGTH(run_key) FROM runs"),
    # quantile_cont has no common spelling.
    ("SELECT quantile_cont(duration_ms, 0.95) FROM runs", "spark",
     "SELECT PERCENTILE(duration_ms, 0.95) FROM runs"),
    ("SELECT quantile_cont(duration_ms, 0.95) FROM runs", "clickhouse",
     "SELECT quantile(0.95)(duration_ms) FROM runs"),
    ("SELECT quantile_cont(duration_ms, 0.95) FROM runs", "trino",
     "SELECT APPROX_PERCENTILE(duration_ms, 0.95) FROM runs"),
    ("SELECT quantile_cont(duration_ms, 0.95) FROM runs", "postgres",
     "SELECT PERCENTILE_CONT(0.95) WITHIN GROUP (ORDER BY duration_ms) FROM runs"),
    ("SELECT quantile_cont(duration_ms, 0.95) FROM runs", "bigquery",
     "SELECT APPROX_QUANTILES(duration_ms, 1000)[OFFSET(950)] FROM runs"),
    # DuckDB's 64-bit hash (the comparison's field fingerprints); Spark's HASH has 32 bits.
    ("SELECT hash(run_key) FROM runs", "spark", "SELECT XXHASH64(run_key) FROM runs"),
    # The DSL's JSON keys, try-casts, relative times and quantifiers.
    ("tool_calls.any(name = 'search_docs' and args.limit > 5) fields run_key", "spark",
     "SELECT runs.run_key FROM runs WHERE EXISTS(SELECT 1 FROM tool_calls AS tc WHERE "
     "tc.run_key = runs.run_key AND (tc.name = 'search_docs' AND "
     "TRY_CAST(GET_JSON_OBJECT(tc.arguments, '$.limit') AS DOUBLE) > 5))"),
    ("metadata.caseId = 'c-17' fields run_key", "trino",
     "SELECT runs.run_key FROM runs WHERE JSON_EXTRACT_SCALAR(runs.metadata, '$.caseId') = "
     "'c-17'"),
    ("metadata.caseId = 'c-17' fields run_key", "postgres",
     "SELECT runs.run_key FROM runs WHERE JSON_EXTRACT_PATH_TEXT(runs.metadata, 'caseId') = "
     "'c-17'"),
    ("metadata.caseId = 'c-17' fields run_key", "bigquery",
     "SELECT runs.run_key FROM runs WHERE JSON_EXTRACT_SCALAR(runs.metadata, '$.caseId') = "
     "'c-17'"),
    ("metadata.caseId = 'c-17' fields run_key", "clickhouse",
     "SELECT runs.run_key FROM runs WHERE JSONExtractString(runs.metadata, 'caseId') = 'c-17'"),
    ("visits.count() >= 3 fields run_key order by started desc limit 5", "spark",
     "SELECT runs.run_key FROM runs WHERE (SELECT COUNT(*) FROM visits AS v WHERE v.run_key = "
     "runs.run_key) >= 3 ORDER BY runs.started DESC LIMIT 5"),
    # DuckDB sorts nulls last both ways; Postgres needs it spelled out for DESC.
    ("status = 'failed' and started > '2026-05-01' fields run_key order by started desc",
     "postgres", "SELECT runs.run_key FROM runs WHERE runs.status = 'failed' AND runs.started > "
     "CAST('2026-05-01' AS TIMESTAMP) ORDER BY runs.started DESC NULLS LAST"),
]


@pytest.mark.parametrize(("text", "dialect", "expected"), CASES)
def test_dialect_output(text, dialect, expected):
    assert compile_query(text).to(dialect) == expected


def test_duckdb_output_is_the_compiled_sql():
    query = compile_query("SELECT len(list(name)) FROM tool_calls")
    assert query.to("duckdb") == query.sql == "SELECT LENGTH(ARRAY_AGG(name)) FROM tool_calls"


def test_unknown_dialect_is_an_input_error():
    with pytest.raises(InputError, match=r"unknown dialect 'oracle'"):
        compile_query("status = 'x'").to("oracle")


def test_cli_prints_dialect_sql_without_a_store(tmp_path):
    result = run_cli("query", "visits.count() >= 3 fields *", "--dialect", "spark",
                     db=tmp_path / "absent.duckdb")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == (
        "SELECT runs.* FROM runs WHERE ( SELECT COUNT(*) FROM visits AS v WHERE v.run_key = "
        "runs.run_key ) >= 3").split()
    assert not (tmp_path / "absent.duckdb").exists()


def test_cli_explain_prints_duckdb_sql_of_a_saved_query(tmp_path):
    result = run_cli("query", "@denied-actions-by-policy-version", "--param",
                     "decision=require_approval", "--explain", db=tmp_path / "absent.duckdb")
    assert result.returncode == 0, result.stderr
    assert "WHERE\n  decision = 'require_approval'" in result.stdout
    assert "\nSELECT\n  policy_version," in result.stdout
    assert "/* name: denied-actions-by-policy-version */" in result.stdout
