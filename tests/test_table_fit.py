"""Tables fit the terminal (issue 27 point 3): one line per row, key columns whole, long text cut
with '…', columns that do not fit named in a footer, never a value wrapped across lines; `show`'s
tool-call lines fit too. The real CLI on a real 100x40 pseudo-terminal over the fixture store,
and a property over any table and width."""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from recstore.query.table import is_key_column, write_table

from .conftest import REPO_ROOT, read_terminal
from .query_support import run_cli

COLS, LINES = 100, 40
_DROPPED = re.compile(r"\+(\d+) columns?(?: \((.*)\))?: --vertical or --columns")


def on_terminal(db: Path, *args: str) -> list[str]:
    """Run recstore with stdout on a 100x40 pseudo-terminal (its window size, not $COLUMNS,
    says how wide); return the lines the terminal received."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLS, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "recstore", "--db", str(db), *args],
                            stdin=follower, stdout=follower, stderr=follower,
                            env={**env, "TERM": "xterm"})
    os.close(follower)
    received = read_terminal(leader)
    assert proc.wait(timeout=120) == 0, received.decode("utf-8", "replace")
    os.close(leader)
    return received.decode("utf-8").replace("\r\n", "\n").splitlines()


def table_parts(lines: list[str]) -> tuple[list[str], list[str], list[str]]:
    """A drawn table's header names, its row lines and the columns its footer says it left
    out; checks the frame: a rule under the header, ``(N rows)`` last, every line in 100
    cells."""
    assert all(cell_len(line) <= COLS for line in lines), \
        [line for line in lines if cell_len(line) > COLS]
    header, rule, *body, count = lines
    assert set(rule) == {"─"}
    dropped: list[str] = []
    if body and (match := _DROPPED.fullmatch(body[-1])):
        body.pop()
        dropped = (match.group(2) or "").split(", ")
        assert len(dropped) == int(match.group(1)) and "…" not in dropped
    assert count == f"({len(body)} row{'s' if len(body) != 1 else ''})"  # one line per row
    return header.split(), body, dropped


def in_order(shown: list[str], dropped: list[str], names: list[str]) -> None:
    """Every column is shown or named as left out (none silently dropped), each list in the
    columns' order."""
    assert sorted(shown + dropped) == sorted(names)
    for part in (shown, dropped):
        assert part == [n for n in names if n in part]


def json_rows(db: Path, *args: str) -> list[dict]:
    done = run_cli(*args, "--json", db=db)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_wide_run_query_keeps_keys_whole_and_names_what_it_leaves_out(fixture_store):
    query = "status = 'failed' and agent = 'Triage' limit 4"
    header, body, dropped = table_parts(on_terminal(fixture_store.path, "query", query))
    rows = json_rows(fixture_store.path, "query", query)
    in_order(header, dropped, list(rows[0]))
    assert dropped, "nine columns do not fit 100 cells"
    assert len(body) == 4
    for line, row in zip(body, rows, strict=True):
        assert line.startswith(row["run_key"] + " ")
        assert f"  {row['status']}  " in line  # short columns whole, not 'faile/d'
        if "started" in header:
            assert row["started"].replace("T", " ").removesuffix("Z")[:19] in line


def test_tool_calls_drop_columns_only_with_a_footer(fixture_store):
    query = "tool_calls where envelope_status = 'denied' limit 3"
    header, body, dropped = table_parts(on_terminal(fixture_store.path, "query", query))
    rows = json_rows(fixture_store.path, "query", query)
    in_order(header, dropped, list(rows[0]))
    assert {"call_index", "envelope_status"} <= set(header)
    for line, row in zip(body, rows, strict=True):
        assert line.startswith(row["run_key"] + " ")  # the run key whole
        if "args_hash" in header:
            assert row["args_hash"] in line  # a hash whole, or not at all


def test_runs_are_one_line_each_with_models_whole(fixture_store):
    header, body, dropped = table_parts(on_terminal(fixture_store.path, "runs", "--limit", "8"))
    runs = json_rows(fixture_store.path, "runs", "--limit", "8")
    assert len(body) == 8
    in_order(header, dropped, ["run_key", "status", "agent", "model", "started", "tool_calls"])
    for line, run in zip(body, runs, strict=True):
        assert line.startswith(run["run_key"] + " ")
        if "model" in header:
            assert f"  {run['model']}  " in line


def test_show_tool_call_lines_fit_the_terminal(fixture_store):
    lines = on_terminal(fixture_store.path, "show", "aioc:81e3aee0", "--no-pager")
    start = lines.index("tool calls (1)")
    call = lines[start + 1]
    assert lines[start + 2].startswith("handoffs"), "the call is one line"
    assert cell_len(call) <= COLS and call.endswith("…")
    assert "[call_Pe08vTEsPsymDbPLKmrQnu7H]" in call  # its call id whole


def test_piped_tables_cut_long_text_at_the_pipe_cell():
    from recstore.query.table import PIPE_CELL

    out = io.StringIO()
    write_table(["run_key", "note"], [["aioc:" + "k" * 60, "研究 " * 40]] * 2, out, width=None)
    _, _, *body, count = out.getvalue().splitlines()
    assert count == "(2 rows)" and len(body) == 2
    assert all(line.startswith("aioc:" + "k" * 60 + "  ") and line.endswith("…") for line in body)
    assert all(cell_len(line) <= 65 + 2 + PIPE_CELL for line in body)


NAMES = st.lists(st.sampled_from(["run_key", "args_hash", "call_id", "source_uri", "status",
                                  "n", "question", "error_message", "model", "started"]),
                 min_size=1, max_size=8, unique=True)
TEXT = st.text(st.sampled_from("abc XYZ09-é研究😀"), max_size=90)
KEY = st.text(st.sampled_from("abcdef0123456789:-研"), min_size=1, max_size=70)


@st.composite
def tables(draw):
    names = draw(NAMES)
    cell = [KEY if is_key_column(n) else TEXT for n in names]
    rows = draw(st.lists(st.tuples(*cell).map(list), max_size=6))
    return names, rows


@settings(max_examples=300, deadline=None)
@given(tables(), st.integers(40, 160), st.sampled_from([None, False]))
def test_any_table_fits_any_width_one_line_per_row_keys_intact(table, width, vertical):
    names, rows = table
    out = io.StringIO()
    write_table(names, rows, out, width=width, vertical=vertical)
    lines = out.getvalue().splitlines()
    assert all(cell_len(line) <= width for line in lines)
    assert lines[-1] == f"({len(rows)} row{'s' if len(rows) != 1 else ''})"
    if lines[0].startswith("-[ row 1 ]"):  # vertical: only when the first column cannot fit
        assert max(cell_len(r[0]) for r in rows) > width or (len(rows) == 1 and vertical is None)
        return
    header, rule, *body = lines[:-1]
    dropped: list[str] = []
    if body and (match := _DROPPED.fullmatch(body[-1])):
        body.pop()
        dropped = (match.group(2) or "…").split(", ")
    assert len(body) == len(rows)  # one line per row
    shown = header.split()
    assert shown[0] == names[0] and set(shown) <= set(names)
    if "…" not in dropped:
        in_order(shown, dropped, names)
    else:
        assert len(shown) + int(match.group(1)) == len(names)
    for line, row in zip(body, rows, strict=True):
        for name in shown:
            if is_key_column(name):
                assert row[names.index(name)] in line  # a key whole, never cut


def test_the_documented_table_is_what_a_100_column_terminal_shows(fixture_store):
    text = (REPO_ROOT / "docs" / "queries.md").read_text(encoding="utf-8")
    shown = text.split("a footer names them:\n\n```\n", 1)[1].split("```", 1)[0]
    query = "status = 'failed' and agent = 'Triage' limit 2"
    assert on_terminal(fixture_store.path, "query", query) == shown.splitlines()


_FIELD_TEXT = st.text(st.sampled_from(list("ab z-\n\t\u00e9\u4e2d\u0301\u3000\u200b")) |
                      st.characters(), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["run", "question", "response", "error", "tags", "x"]),
                          _FIELD_TEXT), min_size=1, max_size=6),
       st.none() | st.integers(min_value=1, max_value=60))
def test_show_fields_without_rich_print_what_rich_prints(fields, width):
    """write_fields prints lines that need no wrapping itself (issue 27.1: `show` without rich's
    console); the result is what rich's table prints, whatever the text and width."""
    from recstore.query.table import _console, _fields_table, write_fields
    from recstore.records.render import printable

    out, reference = io.StringIO(), io.StringIO()
    write_fields(fields, out, width=width)
    _console(reference, width).print(_fields_table([n for n, _ in fields],
                                                   [printable(v, keep="\n") for _, v in fields]))
    assert out.getvalue() == reference.getvalue()
