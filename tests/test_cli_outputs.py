"""Where the CLI's output goes and how wide it is (issue 27, points 2, 4 and 5), through the real
CLI in a subprocess on a real store:

* ``-o FILE`` writes the format FILE's extension names unless ``--format`` says otherwise, for
  ``query`` and ``compare``; a name that names no format is one error line
  (tests/hostile/output-names.txt);
* a table into a pipe or a file fits ``--width`` or ``$COLUMNS`` (unlimited without either);
* every command that writes a file or folder says ``wrote PATH`` on stderr, nothing with
  ``--quiet``.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.cells import cell_len

from recstore.sweep.runner import run_sweep
from recstore.sweep.spec import parse_spec

from .conftest import tagged_store
from .hostile_cases import hostile_lines

BULK = ["compare", "--baseline", "tag.set = 'baseline'", "--candidate", "tag.set = 'candidate'",
        "--no-record", "--fail-on", "", "--max-unpaired", "1"]
RUNS = 18  # 6 cases on each side, and the sweep's 6 replays
WIDE = "SELECT run_key, agent, question, response, error_message FROM runs"


def recstore(db: Path, *args: str, columns: str | None = None) -> subprocess.CompletedProcess:
    """The CLI with stdout and stderr piped; ``COLUMNS`` set to ``columns``, or unset."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), *args],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tagged run sets of 6 generated cases and one finished sweep run (``wide``)."""
    store = tagged_store(tmp_path_factory.mktemp("outputs") / "s.duckdb", 6, seed=3)
    run_sweep(store, parse_spec({"name": "wide", "select": {"query": "tag.set = 'baseline'"},
                                 "candidate": {"from_source": True}}, source="test"))
    return store.path


def _widest(text: str) -> int:
    return max(cell_len(line) for line in text.splitlines())


# --- point 2: -o FILE follows the extension --------------------------------------------------

def _read(path: Path) -> tuple[str, object]:
    """What ``path`` holds: its format and its rows (or text)."""
    raw = path.read_bytes()
    if raw.startswith(b"PAR1"):
        return "parquet", pq.read_table(path).column("run_key").to_pylist()
    text = raw.decode("utf-8")
    if text.startswith("["):
        return "json", [row["run_key"] for row in json.loads(text)]
    if text.startswith("{"):
        return "ndjson", [json.loads(line)["run_key"] for line in text.splitlines()]
    if text.startswith("run_key\r\n"):
        return "csv", [row[0] for row in list(csv.reader(text.splitlines()))[1:]]
    return "table", text


@pytest.mark.parametrize(("name", "fmt"), [
    ("out.csv", "csv"), ("out.json", "json"), ("out.ndjson", "ndjson"), ("out.jsonl", "ndjson"),
    ("out.parquet", "parquet"), ("out.txt", "table"), ("OUT.CSV", "csv"),
])
def test_query_output_file_takes_the_format_its_extension_names(db, tmp_path, name, fmt):
    out = tmp_path / name
    done = recstore(db, "query", "SELECT run_key FROM runs ORDER BY run_key", "-o", str(out))
    assert done.returncode == 0, done.stderr
    written, rows = _read(out)
    assert written == fmt
    if fmt == "table":
        assert rows.splitlines()[0] == "run_key" and rows.endswith(f"({RUNS} rows)\n")
    else:
        assert len(rows) == RUNS and rows == sorted(rows)


def test_format_says_otherwise_and_json_too(db, tmp_path):
    out = tmp_path / "rows.csv"
    query = "SELECT run_key FROM runs ORDER BY run_key"
    assert recstore(db, "query", query, "--format", "ndjson", "-o", str(out)).returncode == 0
    assert _read(out)[0] == "ndjson"
    assert recstore(db, "query", query, "--json", "-o", str(out)).returncode == 0
    assert _read(out)[0] == "json"
    assert recstore(db, "query", query, "--format", "table", "-o", str(out)).returncode == 0
    assert _read(out)[0] == "table"


@pytest.mark.parametrize("name", ["pairs.csv", "pairs.parquet"])
def test_compare_pairs_file_takes_the_format_its_extension_names(db, tmp_path, name):
    out = tmp_path / name
    done = recstore(db, *BULK, "-o", str(out))
    assert done.returncode == 0, done.stderr
    if name.endswith(".csv"):
        rows = list(csv.reader(out.open(encoding="utf-8", newline="")))
        assert rows[0][:2] == ["pair_index", "pair_key"] and len(rows) == 7
    else:
        assert pq.read_table(out).num_rows == 6


NAMES = [line.split(" | ") for line in hostile_lines("output-names.txt")]


@pytest.mark.parametrize(("args", "message"), NAMES, ids=[a for a, _ in NAMES])
def test_an_output_name_that_names_no_format_is_one_error_line(db, tmp_path, args, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in shlex.split(args)]
    message = message.replace("{tmp}", str(tmp_path))
    done = recstore(db, *(BULK if argv[0] == "{bulk}" else argv[:1]), *argv[1:])
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    if message.startswith("usage: "):  # click's own check of an option's value
        assert message[len("usage: "):] in done.stderr.splitlines()[-1], done.stderr
    else:
        assert done.stderr == f"recstore: error: {message}\n"
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing run half-way


# --- point 4: a piped table fits --width or $COLUMNS -----------------------------------------

def test_piped_tables_fit_columns(db):
    for command in (["query", WIDE], ["runs"]):
        assert _widest(recstore(db, *command, columns="100").stdout) <= 100
        assert _widest(recstore(db, *command, columns="140").stdout) > 100  # it uses the room
    unlimited = recstore(db, "query", WIDE)  # no $COLUMNS: unlimited, long text cut at 48 cells
    assert _widest(unlimited.stdout) > 140
    assert _widest(recstore(db, "query", WIDE, columns="not-a-number").stdout) \
        == _widest(unlimited.stdout)


def test_width_option_beats_columns_in_a_pipe_and_a_file(db, tmp_path):
    assert _widest(recstore(db, "query", WIDE, "--width", "90", columns="200").stdout) <= 90
    assert _widest(recstore(db, "runs", "--width", "100", columns="200").stdout) <= 100
    out = tmp_path / "wide.txt"
    assert recstore(db, "query", WIDE, "--width", "90", "-o", str(out)).returncode == 0
    assert _widest(out.read_text(encoding="utf-8")) <= 90
    assert recstore(db, "query", WIDE, "-o", str(out), columns="100").returncode == 0
    assert _widest(out.read_text(encoding="utf-8")) <= 100
    run_key = recstore(db, "query", "SELECT run_key FROM runs LIMIT 1", "--format", "csv"
                       ).stdout.splitlines()[1]
    lead = recstore(db, "show", run_key, "--width", "60").stdout.split("\n\n")[0]
    assert lead.startswith("run ") and _widest(lead) <= 60


# --- point 5: wrote PATH on stderr, nothing with --quiet -------------------------------------

def _wrote(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode in (0, 1), done.stderr  # compare: 1 when a pair fails the gate
    return [line for line in done.stderr.splitlines() if line.startswith("wrote ")]


def test_query_and_compare_say_what_they_wrote(db, tmp_path):
    out, pairs, html = tmp_path / "rows.csv", tmp_path / "pairs.csv", tmp_path / "report.html"
    done = recstore(db, "query", "SELECT run_key FROM runs", "-o", str(out))
    assert done.stderr == f"wrote {out}\n" and done.stdout == ""
    assert recstore(db, "query", "SELECT 1", "-o", str(out), "--quiet").stderr == ""
    assert recstore(db, "query", "SELECT 1").stderr == ""  # to stdout: nothing to say
    assert _wrote(recstore(db, *BULK, "-o", str(pairs), "--html", str(html))) == [
        f"wrote {pairs}", f"wrote {html}"]
    assert _wrote(recstore(db, *BULK, "-o", str(pairs), "--html", str(html), "-q")) == []


def test_export_and_sweep_report_say_what_they_wrote(db, tmp_path):
    done = recstore(db, "export", str(tmp_path / "views"))
    assert _wrote(done) == [f"wrote {tmp_path / 'views'}"] and "exported" in done.stdout
    quiet = recstore(db, "export", str(tmp_path / "views"), "--overwrite", "--quiet", "--json")
    assert _wrote(quiet) == [] and json.loads(quiet.stdout)["rows"]
    traces = recstore(db, "export", "--otlp", str(tmp_path / "traces"), "--json")
    assert _wrote(traces) == [f"wrote {tmp_path / 'traces'}"] and json.loads(traces.stdout)
    report = recstore(db, "sweep", "report", "wide", "--output", str(tmp_path / "r"))
    assert report.stdout == "" and _wrote(report) == [
        f"wrote {tmp_path / 'r' / 'sweep-wide-1.json'}",
        f"wrote {tmp_path / 'r' / 'sweep-wide-1.html'}"]
    assert recstore(db, "sweep", "report", "wide", "--output", str(tmp_path / "r"), "-q"
                    ).stderr == ""
