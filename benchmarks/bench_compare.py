"""Bulk comparison: the set-based engine against ``compare_records`` in a Python loop.

For each size (default 10,000 and 100,000 pairs), in a fresh subprocess so peak RSS is per size:

1. build the pairs from ``recstore.synth`` (baseline and candidate variants of the same cases;
   beyond ``--distinct`` cases the records are reused under new runIds/caseIds, which costs the
   comparison exactly as much as new content would);
2. **baseline**: ``compare_records`` over every pair in a Python loop (aioc parity reference);
3. **index**: reduce every record to feature rows (``record_features``) and append them to a
   DuckDB file (``store_features``) — a one-off cost per stored revision, reused by every later
   comparison of that run;
4. **compare**: every pair's results in SQL (``compare_pairs``: what the loop computes), and
   **bulk**: that plus the classification and aggregate report (``classify`` + ``aggregate``),
   the part ``bulk_compare`` runs per comparison.

Printed: pairs/s of each phase, the bulk/loop speed ratio, index+bulk against the loop (a first
comparison of never-compared runs), peak RSS, and how each phase grows from the smallest size to
the largest. A check that the engine agrees with the loop on every pair runs too (not timed).

A short end-to-end run through a real store (``Store.ingest_records`` then ``bulk_compare`` with
pairing by ``metadata.caseId``) is printed for ``--store-pairs`` pairs (ingest not timed as
comparison).

Loop and bulk are each the best of ``--repeat`` runs (the machine may be shared); CPU time
(``time.process_time``, all threads) is printed next to wall time.

Run: python benchmarks/bench_compare.py [--sizes 10000,100000] [--store-pairs 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from recstore.canonical import canonical_json
from recstore.compare import aioc_result, bulk_compare
from recstore.compare.aggregate import aggregate, classify
from recstore.compare.engine import compare_pairs
from recstore.compare.features import record_features, store_features
from recstore.records import SECTIONS, compare_records
from recstore.resources import resource_dir
from recstore.store import Store
from recstore.synth import generate_corpus


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_pairs(n: int, distinct: int, seed: int = 7) -> list[tuple[dict, dict]]:
    cases = min(n, distinct)
    base = list(zip(generate_corpus(cases, seed), generate_corpus(cases, seed, "candidate"),
                    strict=True))
    pairs = []
    for i in range(n):
        a, b = base[i % cases]
        if i >= cases:  # the same content under new ids: a distinct stored run to compare
            case = f"case-{i + 1:07d}"
            a = dict(a, runId=f"{a['runId']}-{i}", metadata=dict(a["metadata"], caseId=case))
            b = dict(b, runId=f"{b['runId']}-{i}", metadata=dict(b["metadata"], caseId=case))
        pairs.append((a, b))
    return pairs


def _timed(work):
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _best_of(repeat: int, work):
    """Fastest of ``repeat`` runs (wall, cpu, result of the last run): the machine is shared, so
    the minimum is the figure least disturbed by other processes."""
    runs = [_timed(work) for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]


def _index(con, pairs, chunk: int = 2500) -> None:
    """Feature rows for both records of every pair, appended chunk by chunk (bounded memory)."""
    a_ids, b_ids = [], []
    for start in range(0, len(pairs), chunk):
        features = []
        for i, (a, b) in enumerate(pairs[start : start + chunk], start):
            features.append(record_features(a, run_key=f"b{i}", record_hash="h", with_fields=False))
            features.append(record_features(b, run_key=f"c{i}", record_hash="h", with_fields=False))
        ids = store_features(con, features)
        a_ids += [ids[f"b{i}", "h"] for i in range(start, start + len(features) // 2)]
        b_ids += [ids[f"c{i}", "h"] for i in range(start, start + len(features) // 2)]
    con.register("_bench_pairs", pa.table(
        {"pair_index": list(range(len(pairs))), "a_fid": a_ids, "b_fid": b_ids}))
    con.execute("CREATE TABLE bench_pairs AS SELECT * FROM _bench_pairs")
    con.unregister("_bench_pairs")


def _compare(con) -> None:
    """Per-pair results (what compare_records gives for each pair)."""
    con.execute("CREATE OR REPLACE TEMP TABLE _cmp_pairs AS SELECT * FROM bench_pairs")
    compare_pairs(con, set(SECTIONS))


def _report(con) -> dict:
    """What the loop does not give: classification and the aggregate drift report."""
    classify(con)
    return aggregate(con)


def run_size(n: int, distinct: int, repeat: int) -> dict:
    """One size, measured in this process (called in a subprocess by main)."""
    pairs = make_pairs(n, distinct)
    rss_pairs = _peak_rss_mib()
    loop_wall, loop_cpu, loop = _best_of(
        repeat, lambda: [compare_records(a, b) for a, b in pairs]
    )
    with tempfile.TemporaryDirectory() as tmp:
        con = duckdb.connect(str(Path(tmp) / "bench.duckdb"))
        con.execute((resource_dir("schema") / "010_compare.sql").read_text(encoding="utf-8"))
        index_wall, index_cpu, _ = _timed(lambda: _index(con, pairs))
        rss_index = _peak_rss_mib()
        compare_wall, compare_cpu, _ = _best_of(repeat, lambda: _compare(con))
        report_wall, report_cpu, agg = _best_of(repeat, lambda: _report(con))
        rows = con.sql("SELECT * FROM _cmp_result ORDER BY pair_index").fetchall()
        names = [d[0] for d in con.sql("SELECT * FROM _cmp_result LIMIT 0").description]
        con.close()
    mismatches = sum(
        canonical_json(aioc_result(dict(zip(names, row, strict=True))))
        != canonical_json({k: want[k] for k in ("equal", "summary", "metrics")})
        for row, want in zip(rows, loop, strict=True)
    )
    return {
        "pairs": n, "loop": [loop_wall, loop_cpu], "index": [index_wall, index_cpu],
        "compare": [compare_wall, compare_cpu],
        "bulk": [compare_wall + report_wall, compare_cpu + report_cpu], "mismatches": mismatches,
        "changed": agg["flags"]["equal"]["changed"],
        "rss_mib": {"pairs_built": rss_pairs, "after_index": rss_index, "peak": _peak_rss_mib()},
    }


def run_store(n: int, distinct: int, repeat: int) -> dict:
    pairs = make_pairs(n, distinct)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.duckdb")
        ingest_wall, _, _ = _timed(lambda: (
            store.ingest_records([a for a, _ in pairs], tags={"set": "baseline"}),
            store.ingest_records([b for _, b in pairs], tags={"set": "candidate"})))
        timings = []
        for _ in range(2):  # first: features computed from the store; second: reused
            wall, cpu, comparison = _timed(lambda: bulk_compare(
                store, "tag.set = 'baseline'", "tag.set = 'candidate'",
                pair_by="metadata.caseId"))
            timings.append([wall, cpu])
    return {"pairs": n, "ingest": ingest_wall, "first": timings[0], "again": timings[1],
            "paired": comparison.pairs.num_rows}


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:10.0f} pairs/s" if seconds else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--distinct", type=int, default=5000,
                        help="distinct synth cases generated (reused beyond that)")
    parser.add_argument("--store-pairs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3, help="best of N for loop and bulk")
    parser.add_argument("--child", choices=["size", "store"], help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        work = run_size if args.child == "size" else run_store
        print(json.dumps(work(args.n, args.distinct, args.repeat)))
        return

    def child(kind: str, n: int) -> dict:
        out = subprocess.run(
            [sys.executable, __file__, "--child", kind, "--n", str(n),
             "--distinct", str(args.distinct), "--repeat", str(args.repeat)],
            capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        r = child("size", n)
        results.append(r)
        loop, index, bulk, only = r["loop"][0], r["index"][0], r["bulk"][0], r["compare"][0]
        print(f"\n== {n:,} pairs ({r['changed']:,} changed; engine vs loop mismatches: "
              f"{r['mismatches']})")
        print(f"  baseline  compare_records loop  {_rate(n, loop)}  ({loop:7.2f} s wall, "
              f"{r['loop'][1]:7.2f} s cpu)")
        print(f"  index     record features       {_rate(n, index)}  ({index:7.2f} s wall, "
              f"{r['index'][1]:7.2f} s cpu)  one-off per stored run")
        print(f"  compare   SQL per-pair results  {_rate(n, only)}  ({only:7.2f} s wall, "
              f"{r['compare'][1]:7.2f} s cpu)")
        print(f"  bulk      compare + aggregate   {_rate(n, bulk)}  ({bulk:7.2f} s wall, "
              f"{r['bulk'][1]:7.2f} s cpu)")
        print(f"  ratio     per-pair results vs loop: {loop / only:5.1f}x wall, "
              f"{r['loop'][1] / r['compare'][1]:5.1f}x cpu;  with the aggregate report: "
              f"{loop / bulk:5.1f}x wall, {r['loop'][1] / r['bulk'][1]:5.1f}x cpu")
        print(f"            index+bulk vs loop (first comparison of unseen runs): "
              f"{loop / (index + bulk):5.2f}x wall")
        rss = r["rss_mib"]
        print(f"  peak RSS  {rss['peak']:.0f} MiB (pairs in memory {rss['pairs_built']:.0f} MiB, "
              f"after index {rss['after_index']:.0f} MiB)")
    if len(results) > 1:
        small, large = results[0], results[-1]
        scale = large["pairs"] / small["pairs"]
        print(f"\ngrowth {small['pairs']:,} -> {large['pairs']:,} pairs ({scale:.0f}x): " + ", ".join(
            f"{phase} {large[phase][0] / small[phase][0]:.1f}x"
            for phase in ("loop", "index", "compare", "bulk")))
    if args.store_pairs:
        s = child("store", args.store_pairs)
        print(f"\n== through a real store, {s['pairs']:,} pairs by metadata.caseId "
              f"({s['paired']:,} paired; ingest {s['ingest']:.1f} s, not counted)")
        print(f"  bulk_compare, first (features from the store) {_rate(s['pairs'], s['first'][0])}")
        print(f"  bulk_compare, again (features reused)         {_rate(s['pairs'], s['again'][0])}")


if __name__ == "__main__":
    main()
