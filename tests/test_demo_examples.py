"""The documented examples work as written against the store the README's first command builds
(`recstore demo`), through the real CLI (issue 27 point 10: surprising defaults)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO_ROOT, from_source_sweep, run_cli

NIGHTLY = REPO_ROOT / "docs" / "examples" / "sweep-nightly.toml"


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    """The demo's store, built by `recstore demo` exactly as the README runs it."""
    workdir = tmp_path_factory.mktemp("demo") / "work"
    done = subprocess.run([sys.executable, "-m", "recstore", "demo", "--dir", str(workdir)],
                          capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return workdir / "demo.duckdb"


def _copy(db: Path, tmp_path: Path) -> Path:
    """A copy of the demo store a test may change."""
    target = tmp_path / "demo.duckdb"
    target.write_bytes(db.read_bytes())
    return target


def test_the_nightly_sweep_example_passes_on_the_demo_store(demo_db, tmp_path):
    db = _copy(demo_db, tmp_path)
    done = run_cli(db, "sweep", "run", str(NIGHTLY), "--json", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["case_count"] > 20 and result["counts"]["fail"] == 0
    assert result["counts"]["pass"] == result["case_count"]


def test_the_nightly_gate_fails_a_refund_schema_that_changes_arguments(demo_db, tmp_path):
    """The gate is not vacuous: the same spec with a defaulted `reason` (arguments the tape never
    recorded) fails every run that refunded, naming the tool."""
    db = _copy(demo_db, tmp_path)
    spec = tmp_path / "nightly-breaking.toml"
    text = NIGHTLY.read_text(encoding="utf-8")
    compatible = 'reason = { type = "string" }'
    assert compatible in text
    spec.write_text(text.replace(compatible, 'reason = { type = "string", default = "none" }'),
                    encoding="utf-8")
    done = run_cli(db, "sweep", "run", str(spec), "--json", "--quiet")
    assert done.returncode == 1, done.stdout + done.stderr
    assert json.loads(done.stdout)["counts"]["fail"] >= 1
    failed = run_cli(db, "query", "SELECT drift::VARCHAR AS drift FROM sweep_cases "
                     "WHERE status = 'fail'", "--format", "csv")
    assert failed.returncode == 0 and "refund" in failed.stdout


def _replay_baselines(db: Path) -> None:
    """Replay every baseline run strictly from its own recording (the demo's step 6): the
    newest replays, so pairing by lineage (latest duplicate) compares these."""
    done = run_cli(db, "replay", "--select", "tag.set = 'baseline'", "--from-source",
                   "--mode", "strict", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr


REPRODUCED = ("compare", "--baseline", "tag.set = 'baseline'", "--candidate",
              "replay_of_run_id is not null", "--pair-by", "lineage",
              "--include", "response", "--include", "toolCalls")


def test_bulk_compare_counts_reproduced_failures_apart_and_passes(demo_db, tmp_path):
    """Exact reproductions of failed runs are `still failing`, not `fail`: 'changed: 0 of N'
    no longer comes with a failed gate (issue 27 point 10)."""
    db = _copy(demo_db, tmp_path)
    _replay_baselines(db)
    done = run_cli(db, *REPRODUCED, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    failed = [p for p in report["pairs"] if p["status_a"] == "failed"]
    assert len(report["pairs"]) == 200 and len(failed) > 20
    assert report["aggregate"]["flags"]["equal"]["changed"] == 0
    assert report["aggregate"]["classification"] == {
        "pass": 200 - len(failed), "warn": 0, "fail": 0, "still_failing": len(failed)}
    assert {(p["status_b"], p["classification"]) for p in failed} == {("failed", "still_failing")}
    html = tmp_path / "report.html"
    text = run_cli(db, *REPRODUCED, "--html", str(html))
    assert text.returncode == 0
    assert f"fail 0, still failing {len(failed)} (fail on newFailure;" in text.stdout
    page = html.read_text(encoding="utf-8")
    assert f'<b id="still-failing-count">{len(failed)}</b>' in page
    assert '<b id="fail-count">0</b>' in page
    # the documented rule for a gate that fails every candidate failure
    strict = run_cli(db, *REPRODUCED, "--fail-on", "candidateFailed", "--json")
    assert strict.returncode == 1
    assert json.loads(strict.stdout)["aggregate"]["classification"]["fail"] == len(failed)


def test_a_reproducibility_sweep_counts_still_failing_cases(demo_db, tmp_path):
    """A sweep replaying failed runs from source says how many failed as their source did, and
    `still_failing` in fail_on fails them."""
    db = _copy(demo_db, tmp_path)
    spec = from_source_sweep(tmp_path, "failed-repro", "tag.set = 'baseline' and status = 'failed'")
    done = run_cli(db, "sweep", "run", str(spec), "--json", "--quiet")
    result = json.loads(done.stdout)
    still = result["still_failing"]
    assert still > 20 and result["counts"]["pass"] >= still
    text = run_cli(db, "sweep", "run", str(spec), "--rerun", "--quiet")
    assert f"; still failing {still} (failed as their source did)" in text.stdout
    strict = tmp_path / "strict.toml"
    strict.write_text(spec.read_text(encoding="utf-8") + '[classify]\nfail_on = ["replay_error", '
                      '"candidate_failed", "still_failing"]\n', encoding="utf-8")
    gated = run_cli(db, "sweep", "run", str(strict), "--json", "--quiet")
    assert gated.returncode == 1
    assert json.loads(gated.stdout)["counts"]["fail"] >= still
