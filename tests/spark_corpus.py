"""The dev corpus built both ways, once per test run: ingested into a store and exported, and
built on Spark from the same files (conftest's ``spark_built``). test_spark_build.py checks the
two layouts equal view for view; test_spark_compare.py compares on the build with
``--engine spark`` and on the store with DuckDB."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any, NamedTuple

from recstore.query.export import export_views
from recstore.store import Store

from .conftest import CORPUS_DEV

# Small splits, so the uncompressed edge file is read as several (its lines numbered across them)
SPLIT_BYTES = 16 * 1024


class SparkBuilt(NamedTuple):
    store: Store          # the files ingested in path order
    export: Path          # the store's `recstore export`
    build: Path           # `recstore spark build` of the same files
    ingested: Any         # the store's IngestSummary
    summary: dict         # the build's summary as `spark build --json` printed it
    exit_code: int        # and the command's exit status


def edge_lines() -> list[str]:
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


def write_inputs(directory: Path) -> Path:
    """The corpus files and the edge file in one directory, named in ingest order."""
    shutil.copy(CORPUS_DEV / "corpus-baseline.ndjson.gz", directory / "1-baseline.ndjson.gz")
    shutil.copy(CORPUS_DEV / "corpus-candidate.ndjson.gz", directory / "2-candidate.ndjson.gz")
    (directory / "3-edge.ndjson").write_text("\n".join(edge_lines()) + "\n", encoding="utf-8")
    return directory


def build_both(spark: Any, inputs: Path, root: Path) -> SparkBuilt:
    """Ingest and export ``inputs`` on a store, and build them on Spark with the real
    `recstore spark build` command, under ``root``. The command runs in-process (click's
    runner), so it uses the test run's Spark session instead of starting a second JVM."""
    from click.testing import CliRunner

    from recstore.cli import cli

    store = Store(root / "runs.duckdb")
    ingested = store.ingest(sorted(str(p) for p in inputs.iterdir()))
    export_views(store, root / "export")
    previous = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(SPLIT_BYTES))
    try:
        splits = (spark.read.text(str(inputs / "3-edge.ndjson"))
                  .select("_metadata.file_block_start").distinct().count())
        assert splits > 2
        result = CliRunner().invoke(cli, ["--db", str(root / "unused.duckdb"), "spark", "build",
                                          "--json", "--quiet", str(inputs), str(root / "build")])
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", previous)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.stdout, result.stderr  # the build's one error line, when it failed
    return SparkBuilt(store, root / "export", root / "build", ingested,
                      json.loads(result.stdout), result.exit_code)
