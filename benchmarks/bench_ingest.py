"""Ingest throughput of ``recstore ingest`` against DuckDB's own ``read_json`` of the same file.

The corpus is NDJSON of N realistic RunRecords: ``recstore.synth`` generates up to 2,000
distinct records, repeated with fresh runIds up to N. The floor measured in the same run is
DuckDB reading that file into one table (``CREATE TABLE ... AS SELECT * FROM read_json(...)``),
the least any loader must do. Each phase runs in its own process so its peak RSS is its own.

Run: python benchmarks/bench_ingest.py [--n 100000] [--batch-size 2000] [--profile 2000]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DISTINCT = 2000


def write_corpus(path: Path, n: int) -> None:
    """N records as NDJSON; runIds are unique, content repeats every 2,000 records.

    synth plants lone surrogates (valid JSON that DuckDB's parser rejects); they become U+FFFD
    so the floor can read the same file."""
    from recstore.synth import generate_corpus

    templates = [
        json.dumps({**record, "runId": "@@RUN@@"}, ensure_ascii=False)
        .encode("utf-16", "surrogatepass")
        .decode("utf-16", "replace")
        for record in generate_corpus(min(n, DISTINCT), seed=42)
    ]
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(templates[i % len(templates)].replace("@@RUN@@", f"bench-{i:08d}", 1))
            fh.write("\n")


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase_read_json(corpus: Path, db: Path) -> dict:
    import duckdb

    con = duckdb.connect(str(db))
    start = time.perf_counter()
    try:
        con.execute(
            "CREATE TABLE runs AS SELECT * FROM read_json(?, format = 'newline_delimited')",
            [str(corpus)],
        )
        how = "read_json (inferred typed columns)"
    except (duckdb.Error, duckdb.InvalidInputException):  # inference can refuse odd corpora; then one JSON column per record
        con.execute(
            "CREATE OR REPLACE TABLE runs AS SELECT * FROM read_ndjson_objects(?)", [str(corpus)]
        )
        how = "read_ndjson_objects (one JSON column)"
    con.execute("CHECKPOINT")
    seconds = time.perf_counter() - start
    rows = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    con.close()
    return {"seconds": seconds, "rows": rows, "rss_mb": _peak_rss_mb(), "how": how}


def phase_ingest(corpus: Path, db: Path, batch_size: int) -> dict:
    from recstore.store import Store

    store = Store(db)
    start = time.perf_counter()
    summary = store.ingest([str(corpus)], batch_size=batch_size)
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "rows": summary.accepted,
        "rejected": summary.rejected,
        "rss_mb": _peak_rss_mb(),
    }


def profile_ingest(corpus: Path, db: Path, batch_size: int) -> None:
    """Where the time goes: the top functions by own time for one ingest."""
    from recstore.store import Store

    profiler = cProfile.Profile()
    profiler.enable()
    Store(db).ingest([str(corpus)], batch_size=batch_size)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(15)


def _child(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="records in the corpus")
    parser.add_argument("--batch-size", type=int, default=2000)
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile an ingest of the first N records")
    parser.add_argument("--phase", choices=["read_json", "ingest"], help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase == "read_json":
        print(json.dumps(phase_read_json(args.corpus, args.db)))
        return
    if args.phase == "ingest":
        print(json.dumps(phase_ingest(args.corpus, args.db, args.batch_size)))
        return

    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus.ndjson"
        start = time.perf_counter()
        write_corpus(corpus, args.n)
        size_mb = corpus.stat().st_size / 1e6
        print(f"corpus: {args.n:,} records, {size_mb:,.1f} MB NDJSON "
              f"(generated in {time.perf_counter() - start:.1f}s)")

        floor = _child(["--phase", "read_json", "--corpus", str(corpus), "--db",
                        str(work / "floor.duckdb")])
        ours = _child(["--phase", "ingest", "--corpus", str(corpus), "--db",
                       str(work / "store.duckdb"), "--batch-size", str(args.batch_size)])
        floor_rate = floor["rows"] / floor["seconds"]
        our_rate = ours["rows"] / ours["seconds"]
        print(f"floor  DuckDB {floor['how']}: {floor['seconds']:.2f}s, "
              f"{floor_rate:,.0f} records/s, {size_mb / floor['seconds']:,.1f} MB/s, "
              f"peak RSS {floor['rss_mb']:,.0f} MB")
        print(f"recstore ingest (batch {args.batch_size}): {ours['seconds']:.2f}s, "
              f"{our_rate:,.0f} records/s, {size_mb / ours['seconds']:,.1f} MB/s, "
              f"peak RSS {ours['rss_mb']:,.0f} MB, rejected {ours['rejected']}")
        print(f"ratio recstore/read_json: {our_rate / floor_rate:.3f} "
              f"(peak RSS ratio {ours['rss_mb'] / floor['rss_mb']:.2f})")

        if args.profile:
            sample = work / "sample.ndjson"
            with open(corpus, encoding="utf-8") as src, open(sample, "w", encoding="utf-8") as dst:
                for _, line in zip(range(args.profile), src, strict=False):
                    dst.write(line)
            print(f"\nprofile of ingesting {args.profile:,} records (top functions by own time):")
            profile_ingest(sample, work / "profile.duckdb", args.batch_size)


if __name__ == "__main__":
    main()
