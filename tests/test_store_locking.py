"""Who waits for whom: every store command takes --lock-timeout (env RECSTORE_LOCK_TIMEOUT), a
command that only reads says at once that the store is busy and who has it, and a sweep run
waits for an ingest that takes the store halfway through the run instead of dying."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recstore.store import Store
from recstore.synth import generate_corpus

from .conftest import AIOC_FIXTURES, REPO_ROOT

REPLAYER = Path(__file__).parent / "replayers" / "replayer.py"

# Every command that opens the store, with arguments that reach the store ({dir} is scratch),
# and whether it only reads (fails at once by default) or writes (waits 30 s by default).
STORE_COMMANDS = [
    ("read", ["rejects"]),
    ("read", ["show", "simple-run"]),
    ("read", ["runs"]),
    ("read", ["verify"]),
    ("read", ["query", "FROM runs"]),
    ("read", ["schema"]),
    ("read", ["export", "{dir}/export"]),
    ("read", ["lineage", "simple-run"]),
    ("read", ["sweep", "status"]),
    ("read", ["sweep", "report", "1", "--output", "{dir}/report"]),
    ("write", ["ingest", str(AIOC_FIXTURES / "tool-allow.json")]),
    ("write", ["rebuild"]),
    ("write", ["replay", "simple-run", "--from-source"]),
    ("write", ["compare", "aioc:simple-run", "aioc:simple-run"]),
    ("write", ["compare", "--baseline", "status = 'completed'", "--candidate",
               "status = 'failed'"]),
    ("sweep", ["sweep", "run", "{dir}/spec.toml"]),
]


def recstore(db: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("locking") / "s.duckdb"
    Store(path).ingest([str(AIOC_FIXTURES / "simple-run.json")])
    return path


def _args(args: list[str], scratch: Path) -> list[str]:
    (scratch / "spec.toml").write_text('name = "s"\n[select]\nquery = "status = \'completed\'"\n'
                                       '[candidate]\nfrom_source = true\n')
    return [a.replace("{dir}", str(scratch)) for a in args]


@pytest.mark.parametrize(("kind", "args"), STORE_COMMANDS, ids=lambda v: " ".join(v)[:30]
                         if isinstance(v, list) else v)
def test_a_busy_store_is_one_line_naming_the_holder(db, tmp_path, kind, args):
    args = _args(args, tmp_path)
    assert "--lock-timeout" in recstore(db, *args[:2], "--help").stdout or \
        "--lock-timeout" in recstore(db, args[0], "--help").stdout
    extra = [] if kind == "read" else ["--lock-timeout", "0.2"]
    with Store(db).writer():
        done = recstore(db, *args, *extra)
    assert done.returncode == 2, done.stdout + done.stderr
    *notices, error = done.stderr.splitlines()  # a sweep says it waits before it gives up
    assert all("waiting for the store" in line for line in notices) and len(notices) <= 1
    assert error.startswith("recstore: error: ") and "Traceback" not in done.stderr
    assert f"the store is busy: process {os.getpid()} (" in done.stderr
    if kind == "read":  # the default for reading: no wait, and says how to wait
        assert "retry when it is done, or wait for it with --lock-timeout" in done.stderr
    else:
        assert "waited 0.2s" in done.stderr


def test_the_environment_sets_the_lock_timeout(db):
    with Store(db).writer():
        done = recstore(db, "runs", env={"RECSTORE_LOCK_TIMEOUT": "0.3"})
    assert done.returncode == 2 and "waited 0.3s" in done.stderr
    bad = recstore(db, "runs", env={"RECSTORE_LOCK_TIMEOUT": "soon"})
    assert bad.returncode == 2 and "RECSTORE_LOCK_TIMEOUT" in bad.stderr


def _wait_for(path: Path, proc: subprocess.Popen) -> None:
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)


def _stderr_line(proc: subprocess.Popen, hang_guard: float = 120.0) -> str:
    ready, _, _ = select.select([proc.stderr], [], [], hang_guard)
    assert ready, "the sweep printed nothing"
    return proc.stderr.readline()


def test_a_sweep_waits_for_an_ingest_that_takes_the_store_mid_run(tmp_path):
    db = tmp_path / "s.duckdb"
    store = Store(db)
    store.ingest_records(list(generate_corpus(3, seed=5)), source_uri="synth")
    gate = tmp_path / "gate"
    gate.mkdir()
    spec = tmp_path / "spec.toml"
    command = json.dumps([sys.executable, str(REPLAYER), "wait", str(gate)])
    spec.write_text('name = "mid-run"\n[select]\nquery = "status = \'completed\' or status = '
                    f'\'failed\'"\nlimit = 1\n[candidate]\ncommand = {command}\n')
    proc = subprocess.Popen([sys.executable, "-m", "recstore", "--db", str(db), "sweep", "run",
                             str(spec), "--json"], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(gate / "started", proc)  # the run is open and its case is being replayed
        with store.writer():  # an "ingest" takes the store
            (gate / "go").touch()  # the replay ends; the sweep now needs to write it
            line = _stderr_line(proc)
            assert f"waiting for the store, which process {os.getpid()} (" in line, line
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode in (0, 1), err
    summary = json.loads(out)
    assert summary["case_count"] == summary["processed"] == 1
    with store.reader() as con:
        assert con.execute("SELECT count(*) FROM sweep_case_results").fetchone()[0] == 1
