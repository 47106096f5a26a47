"""Stored strings never act on a terminal or a report (issue 12 point 9): `runs`, `show` and
`query`'s table escape control and direction characters — in column names (a query's aliases,
issue 24) as in values — while --json and csv keep them exact, and the HTML report shows them as
text. The cases are data: tests/data/hostile-strings.txt."""

from __future__ import annotations

import copy
import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recstore.records.render import printable
from recstore.store import Store

from .browser import dom, needs_chromium, text_of
from .conftest import AIOC_FIXTURES
from .test_cli_output import on_a_terminal

DATA = Path(__file__).parent / "data" / "hostile-strings.txt"
CASES = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()
         if line.strip() and not line.startswith("#")]
# What a terminal could act on (a newline ends a line; everything else must arrive escaped).
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f"
                         "\u2028\u2029]")
ALIASES = [text for text in CASES if "\0" not in text]  # an argument cannot carry a NUL
# Every case as a column name; two rows, so the table is drawn across (one row would not fit
# a 100-column terminal and print vertically).
ALIASED = "SELECT " + ", ".join(
    f'{i} AS "{text.replace(chr(34), chr(34) * 2)}"' for i, text in enumerate(ALIASES))
ALIASED = f"{ALIASED} UNION ALL {ALIASED}"


def recstore(db: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "recstore", "--db", str(db), *args],
                          capture_output=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.decode("utf-8")  # bytes as printed: no newline translation


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    base = json.loads((AIOC_FIXTURES / "simple-run.json").read_text(encoding="utf-8"))
    records = {"a": [], "b": []}
    for i, text in enumerate(CASES):
        for side in ("a", "b"):
            record = copy.deepcopy(base)
            record.update(runId=f"hostile-{i}-{side}", agentName=text, question=text,
                          response=text + (" changed" if side == "b" else ""))
            record["metadata"] = {"caseId": text}
            records[side].append(record)
    db = tmp_path_factory.mktemp("hostile") / "s.duckdb"
    for side, batch in records.items():
        Store(db).ingest_records(batch, tags={"set": side})
    return db


@pytest.fixture(scope="module")
def outputs(store) -> dict[str, str]:
    query = "SELECT run_id, agent, question, response FROM runs ORDER BY run_id"
    return {
        "runs": recstore(store, "runs", "--limit", "100", "--columns", "run_key,agent"),
        "runs-vertical": recstore(store, "runs", "--limit", "1", "--vertical"),
        "show": "".join(recstore(store, "show", f"hostile-{i}-a") for i in range(len(CASES))),
        "query": recstore(store, "query", query),
        "csv": recstore(store, "query", query, "--format", "csv"),
        "json": recstore(store, "query", query, "--json"),
        "show-json": recstore(store, "show", "hostile-0-a", "--json"),
    }


@pytest.mark.parametrize("command", ["runs", "runs-vertical", "show", "query"])
def test_human_output_carries_no_raw_control_characters(outputs, command):
    found = RAW_CONTROL.findall(outputs[command])
    assert found == [], f"{command} printed {found[:5]!r}"


@pytest.mark.parametrize("form", ["table", "vertical"])
def test_column_names_reach_a_terminal_escaped(store, form):
    """A query's column aliases are its author's text: a terminal gets them escaped, as values."""
    args = ("--vertical",) if form == "vertical" else ()
    shown = on_a_terminal(store, "query", ALIASED, *args, stdout=True).replace("\r\n", "\n")
    assert shown.endswith("(2 rows)\n"), shown
    assert RAW_CONTROL.findall(shown) == [], shown
    names = [printable(text) for text in ALIASES]
    if form == "vertical":
        assert all(name in shown for name in names)
    else:  # the header starts with the first name; those that do not fit are named below
        assert shown.startswith(names[0] + "  ") and "columns (" in shown


@pytest.mark.parametrize("text", CASES)
def test_each_string_is_shown_escaped_in_runs_show_and_query(outputs, text):
    shown = printable(text)
    assert shown in outputs["show"].replace("\n", "") or shown in outputs["show"]
    assert shown.split()[0] in outputs["query"]  # wrapped cells keep their first word whole
    assert RAW_CONTROL.search(shown) is None


@pytest.mark.parametrize("text", CASES)
def test_json_and_csv_keep_each_string_exact(outputs, text):
    rows = json.loads(outputs["json"])
    assert any(row["response"] == text for row in rows)
    parsed = list(csv.reader(io.StringIO(outputs["csv"], newline="")))
    assert any(row[3] == text for row in parsed[1:])
    assert json.loads(outputs["show-json"])["agentName"] == CASES[0]


@needs_chromium
def test_the_compare_report_shows_hostile_strings_as_text(store, tmp_path):
    html = tmp_path / "report.html"
    subprocess.run([sys.executable, "-m", "recstore", "--db", str(store), "compare", "--baseline",
                    "tag.set = 'a'", "--candidate", "tag.set = 'b'", "--html", str(html),
                    "--no-record"], capture_output=True, timeout=300)
    page = dom(tmp_path / "profile", html, "pair=0")
    assert page.count("<script") == 2  # the data block and the page's own script, nothing more
    assert "<img" not in page and "alert(1)</script>" not in page.replace("&lt;", "<").split(
        '<script type="application/json"')[0]
    visible = text_of(page)
    assert "</script><script>alert(1)</script>" in visible  # shown, as text
    assert "{{ 7*7 }}" in visible  # not evaluated by the template
