"""The compare report's pair table at scale: how long headless Chromium takes to load the page
and draw its first 50 rows, and to apply a filter, at 100,000 pairs against 1,000.

A real comparison of ``--pairs`` generated cases (``recstore.synth``) is stored and browsed
once; its rows are then repeated under new pair numbers to reach each size (the table's work
depends on the row count, not on what the rows say), with the same drill-downs. Printed per
size: the HTML size, the time to render it in Python, Chromium's time to a dumped DOM (load,
parse the inline data, draw a page), the same with a filter in the address, and each against
the 1,000-pair page measured in the same run.

Run: python benchmarks/bench_compare_report.py [--pairs 400] [--sizes 1000,100000]
"""

from __future__ import annotations

import argparse
import copy
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from recstore.compare import bulk_compare
from recstore.compare.details import browse_pairs
from recstore.compare.report import render_html
from recstore.store import Store
from recstore.synth import generate_corpus

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_seconds(page: Path, fragment: str, profile: Path) -> float:
    browser = shutil.which("chromium") or sys.exit("needs chromium (apt-get install -y chromium)")
    start = time.perf_counter()
    done = subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                           page.as_uri() + fragment], capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - start
    assert "showing 1–" in done.stdout, done.stderr[-1000:]
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=400)
    parser.add_argument("--sizes", default="1000,100000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="bench-report-"))
    store = Store(tmp / "s.duckdb")
    for variant in ("baseline", "candidate"):
        store.ingest_records(list(generate_corpus(args.pairs, seed=3, variant=variant)),
                             tags={"set": variant})
    comparison = bulk_compare(store, "tag.set = 'baseline'", "tag.set = 'candidate'", record=False)
    browsed = browse_pairs(store, comparison)
    results = {}
    for size in sizes:
        browser = copy.copy(browsed)
        browser.rows = [[i, *row[1:]] for i, row in zip(range(size), _cycle(browsed.rows), strict=False)]
        start = time.perf_counter()
        html = render_html(comparison, browser=browser)
        render = time.perf_counter() - start
        page = tmp / f"report-{size}.html"
        page.write_text(html, encoding="utf-8")
        load = chromium_seconds(page, "", tmp / "profile")
        filtered = chromium_seconds(page, "#cls=warn&q=get", tmp / "profile")
        results[size] = (len(html), render, load, filtered)
    base = results[sizes[0]]
    print(f"{'pairs':>8} {'html MB':>8} {'render s':>9} {'load s':>7} {'filter s':>9} "
          f"{'load ×':>7} {'filter ×':>9}")
    for size, (nbytes, render, load, filtered) in results.items():
        print(f"{size:>8} {nbytes / 1e6:>8.1f} {render:>9.2f} {load:>7.2f} {filtered:>9.2f} "
              f"{load / base[2]:>7.2f} {filtered / base[3]:>9.2f}")
    shutil.rmtree(tmp)


def _cycle(rows: list) -> object:
    while True:
        yield from rows


if __name__ == "__main__":
    main()
