"""Poison inputs through the real CLI (tests/hostile/poison-lines.txt, a corrupt gzip made at
test time): each is one reject naming what is wrong, everything valid around it and in later
inputs is stored, ingest exits 1 without a traceback, and a retry changes nothing."""

from __future__ import annotations

import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recstore.errors import InputError
from recstore.formats.reader import iter_sources

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


_LINK_CASES = [tuple(f.strip() for f in line.split("|")) for line in hostile_lines("glob-links.txt")]


def _lay_out(folder: Path, layout: str) -> None:
    """Make ``layout`` (tests/hostile/glob-links.txt) in ``folder``: files first, then links."""
    entries = [e.strip() for e in layout.split(",")]
    files = [e for e in entries if "->" not in e]
    for entry, line in zip(files, _good(len(files)), strict=True):
        (folder / entry).parent.mkdir(parents=True, exist_ok=True)
        (folder / entry).write_text(line, encoding="utf-8")
    for entry in entries:
        if "->" in entry:
            link, target = (part.strip() for part in entry.split("->"))
            (folder / link).parent.mkdir(parents=True, exist_ok=True)
            (folder / link).symlink_to(target)


@pytest.mark.parametrize(("exit_code", "layout", "argument", "read"), _LINK_CASES,
                         ids=[f"{c[2]} over {c[1]}" for c in _LINK_CASES])
def test_a_glob_or_directory_never_follows_a_folder_link_and_reads_each_file_once(
        tmp_path, exit_code, layout, argument, read):
    tree = tmp_path / "tree"
    tree.mkdir()
    _lay_out(tree, layout)
    db = tmp_path / "s.duckdb"
    try:  # a walk that follows `.` links never ends: the timeout turns that into a failure
        done = run_cli(db, "ingest", "--json", argument, cwd=tree, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ingest {argument} over {layout} did not finish")
    assert done.returncode == int(exit_code) and "Traceback" not in done.stderr, done.stderr
    expected = [] if read == "-" else [e.strip() for e in read.split(",")]
    stored = {str((tree / e).resolve()) for e in expected if "!" not in e}
    rejected = {(str(tree / path), reason) for path, reason in
                (e.split("!") for e in expected if "!" in e)}
    if done.returncode == 2:
        assert len(done.stderr.strip().splitlines()) == 1 and argument in done.stderr
        assert not stored and not rejected
        return
    summary = json.loads(done.stdout)
    assert (summary["accepted"], summary["duplicate"], summary["sources"]) == (
        len(stored), 0, len(stored) + len(rejected))
    assert {(r["source"], r["reason"].removeprefix("skipped: ")) for r in summary["rejects"]} \
        == rejected
    sources = run_cli(db, "query", "SELECT uri FROM sources WHERE accepted > 0", "--format",
                      "json")
    assert {row["uri"] for row in json.loads(sources.stdout)} == stored


_TREE = ("a.json, .h.json, b/c.jsonl, b/.d/e.json, b/f/g.ndjson.gz, b/f/h.txt, .i/j.json, "
         "k/l/m/n.json, ab/o.json")


@pytest.mark.parametrize("pattern", [
    "T/**/*.json", "T/*/*.json", "T/**", "T/**/.*", "T/.*/*.json", "T/.*", "T/a*/**/*.json",
    "T/[ab]*/*", "T/**/m/*.json", "T/**/**/*.json*", "T/?/*", "**/*.json", "T/*/", "./T/k/**/*",
    "T/b/../ab/*.json"])
def test_without_links_a_glob_matches_what_pythons_glob_matches(tmp_path, monkeypatch, pattern):
    # the glob is walked by recstore's own matcher (so links are never followed): same answer as
    # Python's glob on a tree without links, hidden names and `**` included, each file once
    _lay_out(tmp_path / "T", _TREE)
    monkeypatch.chdir(tmp_path)
    expected = {str(Path(m).resolve()) for m in glob.glob(pattern, recursive=True)
                if m.endswith((".json", ".jsonl", ".ndjson.gz")) and Path(m).is_file()}
    try:
        found = [source.uri for source in iter_sources([pattern])]
    except InputError:
        found = []
    assert sorted(found) == sorted(expected)
