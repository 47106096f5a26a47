"""Throughput of the pure record layer: extract_tool_calls, compare_records, analyze and
validate_run_record over >= 10,000 baseline/candidate pairs.

Pairs come from ``recstore.synth`` when it exists, otherwise from perturbed copies of the
corpus-dev fixture pairs (tests/fixtures). The baseline measured in the same run is hashing
both records of a pair (``sha256_canonical``), the cheapest thing that reads every value once;
each figure is printed with its ratio to it.

Run: python benchmarks/bench_records.py [--pairs 10000]
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from recstore.canonical import sha256_canonical
from recstore.formats.aioc import validate_run_record
from recstore.records import analyze, compare_records, extract_tool_calls

CORPUS_DEV = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "aioc" / "corpus-dev"


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _perturb(record: dict, k: int) -> dict:
    """A shallow variant: changed response and metadata, every third drops its last item."""
    variant = dict(record, response=f"{record['response']} #{k}")
    variant["metadata"] = dict(record.get("metadata") or {}, variant=k)
    if k % 3 == 0 and variant["items"]:
        variant["items"] = variant["items"][:-1]
    return variant


def fixture_pairs(n: int) -> tuple[str, list[tuple[dict, dict]]]:
    baseline = {r["metadata"]["caseId"]: r for r in _read(CORPUS_DEV / "corpus-baseline.ndjson.gz")}
    candidate = _read(CORPUS_DEV / "corpus-candidate.ndjson.gz")
    real = [(baseline[c["metadata"]["caseId"]], c) for c in candidate]
    pairs = [
        pair if k < len(real) else (pair[0], _perturb(pair[1], k))
        for k, pair in ((k, real[k % len(real)]) for k in range(n))
    ]
    return f"corpus-dev fixtures ({len(real)} real pairs, perturbed to {n})", pairs


def synth_pairs(n: int) -> tuple[str, list[tuple[dict, dict]]]:
    from recstore import synth

    left = synth.generate_corpus(n, seed=7, variant="baseline")
    right = synth.generate_corpus(n, seed=7, variant="candidate")
    return f"recstore.synth (seed 7, {n} cases)", list(zip(left, right, strict=True))


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _run_all(
    pairs: list[tuple[dict, dict]], fn: Callable[[dict, dict], object]
) -> Callable[[], None]:
    def run() -> None:
        for a, b in pairs:
            fn(a, b)

    return run


def _each_record(pairs: list[tuple[dict, dict]]) -> Iterator[dict]:
    for a, b in pairs:
        yield a
        yield b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000, help="number of pairs (default 10000)")
    parser.add_argument(
        "--source",
        choices=["auto", "synth", "fixtures"],
        default="auto",
        help="where pairs come from (auto: recstore.synth if installed, else fixtures)",
    )
    args = parser.parse_args()
    use_synth = args.source == "synth" or (
        args.source == "auto" and importlib.util.find_spec("recstore.synth") is not None
    )
    source, pairs = synth_pairs(args.pairs) if use_synth else fixture_pairs(args.pairs)
    n = len(pairs)
    n_calls = sum(len(extract_tool_calls(r)) for r in _each_record(pairs))
    print(f"pairs: {n} from {source}; {n_calls} tool calls in {2 * n} records")

    base = _time(_run_all(pairs, lambda a, b: (sha256_canonical(a), sha256_canonical(b))))
    rows = [
        ("baseline: sha256_canonical of both records", base),
        (
            "extract_tool_calls (both records)",
            _time(_run_all(pairs, lambda a, b: (extract_tool_calls(a), extract_tool_calls(b)))),
        ),
        ("compare_records (all sections)", _time(_run_all(pairs, compare_records))),
        (
            "compare_records (no policy/guardrails/metadata)",
            _time(
                _run_all(
                    pairs,
                    lambda a, b: compare_records(
                        a, b, exclude_sections=["policy", "guardrails", "metadata"]
                    ),
                )
            ),
        ),
        ("analyze (both records)", _time(_run_all(pairs, lambda a, b: (analyze(a), analyze(b))))),
        (
            "validate_run_record (both records)",
            _time(_run_all(pairs, lambda a, b: (validate_run_record(a), validate_run_record(b)))),
        ),
    ]
    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        print(
            f"{name:<{width}}  {seconds:7.2f} s  {n / seconds:9,.0f} pairs/s  {seconds / base:5.2f}x baseline"
        )


if __name__ == "__main__":
    main()
