"""Build the Parquet layout of ``recstore export`` from raw aioc NDJSON, on Spark.

The store's definitions do the work; this module only places rows as the ingest's writer would:

1. Every line runs through the ingest's ``prepare`` in a ``mapInArrow`` UDF
   (:mod:`recstore.spark.records`): events and projection rows, seqs counted from each record's
   first event.
2. Lines are numbered per file from the line counts of Spark's splits, and records are placed in
   file-path order, then line order (file ``i`` in that order is source ``i``): a run key's lines
   are its stream, each line whose record differs from the line before it of the same key is a
   new revision (one equal to it is a duplicate and adds nothing), and the last revision is the
   current one, whose projection rows the views show: what ingesting the files one after the
   other, in that order, into an empty store stores. Seqs count from 1 over the stored revisions
   in that order (from each split's total, so no step sees all records at once).
3. The store's tables (``events``, ``streams``, ``proj_*``, ``source_files``,
   ``source_results``, ``rejects``, one ``batches`` row for the build) become Spark temporary
   views; columns the store computes on insert (``started`` from ``started_text``,
   ``duration_ms``) are the same DuckDB expressions transpiled. Each view of the store layer,
   and each helper view (``run_rows``, the ``cmp_*`` feature views), is its ``schema/`` SQL
   transpiled (:mod:`recstore.spark.definitions`); the public ones are written as the export
   writes it (:func:`recstore.query.export.export_select`): zstd Parquet, hive-partitioned
   by day for run views. Views of later layers (comparisons, replays, sweeps) hold what those
   commands recorded in a store, so a build writes them empty, with their columns.

What a build does not have that a store has: the batch hash chain (a build is derived data, not a
log: its ``batches`` row has no hashes), the sha256 of each source (``sources.sha256`` is NULL),
and the end of a file's last line (a truncated last line is rejected as invalid JSON, not named
truncated). Tags are not set.
"""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import accumulate
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from recstore.errors import InputError
from recstore.files import private_tree
from recstore.progress import NO_PROGRESS, Progress, start_phase
from recstore.query.dialects import to_dialect
from recstore.query.export import (
    PARTITION_COLUMN,
    claim_export_dir,
    export_select,
    partitionable,
    write_manifest,
)
from recstore.spark.definitions import SparkDefinitions, spark_definitions, spark_type
from recstore.spark.records import EVENT_FIELDS, prepare_lines, prepared_schema, source_uri
from recstore.store.counts import RecordCounts
from recstore.store.projection import COLUMNS, PROJECTION_TABLES, SEQ_COLUMNS
from recstore.store.tables import derived_column

__all__ = ["BuildSummary", "build_views"]

# Lines handed to one call of the prepare UDF (a record is ~15 KB; Spark's default of 10,000 rows
# per Arrow batch would hold ~300 MB of text and projections at once).
ARROW_BATCH_ROWS = 256
BATCH_ID = 1
# Views written at the same time.
WRITERS = 4
# proj_runs columns the writer sets when it places a record (prepare leaves placeholders).
_PLACED_RUN_COLUMNS = {
    "revision": "revision", "tags": "'{}'", "source_id": "source_id", "source_line": "line",
    "batch_id": str(BATCH_ID), "first_seq": "seq_base", "last_seq": "seq_base + event_count - 1",
}


@dataclass
class BuildSummary(RecordCounts):
    """What a build read and wrote: records by outcome, and rows per view."""

    directory: str
    sources: int = 0
    events: int = 0
    seconds: float = 0.0
    rows: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """The one-line summary the CLI prints."""
        return (f"{self.outcomes()} ({self.sources} sources, {self.events} events, "
                f"{self.seconds:.1f}s) -> {self.directory}")


def build_views(spark: Any, inputs: list[str], directory: str,
                progress: Progress = NO_PROGRESS, *, overwrite: bool = False) -> BuildSummary:
    """Read the NDJSON ``inputs`` (paths, globs, directories or any URI Spark reads) and write
    every public view under ``directory`` as ``recstore export`` lays it out; ``progress``
    follows the records prepared (their total is not known before they are read), then the
    views written, each as a phase of its own (:func:`recstore.progress.start_phase`).

    A local ``directory`` is claimed as ``recstore export`` claims it (new, empty, or an earlier
    export replaced with ``overwrite``; :func:`recstore.query.export.claim_export_dir`), marked
    with the export's manifest and made owner-only; a URI's view folders are replaced.
    """
    start = time.monotonic()
    definitions = spark_definitions()
    local = _local_dir(directory)
    views = list(definitions.catalog.views)
    if local is not None:
        claim_export_dir(local, views, overwrite)
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # the views' times are UTC wall times
    previous = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(ARROW_BATCH_ROWS))
    try:
        start_phase(progress, "prepare records")
        counter = spark.sparkContext.accumulator(0)
        prepared = _prepared(spark, inputs, definitions, counter)
        with _reporting(counter, progress):
            splits = _splits(prepared)  # the first action: every line is prepared here
        if not splits:
            raise InputError("no input lines found", source=", ".join(inputs))
        placement = _placement(spark, prepared, splits)
        summary = BuildSummary(directory)
        now = datetime.now(UTC).replace(tzinfo=None)
        _register_tables(spark, definitions, prepared, placement, splits, now, summary)
        start_phase(progress, "write views")
        _write_views(spark, definitions, directory, summary, progress)
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", previous)
        _release(spark, definitions)
    summary.seconds = time.monotonic() - start
    if local is not None:
        private_tree(local)  # Spark's writers follow its JVM's umask, not this process's
        catalog = definitions.catalog
        write_manifest(local, summary.rows,
                       [v.name for v in catalog.views.values() if partitionable(catalog, v)])
    return summary


def _local_dir(directory: str) -> Path | None:
    """``directory`` as a local path, or None for a URI of another file system."""
    if directory.startswith("file:"):
        return Path(urlsplit(directory).path)
    return None if "://" in directory else Path(directory)


def _release(spark: Any, definitions: SparkDefinitions) -> None:
    """Drop what a build kept in memory, so a long-lived session can run the next one."""
    for name in ("_rs_prepared", "_rs_keyed", "_rs_placement", *definitions.tables):
        if spark.catalog.tableExists(name):
            spark.catalog.uncacheTable(name)


@contextmanager
def _reporting(counter: Any, progress: Progress) -> Iterator[None]:
    """While the block runs, pass ``counter``'s value (lines prepared, as Spark's tasks report
    them) to ``progress`` twice a second."""
    if progress is NO_PROGRESS:
        yield
        return
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(0.5):
            progress.update(counter.value)

    thread = threading.Thread(target=report, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    progress.update(counter.value)


def _prepared(spark: Any, inputs: list[str], definitions: SparkDefinitions,
              counter: Any = None) -> Any:
    """One row per line: the prepare UDF's output (kept: every later step reads it);
    ``counter`` counts the lines prepared."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = prepared_schema(definitions.tables)
    try:
        lines = (spark.read.option("recursiveFileLookup", "true").text(inputs)
                 .selectExpr("CAST(value AS BINARY) AS data", "_metadata.file_path AS file",
                             "_metadata.file_block_start AS block",
                             "_metadata.file_size AS file_size"))
    except Exception as exc:  # noqa: BLE001 - Spark's AnalysisException names the path
        raise InputError(f"cannot read input: {_first_line(exc)}",
                         source=", ".join(inputs)) from None
    udf = functools.partial(prepare_lines, schema=schema, counter=counter)
    prepared = lines.mapInArrow(udf, from_arrow_schema(schema)).persist()
    prepared.createOrReplaceTempView("_rs_prepared")
    return prepared


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


@dataclass(frozen=True)
class _Split:
    file: str
    block: int
    lines: int
    file_size: int
    source_id: int = 0
    line_offset: int = 0


def _splits(prepared: Any) -> list[_Split]:
    """Spark's splits of the input in file-path and offset order, with each file's source id
    and the number of lines of the file before each split."""
    rows = (prepared.groupBy("file", "block")
            .agg({"*": "count", "file_size": "max"}).collect())
    found = sorted((r["file"], r["block"], r["count(1)"], r["max(file_size)"]) for r in rows)
    files = {file: i for i, file in enumerate(sorted({s[0] for s in found}), start=1)}
    splits, offset, previous = [], 0, None
    for file, block, lines, size in found:
        offset = 0 if file != previous else offset
        splits.append(_Split(file, block, lines, size, files[file], offset))
        offset, previous = offset + lines, file
    return splits


def _split_frame(spark: Any, splits: list[_Split], extra: dict[tuple[str, int], int] | None
                 = None) -> Any:
    rows = [(s.file, s.block, s.source_id, s.line_offset, (extra or {}).get((s.file, s.block), 0))
            for s in splits]
    return spark.createDataFrame(rows, "file STRING, block BIGINT, source_id INT, "
                                       "line_offset BIGINT, seq_offset BIGINT")


def _placement(spark: Any, prepared: Any, splits: list[_Split]) -> Any:
    """Per record line: its source id and line, whether it is stored (not a duplicate of the
    line before it of its run key), its revision, whether it is the current revision, its first
    seq and its first stream position."""
    from pyspark.sql import functions as F

    prepared.where("kind = 'record'").join(F.broadcast(_split_frame(spark, splits)),
                                           ["file", "block"]).createOrReplaceTempView("_rs_lines")
    keyed = spark.sql("""
        SELECT *,
               sum(CAST(stored AS INT)) OVER (PARTITION BY run_key ORDER BY source_id, line)
                   AS revision,
               coalesce(sum(IF(stored, event_count, 0)) OVER (
                   PARTITION BY run_key ORDER BY source_id, line
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS pos_base
        FROM (SELECT file, block, row, source_id, line_offset + row + 1 AS line, run_key,
                     event_count,
                     coalesce(lag(record_hash) OVER (PARTITION BY run_key
                                                     ORDER BY source_id, line_offset + row)
                              <> record_hash, TRUE) AS stored
              FROM _rs_lines)
    """).persist()
    keyed.createOrReplaceTempView("_rs_keyed")
    # seqs: each split's stored events, summed over the splits before it (on the driver: one
    # number per split), plus the stored events before the line within its split
    totals = {(r["file"], r["block"]): r["events"] for r in spark.sql(
        "SELECT file, block, sum(IF(stored, event_count, 0)) AS events FROM _rs_keyed "
        "GROUP BY file, block").collect()}
    counts = [totals.get((s.file, s.block), 0) for s in splits]
    firsts = [1 + before for before in accumulate([0, *counts[:-1]])]
    offsets = {(s.file, s.block): first for s, first in zip(splits, firsts, strict=True)}
    _split_frame(spark, splits, offsets).createOrReplaceTempView("_rs_split_seqs")
    placement = spark.sql("""
        SELECT k.file, k.block, k.row, k.source_id, k.line, k.stored, k.revision,
               k.stored AND k.revision = max(k.revision) OVER (PARTITION BY k.run_key)
                   AS current,
               s.seq_offset + coalesce(sum(IF(k.stored, k.event_count, 0)) OVER (
                   PARTITION BY k.file, k.block ORDER BY k.row
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS seq_base,
               k.pos_base
        FROM _rs_keyed k JOIN _rs_split_seqs s ON s.file = k.file AND s.block = k.block
    """).persist()
    keyed.unpersist()
    return placement


def _register_tables(spark: Any, definitions: SparkDefinitions, prepared: Any, placement: Any,
                     splits: list[_Split], now: datetime, summary: BuildSummary) -> None:
    """The store's tables as temporary views of the same names and columns."""
    placement.createOrReplaceTempView("_rs_placement")
    prepared.join(placement, ["file", "block", "row"]).createOrReplaceTempView("_rs_placed")
    counts = spark.sql("""
        SELECT count_if(stored AND revision = 1) AS accepted,
               count_if(stored AND revision > 1) AS revised,
               count_if(NOT stored) AS duplicate,
               coalesce(sum(IF(stored, event_count, 0)), 0) AS events
        FROM _rs_placed""").collect()[0]
    summary.accepted, summary.revised = counts["accepted"], counts["revised"]
    summary.duplicate, summary.events = counts["duplicate"], counts["events"]
    summary.sources = len({s.file for s in splits})
    literals = {"now": f"TIMESTAMP_NTZ '{now.isoformat(sep=' ')}'", "batch": str(BATCH_ID)}
    _stage(spark, "events", f"""
        SELECT p.seq_base + e.pos AS seq, p.run_key AS stream_key,
               CAST(p.pos_base + e.pos AS INT) AS stream_pos, p.revision,
               {", ".join(f"e.event.{name}" for name, _ in EVENT_FIELDS)},
               p.source_id, {literals['batch']} AS batch_id
        FROM _rs_placed p LATERAL VIEW posexplode(p.events) e AS pos, event WHERE p.stored""")
    _stage(spark, "streams", f"""
        SELECT run_key AS stream_key, revision, run_id, 'aioc' AS format, record_hash,
               seq_base AS first_seq, seq_base + event_count - 1 AS last_seq, event_count,
               source_id, line, {literals['batch']} AS batch_id, {literals['now']} AS ingested_at
        FROM _rs_placed WHERE stored""")
    for table in PROJECTION_TABLES:
        _stage(spark, table, _projection_sql(table))
    _register_files(spark, splits)
    summary.rejected = _register_rejects(spark, literals)
    _register_sources(spark, literals)
    _stage(spark, "batches", f"""
        SELECT {literals['batch']} AS batch_id, '{uuid.uuid4()}' AS ingest_id,
               {literals['now']} AS started_at, {literals['now']} AS committed_at,
               '{{}}' AS tags, {summary.accepted} AS accepted, {summary.revised} AS revised,
               {summary.duplicate} AS duplicate, {summary.rejected} AS rejected,
               {summary.events} AS event_count,
               IF({summary.events} > 0, 1, NULL) AS first_seq,
               IF({summary.events} > 0, {summary.events}, NULL) AS last_seq""")
    for table, columns in definitions.tables.items():
        if not spark.catalog.tableExists(table):
            _typed(spark, table, columns, None)


def _projection_sql(table: str) -> str:
    """A projection table's staged rows: the prepared rows of current revisions, seqs shifted
    by the revision's first seq, run columns set as the writer sets them."""
    shifted = set(SEQ_COLUMNS.get(table, ()))
    columns = []
    for name in COLUMNS[table]:
        if name in shifted:
            columns.append(f"x.{name} + p.seq_base AS {name}")
        elif table == "proj_runs" and name in _PLACED_RUN_COLUMNS:
            columns.append(f"{_PLACED_RUN_COLUMNS[name]} AS {name}")
        else:
            columns.append(f"x.`{name}` AS `{name}`")
    return (f"SELECT {', '.join(columns)} FROM _rs_placed p "
            f"LATERAL VIEW explode(p.{table}) t AS x WHERE p.current")


def _register_files(spark: Any, splits: list[_Split]) -> None:
    """``_rs_files``: one row per input file (source id, URI, compression, size)."""
    files = {s.source_id: s for s in splits}
    rows = [(sid, source_uri(s.file), "gzip" if s.file.endswith(".gz") else None, s.file_size)
            for sid, s in sorted(files.items())]
    spark.createDataFrame(rows, "source_id INT, uri STRING, compression STRING, "
                                "size_bytes BIGINT").createOrReplaceTempView("_rs_files")
    _split_frame(spark, splits).createOrReplaceTempView("_rs_splits")


def _register_sources(spark: Any, literals: dict[str, str]) -> None:
    _stage(spark, "source_files", f"""
        SELECT source_id, uri, 'ndjson' AS format, compression, {literals['batch']} AS batch_id,
               {literals['now']} AS opened_at FROM _rs_files""")
    _stage(spark, "source_results", f"""
        WITH outcome AS (
            SELECT source_id, count(*) AS records, count_if(stored AND revision = 1) AS accepted,
                   count_if(stored AND revision > 1) AS revised, count_if(NOT stored) AS duplicate,
                   0 AS rejected
            FROM _rs_placed GROUP BY source_id
            UNION ALL
            SELECT source_id, count(*), 0, 0, 0, count(*) FROM _rs_rejected GROUP BY source_id),
        per_file AS (
            SELECT source_id, sum(records) AS record_count, sum(accepted) AS accepted,
                   sum(revised) AS revised, sum(duplicate) AS duplicate, sum(rejected) AS rejected
            FROM outcome GROUP BY source_id)
        SELECT f.source_id, NULL AS sha256, f.size_bytes,
               CASE WHEN coalesce(o.rejected, 0) = 0 THEN 'ok'
                    WHEN o.record_count > o.rejected THEN 'partial' ELSE 'rejected' END AS status,
               coalesce(o.record_count, 0) AS record_count, coalesce(o.accepted, 0) AS accepted,
               coalesce(o.revised, 0) AS revised, coalesce(o.duplicate, 0) AS duplicate,
               coalesce(o.rejected, 0) AS rejected, {literals['batch']} AS batch_id,
               {literals['now']} AS finished_at
        FROM _rs_files f LEFT JOIN per_file o USING (source_id)""")


def _register_rejects(spark: Any, literals: dict[str, str]) -> int:
    spark.sql("""
        SELECT s.source_id, s.line_offset + p.row + 1 AS line, f.uri AS source_uri, p.*
        FROM _rs_prepared p
        JOIN _rs_splits s ON s.file = p.file AND s.block = p.block
        JOIN _rs_files f ON f.source_id = s.source_id
        WHERE p.kind = 'reject'""").createOrReplaceTempView("_rs_rejected")
    _stage(spark, "rejects", f"""
        SELECT row_number() OVER (ORDER BY source_id, line) AS reject_id, source_id,
               source_uri, line, reason, path, raw_text, raw_bytes, raw_sha256, raw_size,
               {literals['batch']} AS batch_id, {literals['now']} AS rejected_at
        FROM _rs_rejected""")
    return spark.table("rejects").count()


def _stage(spark: Any, table: str, sql: str) -> None:
    """Register ``sql``'s rows as the store table ``table``, in its column order and types;
    columns it lacks are computed as the store computes them on insert, or NULL."""
    spark.sql(sql).createOrReplaceTempView(f"_rs_staged_{table}")
    _typed(spark, table, spark_definitions().tables[table], set(spark.table(
        f"_rs_staged_{table}").columns))


def _typed(spark: Any, table: str, columns: tuple[tuple[str, str], ...],
           given: set[str] | None) -> None:
    given = given or set()
    select = []
    for name, dtype in columns:
        value = f'"{name}"' if name in given else derived_column(table, name, dtype, given)
        select.append(f'{value or "NULL"} AS "{name}"')
    source = f"_rs_staged_{table}" if given else "(SELECT 1 WHERE FALSE)"
    frame = spark.sql(spark_definitions().to_spark(f"SELECT {', '.join(select)} FROM {source}"))
    frame = frame.selectExpr(*(f"CAST(`{n}` AS {spark_type(t)}) AS `{n}`" for n, t in columns))
    # kept: every view that reads the table reads these rows, not the steps that made them
    frame.persist().createOrReplaceTempView(table)


def _write_views(spark: Any, definitions: SparkDefinitions, directory: str,
                 summary: BuildSummary, progress: Progress) -> None:
    """Write every public view; a few at a time, since a small view's write is mostly fixed
    costs (one Parquet file per day) that keep one core busy."""
    catalog = definitions.catalog
    views = list(catalog.views.values())
    for name, sql in definitions.views.items():
        if sql:
            spark.sql(sql).createOrReplaceTempView(name)
    # False: a later layer's view, written empty; a store table (events, batches, rejects) has
    # no view SQL and is written from the table of that name
    computed = {view.name: definitions.views.get(view.name, "") is not None for view in views}
    with ThreadPoolExecutor(WRITERS) as pool:
        futures = {pool.submit(_write_view, spark, catalog, view, directory,
                               computed[view.name]): view.name for view in views}
        for done, future in enumerate(as_completed(futures), start=1):
            summary.rows[futures[future]] = future.result()
            progress.update(done, len(views))
    summary.rows = {view.name: summary.rows[view.name] for view in views}


def _write_view(spark: Any, catalog: Any, view: Any, directory: str, computed: bool) -> int:
    """Write ``view`` as the export does and return its rows; an empty view (or one a build
    leaves empty) is one file without rows, so readers still find its columns."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    target = f"{directory.rstrip('/')}/{view.name}"
    types = {c.name: spark_type(c.type) for c in view.columns}
    if computed:
        partitioned = partitionable(catalog, view)
        frame = spark.sql(to_dialect(export_select(view, partitioned), "spark", catalog))
        frame = frame.selectExpr(*(f"CAST(`{n}` AS {t}) AS `{n}`" for n, t in types.items()),
                                 *([PARTITION_COLUMN] if partitioned else []))
        written = Observation()
        frame = frame.observe(written, F.count(F.lit(1)).alias("rows"))
        if partitioned:  # one file per day, as the export writes it
            frame = frame.repartition(PARTITION_COLUMN)
        writer = frame.write.mode("overwrite").option("compression", "zstd")
        if partitioned:
            writer = writer.partitionBy(PARTITION_COLUMN)
        writer.parquet(target)
        rows = _observed_rows(written)
        if rows:
            return rows
    columns = ", ".join(f"CAST(NULL AS {t}) AS `{n}`" for n, t in types.items())
    (spark.sql(f"SELECT {columns} WHERE FALSE").coalesce(1).write.mode("overwrite")
     .option("compression", "zstd").parquet(target))
    return 0


def _observed_rows(observation: Any) -> int:
    from py4j.protocol import Py4JJavaError

    try:
        return int(observation.get["rows"] or 0)
    except Py4JJavaError:  # a plan Spark knew to be empty ran no task, so no metric came back
        return 0


def output_location(path: str) -> str:
    """``path`` as Spark should write it: a local path made absolute, a URI as it is."""
    if "://" in path or path.startswith("file:"):
        return path
    return str(Path(path).absolute())
