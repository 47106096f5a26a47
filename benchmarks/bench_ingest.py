"""Ingest against DuckDB's own reader of the same NDJSON: time, memory and bytes, at several sizes.

The corpus is NDJSON of N realistic RunRecords from ``recstore.synth`` (2,000 distinct records
repeated with fresh runIds up to N), or with ``--shape aioc-dev`` the 1,200 real records of the
dev corpus (tests/fixtures/aioc/corpus-dev, written by the aioc runtime) repeated the same way. The floor, measured in the same run, is DuckDB loading the
same file into one table, the least any loader must do::

    CREATE TABLE runs AS SELECT json->>'runId' id, json->>'status' status,
        json->>'agentName' agentName, json->>'startedAt' startedAt, json AS raw
    FROM read_ndjson_objects(file);  CHECKPOINT

A second baseline shows the part of the gap Python cannot close: ``hash only`` reads the same
lines and computes each record's aioc hash as ingest does (parse, canonical JSON of the items and
the record, sha256), nothing else, in one process. Every ingest must do that much to tell new
records from duplicates and revisions, so its ratio to the floor bounds a single-process ingest
from above (two worker processes: about twice that).

A third baseline bounds the writer: ``store only`` is DuckDB alone storing each line's text in
one VARCHAR column of a store-like file (64 KiB blocks, one thread, a commit per 2,000 lines as
the ingest commits, then CHECKPOINT), the lines already in Arrow; its CPU per record is what one
process pays DuckDB to put the records' bytes in the file (the write-ahead log, compression). The
writer stores at least those bytes (as event payloads, plus the projection rows), so its CPU per
record cannot go below that while one process writes one DuckDB file.

Each phase runs in its own process (its peak RSS and CPU time are its own: user + system, all
threads, and child processes), floor and recstore interleaved ``--repeat`` times; medians are
printed. Ratios are recstore throughput / floor throughput (>= 0.5 is the aim) and recstore
file / floor file (<= 2 is the aim).

A second table splits recstore's CPU between the writer (the ingesting process: reading, placing,
DuckDB's inserts and commits) and the worker processes that prepare records (parse, validate,
canonical JSON, hashes, projections), per record, and the throughput that split implies on more
cores: ``min(1 / writer, cores / (writer + workers))`` records per CPU-second. The writer is one
process, so ``1 / writer`` bounds ingest however many cores prepare records; the second term is
every core busy. With no worker processes (a small input), the writer prepares records itself.

Run: python benchmarks/bench_ingest.py [--sizes 6000,60000,200000] [--repeat 3] [--profile N]
     [--shape synth|aioc-dev]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DISTINCT = 2000


#: The real aioc records in the repository (written by the aioc runtime): ``--shape aioc-dev``
DEV_CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "aioc" / "corpus-dev"


def shape_records(shape: str, n: int) -> list[dict]:
    """Up to ``DISTINCT`` records of ``shape``: ``synth`` (recstore.synth, seed 42) or
    ``aioc-dev`` (the dev corpus's 1,200 baseline and candidate records, as the aioc runtime
    wrote them; real records cost several times synth ones per record to ingest)."""
    if shape == "synth":
        from recstore.synth import generate_corpus

        return list(generate_corpus(min(n, DISTINCT), seed=42))
    import gzip

    records = []
    for name in ("corpus-baseline.ndjson.gz", "corpus-candidate.ndjson.gz"):
        with gzip.open(DEV_CORPUS / name, "rt", encoding="utf-8") as fh:
            records.extend(json.loads(line) for line in fh if line.strip())
    return records[:n]


def write_corpus(path: Path, n: int, paired: bool = False, shape: str = "synth") -> None:
    """N records as NDJSON; runIds are unique, content repeats every 2,000 records (every
    1,200 for ``shape="aioc-dev"``).

    ``paired``: records 2k and 2k+1 share ``metadata.caseId`` (``bench-case-<k>``) and are the
    two arms of a comparison (``metadata.arm`` ``a`` and ``b``; their contents differ).

    synth plants lone surrogates (valid JSON that DuckDB's parser rejects); they become U+FFFD
    so the floor can read the same file."""
    def template(record: dict) -> str:
        record = {**record, "runId": "@@RUN@@"}
        if paired:
            record["metadata"] = {**record.get("metadata", {}), "caseId": "@@CASE@@",
                                  "arm": "@@ARM@@"}
        return (json.dumps(record, ensure_ascii=False).encode("utf-16", "surrogatepass")
                .decode("utf-16", "replace"))

    templates = [template(record) for record in shape_records(shape, n)]
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            line = templates[i % len(templates)].replace("@@RUN@@", f"bench-{i:08d}", 1)
            if paired:
                line = line.replace("@@CASE@@", f"bench-case-{i // 2:08d}", 1)
                line = line.replace("@@ARM@@", "ab"[i % 2], 1)
            fh.write(line)
            fh.write("\n")


def _usage() -> dict:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "cpu": own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
        "rss_mb": max(own.ru_maxrss, kids.ru_maxrss) / 1024,
    }


def phase_floor(corpus: Path, db: Path) -> dict:
    import duckdb

    start = time.perf_counter()
    con = duckdb.connect(str(db))
    con.execute(
        "CREATE TABLE runs AS SELECT json->>'runId' id, json->>'status' status, "
        "json->>'agentName' agentName, json->>'startedAt' startedAt, json AS raw "
        "FROM read_ndjson_objects(?)",
        [str(corpus)],
    )
    con.execute("CHECKPOINT")
    rows = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    con.close()
    return {"seconds": time.perf_counter() - start, "rows": rows, **_usage()}


def phase_hash(corpus: Path, db: Path) -> dict:
    import orjson

    from recstore.canonical import canonical_bytes
    from recstore.store.prepare import record_hash

    start = time.perf_counter()
    rows = 0
    with open(corpus, "rb") as fh:
        for line in fh:
            record = orjson.loads(line)
            record_hash(record, [canonical_bytes(item) for item in record["items"]])
            rows += 1
    db.write_bytes(b"")  # no store: the table's bytes column shows 0
    return {"seconds": time.perf_counter() - start, "rows": rows, **_usage()}


def phase_store(corpus: Path, db: Path) -> dict:
    import duckdb
    import pyarrow as pa

    from recstore.store.chain import DEFAULT_BATCH_SIZE
    from recstore.store.db import NEW_FILE_BLOCK_SIZE

    with open(corpus, "rb") as fh:
        texts = pa.array([line.rstrip(b"\n") for line in fh], pa.binary()).cast(pa.string())
    start, cpu = time.perf_counter(), time.process_time()  # DuckDB's part only
    con = duckdb.connect()
    con.execute(f"ATTACH ? AS store (BLOCK_SIZE {NEW_FILE_BLOCK_SIZE})", [str(db)])
    con.execute("USE store")
    con.execute("SET threads = 1")  # as Store.ingest's writer runs it
    con.execute("CREATE TABLE records (raw VARCHAR)")
    for at in range(0, len(texts), DEFAULT_BATCH_SIZE):
        batch = pa.table({"raw": texts.slice(at, DEFAULT_BATCH_SIZE)})  # noqa: F841 (SQL reads it)
        con.execute("BEGIN")
        con.execute("INSERT INTO records SELECT raw FROM batch")
        con.execute("COMMIT")
    con.execute("CHECKPOINT")
    rows = con.execute("SELECT count(*) FROM records").fetchone()[0]
    con.close()
    return {"seconds": time.perf_counter() - start, "store_cpu": time.process_time() - cpu,
            "rows": rows, **_usage()}


def _cpu_split() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its ended child processes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def phase_ingest(corpus: Path, db: Path) -> dict:
    from recstore.canonical import BACKEND
    from recstore.store import Store
    from recstore.store.prepare import default_workers

    workers = default_workers(corpus.stat().st_size)  # what Store.ingest would choose
    writer_before, workers_before = _cpu_split()
    start = time.perf_counter()
    summary = Store(db).ingest([str(corpus)], workers=workers)
    seconds = time.perf_counter() - start
    writer_after, workers_after = _cpu_split()  # the pool's workers have ended (and are reaped)
    return {
        "seconds": seconds,
        "rows": summary.accepted,
        "rejected": summary.rejected,
        "workers": workers,
        "backend": BACKEND,
        "writer_cpu": writer_after - writer_before,
        "worker_cpu": workers_after - workers_before,
        **_usage(),
    }


def profile_ingest(corpus: Path, db: Path) -> None:
    """Where the time goes: the top functions by own time for one ingest, in one process (no
    worker processes, so the profile sees the workers' share too), then the cumulative time of
    the main steps."""
    from recstore.store import Store

    profiler = cProfile.Profile()
    profiler.enable()
    Store(db).ingest([str(corpus)], workers=0)
    profiler.disable()
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(
        r"prepare\.py.*\((prepare|record_hash)\)|canonical\.py.*\(canonical_bytes|"
        r"projection\.py.*\(project_record\)|reader\.py.*\(parse_input\)|"
        r"events\.py.*\(record_to_events\)|aioc\.py.*\(validate_run_record\)|"
        r"ingest\.py.*\(ingest_sources\)|chain\.py.*\(line_digests\)")


def _child(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _run(phase: str, corpus: Path, db: Path) -> dict:
    for path in (db, db.with_suffix(db.suffix + ".wal")):
        path.unlink(missing_ok=True)
    result = _child(["--phase", phase, "--corpus", str(corpus), "--db", str(db)])
    result["bytes"] = db.stat().st_size
    db.unlink()
    return result


def _median(results: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in results)


def measure(work: Path, n: int, repeat: int, shape: str = "synth") -> dict:
    corpus = work / f"corpus-{n}.ndjson"
    write_corpus(corpus, n, shape=shape)
    floor, hashed, stored, ours = [], [], [], []
    for _ in range(repeat):  # interleaved: a noisy neighbour hits every phase
        floor.append(_run("floor", corpus, work / "floor.duckdb"))
        hashed.append(_run("hash", corpus, work / "hash.out"))
        stored.append(_run("store", corpus, work / "store-only.duckdb"))
        ours.append(_run("ingest", corpus, work / "store.duckdb"))
    corpus_bytes = corpus.stat().st_size
    corpus.unlink()
    assert all(r["rows"] == n for r in ours), "recstore did not store every record"
    row = {"n": n, "ndjson_mb": corpus_bytes / 1e6}
    for name, results in (("floor", floor), ("hash", hashed), ("recstore", ours)):
        for key in ("seconds", "cpu", "rss_mb", "bytes"):
            row[f"{name}_{key}"] = _median(results, key)
    row["wall_ratio"] = row["floor_seconds"] / row["recstore_seconds"]
    row["cpu_ratio"] = row["floor_cpu"] / row["recstore_cpu"]
    row["hash_wall_ratio"] = row["floor_seconds"] / row["hash_seconds"]
    row["hash_cpu_ratio"] = row["floor_cpu"] / row["hash_cpu"]
    row["bytes_ratio"] = row["recstore_bytes"] / row["floor_bytes"]
    row["writer_us"] = _median(ours, "writer_cpu") / n * 1e6
    row["worker_us"] = _median(ours, "worker_cpu") / n * 1e6
    row["store_only_us"] = _median(stored, "store_cpu") / n * 1e6
    row["workers"] = ours[0]["workers"]
    row["backend"] = ours[0]["backend"]
    return row


CORES = (2, 8, 16)


def implied_throughput(writer_us: float, worker_us: float, cores: int) -> float:
    """Records/s the CPU split allows on ``cores``: the one writer's bound, or all cores busy."""
    return min(1e6 / writer_us, cores * 1e6 / (writer_us + worker_us))


def print_cpu_split(rows: list[dict]) -> None:
    header = (f"{'records':>8} {'workers':>7} {'canonical':>9} | {'writer us/rec':>13} "
              f"{'store only us/rec':>17} {'workers us/rec':>14} | "
              + " ".join(f"{f'{c} cores rec/s':>15}" for c in CORES))
    print("\nCPU per record: the writer vs the worker processes, and the throughput implied")
    print(header)
    print("-" * len(header))
    for r in rows:
        implied = " ".join(f"{implied_throughput(r['writer_us'], r['worker_us'], c):>15,.0f}"
                           for c in CORES)
        print(f"{r['n']:>8,} {r['workers']:>7} {r['backend']:>9} | {r['writer_us']:>13,.0f} "
              f"{r['store_only_us']:>17,.0f} {r['worker_us']:>14,.0f} | {implied}")
    print("store only: DuckDB alone storing each record's text in one process (see above); the "
          "writer stores at least those bytes")


PHASES = {"floor": phase_floor, "hash": phase_hash, "store": phase_store, "ingest": phase_ingest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="6000,60000", help="comma-separated record counts")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs per size")
    parser.add_argument("--shape", choices=("synth", "aioc-dev"), default="synth",
                        help="records from recstore.synth, or the real aioc dev corpus's")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile an ingest of N records")
    parser.add_argument("--phase", choices=sorted(PHASES), help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.phase:
        print(json.dumps(PHASES[args.phase](args.corpus, args.db)))
        return

    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"ingest of {args.shape} records vs DuckDB read_ndjson_objects "
          f"(medians of {args.repeat} interleaved runs, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f})")
    header = (f"{'records':>8} {'NDJSON MB':>9} | {'rec/s':>7} {'floor rec/s':>11} "
              f"{'wall ratio':>10} {'CPU ratio':>9} | {'B/run':>6} {'floor B/run':>11} "
              f"{'bytes ratio':>11} | {'peak RSS MB':>11} {'floor RSS':>9} | "
              f"{'hash only: wall':>15} {'CPU ratio':>9}")
    print(header)
    print("-" * len(header))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        for n in sizes:
            r = measure(Path(tmp), n, args.repeat, args.shape)
            rows.append(r)
            print(f"{n:>8,} {r['ndjson_mb']:>9,.0f} | {n / r['recstore_seconds']:>7,.0f} "
                  f"{n / r['floor_seconds']:>11,.0f} {r['wall_ratio']:>10.2f} "
                  f"{r['cpu_ratio']:>9.2f} | {r['recstore_bytes'] / n:>6,.0f} "
                  f"{r['floor_bytes'] / n:>11,.0f} {r['bytes_ratio']:>11.2f} | "
                  f"{r['recstore_rss_mb']:>11,.0f} {r['floor_rss_mb']:>9,.0f} | "
                  f"{r['hash_wall_ratio']:>15.2f} {r['hash_cpu_ratio']:>9.2f}", flush=True)
        if len(rows) > 1:
            first, last = rows[0], rows[-1]
            change = (last["n"] / last["recstore_seconds"]) / (first["n"] / first["recstore_seconds"])
            print(f"throughput {last['n']:,} vs {first['n']:,} records: {change:.2f}x")
        print_cpu_split(rows)
        if args.profile:
            corpus = Path(tmp) / "profile.ndjson"
            write_corpus(corpus, args.profile, shape=args.shape)
            print(f"\nprofile of ingesting {args.profile:,} records (top functions by own time):")
            profile_ingest(corpus, Path(tmp) / "profile.duckdb")


if __name__ == "__main__":
    main()
