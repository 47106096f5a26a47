"""Run compiled queries on a local Spark session over exported Parquet (the scale-out path).

pyspark is an optional extra (``pip install 'recstore[spark]'``) and needs Java 17+. Each exported
view directory becomes a temporary view of the same name; the ``day`` partition column is dropped
so a query sees the same columns as on the store. Results stream back through
``toLocalIterator`` in Arrow batches, like the DuckDB path.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from recstore.errors import InputError, RecstoreError
from recstore.query.export import PARTITION_COLUMN, parquet_view_paths
from recstore.query.output import BATCH_ROWS, ResultStream

if TYPE_CHECKING:
    from recstore.query.api import CompiledQuery

INSTALL_HINT = "pip install 'recstore[spark]'"


class SparkUnavailable(RecstoreError):
    """pyspark or Java is missing; the message says how to install it."""


def spark_missing_reason() -> str | None:
    """Why Spark cannot run here (no pyspark, no java), or None when it can."""
    try:
        found = importlib.util.find_spec("pyspark") is not None
    except (ImportError, ValueError):  # ValueError: blocked via sys.modules["pyspark"] = None
        found = False
    if not found:
        return f"pyspark is not installed; install it with: {INSTALL_HINT}"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "Spark needs Java 17 or newer; install a JDK and put java on PATH"
    return None


# Set by spark-submit (and pyspark's shell), which started the JVM with the master it was given.
_SUBMITTED = "PYSPARK_GATEWAY_PORT"


@functools.lru_cache(maxsize=1)
def spark_session(master: str | None = None, conf: tuple[tuple[str, str], ...] = ()) -> Any:
    """One Spark session per process: on ``master`` (a Spark master URL; by default the one
    spark-submit was given, else ``local[2]``), UTC, no UI, with the settings ``conf`` added."""
    reason = spark_missing_reason()
    if reason:
        raise SparkUnavailable(reason)
    # Spark otherwise warns that the host name resolves to loopback and may bind elsewhere.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # pyspark warns on each Arrow call that it has not been tested with pandas 3; recstore's
    # Spark path exchanges Arrow batches and does not go through pandas.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                            category=FutureWarning)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if master or _SUBMITTED not in os.environ:
        builder = builder.master(master or "local[2]")
    local = (master or "local").startswith("local") and _SUBMITTED not in os.environ
    builder = (
        builder.appName("recstore")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4" if local else "200")
        # A day-partitioned view has hundreds of small directories: list them on the driver
        # instead of starting a distributed listing job per view.
        .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
    )
    if local:
        builder = builder.config("spark.driver.host", "127.0.0.1")
        # recstore keeps no tables in Spark's catalogue; without this, its first look-up makes
        # an empty spark-warehouse/ in the working directory
        builder = builder.config("spark.sql.warehouse.dir", str(
            Path(tempfile.gettempdir()) / f"recstore-spark-warehouse-{os.getuid()}"))
    for key, value in conf:
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def register_views(spark: Any, parquet_dir: str | Path, names: Iterable[str]) -> list[str]:
    """Register the exported views ``names`` under ``parquet_dir`` as Spark temporary views
    (only those: reading a view's file listing and footers costs seconds)."""
    paths = parquet_view_paths(parquet_dir)
    if not paths:
        raise InputError("no exported views here; run `recstore export DIR` first",
                         source=str(parquet_dir))
    wanted = sorted(set(names))
    missing = [n for n in wanted if n not in paths]
    if missing:
        raise InputError(f"view {missing[0]} was not exported here; run `recstore export DIR` "
                         "again", source=str(parquet_dir))
    for name in wanted:
        path = paths[name]
        frame = spark.read.option("basePath", str(path)).parquet(str(path))
        if PARTITION_COLUMN in frame.columns:
            frame = frame.drop(PARTITION_COLUMN)
        frame.createOrReplaceTempView(name)
    return wanted


def run_on_spark(query: CompiledQuery, parquet_dir: str | Path,
                 batch_rows: int = BATCH_ROWS, spark: Any = None) -> ResultStream:
    """Run ``query`` (compiled to Spark SQL) over the Parquet export in ``parquet_dir``, on
    ``spark`` (default: :func:`spark_session`)."""
    spark = spark or spark_session()
    register_views(spark, parquet_dir, query.views())
    frame = spark.sql(query.to("spark"))
    columns = list(frame.columns)
    types = [f.dataType.simpleString() for f in frame.schema.fields]
    batches = _arrow_batches(frame.toLocalIterator(), columns, batch_rows)
    first = next(batches, None)
    rest = batches if first is None else itertools.chain([first], batches)
    return ResultStream(columns, types, rest, first.schema if first is not None else None)


def _arrow_batches(rows: Iterator[Any], columns: list[str],
                   batch_rows: int) -> Iterator[pa.RecordBatch]:
    chunk: list[tuple] = []
    for row in rows:
        chunk.append(tuple(row))
        if len(chunk) >= batch_rows:
            yield _batch(chunk, columns)
            chunk = []
    if chunk:
        yield _batch(chunk, columns)


def _batch(rows: list[tuple], columns: list[str]) -> pa.RecordBatch:
    arrays = [pa.array(list(values)) for values in zip(*rows, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, names=columns)
