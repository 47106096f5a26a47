"""Every file recstore writes is owner-only, like the store: ``query -o`` in each format, compare
pair files and HTML reports, sweep reports (exports: tests/test_query_export.py). Checked under a
permissive umask (022), where plain ``open`` would make them 0644."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recstore.files import private_dir, private_open
from recstore.store import Store
from recstore.sweep.runner import run_sweep
from recstore.sweep.spec import parse_spec

from .conftest import tagged_store
from .query_support import run_cli


@pytest.fixture(autouse=True)
def permissive_umask():
    previous = os.umask(0o022)  # inherited by the CLI subprocesses
    yield
    os.umask(previous)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return tagged_store(tmp_path_factory.mktemp("private") / "s.duckdb", 6, seed=3)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.parametrize("fmt", ["csv", "json", "ndjson", "table", "parquet"])
def test_query_output_files_are_owner_only(store, tmp_path, fmt):
    out = tmp_path / f"out.{fmt}"
    result = run_cli("query", "SELECT run_key, status FROM runs", "--format", fmt, "-o", str(out),
                     db=store.path)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 0 and _mode(out) == 0o600


def test_an_overwritten_output_file_becomes_owner_only(store, tmp_path):
    out = tmp_path / "shared.csv"
    out.write_text("old\n")
    out.chmod(0o644)
    assert run_cli("query", "FROM runs", "--format", "csv", "-o", str(out),
                   db=store.path).returncode == 0
    assert _mode(out) == 0o600 and out.read_text() != "old\n"


def test_compare_pair_files_and_html_are_owner_only(store, tmp_path):
    pairs, html = tmp_path / "pairs.csv", tmp_path / "report.html"
    result = run_cli("compare", "--baseline", "tag.set = 'baseline'", "--candidate",
                     "tag.set = 'candidate'", "--format", "csv", "-o", str(pairs),
                     "--html", str(html), "--no-record", db=store.path)
    assert result.returncode in (0, 1), result.stderr
    assert _mode(pairs) == 0o600 and _mode(html) == 0o600


def test_sweep_reports_are_owner_only(store, tmp_path):
    spec = parse_spec({"name": "private", "select": {"query": "tag.set = 'baseline'"},
                       "candidate": {"from_source": True}}, source="test")
    run = run_sweep(store, spec)
    out = tmp_path / "reports" / "nightly"
    result = run_cli("sweep", "report", str(run.sweep_run_id), "--output", str(out),
                     db=store.path)
    assert result.returncode == 0, result.stderr
    assert _mode(out) == 0o700 and _mode(out.parent) == 0o700
    assert sorted(_mode(p) for p in out.iterdir()) == [0o600, 0o600]


def test_private_dir_keeps_existing_folders_and_refuses_a_file(tmp_path):
    tmp_path.chmod(0o755)
    made = private_dir(tmp_path / "a" / "b")
    assert _mode(tmp_path) == 0o755  # the user's folder keeps its mode
    assert _mode(tmp_path / "a") == 0o700 and _mode(made) == 0o700
    with private_open(tmp_path / "f", "x") as fh:
        fh.write("x")
    with pytest.raises(FileExistsError):
        private_open(tmp_path / "f", "x")
    from recstore.errors import InputError

    with pytest.raises(InputError, match="is not a directory"):
        private_dir(tmp_path / "f")
