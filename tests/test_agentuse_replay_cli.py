"""``recstore replay --match agentuse`` end to end, one data case per line of
``tests/cases/agentuse/cli_replays.ndjson``: the real CLI in a subprocess, a scripted model, the
fixture session (or a damaged copy) in a real store. The exit code follows agentuse (0 for a
captured proposal or a completed output, 1 otherwise, 2 for a refused source) and the stored
replay carries agentuse's report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from recstore.store.store import Store

from .conftest import AGENTUSE_DATA, AIOC_FIXTURES
from .test_agentuse_external import cli
from .test_agentuse_fidelity import load
from .test_agentuse_format import session_dir, writable_copy
from .test_agentuse_trees import damage

RUN = "agentuse:01M8PCRENAD8M1WA7TYT0KGN5Y"
TOOLS = [
    "store_list", "store_create", "store_get", "tools__bash", "subagent__research",
    "tools__filesystem_read", "await_human", "report_complete", "report_incomplete",
]


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("agentuse-replays") / "replays.duckdb"
    done = cli(db, "ingest", str(AGENTUSE_DATA), str(AIOC_FIXTURES / "tool-allow.json"))
    assert done.returncode == 0, done.stderr
    return db


def _source_state(db: Path, run_key: str) -> list:
    with Store(db).reader() as con:
        return con.execute(
            "SELECT revision, record_hash, last_seq FROM runs WHERE ? IN (run_key, run_id)",
            [run_key],
        ).fetchall()


def harness(case: dict, reference: Path) -> dict:
    script = json.loads(json.dumps(case.get("script", [])).replace('"REF"', json.dumps(str(reference))))
    return {
        "runtime": {"entry_agent": "agents/reply", "max_turns": case.get("max_turns", 10)},
        "agents": {"agents/reply": {"instructions": "Draft a shorter reply.", "tools": TOOLS}},
        "tools": {name: {"parameters": {"type": "object"}} for name in TOOLS},
        "policies": {"default": "allow"},
        "provider": {"kind": "scripted", "script": script},
    }


@pytest.mark.parametrize("case", load("cli_replays.ndjson"))
def test_cli_replay(case, fixture_db, tmp_path):
    db = fixture_db
    if case.get("ops"):
        data = writable_copy(tmp_path)
        for op in case["ops"]:
            damage(session_dir(data), op)
        db = tmp_path / "damaged.duckdb"
        assert cli(db, "ingest", str(data)).returncode in (0, 1)
    args = ["replay", case.get("run", RUN), "--match", "agentuse", "--json"]
    reference = tmp_path / "brief.md"
    reference.write_text("CURRENT BRIEF\nsecond line\n")
    if case.get("from_source"):
        args.append("--from-source")
    else:
        path = tmp_path / "candidate.yaml"
        path.write_text(json.dumps(harness(case, reference)))
        args += ["--harness", str(path)]
    if case.get("reference"):
        args += ["--reference", str(reference)]
    source_key = case.get("run", RUN)
    before = _source_state(db, source_key)
    done = cli(db, *args)
    assert done.returncode == case["exit"], done.stdout + done.stderr
    assert _source_state(db, source_key) == before  # the source is never changed
    assert "Traceback" not in done.stderr
    if case["status"] is None:
        assert case["stderr_has"] in done.stderr and done.stderr.count("\n") == 1
        return
    verdict = json.loads(done.stdout)
    with Store(db).reader() as con:
        (meta, status, error_name, replay_of), = con.execute(
            "SELECT metadata, status, error_name, replay_of_run_id FROM runs WHERE run_key = ?",
            [verdict["replayRunKey"]],
        ).fetchall()
    report = json.loads(meta)["agentuseReplay"]
    assert report["status"] == case["status"]
    assert report["sourceSessionId"] == replay_of == verdict["sourceRunKey"].split(":", 1)[1]
    if report["success"]:
        assert (status, error_name) == ("completed", None)
    assert verdict["status"] == ("completed" if report["success"] else verdict["status"])
    assert verdict["reason"].startswith(f"agentuse {case['status']}: ")
    assert [c["source"] for c in report["calls"]] == case["sources"]
    if "replay_status" in case:
        assert (status, error_name) == (case["replay_status"], case["replay_error"])
    if "proposal_display" in case:
        assert report["current"]["proposal"]["changes"][0]["displayContent"] == case["proposal_display"]


# ---------------------------------------------------------------------------------------------
# what the model sees (issue 15 item 2): a real chat-completions server on 127.0.0.1


def _chat_reply(content=None, tool_calls=None) -> dict:
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
            for c in tool_calls
        ]
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


@pytest.mark.parametrize(
    ("user_prompt", "user_message"),
    [
        ("focus on tone", "Draft a shorter reply.\n\nfocus on tone"),
        ("", "Draft a shorter reply."),  # no recorded prompt: never the old instructions
    ],
)
def test_model_sees_recorded_outputs_as_they_are(user_prompt, user_message, tmp_path):
    from .test_replay_openai import ChatServer

    data = writable_copy(tmp_path)
    message = session_dir(data) / f"{RUN.split(':')[1]}-agents-reply/01M8PCRENBTSEY3HPRJDSV1DFA"
    damage(message.parent, {"op": "patch", "path": f"{message.name}/message.json",
                            "set": {"user.prompt.user": user_prompt}})
    db = tmp_path / "model.duckdb"
    assert cli(db, "ingest", str(data)).returncode == 0
    server = ChatServer()
    try:
        page = {"intent": "find", "type": "mention", "status": "pending", "limit": 5}
        server.reply(payload=_chat_reply(tool_calls=[
            {"id": "c1", "name": "store_list", "arguments": page},
            {"id": "c2", "name": "tools__bash", "arguments": {"command": "gh api /notifications"}},
        ]))
        server.reply(payload=_chat_reply(content="NEW FINAL OUTPUT"))
        candidate = harness({"script": []}, tmp_path / "unused")
        candidate["provider"] = {"kind": "openai", "base_url": server.base_url, "model": "m", "api_key_env": None}
        path = tmp_path / "candidate.yaml"
        path.write_text(json.dumps(candidate))
        done = cli(db, "replay", RUN, "--match", "agentuse", "--harness", str(path), "--json")
    finally:
        server.close()
    assert done.returncode == 0, done.stdout + done.stderr
    first, second = (r["body"]["messages"] for r in server.requests)
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[1]["content"] == user_message
    tools = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
    listed = json.loads(tools["c1"])  # the recorded page, projected: no envelope around it
    assert listed["items"][0]["title"] == "@alice asked about pricing" and listed["replay"] is True
    assert "status" not in listed and "publicReason" not in tools["c1"]
    assert tools["c2"] == "Command not allowed: gh"  # a recorded error reads as its message
    sent = json.dumps([r["body"] for r in server.requests])
    for old in ("Draft a reply to the newest mention.", "Hi @alice, pricing is at", "Shorter please"):
        assert old not in sent  # old instructions, the old draft and the human verdict are withheld


# ---------------------------------------------------------------------------------------------
# the documented example (docs/agentuse.md, "A complete example") runs as written


def test_documented_agentuse_replay_example_runs(tmp_path):
    repo = Path(__file__).resolve().parent.parent
    doc = (repo / "docs" / "agentuse.md").read_text(encoding="utf-8")
    block = doc.split("### A complete example", 1)[1].split("```", 2)[1]
    commands = [line.split() for line in block.splitlines() if line.startswith("recstore ")]
    assert len(commands) == 2 and "--harness" in commands[1] and "agentuse" in commands[1]
    db = str(tmp_path / "agentuse.duckdb")
    outputs = []
    for words in commands:
        words = [db if w == "/tmp/agentuse.duckdb" else w for w in words[1:]]
        done = subprocess.run(
            [sys.executable, "-m", "recstore", *words],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        outputs.append(done.stdout)
    assert "COMPLETED (agentuse proposal:" in outputs[1]
    with Store(Path(db)).reader() as con:
        (meta,) = con.execute("SELECT metadata FROM runs WHERE replay_of_run_id IS NOT NULL").fetchone()
    calls = json.loads(meta)["agentuseReplay"]["calls"]
    assert [c["source"] for c in calls] == ["store-projection", "recording", "recording", "proposal"]
