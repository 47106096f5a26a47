"""The store through the real CLI in subprocesses: bad input, SIGKILL mid-batch, two concurrent
writers, the lock timeout, file permissions and schema versions."""

from __future__ import annotations

import gzip
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from recstore.errors import RecstoreError
from recstore.store import Store
from recstore.synth import generate_corpus

from .conftest import AIOC_FIXTURES, CORPUS_DEV


def recstore(db: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recstore", "--db", str(db), *args],
        input=stdin,
        capture_output=True,
        timeout=600,
    )


def _corpus_lines(n: int) -> list[bytes]:
    with gzip.open(CORPUS_DEV / "corpus-baseline.ndjson.gz", "rb") as fh:
        return [line for _, line in zip(range(n), fh, strict=False)]


def _count(db: Path, sql: str):
    with Store(db).reader() as con:
        return con.execute(sql).fetchone()[0]


def test_mixed_good_and_bad_input(tmp_path):
    good = _corpus_lines(3)
    missing_field = dict(json.loads(good[0]), runId="missing-items")
    del missing_field["items"]
    wrong_type = dict(json.loads(good[0]), runId="wrong-type", status=42)
    lines = [
        good[0],
        b'{"runId": "x", "items": [\n',  # bad JSON
        good[1],
        b'{"runId": "nan", "value": NaN}\n',  # NaN literal
        b"[1, 2, 3]\n",  # not an object
        json.dumps(wrong_type).encode() + b"\n",  # wrong types
        json.dumps(missing_field).encode() + b"\n",  # missing required field
        b'{"runId": "\xff\xfe"}\n',  # invalid UTF-8
        good[2],
        good[0][: len(good[0]) // 2],  # truncated last line (no newline)
    ]
    path = tmp_path / "mixed.ndjson"
    path.write_bytes(b"".join(lines))
    db = tmp_path / "s.duckdb"
    proc = recstore(db, "ingest", str(path))
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert "accepted 3, duplicate 0, revised 0, rejected 7" in proc.stdout.decode()
    rejects = json.loads(recstore(db, "rejects", "--json").stdout)
    by_line = {r["line"]: r for r in rejects}
    assert set(by_line) == {2, 4, 5, 6, 7, 8, 10}
    assert "invalid JSON" in by_line[2]["reason"]
    assert "NaN" in by_line[4]["reason"]
    assert "not a JSON object" in by_line[5]["reason"]
    assert by_line[6]["path"] == "$.status"
    assert by_line[7]["path"] == "$.items" and "missing" in by_line[7]["reason"]
    assert "invalid UTF-8" in by_line[8]["reason"]
    assert "truncated last line" in by_line[10]["reason"]
    assert by_line[2]["raw_text"] == '{"runId": "x", "items": ['
    with Store(db).reader() as con:
        assert con.execute("SELECT raw_bytes FROM rejects WHERE line = 8").fetchone()[0] == (
            b'{"runId": "\xff\xfe"}\n'
        )
        source = con.execute(
            "SELECT status, record_count, rejected, sha256 FROM sources"
        ).fetchone()
    assert source[:3] == ("partial", 10, 7) and len(source[3]) == 64
    assert _count(db, "SELECT count(*) FROM runs") == 3
    for line in good:
        run_id = json.loads(line)["runId"]
        shown = recstore(db, "show", run_id, "--json")
        assert shown.returncode == 0
        assert json.loads(shown.stdout) == json.loads(line)


def test_stdin_gzip_glob_and_directory_inputs(tmp_path):
    lines = _corpus_lines(4)
    (tmp_path / "in" / "sub").mkdir(parents=True)
    (tmp_path / "in" / "a.json").write_bytes(lines[0])
    with gzip.open(tmp_path / "in" / "sub" / "b.jsonl.gz", "wb") as fh:
        fh.write(lines[1])
    db = tmp_path / "s.duckdb"
    assert recstore(db, "ingest", str(tmp_path / "in")).returncode == 0
    assert recstore(db, "ingest", "-", stdin=lines[2]).returncode == 0
    (tmp_path / "c.ndjson").write_bytes(lines[3])
    proc = recstore(db, "ingest", str(tmp_path / "*.ndjson"), "--json", "--tag", "k=v")
    assert json.loads(proc.stdout)["accepted"] == 1
    assert _count(db, "SELECT count(*) FROM runs") == 4
    assert _count(db, "SELECT count(*) FROM sources WHERE uri = 'stdin'") == 1
    assert _count(db, "SELECT tags->>'$.k' FROM batches ORDER BY batch_id DESC LIMIT 1") == "v"
    missing = recstore(db, "ingest", str(tmp_path / "nope.json"))
    assert missing.returncode == 2
    assert missing.stderr.decode().strip() == (
        f"recstore: error: {tmp_path / 'nope.json'}: no such file or directory"
    )


def _big_corpus(path: Path, n: int) -> None:
    with open(path, "wb") as fh:
        for record in generate_corpus(n, seed=3):
            fh.write(json.dumps(record).encode() + b"\n")


def test_sigkill_mid_batch_leaves_whole_batches_only(tmp_path):
    data = tmp_path / "big.ndjson"
    _big_corpus(data, 3000)
    db = tmp_path / "s.duckdb"
    cmd = [sys.executable, "-m", "recstore", "--db", str(db), "ingest", str(data)]
    proc = subprocess.Popen([*cmd, "--batch-size", "250"], stderr=subprocess.PIPE)
    # kill once at least one batch committed but before the ingest could finish
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        wal = Path(f"{db}.wal")
        if db.exists() and wal.exists() and wal.stat().st_size > 500_000:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "ingest finished before it could be killed"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL

    with Store(db).reader() as con:
        batches = con.execute("SELECT batch_id, accepted FROM batches ORDER BY 1").fetchall()
        runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        streams = con.execute("SELECT count(*) FROM streams").fetchone()[0]
    assert runs == streams == sum(accepted for _, accepted in batches)
    assert all(accepted == 250 for _, accepted in batches)  # only whole batches survived
    assert runs < 3000
    verify = recstore(db, "verify")
    assert verify.returncode == 0, verify.stderr

    again = recstore(db, "ingest", str(data), "--json")
    assert again.returncode == 0
    summary = json.loads(again.stdout)
    assert summary["accepted"] == 3000 - runs and summary["duplicate"] == runs
    assert _count(db, "SELECT count(*) FROM runs") == 3000
    assert recstore(db, "verify").returncode == 0


def test_two_concurrent_writers_both_store_everything(tmp_path):
    records = list(generate_corpus(600, seed=11))
    halves = [tmp_path / "a.ndjson", tmp_path / "b.ndjson"]
    for path, part in zip(halves, (records[:300], records[300:]), strict=True):
        path.write_text("".join(json.dumps(r) + "\n" for r in part))
    db = tmp_path / "s.duckdb"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "recstore",
                "--db",
                str(db),
                "ingest",
                str(p),
                "--batch-size",
                "50",
                "--lock-timeout",
                "300",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for p in halves
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err.decode()
        assert b"accepted 300" in out
    assert _count(db, "SELECT count(*) FROM runs") == 600
    assert recstore(db, "verify").returncode == 0


def test_lock_timeout_names_the_holder(tmp_path):
    db = tmp_path / "s.duckdb"
    store = Store(db)
    with store.writer():
        proc = recstore(
            db, "ingest", str(AIOC_FIXTURES / "simple-run.json"), "--lock-timeout", "0.5"
        )
    err = proc.stderr.decode()
    assert proc.returncode == 2
    assert f"the store is busy: process {os.getpid()} (" in err and "Traceback" not in err
    # once the writer is gone the same command works, and readers work in between
    assert recstore(db, "ingest", str(AIOC_FIXTURES / "simple-run.json")).returncode == 0
    assert recstore(db, "runs").returncode == 0


def test_store_files_are_owner_only(tmp_path):
    db = tmp_path / "s.duckdb"
    store = Store(db)
    with store.writer() as con:
        con.execute("CHECKPOINT")
        con.execute("INSERT INTO meta VALUES ('probe', 'x')")
        wal = Path(f"{db}.wal")
        if wal.exists():
            assert stat.S_IMODE(wal.stat().st_mode) == 0o600
    assert stat.S_IMODE(db.stat().st_mode) == 0o600


def test_newer_store_is_refused_and_older_store_upgrades(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).ingest([str(AIOC_FIXTURES / "simple-run.json")])
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(RecstoreError, match="newer than this recstore supports"):
        Store(db).get_record("simple-run")
    proc = recstore(db, "runs")
    assert proc.returncode == 2 and b"newer than this recstore" in proc.stderr

    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))
    con.execute((Path(__file__).parent.parent / "schema" / "001_log.sql").read_text())
    con.execute("INSERT INTO schema_migrations VALUES (1, '001_log.sql', now())")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.close()
    store = Store(old)
    assert store.ingest([str(AIOC_FIXTURES / "simple-run.json")]).accepted == 1
    with store.reader() as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
        applied = con.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
    assert applied >= 2


def test_verify_catches_tampering(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).ingest(
        [str(AIOC_FIXTURES / "handoff-allow.json"), str(AIOC_FIXTURES / "tool-allow.json")]
    )
    assert recstore(db, "verify").returncode == 0
    con = duckdb.connect(str(db))
    con.execute("UPDATE proj_visits SET agent = 'Mallory' WHERE visit_index = 1")
    con.close()
    proc = recstore(db, "verify")
    assert proc.returncode == 1 and b"projection visits" in proc.stderr
    assert recstore(db, "rebuild").returncode == 0
    assert recstore(db, "verify").returncode == 0
    con = duckdb.connect(str(db))
    con.execute(
        "UPDATE events SET payload = replace(payload, 'Finance', 'Fraud') "
        "WHERE type = 'item_appended' AND stream_key = 'aioc:handoff-allow'"
    )
    con.close()
    proc = recstore(db, "verify", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and not report["ok"]
    assert any("hash does not match" in p for p in report["problems"])


def test_show_prints_the_revision_asked_for(tmp_path):
    """`show` reads the record and its runs row in one connection (issue 27.1): the current
    revision shows its own question and status line, an older one its own question."""
    db = tmp_path / "s.duckdb"
    first = json.loads(_corpus_lines(1)[0])
    second = {**first, "question": "what changed since the first revision?"}
    for n, record in enumerate((first, second)):
        path = tmp_path / f"r{n}.json"
        path.write_text(json.dumps(record), encoding="utf-8")
        assert recstore(db, "ingest", str(path)).returncode == 0
    current = recstore(db, "show", first["runId"], "--no-pager").stdout.decode()
    older = recstore(db, "show", first["runId"], "--revision", "1", "--no-pager").stdout.decode()
    assert "what changed since the first revision?" in current
    assert "what changed since the first revision?" not in older
    assert older and current != older
