"""A real `recstore serve` in a subprocess for the serve tests: a demo store, port 0, the URL
parsed from the line the server prints."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

RECSTORE = [sys.executable, "-m", "recstore"]


def demo_store(folder: Path, cases: int = 16) -> Path:
    """A store with runs, replays, a comparison and a sweep (`recstore demo`)."""
    subprocess.run([*RECSTORE, "demo", "--dir", str(folder), "-n", str(cases)], check=True,
                   capture_output=True, timeout=300)
    return folder / "demo.duckdb"


@contextmanager
def served(db: Path, *args: str):
    """Start `recstore --db DB serve --port 0 ARGS`; yields ``(url, process)``; stops it with
    SIGINT (Ctrl-C) and checks it exits cleanly."""
    proc = subprocess.Popen([*RECSTORE, "--db", str(db), "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    try:
        line = proc.stdout.readline()
        match = re.search(r"at (http://\S+?)(\?token=(\S+))? ", line)
        assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield match.group(1), proc, match.group(3)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
