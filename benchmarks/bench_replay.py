"""``recstore replay --select`` end to end: strict, recorded provider, every replay stored.

For each size N, N generated runs (``recstore.synth``) are ingested once; then the CLI a user
runs replays all of them against themselves, in a subprocess, on a fresh copy of that store::

    recstore --db COPY replay --select "run_key like 'aioc:%'" --from-source --mode strict \\
        --workers W

with ``--workers 1`` and ``--workers 2`` interleaved ``--repeat`` times (medians printed). Wall
time is what the user waits for (process start, select, read, replay, store, checkpoint); CPU is
the command's and its workers' (user + system). Printed next to them, measured in the same run:

* ``start``: ``recstore --version`` (the fixed cost of a command);
* ``no store``: the same replays with ``--no-store`` and one worker (read and replay only);
* ``ingest``: ``recstore ingest`` of the same N runs (a replay reads, re-executes and writes a
  run, so a ratio near 1 is what riding the same path looks like).

The aims (issue 11): at 3,000 runs, ``--workers 2`` at >= 1,000 runs/s and >= 1.6x
``--workers 1``. On a shared machine wall time shows the load as much as recstore; CPU seconds
per run are printed so the two can be told apart (2 cores give at most 2 CPU-seconds per second).

``--split`` also prints, for ``replay_stored`` with two workers called in a child process as the
CLI calls it (pyarrow's probe for pandas answered without importing it), the CPU of the writing
process (reading, placing, committing) and of its workers (replaying and preparing) per run:
the writer is one process, so its share bounds the rate on any core count.

``--profile W`` prints where the time goes instead: cProfile of the library call
``replay_stored`` with W workers (this process only; workers are listed by their wait).

Run: python benchmarks/bench_replay.py [--sizes 3000,10000] [--repeat 3] [--split] [--profile W]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SELECT = "run_key like 'aioc:%'"


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _recstore(db: Path, *args: str) -> tuple[float, float, str]:
    """(wall s, CPU s, stdout) of one ``recstore`` command in a subprocess."""
    cpu, wall = _cpu_of_children(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), *args],
                          capture_output=True, text=True)
    wall, cpu = time.perf_counter() - wall, _cpu_of_children() - cpu
    if done.returncode != 0:
        sys.exit(f"recstore {' '.join(args)} failed ({done.returncode}):\n{done.stderr}{done.stdout[-2000:]}")
    return wall, cpu, done.stdout


def _replay(base: Path, work: Path, n: int, workers: int, store: bool = True) -> tuple[float, float]:
    copy = work / f"replay-{workers}.duckdb"
    shutil.copy(base, copy)
    args = ["replay", "--select", SELECT, "--from-source", "--mode", "strict", "--workers", str(workers)]
    wall, cpu, out = _recstore(copy, *args, *([] if store else ["--no-store"]))
    expected = f"{n} replays: {n} completed"
    assert expected in out, out[-500:]  # every replay reproduced its source
    copy.unlink()
    return wall, cpu


_SPLIT = """
import json, resource, sys
from recstore.cli import answer_pyarrow_pandas_probe
answer_pyarrow_pandas_probe()  # as the CLI does: pyarrow's first list is converted without pandas
from recstore.query import select_run_keys
from recstore.replay.batch import ReplayJob, replay_stored
from recstore.store import Store
store = Store(sys.argv[1])
keys = select_run_keys(store, sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF)
replay_stored(store, keys, ReplayJob(), workers=2)
own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps([own.ru_utime + own.ru_stime - before.ru_utime - before.ru_stime,
                  kids.ru_utime + kids.ru_stime]))
"""


def _split(base: Path, work: Path) -> tuple[float, float]:
    """(writer CPU s, workers' CPU s) of ``replay_stored`` with two workers, in a child."""
    copy = work / "split.duckdb"
    shutil.copy(base, copy)
    done = subprocess.run([sys.executable, "-c", _SPLIT, str(copy), SELECT], check=True,
                          capture_output=True, text=True)
    copy.unlink()
    writer, workers = json.loads(done.stdout.splitlines()[-1])
    return writer, workers


def _profile(base: Path, work: Path, workers: int) -> None:
    from recstore.query import select_run_keys
    from recstore.replay.batch import ReplayJob, replay_stored
    from recstore.store import Store

    copy = work / "profile.duckdb"
    shutil.copy(base, copy)
    store = Store(copy)
    profile = cProfile.Profile()
    profile.enable()
    replay_stored(store, select_run_keys(store, SELECT), ReplayJob(), workers=workers)
    profile.disable()
    pstats.Stats(profile).sort_stats("cumulative").print_stats(40)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--split", action="store_true",
                        help="also print the writer's and the workers' CPU per run")
    parser.add_argument("--profile", type=int, metavar="WORKERS",
                        help="profile the library call at the first size instead")
    args = parser.parse_args()
    from recstore.synth import write_corpus

    for n in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            corpus = write_corpus(work / "runs.ndjson", n, seed=args.seed)
            base = work / "base.duckdb"
            ingest = _recstore(base, "ingest", str(corpus))[:2]
            if args.profile is not None:
                _profile(base, work, args.profile)
                return
            rows: dict[str, list[tuple[float, float]]] = {}
            splits = []
            for _ in range(args.repeat):  # interleaved: the machine's load hits every step alike
                if args.split:
                    splits.append(_split(base, work))
                rows.setdefault("start (recstore --version)", []).append(_recstore(base, "--version")[:2])
                rows.setdefault("no store, --workers 1", []).append(_replay(base, work, n, 1, store=False))
                for workers in (1, 2):
                    rows.setdefault(f"replay, --workers {workers}", []).append(_replay(base, work, n, workers))
            _print(n, args.repeat, ingest, rows)
            if splits:
                writer = statistics.median(w for w, _ in splits) * 1000 / n
                workers = statistics.median(k for _, k in splits) * 1000 / n
                print(f"replay_stored, 2 workers: writer {writer:.3f} cpu ms/run, workers "
                      f"{workers:.3f} (the writer alone allows {1000 / writer:,.0f} runs/s)")


def _print(n: int, repeat: int, ingest: tuple[float, float], rows: dict[str, list[tuple[float, float]]]) -> None:
    medians = {label: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
               for label, runs in rows.items()}
    print(f"\n{n} generated runs; replay --select, strict, recorded provider, stored "
          f"(medians of {repeat} interleaved runs)")
    print(f"{'step':32} {'wall s':>8} {'cpu s':>8} {'runs/s':>8} {'cpu ms/run':>11} {'vs ingest':>10}")
    for label, (wall, cpu) in [("ingest (baseline, once)", ingest), *medians.items()]:
        rate = f"{n / wall:8.0f}" if not label.startswith("start") else f"{'':8}"
        print(f"{label:32} {wall:8.2f} {cpu:8.2f} {rate} {1000 * cpu / n:11.3f} {ingest[0] / wall:9.2f}x")
    one, two = medians["replay, --workers 1"][0], medians["replay, --workers 2"][0]
    print(f"--workers 2: {n / two:,.0f} runs/s (aim >= 1,000 at 3,000 runs); "
          f"{one / two:.2f}x --workers 1 (aim >= 1.6x)")


if __name__ == "__main__":
    main()
