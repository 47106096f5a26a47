"""``recstore inspect`` and ``recstore compare`` through the real CLI in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from recstore.canonical import canonical_json

from .conftest import AIOC_FIXTURES, REPO_ROOT


def run_cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recstore", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=cwd or REPO_ROOT,
        timeout=60,
    )


def fixture(name: str) -> str:
    return str(AIOC_FIXTURES / f"{name}.json")


def test_inspect_prints_visits_requests_calls_and_findings():
    proc = run_cli("inspect", fixture("v-two-handoffs-one-turn"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "visits (3)" in out and "Beta  inferred after turn 1 via h1  no requests" in out
    assert "turn 1  Alpha  m  items[1:7]" in out
    assert "handoff_to_gamma  [h2]  turn 1 · Alpha  ok  policy allow  → Gamma" in out
    assert "findings (0)" in out


def test_inspect_reports_dangling_call_finding():
    proc = run_cli("inspect", fixture("v-failed-deny-throw"))
    assert proc.returncode == 0
    assert "dangling_call at $.items[1]" in proc.stdout
    assert "no output  policy deny" in proc.stdout


def test_inspect_json_is_the_full_analysis():
    proc = run_cli("inspect", "--json", fixture("v-thread-continuation"))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["scope"] == {"count": 5, "source": "inputItemCount"}
    assert [(r["output_start"], r["output_end"]) for r in data["requests"]] == [(5, 11), (11, 12)]
    assert [v["agent"] for v in data["visits"]] == ["A"]
    assert data["tool_calls"][0]["in_input"] is True
    # The record's lone surrogate survives as an escape, as JSON.stringify writes it.
    assert "\\ud800" in proc.stdout


def test_compare_different_files_exits_1_with_readable_diff():
    proc = run_cli("compare", fixture("compare-v1"), fixture("compare-v2"))
    assert proc.returncode == 1, proc.stderr
    assert "different (6 differences)" in proc.stdout
    for path in ("response", "toolCalls.length", "toolCalls[0]  missing_right", "metadata"):
        assert path in proc.stdout


def test_compare_equal_files_exits_0():
    proc = run_cli("compare", fixture("tool-allow"), fixture("tool-allow"))
    assert proc.returncode == 0
    assert ": equal" in proc.stdout


def test_compare_json_equals_aioc_result(expected_aioc):
    proc = run_cli(
        "compare",
        "--json",
        "--exclude",
        "metadata",
        fixture("handoff-allow"),
        fixture("v-handoff-cycle"),
    )
    expected = next(
        c["result"]
        for c in expected_aioc["compare"]
        if (c["left"], c["right"]) == ("handoff-allow", "v-handoff-cycle")
        and c["options"] == {"excludeSections": ["metadata"]}
    )
    assert proc.returncode == (0 if expected["equal"] else 1)
    assert canonical_json(json.loads(proc.stdout)) == canonical_json(expected)


def test_compare_include_narrows_sections():
    proc = run_cli(
        "compare", "--include", "toolCalls", fixture("handoff-allow"), fixture("handoff-deny")
    )
    assert proc.returncode == 1
    assert "toolCalls[0].output" in proc.stdout and "policyDecisions" not in proc.stdout


def test_compare_unknown_section_is_a_usage_error():
    proc = run_cli("compare", "--include", "bogus", fixture("tool-allow"), fixture("tool-allow"))
    assert proc.returncode == 2 and "bogus" in proc.stderr


def _valid_record() -> dict:
    return json.loads((AIOC_FIXTURES / "tool-allow.json").read_text(encoding="utf-8"))


def _without_items() -> str:
    rec = _valid_record()
    del rec["items"]
    return json.dumps(rec)


def _wrong_type() -> str:
    rec = _valid_record()
    rec["items"][1]["callId"] = 7
    return json.dumps(rec)


BAD_INPUTS = {
    "invalid-json": ('{"runId": "x",\n  "items": [1,, 2]}', "invalid JSON", "line 2, column"),
    "nan-literal": ('{"runId": "x", "score": NaN}', "NaN is not valid JSON", "line 1, column 25"),
    "array": ("[{}]", "expected a JSON object (a RunRecord), got array", "at $"),
    "missing-items": (_without_items(), "required field missing", "at $.items:"),
    "wrong-type": (_wrong_type(), "expected string, got number", "at $.items[1].callId:"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
@pytest.mark.parametrize("command", ["inspect", "compare"])
def test_bad_input_is_one_clear_line(tmp_path, case, command):
    text, problem, where = BAD_INPUTS[case]
    bad = tmp_path / f"{case}.json"
    bad.write_text(text, encoding="utf-8")
    args = (
        ["inspect", str(bad)]
        if command == "inspect"
        else ["compare", fixture("tool-allow"), str(bad)]
    )
    proc = run_cli(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    (line,) = lines
    assert line.startswith(f"recstore: error: {bad}")
    assert problem in line and where in line
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_missing_file_is_one_clear_line(tmp_path):
    proc = run_cli("inspect", str(tmp_path / "nope.json"))
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == f"recstore: error: {tmp_path / 'nope.json'}: cannot read file: No such file or directory"
    )


def test_debug_shows_the_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[]", encoding="utf-8")
    proc = run_cli("--debug", "inspect", str(bad))
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def _diff_lines(stdout: str) -> tuple[str, str]:
    """The `- left` and `+ right` lines of the first difference in a pair compare."""
    lines = stdout.splitlines()
    left = next(i for i, line in enumerate(lines) if line.startswith("    - "))
    return lines[left], lines[left + 1]


@pytest.mark.parametrize("left, right", [
    ("All done.", "All done. "),            # trailing space
    ("All done.", " All done."),            # leading space
    ("All\tdone.", "All    done."),         # tab against spaces
    ("All\u00a0done.", "All done."),        # NBSP against a space
    ("All done.\r\n", "All done.\n"),       # CR
    ("All done.", "All done.\u200b"),       # a zero-width space
])
def test_pair_compare_shows_differences_a_terminal_would_hide(tmp_path, left, right):
    """A difference in whitespace alone is visible on the `-`/`+` lines, and one difference
    is "1 difference" (issue 27 point 7)."""
    record = json.loads((AIOC_FIXTURES / "tool-allow.json").read_text())
    paths = []
    for name, response in (("a", left), ("b", right)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({**record, "response": response}), encoding="utf-8")
        paths.append(str(path))
    proc = run_cli("compare", *paths, "--include", "response")
    assert proc.returncode == 1, proc.stderr
    assert "different (1 difference)" in proc.stdout
    minus, plus = _diff_lines(proc.stdout)
    shown_left, shown_right = minus[len("    - "):], plus[len("    + "):]
    # They differ in what a terminal shows: not only in trailing blanks or in characters
    # that print as blank or as nothing.
    assert shown_left.rstrip() != shown_right.rstrip()
    assert not any(char in shown_left + shown_right for char in "\t\r\u00a0\u200b")


def test_pair_compare_shows_where_long_values_differ_and_full_prints_them_whole(tmp_path):
    """Two 2,000-character responses that differ near the end: the cut preview shows the
    differing part; --full prints both values whole (issue 27 point 7)."""
    record = json.loads((AIOC_FIXTURES / "tool-allow.json").read_text())
    body = "lorem ipsum " * 160
    paths = []
    for name, tail in (("a", "the answer is 41"), ("b", "the answer is 42")):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({**record, "response": body + tail}), encoding="utf-8")
        paths.append(str(path))
    proc = run_cli("compare", *paths, "--include", "response")
    minus, plus = _diff_lines(proc.stdout)
    assert "answer is 41" in minus and "answer is 42" in plus
    assert len(minus) < 100 and minus[len("    - "):].startswith("…")
    proc = run_cli("compare", *paths, "--include", "response", "--full")
    minus, plus = _diff_lines(proc.stdout)
    assert minus == "    - " + json.dumps(body + "the answer is 41")
    assert plus == "    + " + json.dumps(body + "the answer is 42")
