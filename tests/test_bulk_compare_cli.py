"""``recstore compare`` end to end: the real CLI in a subprocess, a real store, headless Chromium."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

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
    failing = sum(1 for p in report["pairs"] if p["status_b"] == "failed")
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
        ([*BULK, "--format", "csv"], "--format and --output go together"),
        (["only-one"], "give two files or runs"),
        (["aioc:nope", "aioc:nada"], "no stored run matches"),
    ],
)
def test_bad_input_is_one_line(db, args, message):
    done = recstore(db, "compare", *args)
    assert done.returncode == 2
    assert done.stderr.startswith("recstore: error:") and message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Chromium is not installed")
def test_html_report_renders_in_headless_chromium(db, tmp_path):
    html = tmp_path / "report.html"
    done = recstore(db, "compare", *BULK, "--html", str(html), "--no-record")
    assert done.returncode == 1 and html.exists()
    text = html.read_text(encoding="utf-8")
    assert not re.search(r"(src|href)=\"(https?:)?//", text), "no external assets"
    browser = [
        "chromium",
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1280,2000",
    ]
    png = tmp_path / "report.png"
    shot = subprocess.run(
        [*browser, f"--screenshot={png}", html.as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert "CONSOLE" not in shot.stderr and "Uncaught" not in shot.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    dom = subprocess.run(
        [*browser, "--dump-dom", html.as_uri()], capture_output=True, text=True, timeout=180
    )
    assert f'<b id="pair-count">{CASES} pairs</b>' in dom.stdout
    assert "<svg" in dom.stdout and "tool-call drift" in dom.stdout
    assert dom.stdout.count("<details>") >= 1
