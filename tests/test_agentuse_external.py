"""External replayers over a real subprocess (tests/replayers/replayer.py): success, non-zero
exit, timeout and garbage on stdout, each stored as a replay with the right status."""

from __future__ import annotations

import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from recstore.formats.agentuse import assemble_run, scan_tree, to_run_record
from recstore.replay.agentuse_match import recordings_from_session
from recstore.replay.external import (
    build_request,
    parse_replayer_output,
    replay_external,
    split_command,
)
from recstore.replay.lineage import load_source, store_replays
from recstore.store.store import Store

from .conftest import AGENTUSE_DATA, AIOC_FIXTURES

REPLAYER = Path(__file__).parent / "replayers" / "replayer.py"
SESSION = (
    AGENTUSE_DATA
    / "agentuse"
    / "project"
    / "712ea0cee5443fb9"
    / "session"
    / "01M8PCRENAD8M1WA7TYT0KGN5Y-agents-reply"
)


def command(*args: str) -> list[str]:
    return [sys.executable, str(REPLAYER), *args]


@pytest.fixture
def store(tmp_path) -> Store:
    s = Store(tmp_path / "r.duckdb")
    s.ingest([str(AIOC_FIXTURES / "tool-allow.json")])
    return s


def run_and_store(store: Store, argv: list[str], timeout: float = 20.0):
    source = load_source(store, "tool-allow")
    request = build_request(
        source.record, run_key=source.run_key, matching="agentuse", timeout=timeout
    )
    outcome = replay_external(source.record, argv, request)
    (key,) = store_replays(store, [(source, outcome.record, outcome.report, outcome.provider)])
    with store.reader() as con:
        run = con.execute(
            "SELECT status, error_name, error_message, replay_of_run_id FROM runs WHERE run_key = ?",
            [key],
        ).fetchone()
        replay = con.execute(
            "SELECT report_status, reason, source_run_key FROM replays WHERE replay_run_key = ?",
            [key],
        ).fetchone()
    return outcome, run, replay


def test_request_carries_source_modes_rules_and_tape(store):
    source = load_source(store, "tool-allow")
    request = build_request(
        source.record,
        run_key=source.run_key,
        mode="hybrid",
        input_mode="question",
        matching="agentuse",
    )
    assert (request["protocol"], request["mode"], request["inputMode"], request["matching"]) == (
        "recstore-replayer/1",
        "hybrid",
        "question",
        "agentuse",
    )
    assert (
        request["source"]["record"] == source.record
        and request["source"]["runKey"] == source.run_key
    )
    assert request["input"] == {"source": "question", "value": source.record["question"]}
    assert request["matchingRules"]["ignoreTopLevelKeys"] == ["intent"]
    assert request["toolTape"] and all(
        {"tool", "key", "status", "source"} <= set(e) for e in request["toolTape"]
    )
    aioc = build_request(source.record, matching="aioc")
    assert aioc["toolTape"][0]["key"].startswith(aioc["toolTape"][0]["tool"] + "\x1f")


def test_request_for_an_agentuse_session_uses_its_recordings():
    run = assemble_run(scan_tree(SESSION).trees[0].files)
    record = to_run_record(run)[0]
    request = build_request(
        record, run_key=run.run_key, matching="agentuse", recordings=recordings_from_session(run)
    )
    assert [e["tool"] for e in request["toolTape"]] == [
        "store_list",
        "tools__bash",
        "subagent__research",
    ]
    assert request["toolTape"][1] == {
        "tool": "tools__bash",
        "key": '["tools__bash",{"command":"gh api /notifications"}]',
        "arguments": {"command": "gh api /notifications"},
        "status": "error",
        "source": {"sourceRunId": run.session_id, "partId": "01M8PCRENQNFY3XFWCX9QM3W97"},
        "error": "Command not allowed: gh",
    }
    assert request["matchingRules"]["resolvePath"]["sourceRoot"] == "/home/dev/acme-support"


def test_success_is_stored_as_a_completed_replay(store):
    outcome, run, replay = run_and_store(store, command("ok"))
    assert outcome.exit_code == 0 and outcome.report.status == "completed"
    assert run == ("completed", None, None, "tool-allow")
    assert replay == ("completed", None, "aioc:tool-allow")
    assert outcome.record["metadata"]["harness"] == {"kind": "external", "command": command("ok")}


def test_non_zero_exit_is_a_failed_replay_with_the_stderr_tail(store):
    outcome, run, replay = run_and_store(store, command("exit"))
    assert outcome.exit_code == 3 and "model quota exceeded (429)" in outcome.stderr_tail
    status, error_name, message, replay_of = run
    assert (status, error_name, replay_of) == ("failed", "ExternalReplayerError", "tool-allow")
    assert message.startswith(
        "replayer exited with status 3: loading agent..."
    ) and message.endswith("Error: model quota exceeded (429)")
    assert replay[0] == "error" and "status 3" in replay[1]


def test_timeout_is_a_failed_replay(store):
    outcome, run, replay = run_and_store(store, command("sleep"), timeout=1.0)
    assert outcome.exit_code is None and outcome.seconds < 30
    assert (
        run[:2] == ("failed", "ExternalReplayerError") and run[2] == "replayer timed out after 1s"
    )
    assert replay == ("error", "replayer timed out after 1s", "aioc:tool-allow")


def test_garbage_on_stdout_is_a_failed_replay(store):
    outcome, run, replay = run_and_store(store, command("garbage"))
    assert outcome.exit_code == 0
    assert (
        run[0] == "failed"
        and "not JSON and not a session directory: 'Replay finished, see logs'" in run[2]
    )
    assert replay[0] == "error"


def test_missing_command_is_a_failed_replay(store):
    outcome, run, _ = run_and_store(store, ["/nonexistent/replayer"])
    assert run[0] == "failed" and "not found" in run[2]


def test_agentuse_session_path_on_stdout(store):
    outcome, run, replay = run_and_store(store, command("session", str(SESSION)))
    assert outcome.record["runId"] == "01M8PCRENAD8M1WA7TYT0KGN5Y"
    assert outcome.record["metadata"]["agentuse"]["sessionId"] == "01M8PCRENAD8M1WA7TYT0KGN5Y"
    assert run[3] == "tool-allow" and replay[0] in ("mismatch", "completed", "incomplete")


@pytest.mark.parametrize(
    ("stdout", "needle"),
    [
        ("", "printed nothing"),
        ("{oops", "invalid JSON"),
        ("[1, 2]", "expected a RunRecord object"),
        (json.dumps({"runId": "x"}), "required field missing"),
        (json.dumps({"agentuseSession": "/nonexistent"}), "does not exist"),
    ],
)
def test_bad_outputs_are_named(stdout, needle):
    with pytest.raises(Exception, match=needle):
        parse_replayer_output(stdout, "r")


def test_split_command():
    assert split_command("node 'my replayer.js' --fast") == ["node", "my replayer.js", "--fast"]
    with pytest.raises(Exception, match="empty"):
        split_command("  ")


# ---------------------------------------------------------------------------------------------
# the CLI: recstore replay RUN --command / --match agentuse


def cli(db: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recstore", "--db", str(db), *args],
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.fixture
def cli_db(tmp_path) -> Path:
    db = tmp_path / "cli.duckdb"
    done = cli(db, "ingest", str(AIOC_FIXTURES / "tool-allow.json"), str(AGENTUSE_DATA))
    assert done.returncode == 0, done.stderr
    return db


def test_cli_command_replayer_statuses(cli_db):
    ok = cli(cli_db, "replay", "tool-allow", "--command", shlex.join(command("ok")), "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["status"] == "completed"
    failed = cli(cli_db, "replay", "tool-allow", "--command", shlex.join(command("exit")), "--json")
    assert failed.returncode == 1
    report = json.loads(failed.stdout)
    assert report["status"] == "error" and "model quota exceeded (429)" in report["reason"]
    slow = cli(
        cli_db,
        "replay",
        "tool-allow",
        "--command",
        shlex.join(command("sleep")),
        "--command-timeout",
        "1",
        "--json",
    )
    assert (
        slow.returncode == 1 and json.loads(slow.stdout)["reason"] == "replayer timed out after 1s"
    )
    statuses = cli(
        cli_db,
        "query",
        "--json",
        "SELECT report_status, count(*) AS n FROM replays GROUP BY ALL ORDER BY 1",
    )
    assert statuses.returncode == 0, statuses.stderr
    assert "completed" in statuses.stdout and "error" in statuses.stdout


def test_cli_match_agentuse_on_an_aioc_run(cli_db):
    done = cli(cli_db, "replay", "tool-allow", "--from-source", "--match", "agentuse", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"


HARNESS_TOOLS = ["store_list", "tools__bash", "subagent__research", "await_human"]


def test_cli_match_agentuse_on_an_agentuse_session_captures_the_proposal(cli_db, tmp_path):
    script = [
        {
            "tool_calls": [
                {
                    "id": "c1",
                    "name": "store_list",
                    "arguments": {
                        "intent": "find",
                        "type": "mention",
                        "status": "pending",
                        "limit": 1,
                    },
                },
                {
                    "id": "c2",
                    "name": "tools__bash",
                    "arguments": {"command": "gh api /notifications"},
                },
            ]
        },
        {
            "tool_calls": [
                {
                    "id": "c3",
                    "name": "subagent__research",
                    "arguments": {"task": "Find the pricing page"},
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "id": "c4",
                    "name": "await_human",
                    "arguments": {"prompt": "Post?", "draft": "Hi @alice"},
                }
            ]
        },
    ]
    harness = {
        "runtime": {"entry_agent": "agents/reply"},
        "agents": {
            "agents/reply": {"instructions": "Draft a shorter reply.", "tools": HARNESS_TOOLS}
        },
        "tools": {name: {"parameters": {"type": "object"}} for name in HARNESS_TOOLS},
        "policies": {"default": "allow"},
        "provider": {"kind": "scripted", "script": script},
    }
    path = tmp_path / "candidate.yaml"
    path.write_text(json.dumps(harness))
    done = cli(
        cli_db,
        "replay",
        "agentuse:01M8PCRENAD8M1WA7TYT0KGN5Y",
        "--harness",
        str(path),
        "--match",
        "agentuse",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    key = json.loads(done.stdout)["replayRunKey"]
    meta = cli(cli_db, "query", "--json", f"SELECT metadata FROM runs WHERE run_key = '{key}'")
    report = json.loads(meta.stdout)[0]["metadata"]["agentuseReplay"]
    assert report["status"] == "proposal" and report["success"] is True
    assert report["sourceSessionId"] == "01M8PCRENAD8M1WA7TYT0KGN5Y"
    assert [c["source"] for c in report["calls"]] == [
        "store-projection",
        "recording",
        "recording",
        "proposal",
    ]
    assert report["original"]["proposal"]["prompt"] == "Post this reply?"
    assert report["current"]["proposal"] == {"prompt": "Post?", "draft": "Hi @alice"}
    assert report["instructionsSha256"] == hashlib.sha256(b"Draft a shorter reply.").hexdigest()
    assert len(report["agentSha256"]) == 64 and report["sourceModel"] == "anthropic:claude-sonnet-4-6"


def test_cli_refuses_a_mock_session_as_source(tmp_path):
    from .test_agentuse_format import session_dir, writable_copy

    data = writable_copy(tmp_path)
    info_path = session_dir(data) / SESSION.name / "session.json"
    info = json.loads(info_path.read_text())
    info["mock"] = True
    info_path.write_text(json.dumps(info))
    db = tmp_path / "m.duckdb"
    assert cli(db, "ingest", str(data)).returncode == 0
    done = cli(
        db,
        "replay",
        "agentuse:01M8PCRENAD8M1WA7TYT0KGN5Y",
        "--command",
        shlex.join(command("ok")),
        "--match",
        "agentuse",
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "mock:true" in done.stderr and done.stderr.count("\n") == 1
