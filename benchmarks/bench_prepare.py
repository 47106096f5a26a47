"""A worker's CPU per record: the prepare of a corpus's records into Arrow chunks, in-process.

Times what a worker of ``Store.ingest`` does with a chunk of inputs (``prepare`` of each, then
``to_chunk`` of the chunk; recstore.store.prepare._prepare_chunk), chunks of 200 records as the
Preparer sends them, over every record of ``--shape`` (the dev corpus's 1,200 real aioc
records, or synth). Besides the whole, it times the payload steps alone on the same records:
``events`` (record_to_events), ``digests`` (the line digests of those events) and ``to_chunk``
(after a prepare outside the clock), so a change to one step shows against the rest, and
``project_record`` (the biggest share: records given as ``prepare()`` gives them, parsed and
with their items' keys made) beside ``canonical`` (each record's canonical JSON printed once,
which any projection that keys its values must at least read).

``--digest`` prints instead a sha256 of every projection row (repr) of the records, so two
versions of the projection can be checked for equal output (run it with each version's
interpreter and compare the lines).

Figures are CPU us per record (``time.process_time``, the best of ``--repeat``). To compare two
trees, run this script with each tree's interpreter from outside the tree (it imports recstore
from the interpreter's install), alternately, and compare the figures with the load average it
prints; ``--baseline PYTHON`` does that in one run, printing the ratio against the baseline.

Run: python benchmarks/bench_prepare.py [--shape aioc-dev|synth] [--repeat 5]
     [--baseline /path/to/other/.venv/bin/python] [--digest]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHUNK = 200


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def _raws(records: list[dict]) -> list:
    from recstore.formats.jsontext import dumps_json
    from recstore.formats.reader import PENDING, RawInput

    return [RawInput("bench", i, None, PENDING,
                     data=dumps_json(r).encode("utf-8", "surrogatepass"))
            for i, r in enumerate(records)]


def _projection_inputs(records: list[dict]) -> list[tuple]:
    """Each record with the context and item keys ``prepare()`` would give it."""
    from recstore.canonical import canonical_bytes
    from recstore.records.structure import input_scope
    from recstore.store.projection import ItemsKeys, RunContext

    out = []
    for record in records:
        keys = ItemsKeys(input_scope(record).count)
        for item in record["items"]:
            keys.add(canonical_bytes(item))
        ctx = RunContext(f"aioc:{record['runId']}", record["runId"], "aioc", 1, "{}", 0, None,
                         0, 0, 100)
        out.append((record, ctx, keys.keys()))
    return out


def projection_digest(shape: str) -> str:
    """sha256 of every projection row of the records of ``shape``."""
    from bench_ingest import shape_records

    from recstore.store.projection import project_record

    digest = hashlib.sha256()
    for record, ctx, keys in _projection_inputs(shape_records(shape, 1200)):
        rows = sorted(project_record(record, ctx, keys).items())
        digest.update(repr(rows).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _schema(tmp: Path) -> dict:
    from recstore.store import Store
    from recstore.store.chunks import store_schema

    with Store(tmp / "schema.duckdb").writer() as con:
        return store_schema(con)


def _best(repeat: int, step) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        step()
        best = min(best, time.process_time() - start)
    return best


def measure(shape: str, repeat: int) -> dict[str, float]:
    """CPU us per record of each step, the best of ``repeat``."""
    import tempfile

    from bench_ingest import shape_records

    from recstore.canonical import canonical_bytes
    from recstore.formats.events import record_to_events
    from recstore.store.chain import line_digests
    from recstore.store.chunks import chunkable, import_lazy_modules, to_chunk
    from recstore.store.prepare import _prepare_chunk, prepare
    from recstore.store.projection import project_record

    records = shape_records(shape, 1200)
    raws = _raws(records)
    with tempfile.TemporaryDirectory() as tmp:
        schema = _schema(Path(tmp))
    import_lazy_modules()
    chunks = [raws[i:i + CHUNK] for i in range(0, len(raws), CHUNK)]
    n = len(raws)
    figures = {}
    figures["prepare+chunk"] = _best(repeat, lambda: [_prepare_chunk(c, "aioc", schema)
                                                      for c in chunks])
    figures["events"] = _best(repeat, lambda: [record_to_events(r) for r in records])
    events = [record_to_events(r) for r in records]

    def digests() -> None:  # as prepare makes them: one call a record
        for i, evs in enumerate(events):
            line_digests(f"aioc:{i}", 1, evs)

    figures["digests"] = _best(repeat, digests)

    def chunk_only() -> float:
        prepared = [[prepare(raw, "aioc") for raw in c] for c in chunks]
        start = time.process_time()
        for part in prepared:
            to_chunk([p for p in part if chunkable(p)], schema)
        return time.process_time() - start

    figures["to_chunk"] = min(chunk_only() for _ in range(repeat))
    inputs = _projection_inputs(records)
    figures["project_record"] = _best(repeat, lambda: [project_record(*a) for a in inputs])
    figures["canonical"] = _best(repeat, lambda: [canonical_bytes(r) for r, _, _ in inputs])
    return {name: seconds / n * 1e6 for name, seconds in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="aioc-dev", choices=("aioc-dev", "synth"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", help="another tree's python: measured first, same run")
    parser.add_argument("--digest", action="store_true", help="print a digest of every row")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.digest:
        print(f"{args.shape}: {projection_digest(args.shape)}")
        return
    if args.json:
        print(json.dumps(measure(args.shape, args.repeat)))
        return
    base = None
    if args.baseline:
        out = subprocess.run(
            [args.baseline, __file__, "--shape", args.shape, "--repeat", str(args.repeat),
             "--json"], check=True, capture_output=True, text=True, cwd="/")
        base = json.loads(out.stdout)
    load = _load()
    ours = measure(args.shape, args.repeat)
    print(f"shape {args.shape}, 1 process, CPU us/record (best of {args.repeat}), "
          f"load {load:.2f} -> {_load():.2f}")
    for name, value in ours.items():
        line = f"  {name:<14} {value:8.1f}"
        if base is not None:
            line += f"   baseline {base[name]:8.1f}   ratio {value / base[name]:.2f}"
        print(line)


if __name__ == "__main__":
    main()
