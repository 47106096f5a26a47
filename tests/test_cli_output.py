"""What the CLI prints for people and scripts: one progress display (a rich bar on a terminal,
plain periodic lines when piped, nothing with --quiet) and --json on every command the README
promises it for. The real CLI in a subprocess; a real pseudo-terminal for the bar."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from recstore.sweep.schedule import ScheduleEvent

from .conftest import AIOC_FIXTURES, CORPUS_DEV, read_terminal

CORPUS = str(CORPUS_DEV / "corpus-baseline.ndjson.gz")
SPEC = ('name = "nightly"\n[select]\nquery = "status = \'completed\'"\n[candidate]\n'
        'from_source = true\n[schedule]\ncron = "0 3 * * *"\ntimezone = "Europe/Berlin"\n')


def recstore(db: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def on_a_terminal(db: Path, *args: str, stdout: bool = False, env: dict | None = None) -> str:
    """Run recstore with stderr (and ``stdout``) on a 100-column pseudo-terminal; return what
    the terminal received."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "recstore", "--db", str(db), *args],
                            stdin=follower if stdout else subprocess.DEVNULL,
                            stdout=follower if stdout else subprocess.DEVNULL, stderr=follower,
                            env={**os.environ, "COLUMNS": "100", "LINES": "30", "TERM": "xterm",
                                 **(env or {})})
    os.close(follower)
    received = read_terminal(leader)
    proc.wait(timeout=120)
    os.close(leader)
    return received.decode("utf-8", "replace")


def test_piped_progress_is_plain_periodic_lines_and_quiet_silences_it(tmp_path):
    db = tmp_path / "s.duckdb"
    done = recstore(db, "ingest", CORPUS, env={"RECSTORE_PROGRESS_SECONDS": "0"})
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("ingest records: ")]
    assert len(lines) > 10 and "/s, 0:00:" in lines[-1]
    assert "\x1b" not in done.stderr and "\r" not in done.stderr  # no bar drawn into a pipe
    verify = recstore(db, "verify", env={"RECSTORE_PROGRESS_SECONDS": "0"})
    assert "verify runs: 600 of 600 (100%)" in verify.stderr
    quiet = recstore(db, "verify", "--quiet", env={"RECSTORE_PROGRESS_SECONDS": "0"})
    assert quiet.returncode == 0 and quiet.stderr == ""
    default = recstore(db, "verify")  # piped, default interval: a short command prints none
    assert default.stderr == ""


def test_a_terminal_gets_a_progress_bar_with_totals(tmp_path):
    db = tmp_path / "s.duckdb"
    assert recstore(db, "ingest", CORPUS, "--quiet").returncode == 0
    screen = on_a_terminal(db, "verify")
    assert "verify runs" in screen and "━" in screen  # rich's bar
    assert "/600" in screen
    assert on_a_terminal(db, "verify", "--quiet") == ""


def test_runs_fit_a_100_column_terminal_and_show_pages_a_long_run(tmp_path):
    db = tmp_path / "s.duckdb"
    assert recstore(db, "ingest", CORPUS, "--quiet").returncode == 0
    screen = on_a_terminal(db, "runs", "--limit", "8", stdout=True).replace("\r\n", "\n")
    lines = screen.splitlines()
    assert lines[-1] == "(8 rows)"
    assert max(len(line) for line in lines) <= 100
    keys = [r["run_key"] for r in json.loads(recstore(db, "runs", "--limit", "8", "--json").stdout)]
    assert all(any(line.startswith(key) for line in lines) for key in keys)  # whole, copyable
    long_run = max(json.loads(recstore(db, "query", "SELECT run_key, item_count FROM runs "
                                       "ORDER BY item_count DESC LIMIT 1", "--json").stdout),
                   key=lambda r: r["item_count"])["run_key"]
    paged = tmp_path / "paged.txt"
    pager = f"{sys.executable} -c 'import sys; open(sys.argv[1], \"w\").write(sys.stdin.read())' {paged}"
    on_a_terminal(db, "show", long_run, stdout=True, env={"PAGER": pager})
    text = paged.read_text(encoding="utf-8")
    head = [line.split()[0] for line in text.splitlines() if line[:1].strip()][:7]
    assert head == ["run", "question", "response", "error", "duration", "tags", "started"]
    assert "tool calls (" in text


def test_rebuild_and_cron_print_json(tmp_path):
    db = tmp_path / "s.duckdb"
    assert recstore(db, "ingest", str(AIOC_FIXTURES / "simple-run.json")).returncode == 0
    rebuilt = recstore(db, "rebuild", "--json")
    assert json.loads(rebuilt.stdout) == {"runs": 1}
    spec = tmp_path / "nightly.toml"
    spec.write_text(SPEC, encoding="utf-8")
    cron = json.loads(recstore(db, "sweep", "cron", str(spec), "--json").stdout)
    assert cron["sweep"] == "nightly" and cron["timezone"] == "Europe/Berlin"
    assert cron["crontab"].splitlines()[2].startswith("0 3 * * * cd ")


def test_schedule_json_prints_one_object_per_event(tmp_path):
    db = tmp_path / "s.duckdb"
    assert recstore(db, "ingest", str(AIOC_FIXTURES / "simple-run.json")).returncode == 0
    spec = tmp_path / "nightly.toml"
    spec.write_text(SPEC, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "recstore", "--db", str(db), "sweep",
                             "schedule", str(spec), "--json"], stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(proc.stdout.readline())  # the scheduler says when it fires next
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert first["kind"] == "waiting" and first["sweep"] == "nightly"
    assert first["slot"].endswith("+01:00") or first["slot"].endswith("+02:00")
    event = ScheduleEvent("missed", "n", *[__import__("datetime").datetime(2026, 1, 1)] * 2)
    assert json.loads(json.dumps(event.to_json()))["at"] == "2026-01-01T00:00:00"


@pytest.mark.slow
def test_demo_json_summarises_every_command(tmp_path):
    done = subprocess.run([sys.executable, "-m", "recstore", "demo", "-n", "12", "--dir",
                           str(tmp_path / "demo"), "--json"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert Path(summary["compareReport"]).exists() and Path(summary["store"]).exists()
    assert len(summary["commands"]) > 15 and all("exit" in c for c in summary["commands"])
    assert "$ recstore" in done.stderr  # the walkthrough still shows, on stderr
