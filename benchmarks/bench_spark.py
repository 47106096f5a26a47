"""The store's views from raw NDJSON: DuckDB (``recstore ingest`` + ``recstore export``) against
``recstore spark build`` on local Spark, at several sizes, on the same file.

The corpus is bench_ingest's (N realistic RunRecords from ``recstore.synth``, 2,000 distinct
records repeated with fresh runIds, spread over ~10 days). Both paths end with the same Parquet
layout (tests/test_spark_build.py checks they are equal row for row). Each phase runs in its own
process, interleaved ``--repeat`` times; medians are printed:

* **duckdb**: ingest into a fresh store, then export every view (wall seconds of each);
* **spark**: a Spark session on ``--master`` (default local[2]; its start is timed apart, it is
  paid once per job), then the build.

Printed per size: seconds of each side, runs per second end to end, the ratio spark / duckdb
(the baseline measured in the same run), and Spark's runs per second per core: the figure to
reason from about a cluster (docs/scale.md).

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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ingest import write_corpus  # noqa: E402 - the sibling benchmark's corpus


def phase_duckdb(corpus: Path, work: Path) -> dict:
    from recstore.query.export import export_views
    from recstore.store import Store

    start = time.perf_counter()
    store = Store(work / "runs.duckdb")
    summary = store.ingest([str(corpus)])
    ingested = time.perf_counter()
    export_views(store, work / "export")
    done = time.perf_counter()
    return {"ingest": ingested - start, "export": done - ingested, "total": done - start,
            "runs": summary.accepted}


def phase_spark(corpus: Path, work: Path, master: str) -> dict:
    from recstore.query.spark import spark_session
    from recstore.spark.build import build_views

    start = time.perf_counter()
    spark = spark_session(master)
    started = time.perf_counter()
    summary = build_views(spark, [str(corpus)], str(work / "build"))
    done = time.perf_counter()
    return {"session": started - start, "total": done - started, "runs": summary.accepted,
            "cores": spark.sparkContext.defaultParallelism}


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
    write_corpus(corpus, n)
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
            "spark_rate_per_core": n / spark / cores}


def print_table(rows: list[dict]) -> None:
    print("| runs | DuckDB ingest + export (s) | runs/s | Spark build (s) | runs/s | "
          "Spark / DuckDB | Spark runs/s per core | Spark session start (s) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['runs']:,} | {r['duckdb_ingest']:.1f} + {r['duckdb_export']:.1f} = "
              f"{r['duckdb']:.1f} | {r['duckdb_rate']:,.0f} | {r['spark']:.1f} | "
              f"{r['spark_rate']:,.0f} | {r['ratio']:.2f} | {r['spark_rate_per_core']:,.0f} "
              f"(x{r['cores']}) | {r['spark_session']:.1f} |")


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
