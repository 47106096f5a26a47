"""Benchmark: a replay sweep over N generated cases with the recorded provider (default 2,000).

Measures, on one store of N generated runs:

* baseline — the replay layer's batch replay of the same runs (``replay_stored``: replay and
  store with lineage, one writer), serial: what a sweep costs at least;
* ``sweep, 1 worker`` and ``sweep, 2 workers`` — ``run_sweep`` from scratch (select, freeze the
  selection, replay strict from source, compare, classify, store replays and case rows);
* the same with an external replayer (one Python process per case, like a user's own runtime)
  over ``--external`` cases: where the candidate, not the single writer, is the cost, workers
  scale.

Prints cases/s for each and the ratios against the baseline measured in the same run, plus
peak RSS of this (writer) process. Usage::

    python benchmarks/bench_sweep.py [--cases 2000] [--external 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from recstore.query import select_run_keys
from recstore.replay.batch import ReplayJob, replay_stored
from recstore.store import Store
from recstore.sweep.runner import run_sweep
from recstore.sweep.spec import parse_spec
from recstore.synth import generate_corpus

QUERY = "status = 'completed' or status = 'failed'"

# An external replayer that answers with the source run itself under a new runId.
REPLAYER = """
import json, sys, uuid
record = json.load(sys.stdin)["source"]["record"]
record["runId"] = str(uuid.uuid4())
print(json.dumps(record))
"""


def sweep_spec(name: str, workers: int, candidate: dict, sample: int | None = None):
    select = {"query": QUERY} | ({"sample": sample} if sample else {})
    return parse_spec({
        "name": name,
        "select": select,
        "candidate": candidate,
        "replay": {"mode": "strict"},
        "compare": {"preset": "semantic"},
        "workers": workers,
    }, source="bench")


def timed(label: str, cases: int, fn) -> float:
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    print(f"{label:<28} {cases:>6} cases {seconds:>8.1f} s {cases / seconds:>8.1f} cases/s", flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--external", type=int, default=200, help="cases for the external replayer")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        # Two identical stores so the baseline's replays are not selected by the sweeps' query
        # and the sweeps do not read a store grown by the baseline.
        records = list(generate_corpus(args.cases, seed=args.seed))
        base_store, sweep_store = Store(Path(tmp) / "base.duckdb"), Store(Path(tmp) / "sweep.duckdb")
        for store in (base_store, sweep_store):
            store.ingest_records(records, source_uri="synth")
        del records
        print(f"corpus: {args.cases} generated runs (seed {args.seed}), recorded provider, strict mode")

        keys = select_run_keys(base_store, QUERY)
        base = timed("baseline replay_stored", len(keys),
                     lambda: replay_stored(base_store, keys, ReplayJob(mode="strict"), workers=1))
        results = {}
        for workers in (1, 2):
            spec = sweep_spec(f"bench-{workers}", workers, {"from_source": True})
            results[workers] = timed(f"sweep, {workers} worker{'s' if workers > 1 else ''}", len(keys),
                                     lambda s=spec: run_sweep(sweep_store, s))
        external = {}
        if args.external:
            script = Path(tmp) / "replayer.py"
            script.write_text(REPLAYER, encoding="utf-8")
            command = {"command": [sys.executable, str(script)]}
            for workers in (1, 2):
                spec = sweep_spec(f"bench-ext-{workers}", workers, command, args.external)
                external[workers] = timed(f"external replayer, {workers} worker{'s' if workers > 1 else ''}",
                                          args.external, lambda s=spec: run_sweep(sweep_store, s))
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"sweep 1 worker / baseline:  {base / results[1]:.2f}x the baseline's cases/s")
        print(f"sweep 2 workers / baseline: {base / results[2]:.2f}x the baseline's cases/s")
        print(f"2 workers vs 1 worker:      {results[1] / results[2]:.2f}x (recorded provider)")
        if external:
            print(f"2 workers vs 1 worker:      {external[1] / external[2]:.2f}x (external replayer)")
        print(f"peak RSS of the writer process: {peak_mb:.0f} MiB")


if __name__ == "__main__":
    main()
