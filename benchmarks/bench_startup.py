"""Start-up time of the CLI (issue 27.1): every read command beside a one-line Python duckdb
script that runs the same SQL on the same store, and ``--version`` / ``--help`` beside
``python -c pass``; then what each command imports (``python -X importtime``).

Each pair runs interleaved (command, script, command, ...) so that load on the machine falls on
both alike; the table prints medians of wall time and of CPU time (user + system of the child,
less sensitive to other processes than wall time) and their ratios. The goal: every read
command, and its --help, within 1.5x of the script; --version and --help under 0.3 s.
A query text runs the SQL the guard checked on its first run from then on (the cache of
recstore.query.checked_cache, kept in the temporary directory here); the "unchecked" rows run
the same texts with the cache off, as a text never run before does. The texts here are all
plain (recstore.query.plain_sql / plain_dsl), which run without the guard or the cache either
way; the cache serves SQL and DSL beyond that subset. The "README" rows are README's DSL
examples (a relative time, a relation with a JSON key, another view) and the docs'
``visits.count() >= 3``, run as a first run does, beside the script running the SQL they
compile to.

Run: python benchmarks/bench_startup.py [--runs 9] [--top 12] [--sizes 200 2000] [--db STORE]
(without --db a store of each size of synth runs is built in a temporary directory, and the
read commands are timed on each; the load average is printed before and after).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYTHON = [sys.executable]
RECSTORE = [sys.executable, "-m", "recstore"]
GOAL_RATIO = 1.5
GOAL_SECONDS = 0.3
_AGENTS = "SELECT agent, count(*) FROM runs GROUP BY ALL"
_DSL = "status = 'completed' order by started desc limit 20"
_RUNS = ("SELECT run_key, revision, status, agent, model, started_text, item_count, "
         "tool_call_count, request_count FROM runs ORDER BY last_seq DESC LIMIT 20")


def script(db: Path, sql: str) -> list[str]:
    """The one-line duckdb script: open ``db`` read-only, run ``sql``, print its rows."""
    code = (f"import duckdb; print(duckdb.connect({str(db)!r}, read_only=True)"
            f".sql({sql!r}).fetchall())")
    return [*PYTHON, "-c", code]


# `recstore query` remembers the SQL the guard checked for a text (recstore.query.checked_cache):
# the query cases run with a cache of their own, so every run after the first takes the
# remembered SQL, and once more marked "unchecked" with the cache off, as a new text runs.
NO_CACHE = "RECSTORE_CACHE_DIR="
_DSL_SQL = "SELECT * FROM runs WHERE status = 'completed' ORDER BY started DESC LIMIT 20"


_README_DSL = {
    "README: -7d": "status = 'failed' and agent = 'Support' and started > -7d",
    "README: .any()": "tool_calls.any(name = 'refund' and args.amount > 100) order by started "
                      "desc limit 20",
    "README: tool_calls": "tool_calls where envelope_status = 'denied' fields run_key, name, "
                          "envelope_code",
    "docs: .count()": "visits.count() >= 3",
}


def readme_cases() -> list[tuple[str, list[str], str]]:
    """README's DSL examples, each with the SQL it compiles to, run with the cache off."""
    from recstore.query import compile_dsl

    return [(f"  unchecked {label}", [NO_CACHE, "query", text], compile_dsl(text).sql)
            for label, text in _README_DSL.items()]


def read_cases(db: Path, run: str) -> list[tuple[str, list[str], str]]:
    """(label, recstore argv, the SQL the script runs) for each read command and --help."""
    cases = [
        ('query "SELECT 1"', ["query", "SELECT 1"], "SELECT 1"),
        ("query SQL (agents)", ["query", _AGENTS], _AGENTS),
        ("query DSL", ["query", _DSL], _DSL_SQL),
        ('  unchecked "SELECT 1"', [NO_CACHE, "query", "SELECT 1"], "SELECT 1"),
        ("  unchecked SQL", [NO_CACHE, "query", _AGENTS], _AGENTS),
        ("  unchecked DSL", [NO_CACHE, "query", _DSL], _DSL_SQL),
        ("runs", ["runs"], _RUNS),
        ("show RUN", ["show", run, "--no-pager"],
         f"SELECT * FROM runs WHERE run_key = '{run}'"),
        ("schema", ["schema"], "SELECT * FROM duckdb_columns()"),
        ("rejects", ["rejects"], "SELECT * FROM rejects ORDER BY reject_id LIMIT 100"),
        ("lineage RUN", ["lineage", run], "SELECT * FROM lineage"),
        *readme_cases(),
    ]
    helps = [(f"{name} --help", [name, "--help"], "SELECT 1")
             for name in ("query", "runs", "show", "schema", "rejects", "lineage")]
    return [(label, [*(["env", NO_CACHE] if argv[0] == NO_CACHE else []), *RECSTORE, "--db",
                     str(db), *(a for a in argv if a != NO_CACHE)], sql)
            for label, argv, sql in cases + helps]


def timed(command: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run of ``command`` (which must succeed)."""
    before = os.times()
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system
                                                          - before.children_system)
    return wall, cpu


def side_by_side(command: list[str], reference: list[str], runs: int
                 ) -> tuple[float, float, float, float]:
    """Median wall and CPU seconds of ``command`` and of ``reference``, run alternately."""
    own: list[tuple[float, float]] = []
    ref: list[tuple[float, float]] = []
    timed(command)  # not counted: compiles the command's modules, and checks a query's text
    timed(reference)
    for _ in range(runs):
        own.append(timed(command))
        ref.append(timed(reference))
    return (statistics.median(w for w, _ in own), statistics.median(c for _, c in own),
            statistics.median(w for w, _ in ref), statistics.median(c for _, c in ref))


def report_reads(db: Path, run: str, runs: int) -> None:
    print(f"read commands on {db} beside `python -c \"import duckdb; ...\"` running the same "
          f"SQL, {runs} runs each (medians; goal: ratio <= {GOAL_RATIO})")
    print(f"  {'command':31} {'wall':>8} {'script':>8} {'ratio':>6}   {'cpu':>8} {'script':>8} "
          f"{'ratio':>6}")
    for label, command, sql in read_cases(db, run):
        wall, cpu, ref_wall, ref_cpu = side_by_side(command, script(db, sql), runs)
        mark = "  ok" if wall / ref_wall <= GOAL_RATIO else ""
        print(f"  {label:31} {wall * 1000:6.0f}ms {ref_wall * 1000:6.0f}ms "
              f"{wall / ref_wall:5.2f}x   {cpu * 1000:6.0f}ms {ref_cpu * 1000:6.0f}ms "
              f"{cpu / max(ref_cpu, 1e-3):5.2f}x{mark}")


def report_light(runs: int) -> None:
    print(f"\n--version and --help beside `python -c pass` (goal: under {GOAL_SECONDS} s)")
    for label, argv in (("recstore --version", ["--version"]), ("recstore --help", ["--help"])):
        wall, _, ref_wall, _ = side_by_side([*RECSTORE, *argv], [*PYTHON, "-c", "pass"], runs)
        goal = "ok" if wall < GOAL_SECONDS else f"over the {GOAL_SECONDS} s goal"
        print(f"  {label:31} {wall * 1000:6.0f}ms  (pass {ref_wall * 1000:.0f}ms, "
              f"{wall / ref_wall:.2f}x)  {goal}")


def import_times(command: list[str]) -> list[tuple[str, int, int]]:
    """(module, self µs, cumulative µs) for every import ``command`` makes."""
    python = command.index(sys.executable)
    traced = [*command[:python + 1], "-X", "importtime", *command[python + 1:]]
    stderr = subprocess.run(traced, check=True, capture_output=True, text=True).stderr
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        self_us, cumulative_us, name = line.removeprefix("import time:").split("|")
        rows.append((name.strip(), int(self_us), int(cumulative_us)))
    return rows


def report_imports(db: Path, run: str, top: int) -> None:
    print("\nimports (python -X importtime): modules, total self time, the costliest "
          "top-level imports by cumulative time")
    for label, command, _ in read_cases(db, run)[:11]:
        rows = import_times(command)
        total_ms = sum(self_us for _, self_us, _ in rows) / 1000
        print(f"  {label}: {len(rows)} modules, {total_ms:.0f} ms")
        roots = [r for r in rows if not r[0].startswith(" ")]
        for name, _, cumulative_us in sorted(roots, key=lambda r: -r[2])[:top]:
            print(f"      {cumulative_us / 1000:8.1f} ms  {name}")


def build_store(folder: Path, size: int) -> Path:
    """A store of ``size`` synth runs in ``folder``."""
    db = folder / f"bench-startup-{size}.duckdb"
    code = ("import sys; from recstore.store import Store; from recstore.synth import "
            "generate_corpus; Store(sys.argv[1]).ingest_records(list(generate_corpus("
            "int(sys.argv[2]), seed=3)), source_uri='synth')")
    subprocess.run([*PYTHON, "-c", code, str(db), str(size)], check=True)
    return db


def first_run(db: Path) -> str:
    """The first run key of ``db`` (for show and lineage)."""
    return subprocess.run([*RECSTORE, "--db", str(db), "query", "--format", "csv",
                           "SELECT run_key FROM runs ORDER BY run_key LIMIT 1"],
                          check=True, capture_output=True, text=True).stdout.split()[1]


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="Runs per command (and script).")
    parser.add_argument("--top", type=int, default=8, help="Imports listed per command.")
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 2000],
                        help="Runs in each store built (default: 200 2000).")
    parser.add_argument("--db", type=Path, help="An existing store (default: build them).")
    args = parser.parse_args()
    # Run from the repository root so `-m recstore` finds this checkout even without an install.
    os.chdir(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as folder:
        os.environ["RECSTORE_CACHE_DIR"] = str(Path(folder) / "cache")  # not the user's cache
        # An install has its modules compiled (pip writes the .pyc files); a checkout run with
        # PYTHONDONTWRITEBYTECODE would compile recstore's ~170 modules from source on every
        # run, which the duckdb script (site-packages, compiled) never does.
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        stores = [args.db.resolve()] if args.db else [build_store(Path(folder), size)
                                                      for size in args.sizes]
        print(f"{load()} (before; {os.cpu_count()} cores)")
        for db in stores:
            timed(script(db, "SELECT 1"))  # warm the file cache and bytecode before measuring
            timed([*RECSTORE, "--db", str(db), "query", "SELECT 1"])
            report_reads(db, first_run(db), args.runs)
            print()
        report_light(args.runs)
        print(f"{load()} (after)")
        report_imports(stores[0], first_run(stores[0]), args.top)


if __name__ == "__main__":
    main()
