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
import logging
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from recstore.errors import InputError, RecstoreError, SparkFailed, SparkUnavailable
from recstore.query.export import PARTITION_COLUMN, parquet_view_paths
from recstore.query.output import BATCH_ROWS, ResultStream

if TYPE_CHECKING:
    from recstore.query.api import CompiledQuery

INSTALL_HINT = "pip install 'recstore[spark]'"


MEMORY_HINT = ("if it ran out of memory, give it more: spark.driver.memory=8g in `conf` "
               "(local), spark.executor.memory on a cluster")


@contextmanager
def spark_failures() -> Iterator[None]:
    """Turn a Spark failure inside the block into one :class:`SparkFailed` line (Spark's own
    errors arrive as Py4J or PySpark exceptions with a Java stack trace)."""
    try:
        yield
    except RecstoreError:
        raise
    except Exception as exc:
        cause = _spark_cause(exc)
        if cause is None:
            raise
        raise SparkFailed(cause) from exc


def _spark_cause(exc: BaseException) -> str | None:
    """What a user needs from a Spark exception chain, or None when Spark is not in it."""
    try:
        from py4j.protocol import Py4JError, Py4JNetworkError
    except ImportError:  # no pyspark: the error is not Spark's
        return None

    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 10:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    if any(isinstance(e, Py4JNetworkError) for e in chain):
        return (f"Spark's JVM stopped (its log says why: {jvm_log_path()}, or the traceback "
                f"`debug` shows; {MEMORY_HINT})")
    error = next((e for e in chain if isinstance(e, Py4JError)
                  or type(e).__module__.startswith("pyspark")), None)
    if error is None:
        return None
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - Py4J cannot describe the error of a dying JVM
        text = ""
    hint = f"; {MEMORY_HINT}" if "OutOfMemoryError" in text else ""
    return f"Spark failed: {_root_message(text) or type(error).__name__}{hint}"


def _root_message(text: str) -> str:
    """The innermost Java exception's message in Py4J's text of an error (``Caused by: ...``
    lines, else the ``: ...`` line under "An error occurred while calling ..."), without the
    exception's class when Spark names an error class (``[CAST_INVALID_INPUT] ...``)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    causes = causes or [line.removeprefix(": ") for line in lines if line.startswith(": ")]
    message = causes[-1] if causes else (lines[0] if lines else "")
    return re.sub(r"^[\w.$]+: (?=\[)", "", message)


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
def spark_session(master: str | None = None, conf: tuple[tuple[str, str], ...] = (),
                  jvm_log: str | None = None) -> Any:
    """One Spark session per process: on ``master`` (a Spark master URL; by default the one
    spark-submit was given, else ``local[2]``), UTC, no UI, with the settings ``conf`` added.

    ``jvm_log``: a file that the JVM's own output goes to (log4j's start-up lines, Hadoop's
    warnings, the Python workers' stderr) instead of this process's stderr; the CLI passes one
    unless ``--debug``. Spark's errors still reach the caller as exceptions.
    """
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

    options = _session_options(master, conf)
    if jvm_log is not None and _SUBMITTED not in os.environ:
        _launch_jvm(options, jvm_log)
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    # PySpark logs a failed query's error as JSON on stderr; spark_failures reports it once.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    return session


def _session_options(master: str | None, conf: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """The session's settings, ``conf`` last (it wins)."""
    local = (master or "local").startswith("local") and _SUBMITTED not in os.environ
    options = {"spark.app.name": "recstore"}
    if master or _SUBMITTED not in os.environ:
        options["spark.master"] = master or "local[2]"
    options.update({
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4" if local else "200",
        # A day-partitioned view has hundreds of small directories: list them on the driver
        # instead of starting a distributed listing job per view.
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "100000",
    })
    if local:
        options["spark.driver.host"] = "127.0.0.1"
        # recstore keeps no tables in Spark's catalogue; without this, its first look-up makes
        # an empty spark-warehouse/ in the working directory
        options["spark.sql.warehouse.dir"] = str(
            Path(tempfile.gettempdir()) / f"recstore-spark-warehouse-{os.getuid()}")
        options["spark.driver.memory"] = local_driver_memory()
        # the Python workers that run recstore's UDFs are this interpreter, which has recstore
        # and pyarrow: PySpark's default is whatever `python3` is on PATH (the system's, when
        # recstore runs from a venv that is not activated); PySpark reads the variable when
        # the session's context starts
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    options.update(conf)
    return options


def _launch_jvm(options: dict[str, str], jvm_log: str) -> None:
    """Start Spark's JVM with its stdout and stderr appended to ``jvm_log`` (owner-only, never
    through a link), unless this process already has one."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(jvm_log, flags, 0o600)
    try:
        conf = SparkConf(loadDefaults=False).setAll(list(options.items()))
        gateway = launch_gateway(  # type: ignore[no-untyped-call]
            conf, popen_kwargs={"stdout": fd, "stderr": fd})
    finally:
        os.close(fd)  # the JVM holds its own copy
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def jvm_log_path() -> str:
    """Where the CLI sends the JVM's own output: one owner-only file per user in the temp
    folder."""
    return str(Path(tempfile.gettempdir()) / f"recstore-spark-{os.getuid()}.log")


def local_driver_memory() -> str:
    """The heap of a local Spark: half the machine's memory, 1 to 16 GiB. Spark's default of
    1 GiB runs out of memory building ~200,000 runs; a local build has the machine to itself."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return "2g"
    return f"{max(1, min(16, total // 2 // 2**30))}g"


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
    chunk: list[tuple[Any, ...]] = []
    for row in rows:
        chunk.append(tuple(row))
        if len(chunk) >= batch_rows:
            yield _batch(chunk, columns)
            chunk = []
    if chunk:
        yield _batch(chunk, columns)


def _batch(rows: list[tuple[Any, ...]], columns: list[str]) -> pa.RecordBatch:
    arrays = [pa.array(list(values)) for values in zip(*rows, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, names=columns)
