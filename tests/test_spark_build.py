"""`recstore spark build` computes the store's views from raw NDJSON on Spark: built on local
Spark from the dev corpus (plus a file of duplicates, revisions and bad lines), every view equals
the store's `recstore export` of the same files row for row (tests/spark_conformance.py)."""

from __future__ import annotations

import gzip
import json
import shutil
import stat

import duckdb
import pytest

from recstore.errors import InputError
from recstore.query.export import MANIFEST, export_views
from recstore.spark.build import build_views
from recstore.store import Store

from .conftest import CORPUS_DEV, run_cli
from .spark_conformance import layout_differences, row_differences

SPLIT_BYTES = 16 * 1024


def _edge_lines() -> list[str]:
    """Lines that exercise placement: a duplicate, two revisions of one run and of another,
    a run that only this file has, a blank line and three kinds of reject."""
    with gzip.open(CORPUS_DEV / "corpus-baseline.ndjson.gz", "rt", encoding="utf-8") as fh:
        first, second, third = (next(fh) for _ in range(3))
    revised = json.loads(second)
    revised["metadata"]["note"] = "revised once"
    again = dict(revised, metadata=dict(revised["metadata"], note="revised twice"))
    new = json.loads(third)
    new["runId"] = "spark-build-only-here"
    other = json.loads(third)
    other["status"] = "failed"
    return [first.strip(), json.dumps(revised), "", "{not json", json.dumps(again),
            json.dumps({"runId": "x"}), json.dumps(new), "[1, 2]", json.dumps(other),
            json.dumps(revised)]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The corpus files and the edge file in one directory, named in ingest order."""
    directory = tmp_path_factory.mktemp("spark-inputs")
    shutil.copy(CORPUS_DEV / "corpus-baseline.ndjson.gz", directory / "1-baseline.ndjson.gz")
    shutil.copy(CORPUS_DEV / "corpus-candidate.ndjson.gz", directory / "2-candidate.ndjson.gz")
    (directory / "3-edge.ndjson").write_text("\n".join(_edge_lines()) + "\n", encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def built(spark, inputs, tmp_path_factory):
    """(the store's export, the Spark build, the store's ingest summary, the build summary)."""
    root = tmp_path_factory.mktemp("spark-build")
    store = Store(root / "runs.duckdb")
    ingested = store.ingest(sorted(str(p) for p in inputs.iterdir()))
    export_views(store, root / "export")
    # Small splits, so the uncompressed file is read as several (its lines numbered across them)
    previous = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(SPLIT_BYTES))
    try:
        splits = (spark.read.text(str(inputs / "3-edge.ndjson"))
                  .select("_metadata.file_block_start").distinct().count())
        assert splits > 2
        summary = build_views(spark, [str(inputs)], str(root / "build"))
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", previous)
    return root / "export", root / "build", ingested, summary


def test_build_lays_out_the_views_as_the_export_does(built):
    exported, build, _, _ = built
    assert layout_differences(exported, build) == []


@pytest.mark.parametrize("view", [
    "runs", "items", "tool_calls", "requests", "visits", "policy_decisions",
    "guardrail_decisions", "prompt_snapshots", "suspended_proposals", "findings", "lineage",
    "sources", "batches", "rejects", "events", "comparisons", "comparison_pairs",
    "comparison_unpaired", "replays", "replay_calls", "sweeps", "sweep_runs", "sweep_cases",
])
def test_build_rows_equal_the_stores_export(built, view):
    exported, build, _, _ = built
    rows, differing = row_differences(exported, build, view)
    assert differing == []
    if view in {"runs", "items", "tool_calls", "events", "rejects", "sources"}:
        assert rows > 0  # compared something


def test_build_counts_records_as_the_ingest_does(built):
    _, _, ingested, summary = built
    assert (summary.accepted, summary.revised, summary.duplicate, summary.rejected) == (
        ingested.accepted, ingested.revised, ingested.duplicate, ingested.rejected)
    assert (summary.revised, summary.duplicate, summary.rejected) == (4, 1, 3)


def test_cli_refuses_a_missing_input_before_starting_spark(tmp_path):
    result = run_cli(tmp_path / "unused.duckdb", "spark", "build",
                     str(tmp_path / "nowhere" / "*.ndjson"), str(tmp_path / "out"))
    assert result.returncode != 0
    assert result.stderr.startswith("recstore: error:") and "nowhere" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_cli_refuses_a_malformed_setting_before_starting_spark(inputs, tmp_path):
    result = run_cli(tmp_path / "unused.duckdb", "spark", "build", "--conf", "no-equals-sign",
                     str(inputs / "3-edge.ndjson"), str(tmp_path / "out"))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "--conf" in result.stderr and "no-equals-sign" in result.stderr


def test_cli_builds_views_spark_queries_read(spark, inputs, tmp_path):
    """The real command in-process (click's runner), so it uses the test run's one Spark session
    instead of starting a second JVM (the refusals above run it in a subprocess)."""
    from click.testing import CliRunner

    from recstore.cli import cli

    out = tmp_path / "views"
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "unused.duckdb"), "spark", "build",
                                      "--json", "--quiet", str(inputs / "3-edge.ndjson"),
                                      str(out)])
    assert result.exit_code == 1, result.output  # the file has rejected lines, as for ingest
    summary = json.loads(result.stdout)
    assert (summary["accepted"], summary["revised"], summary["rejected"]) == (4, 2, 3)
    con = duckdb.connect()
    stored = con.execute(f"SELECT count(*), count(DISTINCT day) FROM read_parquet("
                         f"'{out}/runs/**/*.parquet', hive_partitioning = true)").fetchone()
    assert stored[0] == summary["rows"]["runs"] == 4 and stored[1] >= 1


def test_build_marks_its_folder_as_an_export_and_keeps_it_owner_only(built):
    _, build, _, summary = built
    manifest = json.loads((build / MANIFEST).read_text())
    assert manifest["complete"] is True and manifest["rows"] == summary.rows
    modes = {stat.S_IMODE(p.stat().st_mode) for p in build.rglob("*") if not p.is_symlink()}
    assert modes == {0o600, 0o700}


def test_build_never_replaces_a_folder_it_did_not_write(spark, inputs, tmp_path, built):
    theirs = tmp_path / "theirs"
    (theirs / "runs").mkdir(parents=True)
    (theirs / "runs" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="holds no recstore export"):
        build_views(spark, [str(inputs / "3-edge.ndjson")], str(theirs))
    assert (theirs / "runs" / "notes.txt").read_text() == "mine"
    _, build, _, _ = built
    with pytest.raises(InputError, match="--overwrite"):
        build_views(spark, [str(inputs / "3-edge.ndjson")], str(build))
