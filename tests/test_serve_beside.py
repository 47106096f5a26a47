"""Every store command from another shell beside a real `recstore serve` (docs/serve.md:
working beside the server): the real CLI in a subprocess, run from another folder, its result
checked in the store or on disk through the server."""

from __future__ import annotations

import json
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.serve_support import RECSTORE, demo_store, served

REPLAYER = Path(__file__).parent / "replayers" / "replayer.py"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = demo_store(tmp_path_factory.mktemp("beside"))
    with served(db) as (url, proc, _token):
        yield url, db, proc


def recstore(db: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`recstore --db DB ARGS` from ``cwd`` (not the server's folder)."""
    done = subprocess.run([*RECSTORE, "--db", str(db), *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    assert "busy" not in done.stderr, done.stderr
    return done


def count(url: str, sql: str) -> int:
    answer = httpx.get(url.rstrip("/") + "/api/query", params={"q": sql}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()["rows"][0][0]


def owner_only(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == 0o600


def test_compare_pair_and_bulk_write_their_reports(server, tmp_path):
    url, db, _ = server
    demo = db.parent
    for name in ("one-run.json", "one-run-candidate.json"):  # relative to the shell's folder
        (tmp_path / name).write_bytes((demo / name).read_bytes())
    files = recstore(db, "compare", "one-run.json", "one-run-candidate.json", "--json",
                     cwd=tmp_path)
    assert files.returncode == 1, files.stderr  # 1: the candidate differs (the demo's pair)
    assert json.loads(files.stdout)["equal"] is False
    keys = [r["run_key"] for r in json.loads(
        recstore(db, "runs", "--limit", "2", "--json", cwd=tmp_path).stdout)]
    stored = recstore(db, "compare", *keys, "--json", cwd=tmp_path)
    assert stored.returncode in (0, 1) and "equal" in json.loads(stored.stdout), stored.stderr
    comparisons = count(url, "SELECT count(*) FROM comparisons")
    bulk = recstore(db, "compare", "--baseline", "tag.set = 'baseline'", "--candidate",
                    "tag.set = 'candidate'", "--pair-by", "metadata.caseId", "--html",
                    "bulk.html", "-o", "pairs.csv", cwd=tmp_path)
    assert bulk.returncode == 1, bulk.stderr  # 1: the gate fails a pair, as without a server
    assert f"wrote {tmp_path / 'pairs.csv'}" in bulk.stderr
    assert len((tmp_path / "pairs.csv").read_text().splitlines()) == 1 + 16  # header, 16 pairs
    assert "<html" in (tmp_path / "bulk.html").read_text() and owner_only(tmp_path / "bulk.html")
    assert count(url, "SELECT count(*) FROM comparisons") == comparisons + 1


def test_an_output_onto_the_store_files_is_refused(server, tmp_path):
    url, db, _ = server
    for target in (f"{db}.wal", f"{db}.serve.json", str(db)):
        before = Path(target).read_bytes() if Path(target).exists() else None
        done = recstore(db, "query", "SELECT 1 AS one", "--format", "csv", "-o", target,
                        cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"recstore: error: {target}: is the ")
        assert "nothing was written" in done.stderr
        assert (Path(target).read_bytes() if Path(target).exists() else None) == before
    assert count(url, "SELECT count(*) FROM runs") > 0  # the store still answers


def test_strict_replay_of_a_few_runs_is_stored(server, tmp_path):
    url, db, _ = server
    picked = ("tag.set = 'baseline' and metadata.caseId in "
              "('case-00001', 'case-00002', 'case-00003')")
    replays = count(url, "SELECT count(*) FROM replays")
    done = recstore(db, "replay", "--select", picked, "--from-source", "--mode", "strict",
                    "--provider", "recorded", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    reports = json.loads(done.stdout)
    assert len(reports) == 3 and {r["mode"] for r in reports} == {"strict"}
    assert count(url, "SELECT count(*) FROM replays") == replays + 3
    assert count(url, "SELECT count(*) FROM lineage WHERE relation = 'replay_of'") >= 3


def test_sweep_run_status_and_report(server, tmp_path):
    url, db, _ = server
    runs = count(url, "SELECT count(*) FROM sweep_runs")
    done = recstore(db, "sweep", "run", str(db.parent / "sweep.toml"), "--rerun", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr  # 1: the gate failed a case, as in the demo
    assert "16 cases" in done.stdout
    assert count(url, "SELECT count(*) FROM sweep_runs") == runs + 1
    status = recstore(db, "sweep", "status", "demo-finance-schema", "--json", cwd=tmp_path)
    assert status.returncode == 0 and len(json.loads(status.stdout)) == runs + 1
    report = recstore(db, "sweep", "report", "demo-finance-schema", "-o", "reports",
                      cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert sorted(p.suffix for p in (tmp_path / "reports").iterdir()) == [".html", ".json"]


def test_tag_and_export(server, tmp_path):
    url, db, _ = server
    done = recstore(db, "tag", "tag.set = 'candidate'", "reviewed=beside", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert count(url, "SELECT count(*) FROM runs WHERE tags->>'reviewed' = 'beside'") == 16
    export = recstore(db, "export", "views", "--json", cwd=tmp_path)
    assert export.returncode == 0, export.stderr
    manifest = json.loads((tmp_path / "views" / "recstore-export.json").read_text())
    assert manifest["rows"]["runs"] == count(url, "SELECT count(*) FROM runs")
    otlp = recstore(db, "export", "--otlp", "traces", "tag.reviewed = 'beside'", cwd=tmp_path)
    assert otlp.returncode == 0, otlp.stderr
    assert len(list((tmp_path / "traces").glob("*.otlp.json"))) == 16
    verify = recstore(db, "verify", cwd=tmp_path)
    assert verify.returncode == 0 and verify.stdout.startswith("verify ok"), verify.stderr


@pytest.mark.parametrize(("args", "says"), [
    (["sweep", "schedule", "sweep.toml"], "`sweep schedule` runs until stopped"),
    (["ingest", "--watch", "."], "`ingest --watch` runs until stopped"),
    (["serve"], "it is served already"),
])
def test_what_cannot_be_sent_says_what_to_do_instead(server, tmp_path, args, says):
    url, db, _ = server
    done = recstore(db, *args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"recstore: error: {db} is served by {url}: ")
    assert done.stderr.count("\n") == 1  # one line
    assert says in done.stderr and "Traceback" not in done.stderr


def test_a_query_answers_while_a_slow_replay_runs(server, tmp_path):
    """The replay's external replayer waits for a file the test writes only after the query
    has answered, so the query cannot have waited for the replay to end."""
    url, db, _ = server
    key = json.loads(recstore(db, "runs", "--limit", "1", "--json", cwd=tmp_path).stdout)[0]
    replayer = shlex.join([sys.executable, str(REPLAYER), "wait", str(tmp_path)])
    slow = subprocess.Popen([*RECSTORE, "--db", str(db), "replay", key["run_key"], "--command",
                             replayer, "--json"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists():
            assert slow.poll() is None, slow.communicate()
            assert time.monotonic() < deadline, "the replayer never started"
            time.sleep(0.1)
        query = recstore(db, "query", "SELECT count(*) AS n FROM runs", "--format", "csv",
                         cwd=tmp_path)
        assert query.returncode == 0 and query.stdout.splitlines()[0] == "n", query.stderr
        assert slow.poll() is None  # the replay is still waiting for its go
    finally:
        (tmp_path / "go").touch()
    out, err = slow.communicate(timeout=300)
    assert slow.returncode == 0, err
    replay = json.loads(out)  # one run: one report
    assert replay["status"] == "completed" and replay["sourceRunKey"] == key["run_key"]
    assert count(url, "SELECT count(*) FROM runs WHERE run_key = "
                      f"'{replay['replayRunKey']}'") == 1


def test_only_the_store_owners_shells_can_have_commands_run(server, tmp_path):
    """The server reads and writes files for a command as its user, so /api/cli needs the key
    in the owner-only server file, on loopback too (another local user cannot read it)."""
    url, db, _ = server
    serve_file = db.with_name(db.name + ".serve.json")
    key = json.loads(serve_file.read_text())["cli_key"]
    assert len(key) >= 24 and owner_only(serve_file)
    out = tmp_path / "x.csv"
    body = {"command": "query", "args": ["SELECT 1 AS one", "--format", "csv", "-o", str(out)]}
    for headers in ({}, {"x-recstore-cli-key": "guess"}, {"x-recstore-cli-key": key[:-1]}):
        answer = httpx.post(url.rstrip("/") + "/api/cli", json=body, headers=headers,
                            timeout=60)
        assert answer.status_code == 403 and "owner-only" in answer.json()["error"]
    assert not out.exists()
    answer = httpx.post(url.rstrip("/") + "/api/cli", json=body,
                        headers={"x-recstore-cli-key": key}, timeout=60)
    assert answer.status_code == 200 and answer.json()["exit_code"] == 0, answer.text
    assert out.read_text().splitlines() == ["one", "1"] and owner_only(out)
