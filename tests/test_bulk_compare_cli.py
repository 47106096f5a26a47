"""``recstore compare`` end to end: the real CLI in a subprocess, a real store, headless Chromium."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from .browser import dom, needs_chromium, screenshot, text_of
from .conftest import AIOC_FIXTURES, CORPUS_DEV

CASES = 60  # the first corpus-dev cases: enough for failures, warns, drift and flips
BULK = ["--baseline", "tag.set = 'baseline'", "--candidate", "tag.set = 'candidate'"]


def recstore(db: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recstore", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    path = root / "store.duckdb"
    for side in ("baseline", "candidate"):
        with gzip.open(CORPUS_DEV / f"corpus-{side}.ndjson.gz", "rt", encoding="utf-8") as fh:
            lines = [next(fh) for _ in range(CASES)]
        part = root / f"{side}.ndjson"
        part.write_text("".join(lines), encoding="utf-8")
        done = recstore(path, "ingest", str(part), "--tag", f"set={side}")
        assert done.returncode == 0, done.stderr
    return path


def test_bulk_json_and_exit_status(db):
    done = recstore(db, "compare", *BULK, "--json")
    report = json.loads(done.stdout)
    assert len(report["pairs"]) == CASES
    failing = sum(1 for p in report["pairs"] if p["status_b"] == "failed"
                  and not (p["status_a"] == "failed" and p["equal"]))  # newFailure
    assert failing > 0, "the first cases include failed candidates"
    assert report["aggregate"]["classification"]["fail"] == failing
    assert done.returncode == 1  # a pair failed: the CI gate trips
    assert report["options"]["pairBy"] == "metadata.caseId"

    relaxed = recstore(db, "compare", *BULK, "--fail-on", "", "--warn-on", "changed")
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    assert f"{CASES} pairs" in relaxed.stdout


def test_pair_rows_as_csv_and_parquet(db, tmp_path):
    csv_path, parquet_path = tmp_path / "pairs.csv", tmp_path / "pairs.parquet"
    recstore(db, "compare", *BULK, "--format", "csv", "-o", str(csv_path), "--no-record")
    recstore(db, "compare", *BULK, "--format", "parquet", "-o", str(parquet_path), "--no-record")
    lines = csv_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == CASES + 1 and lines[0].startswith('"pair_index","pair_key"')
    table = pq.read_table(parquet_path)
    assert table.num_rows == CASES
    assert table.column("pair_key").to_pylist() == sorted(table.column("pair_key").to_pylist())


def test_stored_comparisons_are_queryable_from_the_cli(db):
    before = json.loads(
        recstore(db, "query", "SELECT count(*) AS n FROM comparisons", "--json").stdout
    )
    recstore(db, "compare", *BULK)
    after = recstore(
        db,
        "query",
        "SELECT c.comparison_id, c.pair_count, count(p.pair_index) AS rows FROM comparisons c "
        "JOIN comparison_pairs p USING (comparison_id) GROUP BY ALL ORDER BY 1 DESC LIMIT 1",
        "--json",
    )
    assert after.returncode == 0, after.stderr
    (latest,) = json.loads(after.stdout)
    assert latest["pair_count"] == latest["rows"] == CASES
    assert latest["comparison_id"] > before[0]["n"] - 1


def test_two_stored_runs_and_two_files(db):
    a = json.loads(recstore(db, "compare", *BULK, "--json", "--no-record").stdout)["pairs"][0]
    done = recstore(db, "compare", a["baseline_run_key"], a["candidate_run_key"], "--json")
    assert done.returncode == (0 if a["equal"] else 1)
    assert len(json.loads(done.stdout)["differences"]) == a["difference_count"]
    same = recstore(db, "compare", a["baseline_run_key"], a["baseline_run_key"])
    assert same.returncode == 0
    files = recstore(
        db,
        "compare",
        str(AIOC_FIXTURES / "compare-v1.json"),
        str(AIOC_FIXTURES / "compare-v2.json"),
        "--exclude",
        "metadata",
    )
    assert files.returncode == 1 and "different" in files.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--baseline", "tag.set = 'baseline'"], "--baseline and --candidate"),
        ([*BULK, "--pair-by", "colour"], "--pair-by 'colour'"),
        ([*BULK, "--ignore", "policy.resource.kind"], "ignore path 'policy.resource.kind'"),
        ([*BULK, "--ignore", "policy.timestmap"], "did you mean 'timestamp'?); valid paths: response"),
        ([*BULK, "--fail-on", "vibes"], "unknown classification signal 'vibes'"),
        ([*BULK, "--format", "csv"], "--format needs --output FILE"),
        ([*BULK, "-o", "pairs.json"], "--output: cannot tell the format from the name 'pairs.json'; end it in .csv or .parquet, or give --format"),
        (["only-one"], "give two files or runs"),
        (["aioc:nope", "aioc:nada"], "no stored run matches"),
    ],
)
def test_bad_input_is_one_line(db, args, message):
    done = recstore(db, "compare", *args)
    assert done.returncode == 2
    assert done.stderr.startswith("recstore: error:") and message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.fixture(scope="module")
def report(db, tmp_path_factory) -> tuple[Path, dict]:
    """The HTML report of the bulk comparison and the same comparison as JSON."""
    html = tmp_path_factory.mktemp("report") / "report.html"
    done = recstore(db, "compare", *BULK, "--html", str(html), "--no-record", "--json")
    assert done.returncode == 1 and html.exists()
    return html, json.loads(done.stdout)


def test_html_report_is_one_file_without_network_or_none(report):
    text = report[0].read_text(encoding="utf-8")
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", text), "no external assets"
    assert "script-src 'sha256-" in unescape(text)  # only the page's own script may run
    assert ">None<" not in text and "None" not in text_of(text)
    change = report[1]["aggregate"]["changeRate"]
    low, high = change["ci95"]
    assert change["interval"] == "wilson"
    assert f"changed (95% CI {100 * low:.1f}–{100 * high:.1f}%)" in text  # the JSON's interval


@needs_chromium
def test_html_report_shows_every_pair_regressions_first(report, tmp_path):
    html, result = report
    width, height, pixels = screenshot(tmp_path / "profile", html, tmp_path / "report.png")
    assert (width, height) == (1400, 1800) and len(set(pixels[::97])) > 20
    page = dom(tmp_path / "profile", html)
    assert f'<b id="pair-count">{CASES} pairs</b>' in page
    assert "<svg" in page and "tool-call drift" in page
    assert f"showing 1–50 of {CASES} pairs" in page
    rows = re.findall(r'<tr class="row[^"]*" data-pair="(\d+)">(.*?)</tr>', page)
    assert len(rows) == 50
    regressed = {p["pair_index"] for p in result["pairs"]
                 if p["status_a"] == "completed" and p["status_b"] == "failed"}
    assert regressed, "the first cases include completed → failed pairs"
    first = [int(i) for i, _ in rows[: len(regressed)]]
    assert set(first) == regressed  # regressions lead the table
    assert all("regression" in cells for _, cells in rows[: len(regressed)])
    assert "None" not in text_of(page)


@needs_chromium
def test_a_filter_narrows_the_table(report, tmp_path):
    html, result = report
    warned = [p for p in result["pairs"] if p["classification"] == "warn"]
    page = dom(tmp_path / "profile", html, "cls=warn")
    shown = min(len(warned), 50)
    assert f"showing 1–{shown} of {len(warned)} pairs (filtered from {CASES})" in page
    pills = re.findall(r'<span class="pill (\w+)">', page)
    assert len(pills) == shown and set(pills) == {"warn"}

    tool = next(t["tool"] for t in result["aggregate"]["tools"] if t["tool"])
    searched = dom(tmp_path / "profile", html, f"q={tool}")
    count = re.search(r"showing 1–\d+ of (\d+) pairs", searched)
    assert count and 0 < int(count.group(1)) <= CASES


@needs_chromium
def test_a_pair_opens_with_responses_and_aligned_tool_calls(report, tmp_path):
    html, result = report
    pair = max((p for p in result["pairs"] if not p["same_tool_call_shape"]
                and not p["same_final_response"] and p["response_length_a"]
                and p["response_length_b"]), key=lambda p: p["difference_count"])
    page = dom(tmp_path / "profile", html, f"pair={pair['pair_index']}")
    detail = re.search(r'<div class="pair-detail" data-pair="(\d+)">(.*?)</div></td>', page, re.S)
    assert detail and int(detail.group(1)) == pair["pair_index"]
    body = detail.group(2)
    assert pair["baseline_run_key"] in body and pair["candidate_run_key"] in body
    assert "Tool calls, aligned" in body
    steps = re.findall(r'<tr class="step-(matched|changed|added|removed)">', body)
    assert {"changed", "added", "removed"} & set(steps)
    sides = re.findall(r'<div class="side" data-side="(baseline|candidate)">(.*?)</div>', body, re.S)
    assert [side for side, _ in sides] == ["baseline", "candidate"]
    assert "<del>" in sides[0][1] or "<ins>" in sides[1][1]  # the word diff
    assert "Policy and guardrail decision changes" in body


@needs_chromium
def test_slices_count_per_metadata_value_and_filter_the_table(report, tmp_path):
    html, _ = report
    text = html.read_text(encoding="utf-8")
    slices = re.findall(r"<tr><td>metadata\.suite</td><td>([^<]+)</td><td class=\"n\">(\d+)</td>",
                        text)
    assert len(slices) >= 2 and sum(int(n) for _, n in slices) == CASES
    dims = re.findall(r'<optgroup label="([^"]+)">', text)
    suite = dims.index("metadata.suite")
    values = re.findall(rf'<option value="{suite}:(\d+)">metadata\.suite = ([^<]+)</option>', text)
    index, name = values[0]
    expected = dict(slices)[name]
    page = dom(tmp_path / "profile", html, f"slice={suite}:{index}&sort=key")
    assert f"of {expected} pairs (filtered from {CASES})" in page
    keys = re.findall(r'<tr class="row[^"]*" data-pair="\d+"><td class="n">\d+</td><td>([^<]+)</td>',
                      page)
    assert keys == sorted(keys)  # sorted by case id
