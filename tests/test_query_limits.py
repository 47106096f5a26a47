"""Query limits: the CLI's default timeout and row cap, Ctrl-C, and the library's opt-in
``QueryLimits``. Runaway queries are data (tests/hostile/slow-queries.txt)."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.query import QueryLimitError, QueryLimits, run_query
from recstore.store import Store

from .conftest import AIOC_FIXTURES, AIOC_RECORD_NAMES, REPO_ROOT
from .hostile_cases import hostile_lines
from .query_support import run_cli

SLOW = hostile_lines("slow-queries.txt")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(tmp_path_factory.mktemp("limits") / "s.duckdb")
    store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in AIOC_RECORD_NAMES])
    return store


@pytest.mark.parametrize("sql", SLOW)
def test_a_runaway_query_ends_with_one_clear_error(store, tmp_path, sql):
    out = tmp_path / "out.csv"
    result = run_cli("query", sql, "--timeout", "1", "--max-rows", "0", "--format", "csv",
                     "-o", str(out), db=store.path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("recstore: error: ") and result.stderr.count("\n") == 1, \
        result.stderr
    assert "Traceback" not in result.stderr


def test_the_cli_has_a_default_timeout(store):
    help_text = run_cli("query", "--help").stdout
    assert "--timeout SECONDS" in help_text and "[default: 120.0" in help_text
    assert "--max-rows N" in help_text and "[default: 1000000" in help_text


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sql", [q for q in SLOW if "repeat(" not in q])
def test_ctrl_c_stops_a_running_query(store, sql):
    # Ctrl-C as a terminal delivers it: a test run started in the background of a shell without
    # job control has SIGINT ignored, which a child would inherit.
    proc = subprocess.Popen([sys.executable, "-m", "recstore", "--db", str(store.path), "query",
                             sql, "--timeout", "0"], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    try:
        # Interpreter start-up costs under a second of CPU: past 3 s the query itself runs.
        while proc.poll() is None and _cpu_seconds(proc.pid) < 3:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err == "recstore: interrupted\n"


@pytest.mark.parametrize("fmt", ["csv", "json", "ndjson", "parquet"])
def test_output_stops_at_max_rows_with_a_clear_message(store, tmp_path, fmt):
    out = tmp_path / f"rows.{fmt}"
    result = run_cli("query", "SELECT unnest(range(100000)) AS n", "--max-rows", "10",
                     "--format", fmt, "-o", str(out), db=store.path)
    assert result.returncode == 2
    assert result.stderr == (f"recstore: error: stopped at --max-rows 10: {out} holds the first "
                             "10 rows; raise --max-rows (0 for no limit)\n")
    if fmt == "csv":
        rows = list(csv.reader(out.open(newline="")))
        assert rows[0] == ["n"] and [int(r[0]) for r in rows[1:]] == list(range(10))
    elif fmt == "json":
        assert [r["n"] for r in json.loads(out.read_text())] == list(range(10))
    elif fmt == "ndjson":
        assert len(out.read_text().splitlines()) == 10
    else:
        import pyarrow.parquet as pq

        assert pq.read_table(out).num_rows == 10


def test_a_result_of_exactly_max_rows_is_complete(store):
    result = run_cli("query", "SELECT unnest(range(10)) AS n", "--max-rows", "10",
                     "--format", "ndjson", db=store.path)
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 10


def test_the_library_sets_no_limits_unless_asked(store):
    with run_query(store, "SELECT unnest(range(50000)) AS n") as result:
        assert sum(1 for _ in result.rows()) == 50000
    assert not result.truncated
    with pytest.raises(QueryLimitError, match="time limit"):
        with run_query(store, SLOW[0], limits=QueryLimits(timeout=0.5)) as result:
            list(result.rows())
    with run_query(store, "SELECT * FROM runs", limits=QueryLimits(timeout=60)):
        pass  # a result left unread ends its watch too
    assert not [t for t in threading.enumerate() if t.name == "recstore-query-limit"]


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(0, 300), cap=st.integers(0, 300), batch=st.integers(1, 64))
def test_row_cap_keeps_exactly_the_first_rows(store, rows, cap, batch):
    with run_query(store, f"SELECT unnest(range({rows})) AS n", batch_rows=batch,
                   limits=QueryLimits(max_rows=cap)) as result:
        got = [n for (n,) in result.rows()]
    assert got == list(range(min(rows, cap)))
    assert result.truncated == (rows > cap)


def _blocked_on_its_pipe(proc: subprocess.Popen) -> bool:
    """Whether ``proc`` sleeps writing to a full pipe (Linux names the wait in wchan)."""
    while proc.poll() is None:
        if "pipe_write" in Path(f"/proc/{proc.pid}/wchan").read_text():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("fmt", ["table", "ndjson"])
def test_time_spent_writing_results_is_not_the_querys(store, fmt):
    # 30,000 rows (1.5 MB) fill the pipe while nobody reads it: the CLI then waits to write,
    # long past --timeout and the 3 s it gives DuckDB to stop, with DuckDB idle all along.
    sql = "SELECT unnest(range(30000)) AS n, repeat('x', 40) AS s"
    proc = subprocess.Popen([sys.executable, "-m", "recstore", "--db", str(store.path), "query",
                             sql, "--timeout", "1", "--format", fmt], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _blocked_on_its_pipe(proc), proc.stderr.read() if proc.stderr else ""
        time.sleep(5)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (0, "")
    rows = [line for line in out.splitlines() if "x" * 40 in line]
    assert len(rows) == 30000


def test_a_timeout_past_the_clock_means_no_limit(store):
    result = run_cli("query", "SELECT 42 AS n", "--timeout", "1e300", "--format", "ndjson",
                     db=store.path)
    assert (result.returncode, result.stdout, result.stderr) == (0, '{"n":42}\n', "")
