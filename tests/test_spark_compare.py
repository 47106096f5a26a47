"""`recstore compare --engine spark`: the comparison's own SQL, transpiled, on local Spark over
the dev corpus's Spark build (conftest's ``spark_built``, shared with test_spark_build.py) gives
the per-pair rows (typed, in any order), the unpaired runs and the aggregate the DuckDB engine
gives on a store of the same files; the CLI writes its report and formats from either engine."""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from recstore.cli import cli
from recstore.compare import ClassificationRule, bulk_compare, render_html
from recstore.spark.compare import spark_compare

from .conftest import run_cli

# The baseline takes the edge file too: its copy of a baseline run under another run id is a
# duplicate of that run's case, and its revisions move three cases out of the candidate's reach.
BASELINE = "source_uri LIKE '%baseline%' OR source_uri LIKE '%edge%'"
CANDIDATE = "source_uri LIKE '%candidate%'"


def _sorted_rows(table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda row: row["pair_index"])


def _assert_same(on_spark, on_store) -> None:
    assert on_spark.pairs.schema.equals(on_store.pairs.schema)
    assert _sorted_rows(on_spark.pairs) == _sorted_rows(on_store.pairs)
    assert on_spark.unpaired == on_store.unpaired
    assert on_spark.aggregate == on_store.aggregate
    assert on_spark.snapshot_seq == on_store.snapshot_seq
    assert on_spark.coverage() == on_store.coverage()


def test_spark_compare_equals_the_stores(spark, spark_built):
    options = dict(pair_by="metadata.caseId", rule=ClassificationRule.parse(warn_on="changed"))
    on_store = bulk_compare(spark_built.store, BASELINE, CANDIDATE, record=False, **options)
    on_spark = spark_compare(spark, spark_built.build, BASELINE, CANDIDATE, **options)
    _assert_same(on_spark, on_store)
    agg = on_store.aggregate
    # compared something of every kind: changes, status flips, divergences, policy changes,
    # and unpaired and duplicate runs
    assert agg["pairs"] > 500 and agg["flags"]["equal"]["changed"] > 0
    assert agg["statusFlips"] and agg["firstDivergence"]["pairs"] and agg["policyOutcomeChanges"]
    assert {row["reason"] for row in on_store.unpaired} >= {"duplicate_kept", "duplicate_dropped"}
    # tools are listed by total drift (DuckDB once ordered by the joined columns' NULLs)
    drift = [t["added"] + t["removed"] + t["changed_args"] for t in agg["tools"]]
    assert drift == sorted(drift, reverse=True)


@pytest.mark.parametrize("options", [
    # input-scope keys from the layout's cmp_input_scopes; every field the preset names
    dict(pair_by="input_scope", preset="semantic"),
    # single fields of entries and of the metadata (the other metadata keys still compared)
    dict(pair_by="metadata.caseId", ignore=["policy.timestamp,policy.callId",
                                            "metadata.appBuildVersion", "guardrails.timestamp"]),
], ids=["input-scope-semantic", "fields"])
def test_spark_compare_pairs_by_input_scope_and_ignores_fields_as_the_store(spark, spark_built,
                                                                             options):
    """What a store computes from its records when first asked (input-scope keys, per-field
    keys) comes from the layout on Spark, with the same result."""
    on_store = bulk_compare(spark_built.store, BASELINE, CANDIDATE, record=False, **options)
    on_spark = spark_compare(spark, spark_built.build, BASELINE, CANDIDATE, **options)
    _assert_same(on_spark, on_store)
    exact = bulk_compare(spark_built.store, BASELINE, CANDIDATE, record=False,
                         pair_by=options["pair_by"])
    # the ignored fields made a difference: more pairs have equal policy decisions and metadata
    flags, exact_flags = on_store.aggregate["flags"], exact.aggregate["flags"]
    for flag in ("samePolicyDecisions", "sameMetadata"):
        assert flags[flag]["equal"] > exact_flags[flag]["equal"], flag
    assert on_store.pair_count > 300  # 375 by input scope, 600 by caseId


def test_cli_spark_compare_writes_report_and_pairs(spark, spark_built, tmp_path):
    """The real command, in-process on the test run's Spark session (its own JVM would add
    ~40 s; the refusals below run it in a subprocess): --json, --format parquet and --html from
    the Spark engine, equal to the store's comparison with the same options."""
    pairs, report = tmp_path / "pairs.parquet", tmp_path / "report.html"
    options = ["--pair-by", "metadata.caseId", "--duplicates", "all", "--ignore", "metadata",
               "--fail-on", "regressed", "--max-unpaired", "1"]
    result = CliRunner().invoke(cli, [
        "--db", str(tmp_path / "unused.duckdb"), "compare", "--engine", "spark", "--parquet",
        str(spark_built.build), "--baseline", BASELINE, "--candidate", CANDIDATE, *options,
        "--json", "--quiet", "--format", "parquet", "-o", str(pairs), "--html", str(report)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.stderr
    on_store = bulk_compare(spark_built.store, BASELINE, CANDIDATE, pair_by="metadata.caseId",
                            duplicates="all", ignore=["metadata"],
                            rule=ClassificationRule.parse(fail_on="regressed"), record=False)
    assert result.exit_code == (1 if on_store.failed else 0), result.stderr
    printed = json.loads(result.stdout)
    assert printed["comparisonId"] is None  # a layout is no store: nothing recorded
    assert printed["aggregate"] == json.loads(json.dumps(on_store.aggregate))
    assert {r["reason"] for r in printed["unpaired"]} >= {"duplicate_paired"}
    written = pq.read_table(pairs)
    assert written.schema.equals(on_store.pairs.schema)
    assert _sorted_rows(written) == _sorted_rows(on_store.pairs)
    # the report from Spark (slices, tool names and drill-downs read from the layout's runs,
    # tool calls and events) is the store's report, byte for byte
    page = report.read_text(encoding="utf-8")
    assert f"{on_store.pair_count} pairs" in page and '"details":{"' in page
    assert page == render_html(on_store, spark_built.store)


def _without_java(tmp_path) -> dict[str, str]:
    """An environment in which starting Spark fails ("Spark needs Java"): a refusal that names
    the option came before any Spark session."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)
    return env


@pytest.mark.parametrize(("extra", "named"), [
    (["--ignore", "policy.timestmap"], "did you mean 'timestamp'"),
    (["--pair-by", "input-scopes"], "--pair-by 'input-scopes'"),
    (["A", "B"], "--engine spark compares run sets"),
])
def test_cli_refuses_bad_options_before_spark_starts(tmp_path, extra, named):
    (tmp_path / "layout" / "runs").mkdir(parents=True)  # what the check looks for before Spark
    sets = [] if "A" in extra else ["--baseline", BASELINE, "--candidate", CANDIDATE]
    result = run_cli(tmp_path / "unused.duckdb", "compare", "--engine", "spark", "--parquet",
                     str(tmp_path / "layout"), *sets, *extra, env=_without_java(tmp_path))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("recstore: error:") and named in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_refuses_spark_options_without_the_spark_engine(tmp_path):
    result = run_cli(tmp_path / "unused.duckdb", "compare", "--parquet", str(tmp_path),
                     "--baseline", BASELINE, "--candidate", CANDIDATE)
    assert result.returncode == 2 and "--parquet goes with --engine spark" in result.stderr


def test_cli_refuses_a_folder_without_views(tmp_path):
    result = run_cli(tmp_path / "unused.duckdb", "compare", "--engine", "spark", "--parquet",
                     str(tmp_path), "--baseline", BASELINE, "--candidate", CANDIDATE,
                     env=_without_java(tmp_path))
    assert result.returncode == 2 and "no exported views here" in result.stderr
    assert "Traceback" not in result.stderr
