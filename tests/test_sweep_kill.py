"""A `recstore sweep run` killed with SIGKILL midway continues where it stopped when run again,
and every case ends up replayed exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from recstore.store import Store
from recstore.synth import generate_corpus

CASES = 300  # more than one commit group (FLUSH_CASES), so a kill lands midway

SPEC = """
name = "kill-me"
[select]
query = "status = 'completed' or status = 'failed'"
[candidate]
from_source = true
[compare]
preset = "semantic"
"""

# The same sweep through an external replayer, four commands at once (candidate.max_connections):
# cases finish out of order on threads, and the kill still loses only the cases in flight.
REPLAYER = Path(__file__).parent / "replayers" / "replayer.py"
COMMAND_SPEC = SPEC.replace("from_source = true", f"command = [{json.dumps(sys.executable)}, "
                            f"{json.dumps(str(REPLAYER))}, \"ok\"]\nmax_connections = 4")


def done_cases(db) -> int | None:
    """Cases recorded so far, or None while the sweep process holds the store."""
    try:
        with duckdb.connect(str(db), read_only=True) as con:
            return con.execute("SELECT count(*) FROM sweep_case_results").fetchone()[0]
    except duckdb.Error:
        return None


def sweep(db, spec) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "recstore", "--db", str(db), "sweep", "run", str(spec)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
@pytest.mark.parametrize("spec_text", [SPEC, COMMAND_SPEC], ids=["from-source", "command-4-at-once"])
def test_sigkill_midway_then_rerun_completes_with_each_case_replayed_once(tmp_path, spec_text):
    db = tmp_path / "kill.duckdb"
    Store(db).ingest_records(list(generate_corpus(CASES, seed=5)), source_uri="synth")
    spec = tmp_path / "kill.toml"
    spec.write_text(spec_text, encoding="utf-8")

    proc = sweep(db, spec)
    deadline = time.monotonic() + 240
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None:
        seen = done_cases(db) or seen
        if seen:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"the sweep ended before it could be killed: {proc.communicate()}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    with duckdb.connect(str(db), read_only=True) as con:
        [(status, done)] = con.execute("SELECT status, done_count FROM sweep_runs").fetchall()
        replays_before = con.execute("SELECT count(*) FROM replays").fetchone()[0]
    assert status == "unfinished" and 0 < done < CASES
    assert replays_before >= done  # every recorded case has its replay; maybe a few more

    again = sweep(db, spec)
    out, err = again.communicate(timeout=300)
    assert again.returncode in (0, 1), err
    assert "(resumed)" in out

    with duckdb.connect(str(db), read_only=True) as con:
        runs = con.execute("SELECT sweep_run_id, status, done_count, pending_count FROM sweep_runs").fetchall()
        per_source = con.execute(
            "SELECT r.source_run_key, count(*) FROM replays r JOIN lineage_log l "
            "ON l.child_run_key = r.replay_run_key AND l.relation = 'sweep_case' GROUP BY 1"
        ).fetchall()
        cases = con.execute("SELECT count(*), count(DISTINCT replay_run_key) FROM sweep_cases "
                            "WHERE status <> 'pending'").fetchone()
    assert runs == [(1, "finished", CASES, 0)]  # the same run, resumed, not a new one
    assert len(per_source) == CASES and {n for _, n in per_source} == {1}
    assert cases == (CASES, CASES)
    assert Store(db).verify().ok
