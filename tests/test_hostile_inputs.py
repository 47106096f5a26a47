"""Bad input that once ended in a traceback (issue 24 point 7 and its minor points), as data in
tests/hostile/input-errors.txt and sweep-selections.txt, each case run through the real CLI in a
subprocess: an unclosed quote, a relative time past the calendar, a JSON path sqlglot cannot
write back, DuckDB's error while a selection runs, digits of other scripts. Each ends in one
line naming the input, exit 2."""

from __future__ import annotations

import json
import shlex
import subprocess

import pytest

from recstore.store import Store

from .conftest import tagged_store
from .hostile_cases import hostile_lines
from .query_support import run_cli

CASES = [line.rsplit(" | ", 1) for line in hostile_lines("input-errors.txt")]
SWEEP_SELECTIONS = [line.rsplit(" | ", 1) for line in hostile_lines("sweep-selections.txt")]
HUGE = "99999999999999999999999"  # past DuckDB's BIGINT


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Four runs tagged set=baseline and four tagged set=candidate."""
    return tagged_store(tmp_path_factory.mktemp("hostile-inputs") / "s.duckdb", 4, seed=5)


def _assert_one_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    first, *rest = result.stderr.rstrip("\n").split("\n")
    assert first.startswith("recstore: error: ") and fragment in first, result.stderr
    # a DSL error may show where it stopped: the query's line, then the caret under it
    assert rest == [] or (len(rest) == 2 and all(r.startswith("  ") for r in rest)
                          and "^" in rest[1]), result.stderr


def test_enough_cases():
    assert len(CASES) >= 40


@pytest.mark.parametrize(("args", "fragment"), CASES, ids=[args for args, _ in CASES])
def test_bad_input_ends_in_one_line_and_exit_2(store, tmp_path, args, fragment):
    before = store.path.read_bytes()
    result = run_cli(*shlex.split(args.replace("{tmp}", str(tmp_path))), db=store.path)
    _assert_one_error(result, fragment)
    assert store.path.read_bytes() == before  # tag, replay and compare wrote nothing
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("query", "fragment"), SWEEP_SELECTIONS,
                         ids=[query for query, _ in SWEEP_SELECTIONS])
def test_a_sweep_selection_that_cannot_run_ends_in_one_line(store, tmp_path, query, fragment):
    spec = tmp_path / "bad.toml"  # a JSON string is a TOML basic string
    spec.write_text(f'name = "bad"\n[select]\nquery = {json.dumps(query, ensure_ascii=False)}\n'
                    "[candidate]\nfrom_source = true\n", encoding="utf-8")
    before = store.path.read_bytes()
    _assert_one_error(run_cli("sweep", "run", str(spec), db=store.path), fragment)
    assert store.path.read_bytes() == before


@pytest.mark.parametrize("command", ["runs", "rejects"])
def test_a_limit_past_duckdbs_integers_lists_everything(store, command):
    """A row count no store can reach asks for every row, as --limit 0 does for rejects."""
    result = run_cli(command, "--limit", HUGE, "--json", db=store.path)
    assert result.returncode == 0, result.stderr
    expected = 8 if command == "runs" else 0
    assert len(json.loads(result.stdout)) == expected


def test_a_dsl_limit_past_duckdbs_integers_returns_every_row(store):
    result = run_cli("query", f"tag.set = 'baseline' limit {HUGE}", "--format", "ndjson",
                     db=store.path)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 4
