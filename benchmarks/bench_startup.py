"""Start-up time of the CLI: wall time of ``recstore --version``, ``--help`` and ``query --help``
over several runs, and what each imports (``python -X importtime``): the total import time and the
modules that cost most, cumulatively.

The baseline measured in the same run is ``python -c pass`` (the interpreter alone); every wall
time is printed with its ratio to it. The goal for ``--version`` and ``--help`` is under 0.3 s.

Run: python benchmarks/bench_startup.py [--runs 10] [--top 12]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PYTHON = [sys.executable]
RECSTORE = [sys.executable, "-m", "recstore"]
CASES: list[tuple[str, list[str]]] = [
    ("python -c pass (baseline)", [*PYTHON, "-c", "pass"]),
    ("recstore --version", [*RECSTORE, "--version"]),
    ("recstore --help", [*RECSTORE, "--help"]),
    ("recstore query --help", [*RECSTORE, "query", "--help"]),
]
GOAL_SECONDS = 0.3


def wall_times(command: list[str], runs: int) -> list[float]:
    """Seconds per run of ``command`` (output discarded; a failure stops the benchmark)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def import_times(command: list[str]) -> list[tuple[str, int, int]]:
    """(module, self µs, cumulative µs) for every import ``command`` makes."""
    traced = [command[0], "-X", "importtime", *command[1:]]
    stderr = subprocess.run(traced, check=True, capture_output=True, text=True).stderr
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        self_us, cumulative_us, name = line.removeprefix("import time:").split("|")
        rows.append((name.strip(), int(self_us), int(cumulative_us)))
    return rows


def report_wall(runs: int) -> None:
    print(f"wall time, {runs} runs each: median, min, ratio of medians to the baseline")
    baseline = None
    for label, command in CASES:
        times = wall_times(command, runs)
        median = statistics.median(times)
        baseline = baseline or median
        goal = "" if "recstore" not in label or "query" in label else (
            "  ok" if median < GOAL_SECONDS else f"  over the {GOAL_SECONDS} s goal")
        print(f"  {label:28} {median * 1000:8.1f} ms {min(times) * 1000:8.1f} ms "
              f"{median / baseline:7.2f}x{goal}")


def report_imports(top: int) -> None:
    print("\nimports (python -X importtime): total self time, then the costliest by cumulative")
    for label, command in CASES:
        rows = import_times(command)
        total_ms = sum(self_us for _, self_us, _ in rows) / 1000
        print(f"  {label}: {len(rows)} modules, {total_ms:.1f} ms")
        if "recstore" not in label:
            continue
        for name, _, cumulative_us in sorted(rows, key=lambda r: -r[2])[:top]:
            print(f"      {cumulative_us / 1000:8.1f} ms  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="Runs per command for wall time.")
    parser.add_argument("--top", type=int, default=12, help="Modules listed per command.")
    args = parser.parse_args()
    # Run from the repository root so `-m recstore` finds this checkout even without an install.
    os.chdir(Path(__file__).resolve().parents[1])
    wall_times(CASES[1][1], 2)  # warm the file cache and bytecode before measuring
    report_wall(args.runs)
    report_imports(args.top)


if __name__ == "__main__":
    main()
