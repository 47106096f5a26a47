"""What running one user command costs (``recstore.process.run_command``: replayers, judges).

For each output size, the same command — a ``/bin/sh`` pipeline that reads its input and prints
that many bytes — is run ``--runs`` times in two ways, interleaved:

* ``baseline``: ``subprocess.run(..., input=..., capture_output=True)``, what a plain caller
  would write (no process-tree clean-up, no output limit);
* ``run_command``: recstore's runner, under its reaper (a child subreaper that kills whatever the
  command leaves behind), reading stdout incrementally up to the 64 MiB limit.

Printed: median wall time per command, the ratio to the baseline, and the peak RSS growth of
this process over the sizes (the runner holds at most the limit; past it the command is
stopped). The reaper's start (``python -I -S``, a few milliseconds) is the fixed cost; a
replayer that runs an agent takes far longer than that.

Run: python benchmarks/bench_command.py [--sizes 1024,16777216] [--runs 10]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recstore.process import run_command  # noqa: E402 - after the path set-up

REQUEST = b'{"protocol": "recstore-replayer/1"}' * 100


def _command(size: int) -> list[str]:
    return ["/bin/sh", "-c", f"cat > /dev/null; head -c {size} /dev/zero"]


def _baseline(argv: list[str]) -> int:
    return len(subprocess.run(argv, input=REQUEST, capture_output=True, check=True).stdout)


def _runner(argv: list[str]) -> int:
    return len(run_command(argv, REQUEST, 60.0, role="bench").stdout)


def _timed(run, argv: list[str]) -> float:
    start = time.perf_counter()
    run(argv)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024,16777216", help="stdout bytes, comma-separated")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    print(f"{'stdout bytes':>14} {'baseline ms':>12} {'run_command ms':>15} {'ratio':>7}")
    for size in (int(s) for s in args.sizes.split(",")):
        argv = _command(size)
        assert _baseline(argv) == _runner(argv) == size
        base, ours = [], []
        for _ in range(args.runs):
            base.append(_timed(_baseline, argv))
            ours.append(_timed(_runner, argv))
        b, o = statistics.median(base), statistics.median(ours)
        print(f"{size:>14,} {b * 1000:>12.1f} {o * 1000:>15.1f} {o / b:>6.2f}x")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of this process: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
