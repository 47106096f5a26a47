"""The store's DuckDB SQL transpiled for Spark gives DuckDB's values: every JSON macro and
function the views call, and the time columns the store computes on insert, checked case by case
(tests/fixtures/spark/*.tsv: one case per line) on both engines."""

from __future__ import annotations

import json

from recstore.query.views import schema_connection
from recstore.spark.definitions import spark_definitions
from recstore.store.tables import derived_column

from .conftest import FIXTURES

# Every JSON reader the views use, applied to rs_json(t) at the case's path ({p}).
JSON_EXPRESSIONS = {
    "json_type": "json_type(rs_json(t), {p})",
    "json_extract": "json_extract(rs_json(t), {p})",
    "arrow_text": "rs_json(t) ->> {p}",
    "json_exists": "json_exists(rs_json(t), {p})",
    "rs_member": "rs_member(rs_json(t), {p})",
    "rs_str": "rs_str(rs_json(t), {p})",
    "rs_int": "rs_int(rs_json(t), {p})",
    "rs_bool": "rs_bool(rs_json(t), {p})",
    "rs_time": "rs_time(rs_json(t), {p})",
}
# Compared as JSON values (see the header of json_cases.tsv): JSON text, and ->> of a member that
# is not a string (its JSON text).
JSON_TEXT = {"json_extract", "rs_member"}


def _cases(name: str) -> list[tuple[str, ...]]:
    lines = (FIXTURES / "spark" / name).read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t")) for line in lines if line and not line.startswith("#")]


def _both(spark, sql: str, rows: list[tuple], columns: str) -> tuple[list, list]:
    """``sql`` (DuckDB, reading table ``cases`` of ``rows``) on DuckDB and, transpiled, on
    Spark; rows ordered by their first column."""
    names = [c.split()[0] for c in columns.split(", ")]
    with schema_connection() as con:
        con.execute(f"CREATE TABLE cases ({columns})")
        con.executemany(f"INSERT INTO cases VALUES ({', '.join('?' * len(names))})", rows)
        on_duckdb = con.execute(f"SELECT * FROM ({sql}) ORDER BY 1").fetchall()
    spark.createDataFrame(rows, columns.replace("VARCHAR", "STRING")).createOrReplaceTempView(
        "cases")
    spark_sql = spark_definitions().to_spark(sql)
    on_spark = [tuple(r) for r in spark.sql(spark_sql).orderBy(names[0]).collect()]
    return on_duckdb, on_spark


def _json_value(text):
    return None if text is None else json.loads(text)


def test_json_readers_give_duckdbs_values_on_spark(spark):
    cases = [(i, path, text) for i, (path, text) in enumerate(_cases("json_cases.tsv"))]
    selects = []
    for path in sorted({path for _, path, _ in cases}):
        literal = "'" + path.replace("'", "''") + "'"
        exprs = ", ".join(f"{e.format(p=literal)} AS {name}"
                          for name, e in JSON_EXPRESSIONS.items())
        selects.append(f"SELECT i, {exprs} FROM cases WHERE path = {literal}")
    on_duckdb, on_spark = _both(spark, " UNION ALL ".join(selects), cases,
                                "i INTEGER, path VARCHAR, t VARCHAR")
    assert len(on_duckdb) == len(on_spark) == len(cases)
    differ = []
    for duck_row, spark_row in zip(on_duckdb, on_spark, strict=True):
        case = cases[duck_row[0]]
        for name, duck, other in zip(JSON_EXPRESSIONS, duck_row[1:], spark_row[1:], strict=True):
            if name in JSON_TEXT or (name == "arrow_text" and duck_row[1] != "VARCHAR"):
                duck, other = _json_value(duck), _json_value(other)
            if other != duck:
                differ.append((name, case[1:], duck, other))
    assert not differ, "\n".join(map(repr, differ))


def test_computed_run_times_are_duckdbs_on_spark(spark):
    cases = [(i, *(v or None for v in times))
             for i, times in enumerate(_cases("duration_cases.tsv"))]
    given = {"started_text", "completed_text"}
    computed = [f"{derived_column('proj_runs', name, dtype, given)} AS {name}"
                for name, dtype in (("started", "TIMESTAMP"), ("completed", "TIMESTAMP"),
                                    ("duration_ms", "BIGINT"))]
    on_duckdb, on_spark = _both(spark, f"SELECT i, {', '.join(computed)} FROM cases", cases,
                                "i INTEGER, started_text VARCHAR, completed_text VARCHAR")
    assert any(row[3] is not None for row in on_duckdb)  # the cases hold computable durations
    assert on_spark == on_duckdb
