"""How fast `recstore serve` answers, and how fast it ingests over HTTP.

Builds a store of N synthetic runs (``recstore.synth``), starts a real server on port 0, and
times (p50/p95 over --repeat requests) the runs page, run pages of runs without and with lineage
(thread continuations, as child and as parent), a facet change and a DSL
filter; then POSTs M records as NDJSON chunks to /v1/runrecords and compares the records/s with
`recstore ingest` of the same NDJSON file into a fresh store (the baseline, same run).

    python benchmarks/bench_serve.py --runs 20000 50000 --repeat 20 --ingest 2000 20000
    python benchmarks/bench_serve.py --runs 200000 --keep bench-stores --no-ingest
    python benchmarks/bench_serve.py --runs --ingest 2000 20000 --senders 1 2 4 --pairs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from recstore.synth import generate_corpus  # noqa: E402
from tests.serve_support import RECSTORE, served  # noqa: E402


def write_ndjson(path: Path, n: int, seed: int) -> Path:
    with path.open("w") as out:
        for record in generate_corpus(n, seed=seed):
            out.write(json.dumps(record) + "\n")
    return path


def timed(client: httpx.Client, urls: list[str], repeat: int) -> tuple[float, float]:
    """p50 and p95 (ms) of ``repeat`` GETs, cycling over ``urls``."""
    times = []
    for i in range(repeat):
        start = time.perf_counter()
        client.get(urls[i % len(urls)]).raise_for_status()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)]


def _lineage_runs(client: httpx.Client, url: str, n: int) -> list[str]:
    """Up to ``n`` runs with lineage, as child and as parent (thread continuations in the
    synthetic corpus), alternating."""
    rows = client.get(url + "api/query", params={
        "q": f"SELECT child_run_key, parent_run_key FROM lineage "
             f"WHERE parent_run_key IS NOT NULL ORDER BY hash(child_run_key) LIMIT {n}"}
    ).json()["rows"]
    return [row[i % 2] for i, row in enumerate(rows)]


def bench_pages(folder: Path, runs: int, repeat: int) -> None:
    db = folder / f"pages-{runs}.duckdb"
    if not db.exists():  # --keep reuses a store built before (200k runs take minutes)
        source = write_ndjson(folder / f"pages-{runs}.ndjson", runs, seed=5)
        subprocess.run([*RECSTORE, "--db", str(db), "ingest", str(source), "--quiet"],
                       check=True)
        source.unlink()
    with served(db) as (url, _proc, _), httpx.Client(timeout=120) as client:
        linked = _lineage_runs(client, url, 10)
        plain = [row["run_key"] for row in client.get(
            url + "api/runs", params={"limit": 50}).json()["rows"]]
        plain = [key for key in plain if not client.get(url + "api/runs/" + key).json()[
            "parents"] and not client.get(url + "api/runs/" + key).json()["children"]][:10]
        agent = client.get(url + "api/facets").json()["agent"][0]["value"]
        cases = {
            "runs page": [url],
            "run page": [url + "runs/" + key for key in plain],
            "run (lineage)": [url + "runs/" + key for key in linked],
            "facet change": [url + "?" + str(httpx.QueryParams(
                {"facet": "agent", "value": agent}))],
            "DSL filter": [url + "?" + str(httpx.QueryParams(
                {"filter": "status = 'failed' and tool_calls.any(name = 'get_time')"}))],
        }
        for name, pages in cases.items():
            p50, p95 = timed(client, pages, repeat)
            print(f"{runs:>8} runs  {name:<14} p50 {p50:7.1f} ms  p95 {p95:7.1f} ms "
                  f"({len(pages)} pages)")


def bench_ingest(folder: Path, records: int, chunk: int, senders: int, pairs: int) -> None:
    """``pairs`` times: `recstore ingest` of the file into a fresh store, then the same records
    POSTed to a fresh server; each pair's ratio, and their median (the machine's load moves
    both rates: a pair measured back to back shares it)."""
    folder.mkdir(exist_ok=True)
    source = write_ndjson(folder / f"ingest-{records}.ndjson", records, seed=9)
    lines = source.read_bytes().splitlines(keepends=True)
    bodies = [b"".join(lines[at:at + chunk]) for at in range(0, len(lines), chunk)]
    ratios = []
    for pair in range(pairs):
        cli_rate = _cli_rate(folder / f"cli-{records}-{pair}.duckdb", source, records)
        http_rate = _http_rate(folder / f"http-{records}-{pair}.duckdb", bodies, records, senders)
        ratios.append(http_rate / cli_rate)
        print(f"ingest {records} records: recstore ingest {cli_rate:,.0f}/s, HTTP ({chunk}-record "
              f"POSTs, {senders} at once) {http_rate:,.0f}/s, ratio {ratios[-1]:.2f}x "
              f"(load {os.getloadavg()[0]:.2f})")
    if pairs > 1:
        print(f"ingest {records} records, {senders} at once: median ratio "
              f"{statistics.median(ratios):.2f}x of {pairs} (min {min(ratios):.2f}x)")


def _cli_rate(db: Path, source: Path, records: int) -> float:
    start = time.perf_counter()
    subprocess.run([*RECSTORE, "--db", str(db), "ingest", str(source), "--quiet"], check=True)
    return records / (time.perf_counter() - start)


def _http_rate(db: Path, bodies: list[bytes], records: int, senders: int) -> float:
    with served(db) as (url, _proc, _), httpx.Client(timeout=600) as client:

        def post(body: bytes) -> None:
            answer = client.post(url + "v1/runrecords", content=body,
                                 headers={"content-type": "application/x-ndjson"})
            answer.raise_for_status()

        start = time.perf_counter()
        # senders > 1: POSTs in flight at once, as agents of a fleet send them
        with ThreadPoolExecutor(senders) as pool:
            list(pool.map(post, bodies))
        return records / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, nargs="*", default=[5000, 20000],
                        help="store sizes to time the pages at (none: ingest only)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--ingest", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--chunk", type=int, default=1000)
    parser.add_argument("--senders", type=int, nargs="+", default=[1],
                        help="POSTs in flight at once (each count timed in turn)")
    parser.add_argument("--pairs", type=int, default=1,
                        help="CLI and HTTP ingests timed back to back this many times each")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="build the page stores in DIR and reuse them on the next run")
    parser.add_argument("--no-ingest", action="store_true", help="time the pages only")
    args = parser.parse_args()
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
        for runs in args.runs:
            bench_pages(args.keep or Path(tmp), runs, args.repeat)
        if not args.no_ingest:
            for records in args.ingest:
                for senders in args.senders:
                    bench_ingest(Path(tmp) / f"senders-{senders}", records, args.chunk, senders,
                                 args.pairs)


if __name__ == "__main__":
    main()
