"""Shared helpers for the query tests: one real store built from the fixtures, the CLI runner,
and a fingerprint of a store's contents (to prove a refused query changed nothing)."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import duckdb

from recstore.store import Store

from .conftest import AIOC_FIXTURES, AIOC_RECORD_NAMES, CORPUS_DEV, REPO_ROOT

# The documented DSL examples compile relative times against this instant.
DOCS_NOW_TEXT = "2026-06-01 00:00:00"


def build_store(path: Path) -> Store:
    """The 13 aioc fixture records, the 600-run dev corpus (tagged suite=nightly) and its 120
    replays (lineage replay_of)."""
    store = Store(path)
    store.ingest([str(AIOC_FIXTURES / f"{name}.json") for name in AIOC_RECORD_NAMES])
    store.ingest([str(CORPUS_DEV / "corpus-baseline.ndjson.gz")], tags={"suite": "nightly"})
    with gzip.open(CORPUS_DEV / "corpus-replays.ndjson.gz", "rt", encoding="utf-8") as fh:
        replays = [json.loads(line)["replayRunRecord"] for line in fh if line.strip()]
    store.ingest_records(replays, source_uri="corpus-replays")
    return store


def run_cli(*args: str, db: Path | None = None, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """``python -m recstore [--db DB] ARGS`` in a subprocess."""
    command = [sys.executable, "-m", "recstore"]
    if db is not None:
        command += ["--db", str(db)]
    return subprocess.run([*command, *args], capture_output=True, text=True, cwd=cwd or REPO_ROOT,
                          timeout=300)


def store_fingerprint(path: Path) -> str:
    """SHA-256 over every table's rows (sorted) plus the table list and settings that a hostile
    query might try to change. Read with a fresh read-only connection."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        digest = hashlib.sha256()
        tables = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal "
            "AND database_name = current_database() ORDER BY 1"
        ).fetchall()
        for (table,) in tables:
            digest.update(table.encode())
            rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
            digest.update(repr(sorted(map(repr, rows))).encode())
        return digest.hexdigest()
    finally:
        con.close()
