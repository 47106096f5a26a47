"""Misbehaving external replayers (tests/hostile/replayers/, one per file) and judges: each ends
as a stored failed replay (or a judge error) with its reason — never a traceback, never a new
revision of the source run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recstore.store import Store
from recstore.sweep.runner import run_sweep
from recstore.sweep.spec import parse_spec
from recstore.synth import generate_corpus

from .conftest import AIOC_FIXTURES
from .hostile_cases import HOSTILE_DIR, hostile_files
from .query_support import REPO_ROOT, run_cli

REPLAYER = Path(__file__).parent / "replayers" / "replayer.py"


def _marked(marker: str) -> list[Path]:
    """The hostile replayers whose ``# MARKER: TEXT`` line says what their outcome must be."""
    return [p for p in hostile_files("replayers")
            if p.suffix != ".md" and re.search(rf"^# {marker}: ", p.read_text(), re.MULTILINE)]


def _mark(path: Path, marker: str) -> str:
    return re.search(rf"^# {marker}: (.+)$", path.read_text(), re.MULTILINE).group(1)


FAILING = _marked("expect")  # a stored failed replay whose error names the TEXT
OWN_RUN = _marked("own-run")  # a replay claiming the stored run TEXT's id: a run of its own
REPLAYS = _marked("replay-status")  # a stored replay with that report status


def test_every_hostile_replayer_says_what_it_must_end_as():
    cases = [p for p in hostile_files("replayers") if p.suffix != ".md"]
    assert sorted(FAILING + OWN_RUN + REPLAYS) == cases


def _alive(text: str) -> list[str]:
    """Command lines of the live processes holding ``text`` (zombies are not alive)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline}")
    return found


def _run(replayer: Path, db: Path) -> subprocess.CompletedProcess:
    """The replay command, then: nothing the replayer marked as left running is alive."""
    done = run_cli("replay", "simple-run", "--command", str(replayer), "--command-timeout", "5",
                   "--json", db=db)
    marker = re.search(r"^# leaves-running: (.+)$", replayer.read_text(), re.MULTILINE)
    if marker:
        assert _alive(marker.group(1)) == []
    assert "Traceback" not in done.stderr and done.stderr == "", done.stderr
    return done


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(tmp_path_factory.mktemp("hostile-replayers") / "s.duckdb")
    store.ingest([str(AIOC_FIXTURES / "simple-run.json"), str(AIOC_FIXTURES / "tool-allow.json")])
    return store


def _source_state(store: Store) -> tuple:
    with store.reader() as con:
        return con.execute("SELECT revision, record_hash, replay_of_run_id FROM runs "
                           "WHERE run_key = 'aioc:simple-run'").fetchone()


@pytest.mark.parametrize("replayer", FAILING, ids=lambda p: p.name)
def test_a_misbehaving_replayer_is_a_stored_failed_replay(store, replayer):
    source = _source_state(store)
    done = _run(replayer, store.path)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "error" and report["replayRunKey"] != "aioc:simple-run"
    stored = store.get_record(report["replayRunKey"])
    assert stored["status"] == "failed"
    assert _mark(replayer, "expect") in stored["errorMessage"], stored["errorMessage"]
    assert stored["metadata"]["replayOfRunId"] == "simple-run"
    assert _source_state(store) == source == (1, source[1], None)


@pytest.mark.parametrize("replayer", REPLAYS, ids=lambda p: p.name)
def test_a_replayer_that_leaves_processes_behind_is_still_a_stored_replay(store, replayer):
    source = _source_state(store)
    done = _run(replayer, store.path)
    report = json.loads(done.stdout)
    assert report["status"] == _mark(replayer, "replay-status"), report
    assert done.returncode == (0 if report["status"] == "completed" else 1)
    assert store.get_record(report["replayRunKey"])["metadata"]["replayOfRunId"] == "simple-run"
    assert _source_state(store) == source


@pytest.mark.parametrize("replayer", ["huge-stdout.sh", "huge-stderr.sh"])
def test_a_huge_output_is_read_in_bounded_memory(store, tmp_path, replayer):
    """300 MB on stdout (stopped past the 64 MiB limit) or on stderr (only its tail kept): the
    command's memory stays near the limit (it once held the whole output, several times over:
    1 GB for 300 MB)."""
    command = [sys.executable, "-m", "recstore", "--db", str(store.path), "replay", "simple-run",
               "--command", str(HOSTILE_DIR / "replayers" / replayer), "--json"]
    with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
        proc = subprocess.Popen(command, stdout=out, stderr=err, cwd=REPO_ROOT)
        _, status, usage = os.wait4(proc.pid, 0)  # the rusage of this command alone
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 1 and (tmp_path / "err").read_bytes() == b""
    report = json.loads((tmp_path / "out").read_bytes())
    done = run_cli("query", "SELECT report_status, reason FROM replays WHERE replay_run_key = "
                   f"'{report['replayRunKey']}'", "--format", "json", db=store.path)
    [row] = json.loads(done.stdout)
    assert row["report_status"] == "error" and _mark(HOSTILE_DIR / "replayers" / replayer,
                                                     "expect") in row["reason"], row
    if replayer == "huge-stderr.sh":  # the tail, where the error is
        assert row["reason"].endswith("eee the agent crashed"), row["reason"][-100:]
    assert usage.ru_maxrss * 1024 < 640 * 2**20, usage.ru_maxrss  # Linux: kilobytes
    assert _alive("head -c 300000000") == []


def _stored_runs(db: Path) -> list:
    done = run_cli("query", "SELECT run_key, revision, record_hash FROM runs "
                   "WHERE replay_of_run_id IS NULL ORDER BY run_key", "--format", "json", db=db)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("replayer", OWN_RUN, ids=lambda p: p.name)
def test_a_replay_claiming_a_stored_runs_id_is_a_run_of_its_own(store, replayer):
    claimed = _mark(replayer, "own-run")
    before = _stored_runs(store.path)
    keys = set()
    for _ in range(2):  # and again: the same replay, recognised as such
        done = _run(replayer, store.path)
        assert done.returncode in (0, 1), done.stderr
        report = json.loads(done.stdout)
        assert report["status"] != "error", report
        key = report["replayRunKey"]
        assert key not in ("aioc:simple-run", "aioc:tool-allow")
        assert key == f"aioc:{report['replayRunId']}"
        keys.add(key)
    assert len(keys) == 1
    assert _stored_runs(store.path) == before  # no stored run got a revision
    done = run_cli("query", "SELECT r.source_run_key, r.replay_revision, "
                   "l.detail->>'$.claimedRunId' AS claimed, "
                   "json_extract_string(e.payload, '$.fields.metadata.replayClaimedRunId') AS kept "
                   "FROM replays r JOIN lineage l ON l.child_run_key = r.replay_run_key "
                   "AND l.relation = 'replay_of' JOIN events e ON e.stream_key = r.replay_run_key "
                   "AND e.type = 'run_started' WHERE r.replay_run_key = ?".replace("?", f"'{key}'"),
                   "--format", "json", db=store.path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"source_run_key": "aioc:simple-run", "replay_revision": 1,
                                        "claimed": claimed, "kept": claimed}]


def test_a_deterministic_replayer_run_twice_reports_the_same_replay(store):
    command = f"{sys.executable} {REPLAYER} ok"
    first, second = (run_cli("replay", "simple-run", "--command", command, "--json",
                             db=store.path) for _ in range(2))
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert json.loads(first.stdout)["replayRunKey"] == json.loads(second.stdout)["replayRunKey"]


JUDGES = {
    "non-UTF-8 output": ("import sys; sys.stdin.read(); sys.stdout.buffer.write(b'\\xff ok')",
                         "output is not UTF-8 (byte 0xff at offset 0)"),
    "non-UTF-8 stderr": ("import sys; sys.stdin.read(); sys.stderr.buffer.write(b'\\xfe');"
                         " sys.exit(4)", "exited with 4"),
}


@pytest.mark.parametrize("name", sorted(JUDGES))
def test_a_misbehaving_judge_is_a_judge_error_and_the_sweep_goes_on(tmp_path, name):
    code, expected = JUDGES[name]
    store = Store(tmp_path / "s.duckdb")
    store.ingest_records(list(generate_corpus(3, seed=4)), source_uri="synth")
    spec = parse_spec({"name": "judged", "select": {"query": "status = 'completed' or "
                                                             "status = 'failed'"},
                       "candidate": {"from_source": True}, "workers": 2,
                       "judge": {"command": [sys.executable, "-c", code]}}, source="test")
    for rerun in (False, True):  # and again: a rerun must not crash either
        result = run_sweep(store, spec, rerun=rerun)
        assert result.processed == result.case_count == 3
    with store.reader() as con:
        errors = con.execute("SELECT error FROM sweep_cases WHERE sweep_run_id = ?",
                             [result.sweep_run_id]).fetchall()
    assert len(errors) == 3 and all(expected in error for (error,) in errors), errors
