"""The store's views from raw NDJSON: DuckDB (``recstore ingest`` + ``recstore export``) against
``recstore spark build`` on local Spark, at several sizes, on the same file.

The corpus is bench_ingest's (N realistic RunRecords from ``recstore.synth``, 2,000 distinct
records repeated with fresh runIds, spread over ~10 days), paired: records 2k and 2k+1 are the
two arms (``metadata.arm`` a / b) of case ``metadata.caseId``, with different contents. Both
paths end with the same Parquet layout (tests/test_spark_build.py checks they are equal row for
row). Each phase runs in its own process, interleaved ``--repeat`` times; medians are printed:

* **duckdb**: ingest into a fresh store, then export every view (wall seconds of each), then
  bulk compare arm a with arm b by caseId (N/2 pairs) on the store, exact and with
  ``--preset semantic`` (per-field keys);
* **spark**: a Spark session on ``--master`` (default local[2]; its start is timed apart, it is
  paid once per job), then the build, then the same two comparisons with ``--engine spark``
  over the build.

Printed per size: seconds of each side, runs per second end to end, the ratio spark / duckdb
(the baseline measured in the same run), and Spark's runs per second per core: the figure to
reason from about a cluster (docs/scale.md); then a table of the comparisons.

Run: python benchmarks/bench_spark.py [--sizes 6000,20000] [--repeat 1] [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ingest import write_corpus  # noqa: E402 - the sibling benchmark's corpus

# The comparison both engines run: arm a against arm b of every case (bench_ingest's paired
# corpus), as `recstore compare --baseline ... --candidate ... --pair-by metadata.caseId`.
ARMS = ("metadata.arm = 'a'", "metadata.arm = 'b'")
PAIR_BY = "metadata.caseId"


def phase_duckdb(corpus: Path, work: Path) -> dict:
    from recstore.compare import bulk_compare
    from recstore.query.export import export_views
    from recstore.store import Store

    start = time.perf_counter()
    store = Store(work / "runs.duckdb")
    summary = store.ingest([str(corpus)])
    ingested = time.perf_counter()
    export_views(store, work / "export")
    done = time.perf_counter()
    compared = _compares(lambda preset: bulk_compare(store, *ARMS, pair_by=PAIR_BY, preset=preset,
                                                     record=False))
    return {"ingest": ingested - start, "export": done - ingested, "total": done - start,
            "runs": summary.accepted, **compared}


def phase_spark(corpus: Path, work: Path, master: str) -> dict:
    from recstore.query.spark import spark_session
    from recstore.spark.build import build_views
    from recstore.spark.compare import spark_compare

    start = time.perf_counter()
    spark = spark_session(master)
    started = time.perf_counter()
    summary = build_views(spark, [str(corpus)], str(work / "build"))
    done = time.perf_counter()
    compared = _compares(lambda preset: spark_compare(spark, work / "build", *ARMS,
                                                      pair_by=PAIR_BY, preset=preset))
    return {"session": started - start, "total": done - started, "runs": summary.accepted,
            "cores": spark.sparkContext.defaultParallelism, **compared}


def _compares(compare: Callable[[str | None], Any]) -> dict:
    """Seconds of ``compare(preset)`` exact and semantic, and the pairs compared."""
    out: dict[str, Any] = {}
    for name, preset in (("exact", None), ("semantic", "semantic")):
        start = time.perf_counter()
        comparison = compare(preset)
        out[f"compare_{name}"] = time.perf_counter() - start
        out["pairs"] = comparison.pair_count
    return out


def _child(phase: str, corpus: Path, work: Path, master: str) -> dict:
    work.mkdir(parents=True)
    result = subprocess.run(
        [sys.executable, __file__, "--phase", phase, "--corpus", str(corpus), "--work", str(work),
         "--master", master], capture_output=True, text=True, check=False)
    shutil.rmtree(work, ignore_errors=True)
    if result.returncode != 0:
        raise SystemExit(f"{phase} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure(root: Path, n: int, repeat: int, master: str) -> dict:
    corpus = root / f"corpus-{n}.ndjson"
    write_corpus(corpus, n, paired=True)
    runs: dict[str, list[dict]] = {"duckdb": [], "spark": []}
    for i in range(repeat):
        for phase in runs:
            runs[phase].append(_child(phase, corpus, root / f"{phase}-{n}-{i}", master))
    corpus.unlink()

    def median(phase: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[phase])

    duck, spark = median("duckdb", "total"), median("spark", "total")
    cores = runs["spark"][0]["cores"]
    return {"runs": n, "duckdb_ingest": median("duckdb", "ingest"),
            "duckdb_export": median("duckdb", "export"), "duckdb": duck,
            "spark_session": median("spark", "session"), "spark": spark, "cores": cores,
            "ratio": spark / duck, "duckdb_rate": n / duck, "spark_rate": n / spark,
            "spark_rate_per_core": n / spark / cores, "pairs": runs["duckdb"][0]["pairs"],
            **{f"{phase}_compare_{name}": median(phase, f"compare_{name}")
               for phase in runs for name in ("exact", "semantic")}}


def print_table(rows: list[dict]) -> None:
    print("| runs | DuckDB ingest + export (s) | runs/s | Spark build (s) | runs/s | "
          "Spark / DuckDB | Spark runs/s per core | Spark session start (s) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['runs']:,} | {r['duckdb_ingest']:.1f} + {r['duckdb_export']:.1f} = "
              f"{r['duckdb']:.1f} | {r['duckdb_rate']:,.0f} | {r['spark']:.1f} | "
              f"{r['spark_rate']:,.0f} | {r['ratio']:.2f} | {r['spark_rate_per_core']:,.0f} "
              f"(x{r['cores']}) | {r['spark_session']:.1f} |")
    print()
    print("| runs | pairs | compare exact: DuckDB (s) | Spark (s) | Spark / DuckDB | "
          "semantic: DuckDB (s) | Spark (s) | Spark / DuckDB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        cells = []
        for name in ("exact", "semantic"):
            duck, spark = r[f"duckdb_compare_{name}"], r[f"spark_compare_{name}"]
            cells.append(f"{duck:.1f} | {spark:.1f} | {spark / duck:.2f}")
        print(f"| {r['runs']:,} | {r['pairs']:,} | {' | '.join(cells)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="6000,20000")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--phase", choices=["duckdb", "spark"], help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase == "duckdb":
        print(json.dumps(phase_duckdb(args.corpus, args.work)))
        return
    if args.phase == "spark":
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        print(json.dumps(phase_spark(args.corpus, args.work, args.master)))
        return
    sizes = [int(s) for s in re.split(r"[,\s]+", args.sizes) if s]
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; "
          f"spark master {args.master}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="recstore-bench-spark-") as tmp:
        for n in sizes:
            rows.append(measure(Path(tmp), n, args.repeat, args.master))
            print(json.dumps(rows[-1]), flush=True)
    print_table(rows)


if __name__ == "__main__":
    main()
