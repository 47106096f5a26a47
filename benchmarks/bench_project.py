"""CPU of ``project_record`` alone (a worker's biggest share), per record, on the dev corpus's
1,200 real aioc records and on synth records, against a baseline measured in the same run:
printing each record's canonical JSON once (``canonical_bytes``), which any projection that
keys its values must at least read. Beside it, a worker's whole work on a record in this
process (``prepare`` of its NDJSON line: parse, validate, hash, events, projection), without
the pool's transport or the Arrow staging.

Records are given as ``prepare()`` gives them: parsed, with their items' keys already made
(``ItemsKeys``), so the figure is the projection's own work. ``--digest`` prints instead a
sha256 of every projection row (repr) of both corpora, so two versions of the projection can
be checked for equal output (run it with each version's interpreter and compare the lines).

Run: python benchmarks/bench_project.py [--repeat 5] [--digest]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import shape_records  # noqa: E402

from recstore.canonical import canonical_bytes  # noqa: E402
from recstore.formats.jsontext import dumps_json  # noqa: E402
from recstore.formats.reader import PENDING, RawInput  # noqa: E402
from recstore.records.structure import input_scope  # noqa: E402
from recstore.store.prepare import prepare  # noqa: E402
from recstore.store.projection import ItemsKeys, RunContext, project_record  # noqa: E402

SHAPES = (("aioc-dev", 1200), ("synth", 2000))


def _inputs(records: list[dict]) -> list[tuple[dict, RunContext, tuple]]:
    """Each record with the context and item keys ``prepare()`` would give it."""
    out = []
    for record in records:
        keys = ItemsKeys(input_scope(record).count)
        for item in record["items"]:
            keys.add(canonical_bytes(item))
        ctx = RunContext(f"aioc:{record['runId']}", record["runId"], "aioc", 1, "{}", 0, None,
                         0, 0, 100)
        out.append((record, ctx, keys.keys()))
    return out


def _cpu_us(fn, inputs, repeat: int) -> float:
    """Least process CPU microseconds per record of ``fn`` over ``inputs`` in ``repeat`` runs
    (the least is what other processes on the shared cores disturbed least)."""
    runs = []
    for _ in range(repeat):
        start = time.process_time()
        for args in inputs:
            fn(*args)
        runs.append((time.process_time() - start) / len(inputs) * 1e6)
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--digest", action="store_true", help="print a digest of every row")
    args = parser.parse_args()
    backend = "pure Python" if os.environ.get("RECSTORE_PURE_PYTHON") else "C if built"
    for shape, n in SHAPES:
        inputs = _inputs(shape_records(shape, n))
        if args.digest:
            digest = hashlib.sha256()
            for record, ctx, keys in inputs:
                digest.update(repr(sorted(project_record(record, ctx, keys).items())).encode(
                    "utf-8", "surrogatepass"))
            print(f"{shape} {len(inputs)} records: {digest.hexdigest()}")
            continue
        base = _cpu_us(lambda record, ctx, keys: canonical_bytes(record), inputs, args.repeat)
        proj = _cpu_us(project_record, inputs, args.repeat)
        lines = [(RawInput("bench", i, None, PENDING, data=dumps_json(r).encode()),)
                 for i, (r, _, _) in enumerate(inputs)]
        whole = _cpu_us(prepare, lines, args.repeat)
        load = Path("/proc/loadavg").read_text().split()[0]
        print(f"{shape:8} {len(inputs):5} records ({backend}, load {load}): project_record "
              f"{proj:7.1f} us/rec, canonical JSON of the record {base:7.1f} us/rec, "
              f"ratio {proj / base:.2f}; prepare {whole:7.1f} us/rec "
              f"(project_record {proj / whole:.0%} of it)")


if __name__ == "__main__":
    main()
