"""aioc's replay lines (``{sourceRunId, mode, replayStats, replayRunRecord, error?}``, the form of
corpus-dev/corpus-replays.ndjson.gz) ingest as replays, through the real CLI: each record a run
of its own with a ``replay_of`` row to its source (the ``replays`` view shows mode and
replayStats; a line with ``error`` is a failed replay), whether the source is stored before or
after; bad lines are one reject each (tests/hostile/replay-lines.txt), and ``rejects --json``
lists every problem of a reject (issue 27.6)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from .conftest import CORPUS_DEV, read_ndjson_gz, run_cli
from .hostile_cases import hostile_lines

REPLAYS = CORPUS_DEV / "corpus-replays.ndjson.gz"
_BAD_LINES = [tuple(line.split("\t", 2)) for line in hostile_lines("replay-lines.txt")]


def _ok(db: Path, *args: str, codes: tuple[int, ...] = (0,)):
    done = run_cli(db, *args)
    assert done.returncode in codes, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _json(db: Path, *args: str, codes: tuple[int, ...] = (0,)):
    return json.loads(_ok(db, *args, codes=codes).stdout)


def _rows(db: Path, sql: str) -> list[dict]:
    return _json(db, "query", sql, "--format", "json")


def _write_ndjson(path: Path, values: list[dict]) -> Path:
    path.write_text("".join(json.dumps(v) + "\n" for v in values), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory):
    """corpus-dev's runs, then its 120 replay lines, ingested by the CLI."""
    db = tmp_path_factory.mktemp("replay-lines") / "s.duckdb"
    _ok(db, "ingest", str(CORPUS_DEV / "corpus-baseline.ndjson.gz"),
        str(CORPUS_DEV / "corpus-candidate.ndjson.gz"))
    summary = _json(db, "ingest", "--json", str(REPLAYS))
    return db, summary


def test_the_corpus_replay_lines_are_stored_as_replays_of_their_sources(corpus_store):
    db, summary = corpus_store
    assert (summary["accepted"], summary["rejected"]) == (120, 0)
    lines = {(w["sourceRunId"], w["mode"]): w for w in read_ndjson_gz(REPLAYS)}
    rows = _rows(db, "SELECT r.*, p.run_id AS stored_source_id FROM replays r "
                     "LEFT JOIN runs p ON p.run_key = r.source_run_key")
    assert len(rows) == 120
    for row in rows:
        line = lines[(row["source_run_id"], row["mode"])]
        assert row["stored_source_id"] == line["sourceRunId"]  # the edge names the stored run
        assert row["replay_run_id"] == line["replayRunRecord"]["runId"]  # a run of its own
        assert row["source_revision"] == 1 and row["source_record_hash"]
        stats = line["replayStats"] or {}
        assert (row["recorded_tool_calls"], row["replayed_from_record"], row["missing_tool_calls"],
                row["live_fallback_calls"], row["input_source"]) == (
            stats.get("recordedToolCalls"), stats.get("replayedFromRecord"),
            stats.get("missingToolCalls"), stats.get("liveFallbackCalls"),
            stats.get("inputSource"))
    modes = _rows(db, "SELECT mode, count(*) AS n FROM replays GROUP BY mode ORDER BY mode")
    assert modes == [{"mode": "hybrid", "n": 60}, {"mode": "strict", "n": 60}]


def test_a_replay_line_with_an_error_is_a_failed_replay(corpus_store):
    db, _ = corpus_store
    errors = {(w["sourceRunId"], w["mode"]): w["error"] for w in read_ndjson_gz(REPLAYS)
              if w.get("error")}
    failed = _rows(db, "SELECT source_run_id, mode, replay_status, replay_error_name, reason "
                       "FROM replays WHERE reason IS NOT NULL")
    assert len(failed) == len(errors) == 34
    for row in failed:
        error = errors[(row["source_run_id"], row["mode"])]
        assert row["replay_status"] == "failed" and row["replay_error_name"] == error["name"]
        assert row["reason"] == f"{error['name']}: {error['message']}"
    (completed,) = _rows(db, "SELECT count(*) AS n FROM replays "
                             "WHERE reason IS NULL AND replay_status = 'completed'")
    assert completed["n"] == 86


def test_replay_lines_ingested_again_are_duplicates_and_lineage_shows_them(corpus_store):
    db, _ = corpus_store
    again = _json(db, "ingest", "--json", str(REPLAYS))
    assert (again["accepted"], again["duplicate"]) == (0, 120)
    (count,) = _rows(db, "SELECT count(*) AS n FROM replays")
    assert count["n"] == 120
    source = read_ndjson_gz(REPLAYS)[0]["sourceRunId"]
    tree = _json(db, "lineage", source, "--json")
    modes = sorted(kid["mode"] for kid in tree["children"] if kid["relation"] == "replay_of")
    assert modes == ["hybrid", "strict"]
    text = _ok(db, "lineage", source).stdout
    assert "(replay_of hybrid)" in text and "(replay_of strict)" in text


def test_replay_lines_before_their_sources_link_once_the_sources_are_ingested(tmp_path):
    db = tmp_path / "s.duckdb"
    lines = read_ndjson_gz(REPLAYS)[:6]
    _ok(db, "ingest", str(_write_ndjson(tmp_path / "replays.ndjson", lines)))
    before = _rows(db, "SELECT source_run_key, source_run_id FROM replays")
    assert len(before) == 6 and all(r["source_run_key"] is None for r in before)
    assert {r["source_run_id"] for r in before} == {w["sourceRunId"] for w in lines}
    _ok(db, "ingest", str(CORPUS_DEV / "corpus-baseline.ndjson.gz"))
    after = _rows(db, "SELECT source_run_key, source_run_id FROM replays")
    assert sorted(r["source_run_key"] for r in after) == sorted(
        f"aioc:{w['sourceRunId']}" for w in lines)
    # the same lines again, now that their sources are stored: the replays stored already
    again = _json(db, "ingest", "--json", str(tmp_path / "replays.ndjson"))
    assert (again["accepted"], again["duplicate"]) == (0, 6)
    (count,) = _rows(db, "SELECT count(*) AS n FROM replays")
    assert count["n"] == 6
    _ok(db, "verify")


def test_a_replay_line_claiming_its_sources_run_id_is_a_run_of_its_own(tmp_path):
    db = tmp_path / "s.duckdb"
    line = read_ndjson_gz(REPLAYS)[0]
    source_id = line["sourceRunId"]
    line["replayRunRecord"]["runId"] = source_id  # a replayer that kept the source's id
    _ok(db, "ingest", str(_write_ndjson(tmp_path / "replay.ndjson", [line])))
    with gzip.open(CORPUS_DEV / "corpus-baseline.ndjson.gz", "rt", encoding="utf-8") as fh:
        source = next(json.loads(text) for text in fh if source_id in text[:200])
    summary = _json(db, "ingest", "--json", str(_write_ndjson(tmp_path / "src.ndjson", [source])))
    assert (summary["accepted"], summary["revised"]) == (1, 0)  # not a revision of the replay
    (row,) = _rows(db, "SELECT replay_run_id, source_run_key FROM replays")
    assert row["replay_run_id"].startswith("replay-")
    assert row["source_run_key"] == f"aioc:{source_id}"
    shown = _json(db, "show", row["replay_run_id"], "--json")
    assert shown["metadata"]["replayClaimedRunId"] == source_id


@pytest.mark.parametrize(("path", "text", "line"), _BAD_LINES, ids=[c[0] for c in _BAD_LINES])
def test_a_bad_replay_line_is_one_reject_naming_the_path(tmp_path, path, text, line):
    db = tmp_path / "s.duckdb"
    (tmp_path / "bad.ndjson").write_text(line + "\n", encoding="utf-8")
    summary = _json(db, "ingest", "--json", str(tmp_path / "bad.ndjson"), codes=(1,))
    assert (summary["accepted"], summary["rejected"]) == (0, 1)
    (reject,) = _json(db, "rejects", "--json")
    assert reject["path"] == path and text in reject["reason"]


def test_rejects_json_lists_every_problem_of_a_reject(tmp_path):
    db = tmp_path / "s.duckdb"
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"runId": 1}\n{"sourceRunId": "s", "replayRunRecord": {"runId": "r"}}\n'
                   '{"runId": "x", "startedAt": "t"}\n[1]\n', encoding="utf-8")
    summary = _json(db, "ingest", "--json", str(bad), codes=(1,))
    first, second, third, fourth = _json(db, "rejects", "--json")
    assert first["reason"] == "expected string, got number (and 10 more problems)"
    assert len(first["problems"]) == 11
    assert first["problems"][0] == {"path": "$.runId", "problem": "expected string, got number"}
    assert {"path": "$.items", "problem": "required field missing"} in first["problems"]
    assert all(p["path"].startswith("$.replayRunRecord.") for p in second["problems"])
    assert len(second["problems"]) == 10
    assert len(third["problems"]) == 9
    assert fourth["problems"] == [{"path": None, "problem": "not a JSON object (got array)"}]
    assert [len(r["problems"]) for r in summary["rejects"]] == [11, 10, 9, 1]
    _json(db, "ingest", "--json", str(bad), codes=(1,))  # kept once: problems once too
    assert [len(r["problems"]) for r in _json(db, "rejects", "--json")] == [11, 10, 9, 1]


def test_rejects_json_lists_a_bad_line_read_twice_in_one_ingest_as_stored(tmp_path):
    db = tmp_path / "s.duckdb"
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"runId": 1}\n', encoding="utf-8")
    _json(db, "ingest", "--json", str(bad), str(bad), codes=(1,))  # one batch, the line twice
    (stored,) = _rows(db, "SELECT count(*) AS n FROM rejects")
    listed = _json(db, "rejects", "--json")
    assert len(listed) == stored["n"]  # each stored reject once, not once per kept problem list
    assert [len(r["problems"]) for r in listed] == [11] * stored["n"]


def test_a_store_from_before_reject_problems_lists_its_rejects_and_takes_new_ones(tmp_path):
    import duckdb

    db = tmp_path / "old.duckdb"
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"runId": 1}\n', encoding="utf-8")
    _json(db, "ingest", "--json", str(bad), codes=(1,))
    con = duckdb.connect(str(db))  # as a store was before schema 005: no reject_problems table
    con.execute("DELETE FROM schema_migrations WHERE name = '005_reject_problems.sql'")
    con.execute("DROP TABLE reject_problems")
    con.close()
    (old,) = _json(db, "rejects", "--json")  # a reader upgrades the store first
    assert old["problems"] == [{"path": "$.runId", "problem": old["reason"]}]  # all it kept
    other = tmp_path / "other.ndjson"
    other.write_text('{"runId": 2}\n', encoding="utf-8")
    _json(db, "ingest", "--json", str(other), codes=(1,))
    assert [len(r["problems"]) for r in _json(db, "rejects", "--json")] == [1, 11]
