"""Bulk compare end to end: the first comparison of a fresh store against a repeated one, and
against aioc's own Node ``compareRunRecords`` over the same pairs held in memory.

For each size (default 3,000 and 100,000 pairs):

1. **store** (not timed as comparison): baseline and candidate runs from ``recstore.synth``
   (beyond ``--distinct`` cases the records are reused under new runIds and caseIds, which costs
   a comparison exactly as much as new content would) ingested into a fresh store, tagged
   ``set=baseline`` / ``set=candidate``;
2. ``--rounds`` rounds, each of two parts, so that a change in the (shared) machine's load
   between the two sides does not decide their ratio:

   * **recstore**, in a new process (its peak RSS is the comparison's own): ``bulk_compare`` by
     ``metadata.caseId`` twice, end to end — select both sets with the DSL, pair, compare every
     pair, classify, aggregate, store the comparison. The very first one runs on the fresh store
     ("first"); the best first one of a later round's process is "repeated" (what running
     ``recstore compare`` again costs) and the best second one of a process "repeated, warm".
     first / repeated should stay at or below 1.5: compare features are built at ingest, so a
     first comparison computes nothing a repeated one does not;
   * **node**: the same pairs built in memory in Node from the same records (the reused ones as
     shallow copies with new ids, as in step 1), then ``compareRunRecords(a, b)`` over every
     pair, twice in the process (the second has a warm JIT); the best over all rounds counts.

Printed per size: wall and CPU (all threads) of each, first / repeated, peak RSS, Node's time
per pair next to recstore's end-to-end time per pair and their ratios (the aim: recstore >= 5x
faster per pair), and a parity line: both sides' equal / summary-flag / metric totals, which must
agree on every count.

Node needs a build of aioc (it is not on npm): ``--aioc-dist PATH`` or env ``AIOC_DIST``, the
build's ``dist`` directory (or its ``index.js``). Without ``node`` on PATH or without a build,
the Node step is skipped and the benchmark says so. To build aioc (by hand, in a temporary
directory outside this repository; nothing of it belongs in the repository):

    AIOC_SRC=$(mktemp -d)
    git clone https://github.com/axiastudio/aioc "$AIOC_SRC"   # or unpack a source archive
    cd "$AIOC_SRC"
    npm ci --workspaces=false --include-workspace-root --ignore-scripts   # the core's own deps
    npx tsc -p tsconfig.build.json     # writes dist/; dist/index.js exports compareRunRecords
    export AIOC_DIST="$AIOC_SRC/dist"

(measured with aioc 0.2.8, commit b1ff8fb, and Node 20.)

Run: python benchmarks/bench_compare.py [--sizes 3000,100000] [--rounds 3] [--aioc-dist PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE, CANDIDATE = "tag.set = 'baseline'", "tag.set = 'candidate'"
# Totals both sides report, as (recstore pair column, aioc field): counts of true flags, sums of
# metrics. They must agree.
TOTALS = [
    ("equal", "equal"),
    ("same_final_response", "summary.sameFinalResponse"),
    ("same_tool_call_shape", "summary.sameToolCallShape"),
    ("same_policy_decisions", "summary.samePolicyDecisions"),
    ("same_guardrail_decisions", "summary.sameGuardrailDecisions"),
    ("matched_tool_calls", "metrics.matchedToolCalls"),
    ("missing_tool_calls", "metrics.missingToolCalls"),
    ("extra_tool_calls", "metrics.extraToolCalls"),
    ("difference_count", "differences.length"),
]

# Builds the pairs as make_pairs does, then times compareRunRecords over them (best of repeat).
NODE_DRIVER = r"""
const dist = process.argv[2];
const { compareRunRecords } = require(dist.endsWith(".js") ? dist : dist + "/index.js");
const fs = require("fs");
const read = (p) => fs.readFileSync(p, "utf8").split("\n").filter(Boolean).map(JSON.parse);
const base = read(process.argv[3]), cand = read(process.argv[4]);
const n = Number(process.argv[5]), repeat = Number(process.argv[6]);
const cases = base.length;
const pairs = [];
for (let i = 0; i < n; i++) {
  let a = base[i % cases], b = cand[i % cases];
  if (i >= cases) {
    const caseId = `case-${String(i + 1).padStart(7, "0")}`;
    a = { ...a, runId: `${a.runId}-${i}`, metadata: { ...a.metadata, caseId } };
    b = { ...b, runId: `${b.runId}-${i}`, metadata: { ...b.metadata, caseId } };
  }
  pairs.push([a, b]);
}
const fields = JSON.parse(process.argv[7]);
const get = (r, path) => path.split(".").reduce((v, k) => v[k], r);
let best = null, totals = null;
for (let k = 0; k < repeat; k++) {
  const sums = Object.fromEntries(fields.map((f) => [f, 0]));
  const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
  for (const [a, b] of pairs) {
    const r = compareRunRecords(a, b);
    for (const f of fields) sums[f] += Number(get(r, f));
  }
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const c = process.cpuUsage(c0), cpu = (c.user + c.system) / 1e6;
  if (best === null || wall < best.wall) best = { wall, cpu };
  totals = sums;
}
console.log(JSON.stringify({ ...best, totals, rss_mib: process.memoryUsage().rss / 2 ** 20 }));
"""


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_pairs(n: int, distinct: int, seed: int = 7) -> list[tuple[dict, dict]]:
    """n (baseline, candidate) record pairs: ``distinct`` generated cases, then the same content
    under new runIds and caseIds (shallow copies)."""
    from recstore.synth import generate_corpus

    cases = min(n, distinct)
    base = list(
        zip(generate_corpus(cases, seed), generate_corpus(cases, seed, "candidate"), strict=True)
    )
    pairs = []
    for i in range(n):
        a, b = base[i % cases]
        if i >= cases:
            case = f"case-{i + 1:07d}"
            a = dict(a, runId=f"{a['runId']}-{i}", metadata=dict(a["metadata"], caseId=case))
            b = dict(b, runId=f"{b['runId']}-{i}", metadata=dict(b["metadata"], caseId=case))
        pairs.append((a, b))
    return pairs


def _timed(work):
    wall, cpu = time.perf_counter(), time.process_time()
    result = work()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def build_store(path: Path, n: int, distinct: int) -> dict:
    """Ingest the pairs' runs into a new store (measured, not part of the comparison)."""
    from recstore.store import Store

    pairs = make_pairs(n, distinct)
    store = Store(path)
    wall, cpu, _ = _timed(
        lambda: (
            store.ingest_records((a for a, _ in pairs), tags={"set": "baseline"}),
            store.ingest_records((b for _, b in pairs), tags={"set": "candidate"}),
        )
    )
    return {"wall": wall, "cpu": cpu, "bytes": path.stat().st_size}


def compare_store(path: Path, runs: int) -> dict:
    """bulk_compare end to end on the store, ``runs`` times; the totals of the last."""
    from recstore.compare import bulk_compare
    from recstore.store import Store

    store = Store(path)
    rss_before = _peak_rss_mib()
    times = []
    for _ in range(runs):
        wall, cpu, comparison = _timed(
            lambda: bulk_compare(store, BASELINE, CANDIDATE, pair_by="metadata.caseId")
        )
        times.append([wall, cpu])
    pairs = comparison.pairs
    totals = {
        column: sum(v for v in pairs.column(column).to_pylist() if v) for column, _ in TOTALS
    }
    return {
        "pairs": pairs.num_rows,
        "unpaired": len(comparison.unpaired),
        "times": times,
        "totals": totals,
        "rss_mib": {"before": rss_before, "peak": _peak_rss_mib()},
    }


def write_node_input(tmp: Path, n: int, distinct: int) -> list[str]:
    """The distinct records of the n pairs as NDJSON, for the Node driver to build the pairs."""
    from recstore.synth import generate_corpus

    files = []
    for variant in ("baseline", "candidate"):
        path = tmp / f"{variant}.ndjson"
        with open(path, "w", encoding="utf-8") as fh:
            for record in generate_corpus(min(n, distinct), 7, variant):
                fh.write(json.dumps(record) + "\n")  # ASCII: lone surrogates stay escapes
        files.append(str(path))
    driver = tmp / "compare.js"
    driver.write_text(NODE_DRIVER, encoding="utf-8")
    return [str(driver), *files]


def run_node(node: str, dist: str, inputs: list[str], n: int, repeat: int) -> dict:
    """compareRunRecords over the same n pairs in Node, best of ``repeat`` in one process."""
    driver, *files = inputs
    fields = json.dumps([field for _, field in TOTALS])
    out = subprocess.run(
        [node, driver, dist, *files, str(n), str(repeat), fields],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _aioc_dist(given: str | None) -> str | None:
    path = given or os.environ.get("AIOC_DIST")
    if not path:
        return None
    index = Path(path) if path.endswith(".js") else Path(path) / "index.js"
    return path if index.is_file() else None


def _child(args: argparse.Namespace) -> None:
    path = Path(args.store)
    result = (
        build_store(path, args.n, args.distinct)
        if args.child == "build"
        else compare_store(path, args.runs)
    )
    print(json.dumps(result))


def _run_child(kind: str, store: Path, args: argparse.Namespace, n: int, runs: int = 0) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, "--store", str(store), "--n", str(n),
         "--distinct", str(args.distinct), "--runs", str(runs)],
        capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(n: int, args: argparse.Namespace, node: str | None, dist: str | None) -> tuple:
    """Build a store of n pairs, then ``--rounds`` rounds of [two recstore comparisons in a new
    process; Node over the pairs]: interleaved, so that a change in the machine's load between
    them does not decide the ratio. The first comparison of round 1 is the first on the fresh
    store; the first one of each later round is a repeated one in a fresh process (what running
    ``recstore compare`` again costs), the second one of each round a repeated one in a warm
    process (what a library caller comparing again pays, and what Node is measured at)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "bench.duckdb"
        built = _run_child("build", store, args, n)
        inputs = write_node_input(Path(tmp), n, args.distinct) if node and dist else None
        ours, theirs = [], []
        for _ in range(max(args.rounds, 2)):
            ours.append(_run_child("compare", store, args, n, runs=2))
            if inputs:
                theirs.append(run_node(node, dist, inputs, n, repeat=2))
    result = {
        **ours[-1],
        "first": ours[0]["times"][0],
        "repeated": min((r["times"][0] for r in ours[1:]), key=lambda t: t[0]),
        "warm": min((r["times"][1] for r in ours), key=lambda t: t[0]),
        "rss_mib": {"before": ours[0]["rss_mib"]["before"],
                    "peak": max(r["rss_mib"]["peak"] for r in ours)},
    }
    best = min(theirs, key=lambda r: r["wall"]) if theirs else None
    return built, result, best


def _us(seconds: float, n: int) -> str:
    return f"{seconds / n * 1e6:8.1f} us/pair"


def _line(label: str, timing: list[float], n: int) -> str:
    return (f"  {label:<26}{timing[0]:7.2f} s wall {timing[1]:7.2f} s cpu  "
            f"{_us(timing[0], n)}")


def report(n: int, built: dict, ours: dict, node: dict | None, node_note: str) -> None:
    first, again, warm = ours["first"], ours["repeated"], ours["warm"]
    print(f"\n== {n:,} pairs ({ours['pairs']:,} paired, {ours['unpaired']} unpaired; store "
          f"{built['bytes'] / 2**20:.0f} MiB, ingest {built['wall']:.0f} s wall, not counted)")
    print(_line("recstore first", first, n))
    print(_line("recstore repeated", again, n) + "  (new process, as the CLI)")
    print(_line("recstore repeated, warm", warm, n) + "  (same process)")
    print(f"  first / repeated          {first[0] / again[0]:5.2f}x wall "
          f"{first[1] / again[1]:5.2f}x cpu  (aim <= 1.5)")
    rss = ours["rss_mib"]
    print(f"  peak RSS                  {rss['peak']:.0f} MiB (after imports "
          f"{rss['before']:.0f} MiB; aim < 2048)")
    if node is None:
        print(f"  node                      skipped: {node_note}")
        return
    print(_line("aioc node", [node["wall"], node["cpu"]], n)
          + f"  (pairs in memory, warm; RSS {node['rss_mib']:.0f} MiB)")
    for label, ours_t in (("first", first), ("repeated", again), ("repeated, warm", warm)):
        print(f"  node / recstore, {label:<16}{node['wall'] / ours_t[0]:5.1f}x wall "
              f"{node['cpu'] / ours_t[1]:5.1f}x cpu  (per pair; aim >= 5)")
    differ = [
        f"{column} {ours['totals'][column]} vs {node['totals'][field]}"
        for column, field in TOTALS
        if ours["totals"][column] != node["totals"][field]
    ]
    shown = ", ".join(f"{c}={ours['totals'][c]}" for c, _ in TOTALS[:2])
    print("  parity                    " + (f"identical totals ({shown}, ...)" if not differ
                                            else "DIFFERENT: " + "; ".join(differ)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="3000,100000")
    parser.add_argument("--distinct", type=int, default=5000,
                        help="distinct synth cases generated (reused beyond that)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of (2 recstore comparisons, 2 Node passes); best reported")
    parser.add_argument("--aioc-dist", help="aioc build: its dist directory (or env AIOC_DIST)")
    parser.add_argument("--child", choices=["build", "compare"], help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    node, dist = shutil.which("node"), _aioc_dist(args.aioc_dist)
    note = ("node is not installed" if node is None else
            "no aioc build (give --aioc-dist PATH or set AIOC_DIST; see this file's docstring)"
            if dist is None else "")
    print(f"node: {node or 'not found'}; aioc build: {dist or 'none'}")
    for n in (int(s) for s in args.sizes.split(",")):
        report(n, *measure(n, args, node, dist), note)


if __name__ == "__main__":
    main()
