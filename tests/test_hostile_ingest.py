"""Poison inputs through the real CLI (tests/hostile/poison-lines.txt, a corrupt gzip made at
test time): each is one reject naming what is wrong, everything valid around it and in later
inputs is stored, ingest exits 1 without a traceback, and a retry changes nothing."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import CORPUS_DEV, run_cli
from .hostile_cases import hostile_lines

_CASES = [tuple(line.split("\t", 1)) for line in hostile_lines("poison-lines.txt")]


def _good(n: int) -> list[str]:
    with gzip.open(CORPUS_DEV / "corpus-baseline.ndjson.gz", "rt", encoding="utf-8") as fh:
        return [line.strip() for _, line in zip(range(n), fh, strict=False)]


def _ingest(db: Path, *paths: Path) -> tuple[int, dict, str]:
    done = run_cli(db, "ingest", "--json", *map(str, paths))
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout), done.stderr


def _stored(db: Path) -> int:
    done = run_cli(db, "query", "SELECT count(*) AS n FROM runs", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)[0]["n"]


@pytest.mark.parametrize(("word", "line"), _CASES, ids=[c[1][:30] for c in _CASES])
def test_a_poison_line_is_one_reject_and_the_rest_is_stored(tmp_path, word, line):
    good = _good(3)
    poisoned = tmp_path / "poisoned.ndjson"
    poisoned.write_text("\n".join([good[0], line, good[1]]) + "\n", encoding="utf-8")
    later = tmp_path / "later.ndjson"
    later.write_text(good[2] + "\n", encoding="utf-8")
    db = tmp_path / "s.duckdb"
    code, summary, _ = _ingest(db, poisoned, later)
    assert code == 1
    assert (summary["accepted"], summary["rejected"]) == (3, 1)
    assert word in summary["rejects"][0]["reason"] and summary["rejects"][0]["line"] == 2
    assert _stored(db) == 3
    code, again, _ = _ingest(db, poisoned, later)  # a retry: same answer, nothing added
    assert code == 1 and (again["accepted"], again["duplicate"]) == (0, 3)
    assert _stored(db) == 3


def test_a_corrupt_deflate_block_is_a_reject_and_later_inputs_are_stored(tmp_path):
    good = _good(2)
    data = bytearray(gzip.compress((good[0] + "\n").encode("utf-8")))
    data[10] |= 0b110  # the first deflate block's type bits: 3 is no valid block type
    corrupt = tmp_path / "corrupt.ndjson.gz"
    corrupt.write_bytes(bytes(data))
    later = tmp_path / "later.ndjson"
    later.write_text(good[1] + "\n", encoding="utf-8")
    db = tmp_path / "s.duckdb"
    code, summary, _ = _ingest(db, corrupt, later)
    assert code == 1 and (summary["accepted"], summary["rejected"]) == (1, 1)
    assert "corrupt gzip data" in summary["rejects"][0]["reason"]
    assert _stored(db) == 1
    assert _ingest(db, corrupt, later)[0] == 1 and _stored(db) == 1


@pytest.mark.parametrize(("target", "reason"), [
    ("self.json", "a symbolic link loop"),
    ("gone.json", "a symbolic link whose target does not exist"),
])
def test_a_broken_link_named_on_the_command_line_says_what_is_wrong(tmp_path, target, reason):
    (tmp_path / "self.json").symlink_to(tmp_path / target)
    done = run_cli(tmp_path / "s.duckdb", "ingest", str(tmp_path / "self.json"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"recstore: error: {tmp_path / 'self.json'}: {reason}"


@pytest.mark.parametrize("started", ["10000-01-01T00:00:00Z", "0000-01-01T00:00:00Z"])
@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_a_time_python_cannot_hold_is_stored_and_printed(tmp_path, started, fmt):
    record = dict(json.loads(_good(1)[0]), startedAt=started)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    db = tmp_path / "s.duckdb"
    assert _ingest(db, path)[0] == 0
    done = run_cli(db, "query", "SELECT run_key, started, started_text FROM runs", "--format", fmt)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert started.replace("T", " ").rstrip("Z") in done.stdout and started in done.stdout


# root enters every folder unless it gives up the capabilities that let it (as test_store_log)
_AS_A_USER = (["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps",
               "-all"] if os.geteuid() == 0 else [])


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("setpriv"),
                    reason="root enters every folder and setpriv is missing")
def test_a_folder_it_cannot_enter_is_a_reject_and_the_file_beside_it_is_stored(tmp_path):
    folder = tmp_path / "in"
    (folder / "locked").mkdir(parents=True)
    good = _good(2)
    (folder / "good.json").write_text(good[0], encoding="utf-8")
    (folder / "locked" / "hidden.json").write_text(good[1], encoding="utf-8")
    (folder / "locked").chmod(0)
    db = tmp_path / "s.duckdb"
    try:
        done = subprocess.run(
            [*_AS_A_USER, sys.executable, "-m", "recstore", "--db", str(db), "ingest", "--json",
             str(folder)], capture_output=True, text=True, timeout=300)
    finally:
        (folder / "locked").chmod(0o755)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["accepted"], summary["rejected"]) == (1, 1)
    assert summary["rejects"][0]["source"].endswith("locked")
    assert "Permission denied" in summary["rejects"][0]["reason"]
    assert _stored(db) == 1
