"""Canonical JSON throughput: the C extension against the pure-Python path, at several sizes.

Two corpora: the dev corpus (tests/fixtures/aioc/corpus-dev, real aioc records, repeated up to N)
and ``recstore.synth`` records. For each, the CPU time (``time.process_time``, best of
``--repeat``) to print every record's canonical JSON with

* ``C``: ``recstore._canonical.dumps`` (what ``canonical_bytes`` runs when the extension is built);
* ``Python``: ``canonical_bytes`` on the pure-Python path (orjson's sorted output where it is
  already aioc's text, the Python reference elsewhere);
* ``orjson``: ``orjson.dumps(value, option=OPT_SORT_KEYS)``, the baseline measured in the same
  run: a compiled encoder that sorts keys but does not print aioc's text (key order and numbers
  differ), so it shows what compiled code costs here, not a correct alternative. orjson refuses
  some records (lone surrogates, ints beyond 64 bits): its column and ``C/orjson`` are measured
  on the records it accepts, with C timed on that same subset.

The ``hash`` columns time what ingest does per record (``record_hash`` over the items' canonical
JSON and the record's, sha256 included) on each path. Ratios are throughput against Python
(>1: faster). Every C output is checked byte for byte against the Python path first.

Run: python benchmarks/bench_canonical.py [--sizes 1000,10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from recstore import canonical
from recstore.store.prepare import record_hash

CORPUS_DEV = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "aioc" / "corpus-dev"


def dev_records() -> list[dict]:
    """The dev corpus's 1,200 records and its 120 replay records, parsed as ingest parses."""
    records = []
    for name in ("corpus-baseline", "corpus-candidate"):
        with gzip.open(CORPUS_DEV / f"{name}.ndjson.gz", "rb") as fh:
            records += [canonical.loads_strict(line) for line in fh if line.strip()]
    with gzip.open(CORPUS_DEV / "corpus-replays.ndjson.gz", "rb") as fh:
        records += [canonical.loads_strict(line)["replayRunRecord"] for line in fh if line.strip()]
    return records


def synth_records(n: int) -> list[dict]:
    from recstore.synth import generate_corpus

    return [json.loads(json.dumps(r)) for r in generate_corpus(n, seed=42)]


def _cpu(fn: Callable[[dict], object], records: list[dict], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for record in records:
            fn(record)
        best = min(best, time.process_time() - start)
    return best


def _python_path(fn: Callable[[dict], object]) -> Callable[[dict], object]:
    """``fn`` run with the C encoder switched off (canonical's pure-Python path)."""
    def run(record: dict) -> object:
        saved, canonical._c_dumps = canonical._c_dumps, None
        try:
            return fn(record)
        finally:
            canonical._c_dumps = saved
    return run


def _hash(record: dict) -> bytes:
    return record_hash(record, [canonical.canonical_bytes(i) for i in record["items"]])


def _orjson_sorted(record: dict) -> bytes:
    return orjson.dumps(record, option=orjson.OPT_SORT_KEYS)


def _orjson_accepts(record: dict) -> bool:
    try:
        _orjson_sorted(record)
    except (TypeError, orjson.JSONEncodeError):
        return False
    return True


def measure(records: list[dict], repeat: int, c_dumps) -> dict:
    python = _python_path(canonical.canonical_bytes)
    for record in records:
        assert c_dumps(record) == python(record), "C and Python paths differ"
    mb = sum(len(python(r)) for r in records) / 1e6
    accepted = [r for r in records if _orjson_accepts(r)]
    return {
        "mb": mb,
        "c": _cpu(c_dumps, records, repeat),
        "python": _cpu(python, records, repeat),
        "orjson_n": len(accepted),
        "orjson": _cpu(_orjson_sorted, accepted, repeat),
        "c_on_orjson": _cpu(c_dumps, accepted, repeat),
        "hash_c": _cpu(_hash, records, repeat),
        "hash_python": _cpu(_python_path(_hash), records, repeat),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated record counts")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes (best is printed)")
    args = parser.parse_args()
    try:
        from recstore._canonical import dumps as c_dumps
    except ImportError:
        raise SystemExit("bench_canonical: the C extension is not built (pip install -e .)") from None
    sizes = [int(s) for s in args.sizes.split(",")]
    dev = dev_records()
    synth = synth_records(min(max(sizes), 2000))
    load = os.getloadavg()[0]
    print(f"canonical JSON, CPU seconds (best of {args.repeat}); load average {load:.2f}")
    header = (f"{'corpus':>6} {'records':>8} {'MB':>6} | {'C rec/s':>9} {'Python rec/s':>12} "
              f"{'orjson rec/s':>12} | {'C/Python':>8} {'C/orjson':>8} | "
              f"{'hash C/s':>9} {'hash Py/s':>9} {'ratio':>6}")
    print(header)
    print("-" * len(header))
    for name, pool in (("dev", dev), ("synth", synth)):
        for n in sizes:
            records = [pool[i % len(pool)] for i in range(n)]
            r = measure(records, args.repeat, c_dumps)
            print(f"{name:>6} {n:>8,} {r['mb']:>6.1f} | {n / r['c']:>9,.0f} "
                  f"{n / r['python']:>12,.0f} {r['orjson_n'] / r['orjson']:>12,.0f} | "
                  f"{r['python'] / r['c']:>8.2f} {r['orjson'] / r['c_on_orjson']:>8.2f} | "
                  f"{n / r['hash_c']:>9,.0f} {n / r['hash_python']:>9,.0f} "
                  f"{r['hash_python'] / r['hash_c']:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
