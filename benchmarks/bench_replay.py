"""Strict replays per second: N generated runs (``recstore.synth``) replayed against themselves
(``--from-source`` harness, ``recorded`` provider), end to end through the store — read the
sources, replay, store every replay with its lineage — serially and with 2 worker processes.

The baseline measured in the same run is ingesting the same N runs into the store; every figure
is printed with its ratio to it (a replay reads, re-executes and writes a run, so a ratio near
or below 1 is the expectation). The replay-only figure (no store) shows what the store costs.
CPU time (this process and its workers) is printed next to wall time because the machine may
be shared: on a loaded machine wall time hides what the workers save.

Run: python benchmarks/bench_replay.py [--runs 1000] [--workers 2]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections import Counter
from pathlib import Path

from recstore.replay import harness_from_source, replay_run
from recstore.replay.batch import ReplayJob, replay_stored
from recstore.replay.lineage import load_sources
from recstore.store import Store
from recstore.synth import write_corpus


def _cpu() -> float:
    """CPU seconds of this process plus its finished worker processes."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _timed(label: str, fn):
    wall, cpu = time.perf_counter(), _cpu()
    result = fn()
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    return label, wall, cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    n = args.runs

    with tempfile.TemporaryDirectory() as tmp:
        corpus = write_corpus(Path(tmp) / "runs.ndjson", n, seed=args.seed)
        rows = []

        store = Store(Path(tmp) / "ingest.duckdb")
        rows.append(_timed("ingest (baseline)", lambda: store.ingest([str(corpus)])))
        keys = _all_keys(store)

        def replay_only():
            loaded = load_sources(store, keys)
            return Counter(replay_run(s.record, harness_from_source(s.record), "strict").report.status for s in loaded)

        rows.append(_timed("replay only (read sources, no store)", replay_only))
        for workers in (1, args.workers):
            copy = Store(Path(tmp) / f"replay-{workers}.duckdb")
            copy.ingest([str(corpus)])
            label = "strict replay, serial" if workers == 1 else f"strict replay, --workers {workers}"
            rows.append(_timed(label, lambda c=copy, w=workers: Counter(
                r.report.status for r in replay_stored(c, keys, ReplayJob(), workers=w))))

    base_wall = rows[0][1]
    print(f"{n} generated runs (seed {args.seed}); baseline = ingesting them")
    print(f"{'step':40} {'wall s':>8} {'cpu s':>8} {'runs/s':>9} {'vs ingest':>10}")
    for label, wall, cpu, result in rows:
        print(f"{label:40} {wall:8.2f} {cpu:8.2f} {n / wall:9.0f} {base_wall / wall:9.2f}x")
        if isinstance(result, Counter):
            assert result == Counter({"completed": n}), result  # every replay reproduced its source


def _all_keys(store: Store) -> list[str]:
    with store.reader() as con:
        return [row[0] for row in con.execute("SELECT run_key FROM runs ORDER BY run_key").fetchall()]


if __name__ == "__main__":
    main()
