"""agentuse trees through the real store and CLI: the fixture ingests with zero rejects (runs,
subagent visit and link, approval gate, clamped artifact, lineage), a copy corrupted in every
§4.2 way still ingests everything else with each bad file in rejects, and re-scans append only
new or changed files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from recstore.store.store import Store

from .conftest import AGENTUSE_DATA
from .test_agentuse_format import (
    CHILD_DIR,
    CHILD_ID,
    CHILD_MSG,
    MSG,
    ROOT_DIR,
    ROOT_ID,
    session_dir,
    writable_copy,
)

RUN_KEY = f"agentuse:{ROOT_ID}"


def rows(store: Store, sql: str, params: list | None = None) -> list[tuple]:
    with store.reader() as con:
        return con.execute(sql, params or []).fetchall()


def event_count(store: Store) -> int:
    return rows(store, "SELECT count(*) FROM events")[0][0]


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "au.duckdb")


def test_fixture_tree_ingests_with_zero_rejects(store):
    summary = store.ingest([str(AGENTUSE_DATA)])
    assert (summary.accepted, summary.rejected, summary.run_keys) == (1, 0, [RUN_KEY])
    assert rows(store, "SELECT count(*) FROM rejects") == [(0,)]
    run = rows(
        store,
        "SELECT format, run_id, status, agent, model, trigger, mock, tokens_input, tokens_output, tokens_cache_read, "
        "visit_count, tool_call_count, approval_count, question, response, error_message FROM runs",
    )
    assert run == [
        (
            "agentuse",
            ROOT_ID,
            "completed",
            "agents/reply",
            "anthropic:claude-sonnet-4-6",
            "manual",
            False,
            15321 + 812,
            902 + 44,
            9000,
            2,
            4,
            1,
            "focus on tone",
            "Checking the store for pending mentions.",
            None,
        )
    ]
    assert rows(
        store, "SELECT count(*), count(DISTINCT type) FROM events WHERE stream_key = ?", [RUN_KEY]
    ) == [(19, 1)]


def test_fixture_subagent_visit_and_its_link(store):
    store.ingest([str(AGENTUSE_DATA)])
    visits = rows(
        store,
        "SELECT visit_index, agent, transition, session_id, parent_visit_index, depth, via_call_id, link_confidence, status FROM visits ORDER BY visit_index",
    )
    assert visits == [
        (0, "agents/reply", "initial", ROOT_ID, None, 0, None, None, "completed"),
        (1, "agents/research", "subagent", CHILD_ID, 0, 1, "toolu_01GHI", 1.0, "completed"),
    ]
    call = rows(
        store,
        "SELECT name, child_session_id, child_link, child_link_confidence FROM tool_calls WHERE name LIKE 'subagent__%'",
    )
    assert call == [("subagent__research", CHILD_ID, "inferred", 1.0)]
    # the child's text sits inside the parent's call, in the visit's item interval
    start, end = rows(store, "SELECT item_start, item_end FROM visits WHERE visit_index = 1")[0]
    assert rows(
        store, "SELECT content FROM items WHERE item_index >= ? AND item_index < ?", [start, end]
    ) == [("Pricing is at https://example.com/pricing",)]


def test_fixture_approval_gate_and_tool_states(store):
    store.ingest([str(AGENTUSE_DATA)])
    gate = rows(
        store,
        "SELECT kind, call_id, tool_name, reason, public_reason, args_canonical, metadata FROM suspended_proposals",
    )
    (kind, call_id, tool, decision, comment, args, metadata) = gate[0]
    assert (kind, call_id, tool, decision, comment) == (
        "approval_gate",
        "toolu_01JKL",
        "await_human",
        "comment",
        "Shorter please",
    )
    assert json.loads(args) == {
        "draft": "Hi @alice, pricing is at ...",
        "prompt": "Post this reply?",
    }
    assert "rt_abc" not in metadata  # resume tokens are not projected
    calls = rows(
        store, "SELECT name, status, error, duration_ms FROM tool_calls ORDER BY call_index"
    )
    assert calls[1] == ("tools__bash", "error", "Command not allowed: gh", 3)


def test_fixture_clamped_tool_output_artifact_is_stored(store):
    store.ingest([str(AGENTUSE_DATA)])
    (payload,) = rows(store, "SELECT payload FROM events WHERE payload->>'kind' = 'artifact'")[0]
    artifact = json.loads(payload)
    assert (
        artifact["path"]
        == f"{ROOT_DIR}/{MSG}/artifact/tool-output-tools__bash-01M8PCREPZVF3G06FKX339GSSE.json"
    )
    assert json.loads(artifact["text"])["output"] == {"output": "x" * 50}


def test_lineage_of_a_replay_session(store, tmp_path):
    data = writable_copy(tmp_path)
    container = session_dir(data)
    replay_id = "01M8PCRENAD8M1WA7TYT0KGN99"
    replay_dir = container / f"{replay_id}-agents-reply"
    shutil.copytree(container / ROOT_DIR, replay_dir)
    shutil.rmtree(replay_dir / "subagent")
    info = json.loads((replay_dir / "session.json").read_text())
    info.update(id=replay_id, mock=True, config={"maxSteps": 100, "replaySourceSessionId": ROOT_ID})
    (replay_dir / "session.json").write_text(json.dumps(info))
    (replay_dir / "replay.json").write_text(
        json.dumps(
            {
                "success": True,
                "status": "proposal",
                "sourceSessionId": ROOT_ID,
                "sessionId": replay_id,
                "calls": [],
            }
        )
    )
    store.ingest([str(data)])
    run = rows(
        store,
        "SELECT mock, replay_of_run_id, metadata->>'$.agentuse.replayReport.status' FROM runs WHERE run_id = ?",
        [replay_id],
    )
    assert run == [(True, ROOT_ID, "proposal")]
    lineage = rows(
        store,
        "SELECT child_run_key, parent_run_key, relation FROM lineage WHERE child_run_key = ?",
        [f"agentuse:{replay_id}"],
    )
    assert lineage == [(f"agentuse:{replay_id}", RUN_KEY, "replay_of")]
    # DSL-style questions work across formats: production runs exclude test runs
    assert rows(store, "SELECT run_id FROM runs WHERE NOT coalesce(mock, false)") == [(ROOT_ID,)]


def test_rescan_of_an_unchanged_tree_appends_nothing(store):
    store.ingest([str(AGENTUSE_DATA)])
    before = (event_count(store), rows(store, "SELECT count(*) FROM streams")[0][0])
    summary = store.ingest([str(AGENTUSE_DATA)])
    assert (summary.accepted, summary.revised, summary.duplicate) == (0, 0, 1)
    assert (event_count(store), rows(store, "SELECT count(*) FROM streams")[0][0]) == before


def test_rescan_appends_only_changed_and_new_files(store, tmp_path):
    data = writable_copy(tmp_path)
    store.ingest([str(data)])
    container = session_dir(data)
    info_path = container / ROOT_DIR / "session.json"
    info = json.loads(info_path.read_text())
    info["time"]["updated"] += 1000
    info_path.write_text(json.dumps(info))
    new_part = {
        "type": "log",
        "level": "info",
        "message": "resumed",
        "time": {"start": 1796047911700},
        "id": "01M8PCREQ0000000000000000A",
        "sessionID": ROOT_ID,
        "messageID": MSG,
    }
    (container / ROOT_DIR / MSG / "part" / "01M8PCREQ0000000000000000A.json").write_text(
        json.dumps(new_part)
    )
    summary = store.ingest([str(data)])
    assert summary.revised == 1
    appended = rows(store, "SELECT payload->>'path' FROM events WHERE revision = 2 ORDER BY seq")
    assert sorted(p for (p,) in appended) == sorted(
        [f"{ROOT_DIR}/session.json", f"{ROOT_DIR}/{MSG}/part/01M8PCREQ0000000000000000A.json"]
    )
    # the projection is the fold of every revision: nothing of revision 1 is lost
    assert rows(store, "SELECT revision, visit_count, tool_call_count FROM runs") == [(2, 2, 4)]
    report = store.verify()
    assert report.ok, report.problems
    assert store.get_record(RUN_KEY)["completedAt"] == "2026-11-30T14:11:51.648Z"


def test_rows_of_a_revision_point_at_the_latest_event_of_their_file(store, tmp_path):
    """A re-scan that changes one tool part: the call's output is read from the new file event,
    and every item row points at the latest version of some file of the run (kept files at
    revision 1's events, the changed one at revision 2's)."""
    data = writable_copy(tmp_path)
    store.ingest([str(data)])
    part = session_dir(data) / ROOT_DIR / MSG / "part" / "01M8PCRENMH5FEF5JE9N3BZ74S.json"
    value = json.loads(part.read_text())
    value["state"]["output"]["count"] = 2
    part.write_text(json.dumps(value))
    assert store.ingest([str(data)]).revised == 1
    (part_seq,) = rows(
        store, "SELECT seq FROM events WHERE revision = 2 AND payload->>'path' LIKE ?",
        [f"%{part.name}"],
    )[0]
    (output_seq, output), = rows(
        store, "SELECT output_seq, output FROM proj_tool_calls WHERE name = 'store_list'"
    )
    assert output_seq == part_seq and json.loads(output)["count"] == 2
    latest = dict(rows(
        store, "SELECT max(seq), 0 FROM events WHERE type = 'agentuse_file' "
        "GROUP BY payload->>'path'",
    ))
    revision_of = dict(rows(store, "SELECT seq, revision FROM events"))
    item_seqs = [seq for (seq,) in rows(store, "SELECT event_seq FROM proj_items")]
    assert item_seqs and all(seq in latest for seq in item_seqs)
    assert {revision_of[seq] for seq in item_seqs} == {1, 2}
    # the events are whole files: each item's own JSON is kept in its row
    assert rows(store, "SELECT count(*) FROM proj_items WHERE payload IS NULL") == [(0,)]
    assert store.verify().ok


def corrupt_every_way(data) -> dict[str, str]:
    """Apply each §4.2 corruption to a copy; returns {code: path of the bad file}."""
    container = session_dir(data)
    root, child = container / ROOT_DIR, container / CHILD_DIR
    bad: dict[str, str] = {}
    # a valid object followed by garbage (interleaved writes)
    target = child / "session.json"
    target.write_text(target.read_text() + "\n  }\n}")
    bad["salvaged"] = str(target)
    # a truncated part
    target = root / MSG / "part" / "01M8PCREQ00000000000000000.json"
    target.write_text('{ "type": "tool", "tool": "shell", "output": ')
    bad["corrupt_json"] = str(target)
    # a leftover temp file
    target = root / MSG / "part" / "01M8PCRENMH5FEF5JE9N3BZ74S.json.4242.1f2e3d.tmp"
    target.write_text('{"type": "tool"')
    bad["tmp_file"] = str(target)
    # an orphaned child whose parent is not in the tree
    orphan = container / "01M8PCRENWQ1KKA1T2JG6FN2ZZ-agents-lost"
    shutil.copytree(child, orphan)
    info = json.JSONDecoder().raw_decode((orphan / "session.json").read_text())[0]
    info.update(id="01M8PCRENWQ1KKA1T2JG6FN2ZZ", parentSessionID="01M8PCRENAD8M1WA7TYT0KGNXX")
    (orphan / "session.json").write_text(json.dumps(info))
    bad["orphan"] = str(orphan / "session.json")
    # a session stuck 'running' after a crash, in its own tree
    stuck = container / "01M8PCRENAD8M1WA7TYT0KGN77-agents-stuck"
    shutil.copytree(root, stuck)
    shutil.rmtree(stuck / "subagent")
    info = json.loads((stuck / "session.json").read_text())
    info.update(id="01M8PCRENAD8M1WA7TYT0KGN77", status="running")
    (stuck / "session.json").write_text(json.dumps(info))
    for tmp in stuck.rglob("*.tmp"):
        tmp.unlink()
    (stuck / MSG / "part" / "01M8PCREQ00000000000000000.json").unlink()
    bad["still_running"] = str(stuck / "session.json")
    # a tool part with callID 'unknown'
    target = root / MSG / "part" / "01M8PCREP3N0P0ETW6GHX2PZU1.json"
    target.write_text(
        json.dumps(
            {
                "type": "tool",
                "callID": "unknown",
                "tool": "tools__bash",
                "state": {
                    "status": "error",
                    "input": {},
                    "error": "stopped",
                    "time": {"start": 1796047911630, "end": 1796047911631},
                },
                "id": "01M8PCREP3N0P0ETW6GHX2PZU1",
                "sessionID": ROOT_ID,
                "messageID": MSG,
            }
        )
    )
    bad["unknown_call_id"] = str(target)
    # a message directory without message.json
    (child / CHILD_MSG / "message.json").unlink()
    bad["missing_message_json"] = f"{CHILD_DIR}/{CHILD_MSG}"
    return bad


def test_corrupted_copy_ingests_everything_else_and_rejects_each_bad_file(store, tmp_path):
    data = writable_copy(tmp_path)
    bad = corrupt_every_way(data)
    summary = store.ingest([str(data)])
    assert sorted(summary.run_keys) == sorted([RUN_KEY, "agentuse:01M8PCRENAD8M1WA7TYT0KGN77"])
    # everything that was fine is stored: both visits, every tool call, the gate
    assert rows(
        store,
        "SELECT visit_count, tool_call_count, approval_count FROM runs WHERE run_key = ?",
        [RUN_KEY],
    ) == [(2, 5, 1)]
    assert rows(store, "SELECT status FROM runs WHERE run_id = '01M8PCRENAD8M1WA7TYT0KGN77'") == [
        ("running",)
    ]
    rejects = rows(store, "SELECT source_uri, path, reason, raw_text FROM rejects")
    for code, where in bad.items():
        hits = [
            r
            for r in rejects
            if (r[0] == where or (r[1] == where)) and r[2].startswith(f"agentuse {code}:")
        ]
        assert hits, f"no reject for {code} ({where}); rejects: {[r[:3] for r in rejects]}"
    truncated = next(r for r in rejects if r[2].startswith("agentuse corrupt_json"))
    assert truncated[3] == '{ "type": "tool", "tool": "shell", "output": '  # kept whole
    # kept-but-odd files are also findings of their run, so queries can see them
    codes = {c for (c,) in rows(store, "SELECT code FROM findings WHERE run_key = ?", [RUN_KEY])}
    assert {
        "agentuse.salvaged",
        "agentuse.unknown_call_id",
        "agentuse.missing_message_json",
    } <= codes
    # and a re-scan of the unchanged corrupted tree appends nothing, rejects included
    counts = (event_count(store), rows(store, "SELECT count(*) FROM rejects")[0][0])
    store.ingest([str(data)])
    assert (event_count(store), rows(store, "SELECT count(*) FROM rejects")[0][0]) == counts


def test_cli_ingest_detects_and_forces_agentuse(tmp_path):
    db = tmp_path / "cli.duckdb"

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "recstore", "--db", str(db), *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    first = cli("ingest", str(AGENTUSE_DATA))
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("accepted 1, duplicate 0")
    again = cli("ingest", str(AGENTUSE_DATA), "--format", "agentuse")
    assert again.stdout.startswith("accepted 0, duplicate 1")
    wrong = cli("ingest", str(tmp_path), "--format", "agentuse")
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert (
        wrong.stderr.strip()
        == f"recstore: error: {tmp_path}: not an agentuse data root, project, session container or session directory"
    )
    assert (db.stat().st_mode & 0o777) == 0o600


def test_cli_agentuse_check(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "recstore", "agentuse", "check", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )

    clean = run(str(AGENTUSE_DATA))
    assert clean.returncode == 0, clean.stderr
    assert clean.stdout.splitlines() == [
        "data_root: 1 sessions, 0 problems",
        f"{RUN_KEY} completed agents/reply visits=2 tool_calls=4 gates=1",
    ]
    data = writable_copy(tmp_path)
    bad = corrupt_every_way(data)
    damaged = run(str(data), "--json")
    assert damaged.returncode == 1
    codes = {p["code"] for p in json.loads(damaged.stdout)["problems"]}
    assert codes >= set(bad)
    assert run(str(tmp_path / "nope")).stderr.startswith("recstore: error: ")


def test_dsl_reads_both_formats(store):
    from recstore.query import select_run_keys

    from .conftest import AIOC_FIXTURES

    store.ingest([str(AGENTUSE_DATA), str(AIOC_FIXTURES / "tool-allow.json")])
    assert select_run_keys(
        store, "tool_calls.any(name = 'tools__bash' and status = 'error') and trigger = 'manual'"
    ) == [RUN_KEY]
    assert select_run_keys(store, "tokens_input > 16000 and visits.count() >= 2") == [RUN_KEY]
    assert sorted(select_run_keys(store, "status = 'completed'")) == sorted(
        [RUN_KEY, "aioc:tool-allow"]
    )


def test_cli_failed_tool_call_output_is_null_and_error_stays_in_error(tmp_path):
    """A failed call whose part file holds no output projects a NULL output (issue 27.11)."""
    db = tmp_path / "fail.duckdb"
    done = subprocess.run(
        [sys.executable, "-m", "recstore", "--db", str(db), "ingest", str(AGENTUSE_DATA)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    failed = rows(Store(db), "SELECT output, error FROM tool_calls WHERE status = 'error'")
    assert failed == [(None, "Command not allowed: gh")]
