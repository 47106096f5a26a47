"""Throughput of the corpus generator (and so of the agent runtime underneath it).

Generates N baseline records, N candidate records, and writes N records as gzip NDJSON, single
process. The baseline measured in the same run is hashing the generated records once
(``sha256_canonical``, the cheapest pass that reads every value); each figure is printed with its
ratio to it. CPU time (``time.process_time``) is reported next to wall time because the machine
may be shared.

Run: python benchmarks/bench_synth.py [--records 10000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from recstore.canonical import sha256_canonical
from recstore.synth import generate_corpus, write_corpus


def _timed(label: str, n: int, work: Callable[[], object]) -> tuple[float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label:34s} {n / wall:9.0f} records/s wall   {n / cpu:9.0f} records/s cpu")
    return cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    n = parser.parse_args().records
    seed = parser.parse_args().seed

    gen_cpu, records = _timed("generate baseline", n, lambda: list(generate_corpus(n, seed)))
    cand_cpu, _ = _timed("generate candidate", n, lambda: list(generate_corpus(n, seed, "candidate")))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.ndjson.gz"
        write_cpu, _ = _timed("write_corpus (.ndjson.gz)", n, lambda: write_corpus(path, n, seed))
        size = path.stat().st_size
    hash_cpu, _ = _timed("baseline: sha256_canonical(record)", n,
                         lambda: [sha256_canonical(r) for r in records])

    print(f"\ngenerate / hash (cpu time ratio): {gen_cpu / hash_cpu:.2f}x")
    print(f"candidate / baseline generation: {cand_cpu / gen_cpu:.2f}x")
    print(f"write (gen + json + gzip) / generate: {write_cpu / gen_cpu:.2f}x; "
          f"{size / n:.0f} compressed bytes per record")
    statuses = Counter(r["status"] for r in records)
    scenarios = Counter(r["metadata"]["scenario"] for r in records)
    print(f"statuses {dict(statuses)}; {len(scenarios)} scenarios; "
          f"{sum(len(r['items']) for r in records) / n:.1f} items per record")


if __name__ == "__main__":
    main()
