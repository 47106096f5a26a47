"""Query layer: DSL compile time and query latency against hand-written SQL on DuckDB.

1. Build (once, cached under ``benchmarks/out/``) a store of ``--runs`` runs: ``--distinct``
   records from ``recstore.synth`` re-ingested under new runIds/caseIds until the count is
   reached (a stored run costs the same whether its content is new or not).
2. **Compile**: median µs to compile each of five typical DSL questions (tokenize, parse against
   the catalogue, build the sqlglot tree, structural checks, generate DuckDB SQL).
3. **Latency**: median ms of each question through the query layer (compile + guard + run +
   stream every row as Arrow batches) and of the equivalent hand-written SQL run directly on
   the same read-only DuckDB connection (``execute`` + ``fetchall``), with the ratio. Both sides
   must return the same number of rows (checked, not timed).
4. **Documented examples**: every ``dsl`` example of docs/queries.md through the query layer,
   median ms each and the slowest (the aim: every one under a second at 200,000 runs).

Run: python benchmarks/bench_query.py [--runs 200000] [--distinct 2000] [--repeat 5]
     [--db STORE]   (an existing store instead of the cached one)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

from recstore.query import compile_dsl, execute
from recstore.query.guard import lock_down
from recstore.query.views import catalog_from_connection
from recstore.store import Store
from recstore.synth import generate_corpus

OUT = Path(__file__).resolve().parent / "out"
DOCS = Path(__file__).resolve().parents[1] / "docs" / "queries.md"


def documented_examples() -> list[str]:
    """The DSL of every ```dsl block in docs/queries.md."""
    text = DOCS.read_text(encoding="utf-8")
    return [block.split("```", 1)[0].strip() for block in text.split("```dsl\n")[1:]]

# (label, DSL, hand-written DuckDB SQL answering the same question)
QUESTIONS = [
    ("recent failures",
     "status = 'failed' and started > -7d fields run_key, agent, error_name "
     "order by started desc limit 50",
     "SELECT run_key, agent, error_name FROM runs WHERE status = 'failed' AND started > "
     "$since ORDER BY started DESC LIMIT 50"),
    ("refund over 100 (same call)",
     "tool_calls.any(name = 'refund' and args.amount > 100) fields run_key",
     "SELECT DISTINCT r.run_key FROM runs r JOIN tool_calls t ON t.run_key = r.run_key "
     "WHERE t.name = 'refund' AND TRY_CAST(t.arguments ->> '$.amount' AS DOUBLE) > 100"),
    ("three or more visits",
     "visits.count() >= 3 fields run_key, agent",
     "SELECT r.run_key, r.agent FROM runs r JOIN visits v ON v.run_key = r.run_key "
     "GROUP BY r.run_key, r.agent HAVING count(*) >= 3"),
    ("denied by policy",
     "policy.any(decision = 'deny') fields run_key, agent",
     "SELECT DISTINCT r.run_key, r.agent FROM runs r JOIN policy_decisions p "
     "ON p.run_key = r.run_key WHERE p.decision = 'deny'"),
    ("one case by metadata",
     "metadata.caseId = 'case-000777'",
     "SELECT * FROM runs WHERE metadata ->> '$.caseId' = 'case-000777'"),
]


def build_store(path: Path, runs: int, distinct: int) -> Store:
    store = Store(path)
    if path.exists():
        with store.reader() as con:
            if con.execute("SELECT count(*) FROM runs").fetchone()[0] >= runs:
                return store
        path.unlink()
    print(f"building a store of {runs:,} runs from {min(runs, distinct):,} synth records "
          f"(cached at {path}) ...", flush=True)
    started = time.perf_counter()
    base = list(generate_corpus(min(runs, distinct), seed=11))
    chunk: list[dict] = []
    for i in range(runs):
        record = dict(base[i % len(base)])
        record["runId"] = f"bench-{i:06d}"
        record["metadata"] = {**record.get("metadata", {}), "caseId": f"case-{i:06d}"}
        chunk.append(record)
        if len(chunk) == 5000 or i == runs - 1:
            store.ingest_records(chunk, source_uri=f"bench:{i // 5000}")
            chunk = []
            print(f"  {i + 1:,} runs stored ({time.perf_counter() - started:.0f} s)", flush=True)
    return store


def median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--distinct", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--compile-repeat", type=int, default=300)
    parser.add_argument("--db", type=Path, help="an existing store to query")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    store = Store(args.db) if args.db else build_store(
        OUT / f"query-{args.runs}.duckdb", args.runs, args.distinct
    )

    with store.reader() as con:
        lock_down(con)
        catalog = catalog_from_connection(con)
        latest = con.execute("SELECT max(started) FROM runs").fetchone()[0] or datetime(2026, 6, 1)
        now = latest + timedelta(days=1)  # relative times land inside the data
        run_count = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        print(f"store: {run_count:,} runs; sqlglot compile medians over {args.compile_repeat} "
              f"runs, latency medians over {args.repeat}\n")
        header = (f"{'question':<30} {'compile µs':>10} {'DSL ms':>9} {'SQL ms':>9} "
                  f"{'DSL/SQL':>8} {'rows':>8}")
        print(header)
        print("-" * len(header))
        ratios = []
        for label, text, sql in QUESTIONS:
            compile_s = median_seconds(lambda t=text: compile_dsl(t, catalog, now=now).sql,
                                       args.compile_repeat)
            params = {"since": now - timedelta(days=7)} if "$since" in sql else None

            def via_layer(t=text) -> int:
                result = execute(con, compile_dsl(t, catalog, now=now))
                return sum(batch.num_rows for batch in result.batches)

            def direct(s=sql, p=params) -> int:
                return len(con.execute(s, p).fetchall())

            dsl_rows, sql_rows = via_layer(), direct()  # warm both, and check they agree
            if dsl_rows != sql_rows:
                sys.exit(f"{label}: DSL returned {dsl_rows} rows, SQL {sql_rows}")
            dsl_s = median_seconds(via_layer, args.repeat)
            sql_s = median_seconds(direct, args.repeat)
            ratios.append(dsl_s / sql_s)
            print(f"{label:<30} {compile_s * 1e6:>10.0f} {dsl_s * 1e3:>9.1f} {sql_s * 1e3:>9.1f} "
                  f"{dsl_s / sql_s:>7.2f}x {dsl_rows:>8,}")
        print(f"\ngeometric mean DSL/SQL latency ratio: "
              f"{statistics.geometric_mean(ratios):.2f}x")

        print(f"\nevery DSL example of docs/queries.md on {run_count:,} runs (median ms):")
        slowest = 0.0
        for text in documented_examples():
            def run(t=text) -> int:
                result = execute(con, compile_dsl(t, catalog, now=now))
                return sum(batch.num_rows for batch in result.batches)

            rows = run()
            seconds = median_seconds(run, args.repeat)
            slowest = max(slowest, seconds)
            print(f"  {seconds * 1e3:>8.1f} ms {rows:>8,} rows  {text}")
        print(f"slowest documented example: {slowest * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
