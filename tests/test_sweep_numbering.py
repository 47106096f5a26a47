"""Sweep runs are numbered per sweep: the first run of a new sweep is NAME#1 whatever ran
before it; RUN arguments accept NAME#N; the store-wide sweep_run_id stays for scripts."""

from __future__ import annotations

import json
import re

import pytest

from recstore.store import Store
from recstore.synth import generate_corpus

from .conftest import from_source_sweep, run_cli


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    root = tmp_path_factory.mktemp("numbering")
    path = root / "store.duckdb"
    Store(path).ingest_records(list(generate_corpus(6, seed=4)), source_uri="synth")
    for name in ("first", "second"):
        from_source_sweep(root, name, "status = 'completed'", select_extra="limit = 2\n")
    for name, rerun in (("first", False), ("first", True), ("second", False)):
        args = ["sweep", "run", str(root / f"{name}.toml"), *(["--rerun"] if rerun else [])]
        assert run_cli(path, *args).returncode == 0
    return path


def test_a_new_sweep_starts_at_run_1(db):
    done = run_cli(db, "sweep", "run", str(db.parent / "second.toml"), "--rerun", "--json")
    summary = json.loads(done.stdout)
    assert (summary["run"], summary["run_number"], summary["sweep_run_id"]) == ("second#2", 2, 4)
    text = run_cli(db, "sweep", "run", str(db.parent / "first.toml"), "--rerun")
    assert text.stdout.startswith("sweep first#3 (ran): 2 cases")
    assert "recstore sweep report first#3 --output DIR" in text.stdout


def test_runs_are_named_and_found_by_their_per_sweep_number(db, tmp_path):
    status = json.loads(run_cli(db, "sweep", "status", "second", "--json").stdout)
    assert [(r["run"], r["run_number"]) for r in status][:1] == [("second#1", 1)]
    table = run_cli(db, "sweep", "status", "second").stdout.splitlines()
    assert table[1].split()[:2] == ["#1", "second"]
    report = json.loads(run_cli(db, "sweep", "report", "second#1", "--json").stdout)
    assert report["run"]["sweep_name"] == "second" and report["run"]["run_number"] == 1
    assert [h["run_number"] for h in report["history"]] == [1]
    by_id = json.loads(run_cli(db, "sweep", "report", str(report["run"]["sweep_run_id"]), "--json").stdout)
    assert by_id["run"]["run"] == "second#1"
    written = run_cli(db, "sweep", "report", "first#2", "--output", str(tmp_path))
    assert written.returncode == 0, written.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep-first-2.html", "sweep-first-2.json"]
    html = (tmp_path / "sweep-first-2.html").read_text(encoding="utf-8")
    assert "Sweep first — run #2" in html and "Against run #1" in html
    # second#1 is store-wide run 3: its page, chart bars included, shows #1, never the id
    assert run_cli(db, "sweep", "report", "second#1", "--output", str(tmp_path / "s")).returncode == 0
    html = (tmp_path / "s" / "sweep-second-1.html").read_text(encoding="utf-8")
    assert "<title>Sweep second run #1</title>" in html and "run #3" not in html
    assert re.findall(r'text-anchor="middle">#(\d+)</text>', html) == ["1"]
    missing = run_cli(db, "sweep", "report", "second#9")
    assert missing.returncode == 2 and "no sweep run 'second#9'" in missing.stderr


def test_a_store_from_before_run_numbers_gets_them(tmp_path):
    import duckdb

    db = tmp_path / "old.duckdb"
    Store(db).ingest_records(list(generate_corpus(4, seed=4)), source_uri="synth")
    spec = from_source_sweep(tmp_path, "old", "status = 'completed'")
    assert run_cli(db, "sweep", "run", str(spec)).returncode == 0
    con = duckdb.connect(str(db))  # as the store was before schema 041: views without run_number
    con.execute("DELETE FROM schema_migrations WHERE name = '041_sweep_run_number.sql'")
    con.execute("CREATE OR REPLACE VIEW sweep_runs AS SELECT sweep_run_id, sweep_name FROM sweep_run_starts")
    con.close()
    status = json.loads(run_cli(db, "sweep", "status", "old", "--json").stdout)
    assert [(r["run"], r["run_number"]) for r in status] == [("old#1", 1)]
