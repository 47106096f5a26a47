"""What a store's physical layout costs the readers of one run: ``Store.run_detail`` (every
view of a run, as its page shows it) and ``Store.get_record`` (the record reassembled from its
events), timed over the same sample of runs in two or more stores of the same records (e.g.
one written by main and one by a branch that stores the log in another order), interleaved
so a noisy neighbour hits every store alike; and, on one open connection, the SELECT of a
run's events alone. Prints the median ms per run and each store's ratio to the first.

Run: python benchmarks/bench_run_reads.py STORE_A STORE_B [--runs 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from recstore.store import Store


def sample_runs(store: Store, n: int) -> list[str]:
    """``n`` run keys of ``store``, the same ones for every run of the benchmark (seed 7)."""
    with store.reader() as con:
        keys = sorted(r[0] for r in con.execute("SELECT run_key FROM proj_runs").fetchall())
    return random.Random(7).sample(keys, min(n, len(keys)))


def time_reads(store: Store, keys: list[str]) -> dict[str, float]:
    """Seconds per run of each read, over ``keys``: the two public reads (each opens the store)
    and, on one open connection, the run's events alone (what the log's order changes)."""
    seconds = {}
    with store.reader() as con:
        ranges = con.execute("SELECT first_seq, last_seq FROM proj_runs WHERE list_contains(?, "
                             "run_key)", [keys]).fetchall()
        start = time.perf_counter()
        for first, last in ranges:
            con.execute("SELECT type, idx, payload FROM events WHERE seq BETWEEN ? AND ? "
                        "ORDER BY seq", [first, last]).fetchall()
        seconds["events"] = (time.perf_counter() - start) / len(ranges)
    for name, read in (("run_detail", store.run_detail), ("get_record", store.get_record)):
        start = time.perf_counter()
        for key in keys:
            read(key)
        seconds[name] = (time.perf_counter() - start) / len(keys)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", type=Path, nargs="+")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    stores = [Store(path) for path in args.stores]
    keys = sample_runs(stores[0], args.runs)
    results = {path: [] for path in args.stores}
    for _ in range(args.repeat):
        for path, store in zip(args.stores, stores, strict=True):
            results[path].append(time_reads(store, keys))
    with open("/proc/loadavg", encoding="ascii") as fh:
        load = fh.read().split()[0]
    print(f"{len(keys)} runs, median of {args.repeat}, load average {load}")
    first = None
    for path, runs in results.items():
        medians = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
        first = first or medians
        print(f"{str(path):<40} " + "  ".join(
            f"{name} {ms * 1e3:7.2f} ms ({ms / first[name]:.2f}x)" for name, ms in medians.items()))


if __name__ == "__main__":
    main()
