"""The documented examples work as written against the store the README's first command builds
(`recstore demo`), through the real CLI (issue 27 point 10: surprising defaults)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO_ROOT, run_cli

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
