"""Parsing agentuse session trees (recstore.formats.agentuse): the v0.15 fixture tree, layout
detection, ordering, subagent linking, and every bad input of docs/agentuse-sessions.md §4.2 on a
corrupted copy of the fixture."""

from __future__ import annotations

import dataclasses
import json
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.formats.agentuse import assemble_run, is_agentuse_tree, part_sort_key, scan_tree

from .conftest import AGENTUSE_DATA

PROJECT = AGENTUSE_DATA / "agentuse" / "project" / "712ea0cee5443fb9"
CONTAINER = PROJECT / "session"
ROOT_ID = "01M8PCRENAD8M1WA7TYT0KGN5Y"
CHILD_ID = "01M8PCRENWQ1KKA1T2JG6FN25X"
ROOT_DIR = f"{ROOT_ID}-agents-reply"
MSG = "01M8PCRENBTSEY3HPRJDSV1DFA"
CHILD_DIR = f"{ROOT_DIR}/subagent/{CHILD_ID}-agents-research"
CHILD_MSG = "01M8PCRENWHAYP5DS25T2BANDZ"


def writable_copy(tmp_path: Path) -> Path:
    """A writable copy of the read-only fixture data root."""
    dest = tmp_path / "data"
    shutil.copytree(AGENTUSE_DATA, dest)
    for p in [dest, *dest.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return dest


def session_dir(root: Path) -> Path:
    return root / "agentuse" / "project" / "712ea0cee5443fb9" / "session"


def only_run(path: Path):
    scan = scan_tree(path)
    assert len(scan.trees) == 1
    return scan, assemble_run(scan.trees[0].files)


# ---------------------------------------------------------------------------------------------
# the fixture as written by agentuse v0.15


@pytest.mark.parametrize(
    "path", [AGENTUSE_DATA, AGENTUSE_DATA / "agentuse", PROJECT, CONTAINER, CONTAINER / ROOT_DIR]
)
def test_layout_is_auto_detected(path):
    assert is_agentuse_tree(path)
    scan, run = only_run(path)
    assert scan.problems == [] and run.problems == []
    assert run.run_key == f"agentuse:{ROOT_ID}"
    assert len(scan.trees[0].files) == 19


def test_fixture_run_fields():
    _, run = only_run(AGENTUSE_DATA)
    root = run.root
    assert (root.status, root.trigger, root.mock, root.model) == (
        "completed",
        "manual",
        False,
        "anthropic:claude-sonnet-4-6",
    )
    assert (root.agent_id, root.agent_name, root.version, root.project_root) == (
        "agents/reply",
        "reply",
        "0.15.0",
        "/home/dev/acme-support",
    )
    assert (root.created, root.updated, root.completed) == (
        1796047911594,
        1796047911650,
        1796047911648,
    )
    assert root.tokens == {
        "input": 15321,
        "output": 902,
        "reasoning": 120,
        "cache_read": 9000,
        "cache_write": 2048,
    }
    # tree totals add the child's own tokens; the parent's subagent part metadata is not added
    assert run.tree_tokens()["input"] == 15321 + 812
    assert run.primary_message.user_prompt == "focus on tone"
    assert [t["name"] for t in run.tools_snapshot] == [
        "tools__bash",
        "store_list",
        "subagent__research",
        "await_human",
    ]
    assert run.lineage == []


def test_fixture_subagent_visit_and_link():
    _, run = only_run(AGENTUSE_DATA)
    root, child = run.visits
    assert (child.session_id, child.parent_session_id, child.parent_link, child.depth) == (
        CHILD_ID,
        ROOT_ID,
        "parentSessionID",
        1,
    )
    assert child.is_subagent and child.agent_id == "agents/research"
    call = next(c for c in run.tool_calls if c.kind == "subagent")
    # no field points from the call to the child: linked by name (100) + created within 5 s (10)
    assert (call.child_session_id, call.child_link, call.child_link_confidence) == (
        CHILD_ID,
        "inferred",
        1.0,
    )
    assert (child.via_call_id, child.via_part_id) == ("toolu_01GHI", call.part_id)
    assert [e.type for e in run.events if e.session_id == CHILD_ID] == ["text"]


def test_fixture_tool_calls_gate_and_events_in_agentuse_order():
    _, run = only_run(AGENTUSE_DATA)
    root_parts = sorted(
        [(c.order, c.tool) for c in run.tool_calls]
        + [(e.order, e.type) for e in run.events if e.session_id == ROOT_ID]
    )
    assert [name for _, name in root_parts] == [
        "reasoning",
        "text",
        "store_list",
        "tools__bash",
        "log",
        "subagent__research",
        "compaction",
        "await_human",
        "learning",
        "text",
    ]
    bash = next(c for c in run.tool_calls if c.tool == "tools__bash")
    assert (bash.status, bash.error, bash.output, bash.t_start, bash.t_end) == (
        "error",
        "Command not allowed: gh",
        None,
        1796047911607,
        1796047911610,
    )
    (gate,) = run.gates
    assert (gate.call_id, gate.status, gate.prompt, gate.decision, gate.comment, gate.reviewer) == (
        "toolu_01JKL",
        "completed",
        "Post this reply?",
        "comment",
        "Shorter please",
        "cli",
    )
    assert gate.resume_payload["kind"] == "await_human"
    # human-level turns: the resolved gate and the follow-up prompt each start a new turn
    assert {
        e.type: e.turn
        for e in run.events
        if e.session_id == ROOT_ID and e.type in ("learning", "compaction")
    } == {"compaction": 1, "learning": 2}
    follow_up = next(e for e in run.events if e.subtype == "user")
    assert follow_up.turn == 3


def test_fixture_clamped_tool_output_artifact():
    _, run = only_run(AGENTUSE_DATA)
    (artifact,) = run.artifacts
    assert (
        artifact.rel_path
        == f"{ROOT_DIR}/{MSG}/artifact/tool-output-tools__bash-01M8PCREPZVF3G06FKX339GSSE.json"
    )
    assert (artifact.tool, artifact.format, artifact.session_id) == ("tools__bash", "json", ROOT_ID)
    assert artifact.output == {"output": "x" * 50}


def test_clamped_output_links_its_artifact(tmp_path):
    data = writable_copy(tmp_path)
    part = session_dir(data) / ROOT_DIR / MSG / "part" / "01M8PCRENQNFY3XFWCX9QM3W97.json"
    art_rel = f"{ROOT_DIR}/{MSG}/artifact/tool-output-tools__bash-01M8PCREPZVF3G06FKX339GSSE.json"
    value = json.loads(part.read_text())
    value["state"] = {
        "status": "completed",
        "input": {"command": "ls"},
        "time": {"start": 1796047911607, "end": 1796047911610},
        "output": {
            "output": "xxx",
            "metadata": {
                "fullOutputArtifact": {
                    "kind": "tool-output",
                    "path": art_rel,
                    "bytes": 50,
                    "originalChars": 50,
                }
            },
        },
    }
    part.write_text(json.dumps(value))
    _, run = only_run(data)
    bash = next(c for c in run.tool_calls if c.tool == "tools__bash")
    assert bash.artifact_path == art_rel
    assert run.artifacts[0].call_id == "toolu_01DEF"


def test_part_sort_key_uses_times_then_ids():
    parts = [
        {"id": "B", "type": "text", "time": {"start": 5}},
        {"id": "A", "type": "text", "time": {"start": 5}},
        {"id": "0", "type": "log"},
        {
            "id": "C",
            "type": "tool",
            "state": {"status": "pending", "suspendedAt": 1, "time": {"start": 99}},
        },
        {"id": "D", "type": "tool", "state": {"status": "completed", "time": {"start": 3}}},
    ]
    assert [p["id"] for p in sorted(parts, key=part_sort_key)] == ["C", "D", "A", "B", "0"]


def test_replay_session_lineage(tmp_path):
    data = writable_copy(tmp_path)
    container = session_dir(data)
    replay_id = "01M8PCRENAD8M1WA7TYT0KGN99"
    replay_dir = container / f"{replay_id}-agents-reply"
    shutil.copytree(container / ROOT_DIR, replay_dir)
    shutil.rmtree(replay_dir / "subagent")
    info = json.loads((replay_dir / "session.json").read_text())
    info.update(
        id=replay_id,
        mock=True,
        config={"maxSteps": 100, "timeout": 300, "replaySourceSessionId": ROOT_ID},
    )
    (replay_dir / "session.json").write_text(json.dumps(info))
    report = {
        "success": True,
        "status": "proposal",
        "sourceSessionId": ROOT_ID,
        "sessionId": replay_id,
        "calls": [
            {"tool": "store_list", "source": "recording", "partId": "01M8PCRENMH5FEF5JE9N3BZ74S"}
        ],
    }
    (replay_dir / "replay.json").write_text(json.dumps(report))
    scan = scan_tree(data)
    runs = {r.session_id: r for r in map(assemble_run, (t.files for t in scan.trees))}
    replay = runs[replay_id]
    assert replay.root.mock is True
    (edge,) = replay.lineage
    assert (edge.kind, edge.source_session_id, edge.source_run_key) == (
        "strict_replay",
        ROOT_ID,
        f"agentuse:{ROOT_ID}",
    )
    assert (
        edge.report_rel_path == f"{replay_id}-agents-reply/replay.json"
        and edge.report["calls"][0]["partId"] == "01M8PCRENMH5FEF5JE9N3BZ74S"
    )


# ---------------------------------------------------------------------------------------------
# §4.2 bad inputs, each on a copy of the fixture: the rest of the tree survives


def problems_by_code(scan, run) -> dict[str, list]:
    out: dict[str, list] = {}
    for p in [*scan.problems, *run.problems]:
        out.setdefault(p.code, []).append(p)
    return out


def assert_rest_intact(run, *, child: bool = True):
    assert run.run_key == f"agentuse:{ROOT_ID}"
    assert {c.tool for c in run.tool_calls} >= {
        "store_list",
        "tools__bash",
        "subagent__research",
        "await_human",
    }
    assert len(run.gates) == 1 and len(run.artifacts) == 1
    if child:
        assert [v.session_id for v in run.visits] == [ROOT_ID, CHILD_ID]


def test_trailing_garbage_is_salvaged_and_reported(tmp_path):
    data = writable_copy(tmp_path)
    target = session_dir(data) / CHILD_DIR / "session.json"
    target.write_text(target.read_text() + "\n  }\n}")
    scan, run = only_run(data)
    assert_rest_intact(run)
    (p,) = problems_by_code(scan, run)["salvaged"]
    assert p.rel_path == f"{CHILD_DIR}/session.json" and p.kept and "garbage" in p.reason
    assert p.source_path == str(target)


def test_truncated_part_is_rejected(tmp_path):
    data = writable_copy(tmp_path)
    bad = session_dir(data) / ROOT_DIR / MSG / "part" / "01M8PCREQ00000000000000000.json"
    bad.write_text('{ "type": "tool", "tool": "shell", "output": ')
    scan, run = only_run(data)
    assert_rest_intact(run)
    (p,) = problems_by_code(scan, run)["corrupt_json"]
    assert (
        p.rel_path.endswith("01M8PCREQ00000000000000000.json")
        and not p.kept
        and "corrupt JSON" in p.reason
    )


def test_corrupt_session_json_falls_back_to_directory_name(tmp_path):
    data = writable_copy(tmp_path)
    (session_dir(data) / CHILD_DIR / "session.json").write_text('{"id": "01M8PC')
    scan, run = only_run(data)
    child = run.visits[1]
    assert (child.session_id, child.agent_id, child.status, child.parent_link) == (
        CHILD_ID,
        "agents-research",
        "unknown",
        "nesting",
    )
    assert child.derived_from_dir_name
    assert "corrupt_json" in problems_by_code(scan, run)


def test_leftover_tmp_files_are_ignored_and_reported(tmp_path):
    data = writable_copy(tmp_path)
    top = session_dir(data) / ROOT_DIR
    names = [
        top / "session.json.4242.0f0e.tmp",
        top / MSG / "part" / "01M8PCRENMH5FEF5JE9N3BZ74S.json.1796047911000.tmp",
        top / MSG / "artifact" / "tool-output-tools__bash-01M8.txt.77.01M8PCREQ0.tmp",
    ]
    for p in names:
        p.write_text("{ half")
    scan, run = only_run(data)
    assert_rest_intact(run)
    tmp = problems_by_code(scan, run)["tmp_file"]
    assert sorted(p.source_path for p in tmp) == sorted(map(str, names))
    assert all(not p.kept and "temp file" in p.reason for p in tmp)


def test_orphaned_child_at_top_level_joins_its_parent(tmp_path):
    data = writable_copy(tmp_path)
    container = session_dir(data)
    shutil.move(container / CHILD_DIR, container / f"{CHILD_ID}-agents-research")
    scan, run = only_run(data)
    assert_rest_intact(run)
    child = run.visits[1]
    assert (child.parent_session_id, child.parent_link, child.depth, child.via_call_id) == (
        ROOT_ID,
        "parentSessionID",
        1,
        "toolu_01GHI",
    )


def test_orphaned_child_without_parent_is_rejected(tmp_path):
    data = writable_copy(tmp_path)
    container = session_dir(data)
    orphan = container / "01M8PCRENWQ1KKA1T2JG6FN2ZZ-agents-lost"
    shutil.copytree(container / CHILD_DIR, orphan)
    info = json.loads((orphan / "session.json").read_text())
    info.update(id="01M8PCRENWQ1KKA1T2JG6FN2ZZ", parentSessionID="01M8PCRENAD8M1WA7TYT0KGNXX")
    (orphan / "session.json").write_text(json.dumps(info))
    scan, run = only_run(data)
    assert_rest_intact(run)
    (p,) = problems_by_code(scan, run)["orphan"]
    assert "01M8PCRENAD8M1WA7TYT0KGNXX" in p.reason and not p.kept


def test_stuck_running_session_and_abandoned_calls(tmp_path):
    data = writable_copy(tmp_path)
    container = session_dir(data)
    running_part = {
        "type": "tool",
        "callID": "toolu_RUN",
        "tool": "tools__bash",
        "state": {
            "status": "running",
            "input": {"command": "sleep 9"},
            "time": {"start": 1796047911613},
        },
        "id": "01M8PCRENXHCHX9S1AHZ58SKZZ",
        "sessionID": CHILD_ID,
        "messageID": CHILD_MSG,
    }
    (container / CHILD_DIR / CHILD_MSG / "part" / "01M8PCRENXHCHX9S1AHZ58SKZZ.json").write_text(
        json.dumps(running_part)
    )
    info_path = container / ROOT_DIR / "session.json"
    info = json.loads(info_path.read_text())
    info["status"] = "running"
    info_path.write_text(json.dumps(info))
    scan, run = only_run(data)
    assert_rest_intact(run)
    assert run.status == "running"
    codes = problems_by_code(scan, run)
    assert codes["still_running"][0].rel_path == f"{ROOT_DIR}/session.json"
    # the child session is 'completed', so its call left 'running' is abandoned
    stuck = next(c for c in run.tool_calls if c.call_id == "toolu_RUN")
    assert (stuck.status, stuck.raw_status) == ("abandoned", "running")
    assert codes["abandoned_call"][0].rel_path.endswith("01M8PCRENXHCHX9S1AHZ58SKZZ.json")


def test_unknown_call_ids_are_not_keys(tmp_path):
    data = writable_copy(tmp_path)
    part_dir = session_dir(data) / ROOT_DIR / MSG / "part"
    for suffix, t in (("U1", 1796047911630), ("U2", 1796047911631)):
        pid = f"01M8PCREP3N0P0ETW6GHX2PZ{suffix}"
        part = {
            "type": "tool",
            "callID": "unknown",
            "tool": "tools__bash",
            "state": {
                "status": "error",
                "input": {},
                "error": "stopped",
                "time": {"start": t, "end": t},
            },
            "id": pid,
            "sessionID": ROOT_ID,
            "messageID": MSG,
        }
        (part_dir / f"{pid}.json").write_text(json.dumps(part))
    scan, run = only_run(data)
    assert_rest_intact(run)
    unknown = [c for c in run.tool_calls if c.call_id == "unknown"]
    assert len(unknown) == 2 and len({c.part_id for c in unknown}) == 2
    assert len(problems_by_code(scan, run)["unknown_call_id"]) == 2


def test_missing_message_json_keeps_parts(tmp_path):
    data = writable_copy(tmp_path)
    (session_dir(data) / CHILD_DIR / CHILD_MSG / "message.json").unlink()
    scan, run = only_run(data)
    assert_rest_intact(run)
    assert run.visits[1].tokens == {}
    assert [e.type for e in run.events if e.session_id == CHILD_ID] == ["text"]
    (p,) = problems_by_code(scan, run)["missing_message_json"]
    assert p.rel_path == f"{CHILD_DIR}/{CHILD_MSG}" and p.kept


def test_id_mismatch_trusts_the_file(tmp_path):
    data = writable_copy(tmp_path)
    path = session_dir(data) / CHILD_DIR / "session.json"
    info = json.loads(path.read_text())
    info["id"] = "01M8PCRENWQ1KKA1T2JG6FN2AA"
    path.write_text(json.dumps(info))
    scan, run = only_run(data)
    assert run.visits[1].session_id == "01M8PCRENWQ1KKA1T2JG6FN2AA"
    assert "id_mismatch" in problems_by_code(scan, run)


def test_unknown_part_types_and_extra_fields_are_kept(tmp_path):
    data = writable_copy(tmp_path)
    part_dir = session_dir(data) / ROOT_DIR / MSG / "part"
    part = {
        "type": "verify",
        "verdict": "pass",
        "attempt": 1,
        "superseded": True,
        "time": {"start": 1796047911647},
        "id": "01M8PCREPYBAYRDMDYRVKSGDZZ",
        "sessionID": ROOT_ID,
        "messageID": MSG,
    }
    (part_dir / "01M8PCREPYBAYRDMDYRVKSGDZZ.json").write_text(json.dumps(part))
    _, run = only_run(data)
    event = next(e for e in run.events if e.type == "verify")
    assert event.subtype == "pass" and event.payload["superseded"] is True


# ---------------------------------------------------------------------------------------------
# property: no single damaged file stops the fold


_FIXTURE_FILES = scan_tree(AGENTUSE_DATA).trees[0].files


@settings(max_examples=120, deadline=None)
@given(
    st.integers(0, len(_FIXTURE_FILES) - 1),
    st.one_of(
        st.integers(0, 400).map(lambda k: ("cut", k)),
        st.text(min_size=1, max_size=20).map(lambda t: ("append", t)),
    ),
)
def test_property_any_damaged_file_leaves_the_run(index, damage):
    files = list(_FIXTURE_FILES)
    target = files[index]
    kind, arg = damage
    text = target.text[:arg] if kind == "cut" else target.text + arg
    files[index] = dataclasses.replace(target, text=text)
    run = assemble_run(files)
    assert run.run_key == f"agentuse:{ROOT_ID}"
    assert len(run.tool_calls) >= 3  # at most the damaged part is lost
    known = {f.rel_path for f in files}
    for problem in run.problems:
        assert problem.rel_path.split(":")[0] in known or any(
            k.startswith(problem.rel_path + "/") for k in known
        )
        assert problem.reason


def test_data_root_with_several_projects_and_odd_directory_names(tmp_path):
    data = writable_copy(tmp_path)
    projects = data / "agentuse" / "project"
    other = projects / "global" / "session" / "legacy-session-dir"  # pre-v0.12 shared dir, odd name
    shutil.copytree(session_dir(data) / ROOT_DIR, other)
    shutil.rmtree(other / "subagent")
    info = json.loads((other / "session.json").read_text())
    info.update(
        id="01M8PCRENAD8M1WA7TYT0KGN11",
        project={"root": "/home/dev/other", "cwd": "/home/dev/other"},
    )
    (other / "session.json").write_text(json.dumps(info))
    scan = scan_tree(data)
    runs = {r.session_id: r for r in (assemble_run(t.files) for t in scan.trees)}
    assert set(runs) == {ROOT_ID, "01M8PCRENAD8M1WA7TYT0KGN11"}
    assert runs["01M8PCRENAD8M1WA7TYT0KGN11"].root.project_root == "/home/dev/other"
    assert runs[ROOT_ID].root.project_root == "/home/dev/acme-support"
