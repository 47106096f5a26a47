"""Every JSON writer escapes lone surrogates as JavaScript does, and writes timestamps in UTC.

JSON text may hold a lone surrogate (``"\\ud800"``) and aioc records can; Python keeps it as one
code point, which UTF-8 cannot encode. Each ``--json`` output and report file of the real CLI is
checked on a store holding such a record, and the one helper (``recstore.jsonout``) is checked
with hypothesis over strings full of surrogates.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.jsonout import _dumps_iteratively, dumps, dumps_compact, utc_timestamp, write_json
from recstore.store import Store

from .conftest import AIOC_FIXTURES, from_source_sweep, run_cli

SURROGATE = "\ud800"
# Text mixing lone surrogates (high and low, paired or not) with any other characters.
_TEXT = st.text(st.one_of(st.characters(categories=["Cs"]), st.characters()), max_size=30)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)
_ESCAPE = re.compile(r"\\u(d[89a-f][0-9a-f]{2})")


def _check(text: str, value: object) -> None:
    text.encode("utf-8")  # a raw surrogate would raise UnicodeEncodeError here
    assert json.loads(text) == value
    assert not re.search("[\ud800-\udfff]", text)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_every_writer_escapes_lone_surrogates_and_round_trips(value):
    _check(dumps(value), value)
    _check(dumps(value, indent=None), value)
    _check(dumps_compact(value), value)
    _check(dumps(value, indent=None, ascii_only=True), value)


@settings(max_examples=300, deadline=None)
@given(_JSON, st.sampled_from([None, 2]), st.booleans())
def test_the_deep_value_writer_writes_what_the_stdlib_writes(value, indent, ascii_only):
    """``dumps`` falls back to its own stack for values nested past the stdlib's recursion
    (a 1000-deep lineage chain); that text is the stdlib's, byte for byte."""
    assert _dumps_iteratively(value, indent, ascii_only) == json.dumps(
        value, indent=indent, ensure_ascii=ascii_only)


def test_a_value_nested_past_the_recursion_limit_is_written():
    deep: dict = {"leaf": True}
    for i in range(5000):
        deep = {"n": i, "children": [deep]}
    text = dumps(deep)
    assert text.count('"children": [') == 5000 and text.endswith("}")
    assert text.splitlines()[-1] == "}" and '"leaf": true' in text
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="Circular"):
        _dumps_iteratively(cyclic, 2, False)


@settings(max_examples=200, deadline=None)
@given(_TEXT)
def test_surrogates_are_lowercase_u_escapes_and_other_text_stays_raw(text):
    written = dumps(text, indent=None)
    surrogates = [c for c in text if 0xD800 <= ord(c) <= 0xDFFF]
    assert _ESCAPE.findall(written) == [f"{ord(c):04x}" for c in surrogates]  # as JSON.stringify
    for char in text:
        if ord(char) > 0x7F and not 0xD800 <= ord(char) <= 0xDFFF:
            assert char in written  # non-ASCII is not escaped


def test_timestamps_are_utc_with_z():
    naive = datetime(2026, 3, 1, 12, 30, 5, 120000)
    plus_two = datetime(2026, 3, 1, 14, 30, 5, 120000, tzinfo=timezone(timedelta(hours=2)))
    assert utc_timestamp(naive) == utc_timestamp(plus_two) == "2026-03-01T12:30:05.120000Z"
    assert json.loads(dumps({"at": naive})) == {"at": "2026-03-01T12:30:05.120000Z"}
    assert json.loads(dumps_compact({"at": plus_two.astimezone(UTC)}))["at"].endswith("Z")


def test_write_json_writes_a_file_a_surrogate_cannot_break(tmp_path):
    path = write_json(tmp_path / "out.json", {"response": f"ok {SURROGATE}"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"response": f"ok {SURROGATE}"}


# --- the CLI ------------------------------------------------------------------------------------



@pytest.fixture(scope="module")
def store_with_surrogates(tmp_path_factory):
    root = tmp_path_factory.mktemp("surrogates")
    record = json.loads((AIOC_FIXTURES / "tool-allow.json").read_text(encoding="utf-8"))
    record["runId"] = "surrogate-run"
    record["response"] += f" {SURROGATE}"
    record["metadata"] = {"caseId": f"case-{SURROGATE}", "note": "\udfff alone"}
    source = root / "surrogate.json"
    source.write_text(json.dumps(record), encoding="utf-8")  # ASCII escapes, as JS would write
    other = dict(record, runId="surrogate-other", response=f"other {SURROGATE}")
    (root / "other.json").write_text(json.dumps(other), encoding="utf-8")
    db = root / "store.duckdb"
    Store(db).ingest([str(source)], tags={"set": "a"})
    Store(db).ingest([str(root / "other.json")], tags={"set": "b"})
    from_source_sweep(root, "surrogates", "run_id = 'surrogate-run'")
    return db, root


# (arguments, whether the output carries record text holding the surrogate)
COMMANDS = [
    (["show", "surrogate-run", "--json"], True),
    (["replay", "surrogate-run", "--from-source", "--json"], True),
    (["compare", "{root}/surrogate.json", "{root}/other.json", "--json"], True),
    (["compare", "surrogate-run", "surrogate-other", "--json"], True),
    (["runs", "--json"], False),
    (["inspect", "{root}/surrogate.json", "--json"], False),
    (["lineage", "surrogate-run", "--json"], False),
    (["compare", "--baseline", "tag.set = 'a'", "--candidate", "tag.set = 'b'", "--json"], False),
    (["query", "SELECT run_key, response, metadata FROM runs", "--format", "json"], False),
    (["query", "SELECT run_key, response, metadata FROM runs", "--format", "ndjson"], False),
    (["sweep", "run", "{root}/surrogates.toml", "--json"], False),
    (["sweep", "report", "surrogates", "--json"], False),
    (["sweep", "status", "--json"], False),
]


@pytest.mark.parametrize(("args", "carries"), COMMANDS, ids=[" ".join(a[:2]) for a, _ in COMMANDS])
def test_cli_json_output_survives_lone_surrogates(store_with_surrogates, args, carries):
    db, root = store_with_surrogates
    done = run_cli(db, *(a.format(root=root) for a in args))
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 1), done.stderr  # 1: the two records differ
    lines = done.stdout.splitlines() if "ndjson" in args else [done.stdout]
    values = [json.loads(line) for line in lines]
    assert (SURROGATE in json.dumps(values, ensure_ascii=False)) == carries


def test_sweep_report_files_and_timestamps(store_with_surrogates, tmp_path):
    db, root = store_with_surrogates
    assert run_cli(db, "sweep", "run", str(root / "surrogates.toml")).returncode == 0
    done = run_cli(db, "sweep", "report", "surrogates", "--output", str(tmp_path))
    assert done.returncode == 0, done.stderr
    (report_path,) = tmp_path.glob("*.json")
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["run"]["started_at"].endswith("Z") and report["run"]["ended_at"].endswith("Z")
    assert all(h["started_at"].endswith("Z") for h in report["history"])
    status = json.loads(run_cli(db, "sweep", "status", "surrogates", "--json").stdout)
    assert status[-1]["started_at"].endswith("Z")
    rejects = run_cli(db, "query", "SELECT ingested_at FROM sources", "--format", "json")
    assert all(row["ingested_at"].endswith("Z") for row in json.loads(rejects.stdout))


def test_html_reports_survive_lone_surrogates(store_with_surrogates, tmp_path):
    db, root = store_with_surrogates
    html = tmp_path / "compare.html"
    done = run_cli(db, "compare", "--baseline", "tag.set = 'a'", "--candidate", "tag.set = 'b'",
                   "--pair-by", "question", "--html", str(html), "--html-details", "5")
    assert "Traceback" not in done.stderr and done.returncode in (0, 1), done.stderr
    page = html.read_text(encoding="utf-8")  # UTF-8 throughout: no raw surrogate was written
    assert "\\ud800" in page  # the responses reach the page's data as JSON escapes
