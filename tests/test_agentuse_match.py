"""agentuse strict-replay matching: one test (or more) per rule of docs/agentuse-sessions.md
§2.3 (source eligibility, recording selection, dispatcher, status) and §3.1–§3.5."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.formats.agentuse import TreeFile, assemble_run, scan_tree
from recstore.replay.agentuse_match import (
    MISMATCH_REASON,
    STRIP_RUNTIME_KEYS,
    AgentuseTape,
    Recording,
    RecordingSet,
    ReplaySourceError,
    match_key,
    project_store_list,
    recordings_from_record,
    recordings_from_session,
    snapshot_references,
)

from .conftest import AGENTUSE_DATA, reverse_key_order

SID = "01M8PCRENAD8M1WA7TYT0KGN5Y"
MID = "01M8PCRENBTSEY3HPRJDSV1DFA"
SRC_ROOT = "/home/dev/acme-support"


def tape(*recs: Recording, cwd: str = SRC_ROOT, root: str | None = None, **kw) -> AgentuseTape:
    return AgentuseTape(
        RecordingSet("src", list(recs), cwd=cwd, created_at=1796047911594),
        project_root=root or cwd,
        **kw,
    )


def rec(tool: str, value, output=None, *, error: str | None = None, part: str = "p") -> Recording:
    return Recording(tool, value, "error" if error else "completed", output, error, part)


def hit(t: AgentuseTape, tool: str, value) -> bool:
    result = t.call(tool, value)
    return not (
        isinstance(result.value, dict) and result.value.get("error") == "REPLAY_INPUT_MISSING"
    )


# ---------------------------------------------------------------------------------------------
# session files built in memory (assemble_run reads (path, text) pairs only)


def _file(rel: str, kind: str, value) -> TreeFile:
    text = json.dumps(value)
    return TreeFile(rel, kind, hashlib.sha256(text.encode()).hexdigest(), len(text), text)


def session_files(
    parts: list[dict], *, session: dict | None = None, tools: bool = True, message: bool = True
) -> list[TreeFile]:
    top = f"{SID}-agents-reply"
    info = {
        "id": SID,
        "status": "completed",
        "agent": {"id": "agents/reply", "name": "reply"},
        "model": "anthropic:m",
        "time": {"created": 1000, "updated": 2000},
    }
    info.update(session or {})
    files = [_file(f"{top}/session.json", "session", info)]
    if tools:
        files.append(_file(f"{top}/tools.json", "tools", {"tools": [{"name": "tools__bash"}]}))
    if message:
        msg = {
            "id": MID,
            "sessionID": SID,
            "time": {"created": 1001},
            "user": {"prompt": {"task": "T", "user": "focus on tone"}},
            "assistant": {"path": {"root": SRC_ROOT}, "modelID": "anthropic:m"},
        }
        files.append(_file(f"{top}/{MID}/message.json", "message", msg))
    for i, part in enumerate(parts):
        pid = f"01M8PCRENC82T5E03J26R6B5{i:02d}"
        full = {"id": pid, "sessionID": SID, "messageID": MID, **part}
        files.append(_file(f"{top}/{MID}/part/{pid}.json", "part", full))
    return files


def tool_part(
    tool: str, value, t: int, *, status: str = "completed", output=None, error: str | None = None
) -> dict:
    state = {"status": status, "input": value, "time": {"start": t, "end": t + 1}}
    if status == "completed":
        state["output"] = output
    if status == "error":
        state["error"] = error
    if status == "pending":
        state = {"status": "pending", "input": value, "suspendedAt": t}
    return {"type": "tool", "callID": f"c{t}", "tool": tool, "state": state}


def text_part(text: str, t: int, role: str | None = None) -> dict:
    part = {"type": "text", "text": text, "time": {"start": t, "end": t}}
    if role:
        part["role"] = role
    return part


# ---------------------------------------------------------------------------------------------
# §3.1 the match key


def test_intent_is_ignored_at_top_level_only():
    t = tape(rec("tools__bash", {"command": "ls", "opts": {"intent": "x"}}, "out"))
    assert not hit(t, "tools__bash", {"command": "ls", "opts": {}})  # nested intent matters
    t = tape(rec("tools__bash", {"command": "ls", "intent": "old goal"}, "out"))
    assert t.call("tools__bash", {"intent": "a new goal", "command": "ls"}).value == "out"


def test_recovers_is_significant_by_default_and_strippable_by_flag():
    recorded = rec("tools__bash", {"command": "ls"}, "out")
    assert not hit(tape(recorded), "tools__bash", {"command": "ls", "recovers": "call_1"})
    flagged = tape(recorded, strip_keys=STRIP_RUNTIME_KEYS)
    assert flagged.call("tools__bash", {"command": "ls", "recovers": "call_1"}).value == "out"


def test_read_path_resolved_against_recording_root_and_replay_root():
    recorded = rec("tools__filesystem_read", {"file_path": "docs/./guide/../faq.md"}, "FAQ")
    # recorded relative path resolves against the source root; the new absolute path equals it
    t = tape(recorded, root="/elsewhere")
    assert (
        t.call("tools__filesystem_read", {"file_path": f"{SRC_ROOT}/docs//faq.md/"}).value == "FAQ"
    )
    # a relative new path resolves against the replay's root: same root matches …
    assert (
        tape(recorded).call("tools__filesystem_read", {"file_path": "./docs/faq.md"}).value == "FAQ"
    )
    # … a moved project does not (documented pitfall; absolute paths are not rebased either)
    assert not hit(
        tape(recorded, root="/moved"), "tools__filesystem_read", {"file_path": "docs/faq.md"}
    )


def test_read_path_resolution_is_lexical_only():
    recorded = rec("tools__filesystem_read", {"file_path": "/abs/File.md"}, "x")
    assert not hit(
        tape(recorded), "tools__filesystem_read", {"file_path": "/abs/file.md"}
    )  # case kept
    assert not hit(
        tape(rec("tools__filesystem_read", {"file_path": "~/a"}, "x"), root="/r"),
        "tools__filesystem_read",
        {"file_path": "/home/dev/a"},
    )
    # offset and limit stay significant
    recorded = rec("tools__filesystem_read", {"file_path": "a.md", "offset": 1}, "x")
    assert not hit(tape(recorded), "tools__filesystem_read", {"file_path": "a.md", "offset": 2})


def test_path_normalisation_applies_only_to_filesystem_read():
    for tool in (
        "tools__filesystem_write",
        "tools__filesystem_edit",
        "tools__skill_read",
        "mcp__fs__read",
    ):
        recorded = rec(tool, {"file_path": "./a.md"}, "x")
        assert not hit(tape(recorded), tool, {"file_path": "a.md"}), tool


def test_key_order_never_matters_and_array_order_does():
    recorded = rec("mcp__db__q", {"b": {"y": 1, "x": [{"k": 1, "j": 2}]}, "a": 0}, "r")
    assert (
        tape(recorded).call("mcp__db__q", {"a": 0, "b": {"x": [{"j": 2, "k": 1}], "y": 1}}).value
        == "r"
    )
    recorded = rec("mcp__db__q", {"ids": [1, 2]}, "r")
    assert not hit(tape(recorded), "mcp__db__q", {"ids": [2, 1]})


def test_number_formatting_null_and_exact_strings():
    assert match_key("t", {"n": 1}, None) == match_key("t", {"n": 1.0}, None)
    assert match_key("t", {"n": "5"}, None) != match_key("t", {"n": 5}, None)
    assert match_key("t", {"a": None}, None) != match_key("t", {}, None)
    assert match_key("t", {"s": "x"}, None) != match_key("t", {"s": "x "}, None)
    assert match_key("t", {"s": "é"}, None) != match_key("t", {"s": "e\u0301"}, None)  # no NFC
    assert match_key("t", {"s": "A"}, None) != match_key("t", {"s": "a"}, None)


def test_non_object_inputs_are_used_as_they_are():
    t = tape(rec("t", ["x", {"b": 1, "a": 2}], "arr"), rec("t", "plain", "str"), rec("t", 7, "num"))
    assert t.call("t", ["x", {"a": 2, "b": 1}]).value == "arr"
    assert t.call("t", "plain").value == "str"
    assert t.call("t", 7.0).value == "num"


def test_tool_names_are_exact():
    t = tape(rec("mcp__github__search", {"q": "x"}, "r"))
    assert not hit(t, "mcp__GitHub__search", {"q": "x"})
    assert not hit(tape(rec("mcp__github__search", {"q": "x"}, "r")), "search", {"q": "x"})


def test_everything_else_must_be_identical():
    recorded = rec("subagent__research", {"task": "Find the pricing page"}, {"output": "ok"})
    assert not hit(tape(recorded), "subagent__research", {"task": "Find the pricing page."})


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(max_size=4).filter(lambda k: k != "intent"), _json, max_size=5),
    st.text(max_size=5),
)
def test_property_key_ignores_key_order_and_top_level_intent(args, intent):
    assert match_key("t", args, "/r") == match_key("t", {"intent": intent, **reverse_key_order(args)}, "/r")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=8))
def test_property_fifo_per_key_in_any_cross_key_order(calls):
    """N identical calls replay the N recorded outputs in order; the N+1th is a mismatch."""
    recs = [rec("t", {"k": k}, f"{k}{i}") for k in "abc" for i in range(calls.count(k))]
    t = tape(*recs)
    seen: dict[str, int] = {}
    for k in calls:
        assert t.call("t", {"k": k}).value == f"{k}{seen.get(k, 0)}"
        seen[k] = seen.get(k, 0) + 1
    assert not hit(t, "t", {"k": calls[0]})
    assert t.status() == "mismatch"


# ---------------------------------------------------------------------------------------------
# §3.2 queues and recorded errors


def test_recorded_errors_are_consumed_and_replayed_as_errors_not_stops():
    t = tape(
        rec("tools__bash", {"command": "gh"}, error="Command not allowed: gh"),
        rec("tools__bash", {"command": "gh"}, "second"),
    )
    first = t.call("tools__bash", {"command": "gh"})
    assert first.is_error and first.error_message == "Command not allowed: gh"
    assert not t.stopped
    assert t.call("tools__bash", {"command": "gh"}).value == "second"
    assert [c["source"] for c in t.calls] == ["recording", "recording"]


def test_outputs_are_deep_copies():
    recorded = rec("t", {}, {"rows": [1]})
    t = tape(recorded, recorded)
    t.call("t", {}).value["rows"].append(2)
    assert t.call("t", {}).value == {"rows": [1]}


# ---------------------------------------------------------------------------------------------
# §3.3 what counts as recorded (and §2.3 recording selection / eligibility)


def test_fixture_recordings_stop_at_first_gate():
    run = assemble_run(scan_tree(AGENTUSE_DATA).trees[0].files)
    recs = recordings_from_session(run)
    assert [(r.tool, r.status) for r in recs.recordings] == [
        ("store_list", "completed"),
        ("tools__bash", "error"),
        ("subagent__research", "completed"),
    ]
    assert recs.original_proposal == {
        "prompt": "Post this reply?",
        "draft": "Hi @alice, pricing is at ...",
    }
    assert recs.original_text == "Checking the store for pending mentions."
    assert recs.user_prompt == "focus on tone" and recs.cwd == SRC_ROOT
    # subagent internals are not recordings; the parent's part replays the child's result
    t = AgentuseTape(recs, project_root=SRC_ROOT)
    assert (
        t.call("subagent__research", {"task": "Find the pricing page"})
        .value["output"]
        .startswith("Pricing is at")
    )


def test_selection_stops_at_user_text_and_skips_running_and_pending():
    parts = [
        tool_part("a", {}, 10, output="A"),
        tool_part("b", {}, 11, status="running"),
        tool_part("c", {}, 12, status="pending"),
        text_part("draft ", 13),
        tool_part("d", {}, 14, status="error", error="boom"),
        text_part("done", 15),
        text_part("follow-up", 16, role="user"),
        tool_part("e", {}, 17, output="E"),
        tool_part("await_human", {"prompt": "later"}, 18),
    ]
    recs = recordings_from_session(assemble_run(session_files(parts)))
    assert [(r.tool, r.status) for r in recs.recordings] == [("a", "completed"), ("d", "error")]
    assert recs.original_text == "draft done" and recs.original_proposal is None


def test_parts_are_taken_in_time_order_not_file_order():
    parts = [
        tool_part("late", {}, 50, output="L"),
        tool_part("await_human", {"prompt": "p"}, 30),
        tool_part("early", {}, 20, output="E"),
    ]
    recs = recordings_from_session(assemble_run(session_files(parts)))
    assert [r.tool for r in recs.recordings] == ["early"]


@pytest.mark.parametrize(
    ("session", "kwargs", "needle"),
    [
        ({"mock": True}, {}, "mock"),
        (
            {"mock": True, "config": {"replaySourceSessionId": "01M8PCRENAD8M1WA7TYT0KGN00"}},
            {},
            "mock",
        ),
        ({"status": "running"}, {}, "running"),
        ({"status": "preparing"}, {}, "preparing"),
        ({}, {"tools": False}, "tools.json"),
        ({}, {"message": False}, "primary message"),
    ],
)
def test_ineligible_sources_are_refused(session, kwargs, needle):
    files = session_files([tool_part("a", {}, 10, output="A")], session=session, **kwargs)
    with pytest.raises(ReplaySourceError, match=needle):
        recordings_from_session(assemble_run(files))


@pytest.mark.parametrize("status", ["completed", "error", "suspended"])
def test_finished_and_suspended_sources_are_accepted(status):
    files = session_files([tool_part("a", {}, 10, output="A")], session={"status": status})
    assert len(recordings_from_session(assemble_run(files)).recordings) == 1


def test_aioc_records_use_the_same_rules(aioc_records):
    record = aioc_records["tool-allow"]
    recs = recordings_from_record(record)
    assert recs.recordings and recs.source_run_key == f"aioc:{record['runId']}"
    first = recs.recordings[0]
    t = AgentuseTape(recs)
    assert t.call(first.tool, {"intent": "why", **first.input}).value == first.output
    replayed = dict(record, metadata={"replayOfRunId": record["runId"]})
    with pytest.raises(ReplaySourceError, match="replay"):
        recordings_from_record(replayed)


def test_aioc_recordings_stop_at_await_human_and_follow_up_user_message():
    items = [
        {"type": "message", "role": "user", "content": "q"},
        {"type": "tool_call_item", "callId": "1", "name": "a", "arguments": {}},
        {
            "type": "tool_call_output_item",
            "callId": "1",
            "output": {"status": "ok", "code": None, "publicReason": None, "data": "A"},
        },
        {"type": "message", "role": "user", "content": "follow-up"},
        {"type": "tool_call_item", "callId": "2", "name": "b", "arguments": {}},
        {"type": "tool_call_output_item", "callId": "2", "output": "B"},
    ]
    recs = recordings_from_record({"runId": "r", "items": items, "inputItemCount": 1})
    assert [(r.tool, r.output) for r in recs.recordings] == [("a", "A")]


# ---------------------------------------------------------------------------------------------
# §3.4 stops and trace entries (+ §2.3 dispatcher order and status)


def test_gate_captures_proposal_and_everything_after_is_stopped():
    t = tape(rec("t", {}, "x"))
    assert t.call("await_human", {"prompt": "Post?", "draft": "d"}).value == {
        "replay": True,
        "captured": True,
        "approved": False,
    }
    assert t.call("t", {}).value == {
        "replay": True,
        "stopped": True,
    }  # even a call that would match
    assert [c["source"] for c in t.calls] == ["proposal", "stopped"]
    report = t.report(session_id="new", model="m")
    assert report["status"] == "proposal" and report["success"] is True
    assert report["current"]["proposal"] == {"prompt": "Post?", "draft": "d"}


@pytest.mark.parametrize(
    ("tool", "status", "success"),
    [("report_complete", "completed", True), ("report_incomplete", "incomplete", False)],
)
def test_outcome_tools(tool, status, success):
    t = tape()
    t.call(tool, {"summary": "s"})
    report = t.report(session_id="n", model="m")
    assert (report["status"], report["success"], report["current"]["output"]) == (
        status,
        success,
        {"summary": "s"},
    )
    assert t.calls[0]["source"] == "outcome"


def test_missing_recording_is_a_mismatch_with_the_documented_reason():
    t = tape()
    result = t.call("tools__bash", {"command": "rm -rf /"})
    assert result.value == {
        "replay": True,
        "error": "REPLAY_INPUT_MISSING",
        "reason": MISMATCH_REASON,
    }
    report = t.report(session_id="n", model="m")
    assert report["status"] == "mismatch" and report["error"] == MISMATCH_REASON
    assert report["calls"] == [
        {"tool": "tools__bash", "input": {"command": "rm -rf /"}, "source": "missing"}
    ]


def test_media_recordings_stop_with_part_id():
    t = tape(
        rec("mcp__img__get", {}, {"content": [{"type": "image", "data": "AAA"}]}, part="p-media")
    )
    assert t.call("mcp__img__get", {}).value["error"] == "REPLAY_INPUT_MISSING"
    assert t.calls[-1] == {
        "tool": "mcp__img__get",
        "input": {},
        "source": "missing",
        "partId": "p-media",
    }


def test_status_rules():
    assert tape().status(error="timeout") == "error"
    assert tape().status(finish_reason="stop", final_text="Hi") == "completed"
    assert tape().status(finish_reason="stop", final_text="") == "error"
    t = tape()
    t.call("await_human", {})
    assert t.status(error="boom") == "error"  # an exception wins even after a proposal
    assert (
        tape().report(session_id="n", model="m")["error"]
        == "Replay ended without a proposal or final output"
    )


def test_current_reference_is_served_before_recordings(tmp_path):
    ref = tmp_path / "guide.md"
    ref.write_text("line one\nline two\nline three\n")
    refs = snapshot_references(["guide.md"], str(tmp_path))
    t = tape(
        rec("tools__filesystem_read", {"file_path": "guide.md"}, "OLD"),
        cwd=str(tmp_path),
        references=refs,
    )
    assert (
        t.call("tools__filesystem_read", {"file_path": "guide.md"}).value
        == "1\tline one\n2\tline two\n3\tline three"
    )
    paged = t.call("tools__filesystem_read", {"file_path": str(ref), "offset": 2, "limit": 1}).value
    assert paged == "[Reading lines 2-2 of 3 total]\n2\tline two"
    digest = hashlib.sha256(ref.read_bytes()).hexdigest()
    assert t.calls[0]["reference"] == {"path": str(ref), "sha256": digest}
    assert t.report(session_id="n", model="m")["referenceFiles"] == [
        {"path": str(ref), "sha256": digest}
    ]


def test_reference_snapshot_refuses_missing_and_binary_files(tmp_path):
    with pytest.raises(Exception, match="missing"):
        snapshot_references(["nope.md"], str(tmp_path))
    (tmp_path / "bin").write_bytes(b"a\0b")
    with pytest.raises(Exception, match="NUL"):
        snapshot_references(["bin"], str(tmp_path))


# ---------------------------------------------------------------------------------------------
# §2.7 temporary store


def test_store_create_is_isolated_in_memory_with_replay_ids():
    t = tape()
    created = t.call(
        "store_create", {"intent": "save", "type": "draft", "title": "T", "data": {"a": 1, "b": 2}}
    ).value
    assert created["success"] and created["replay"] and created["store"] == "replay-memory"
    item_id = created["id"]
    assert (
        item_id.startswith("replay-")
        and "data" not in created["item"]
        and "intent" not in created["item"]
    )
    assert created["item"]["createdAt"] == "2026-11-30T14:11:51.594Z"  # the source session's start
    assert t.call("store_get", {"id": item_id, "fields": ["a"]}).value["item"]["data"] == {"a": 1}
    updated = t.call("store_update", {"id": item_id, "status": "ready", "data": {"b": 3}}).value
    assert updated["item"]["status"] == "ready"
    assert t.call("store_get", {"id": item_id}).value["item"]["data"] == {"a": 1, "b": 3}
    assert t.call("store_delete", {"id": item_id}).value["deleted"] is True
    assert [c["source"] for c in t.calls] == ["temporary-store"] * 5
    # a deleted replay- id falls through to exact matching and stops the replay
    assert not hit(t, "store_get", {"id": item_id})


def test_store_calls_on_other_ids_use_recordings():
    t = tape(rec("store_get", {"id": "01REAL"}, {"success": True, "item": {"id": "01REAL"}}))
    assert t.call("store_get", {"id": "01REAL"}).value["item"]["id"] == "01REAL"


def test_store_list_after_temporary_write_stops():
    page = {"success": True, "total": 1, "items": [{"id": "a"}]}
    t = tape(rec("store_list", {"type": "x"}, page))
    t.call("store_create", {"data": {}})
    result = t.call("store_list", {"type": "x"})
    assert result.value["reason"] == "queries after temporary writes require a complete snapshot"
    assert t.status() == "mismatch"


# ---------------------------------------------------------------------------------------------
# §3.5 store_list projection


def _rows(*ids: str, data: dict | None = None) -> list[dict]:
    return [
        {
            "id": i,
            "title": i.upper(),
            "type": "mention",
            "dataKeys": sorted(data or {}),
            **({"data": data} if data else {}),
        }
        for i in ids
    ]


WINDOW = {
    "success": True,
    "store": "reply",
    "count": 3,
    "total": 10,
    "items": _rows("a", "b", "c"),
    "dataKeysByType": {"mention": ["url"]},
}


def test_store_list_window_example():
    """offset 0 limit 3 total 10 (rows a, b, c) serves {offset 1, limit 2}, stops on {offset 2, limit 2}."""
    recorded = rec(
        "store_list", {"type": "mention", "offset": 0, "limit": 3}, WINDOW, part="p-list"
    )
    t = tape(recorded)
    served = t.call("store_list", {"type": "mention", "offset": 1, "limit": 2}).value
    assert [r["id"] for r in served["items"]] == ["b", "c"]
    assert (served["count"], served["total"], served["replay"]) == (2, 10, True)
    assert "dataKeysByType" not in served
    assert t.calls[-1] == {
        "tool": "store_list",
        "input": {"type": "mention", "offset": 1, "limit": 2},
        "source": "store-projection",
        "partId": "p-list",
    }
    t = tape(recorded)
    assert not hit(t, "store_list", {"type": "mention", "offset": 2, "limit": 2})


def test_projection_consumes_the_head_recording():
    recorded = rec("store_list", {"type": "mention", "limit": 3}, WINDOW)
    t = tape(recorded)
    assert hit(t, "store_list", {"type": "mention", "limit": 2})
    assert not hit(t, "store_list", {"type": "mention", "limit": 2})


def test_projection_requires_the_same_query():
    recorded = {"type": "mention", "status": "pending", "where": {"a": 1, "b": 2}, "limit": 3}
    assert project_store_list(
        {
            "where": {"b": 2, "a": 1},
            "status": "pending",
            "type": "mention",
            "intent": "x",
            "limit": 2,
        },
        recorded,
        WINDOW,
    )
    assert project_store_list({"type": "mention", "limit": 1}, recorded, WINDOW) is None
    assert (
        project_store_list(
            {"type": "mention", "status": "pending", "where": {"a": 1, "b": 2}, "q": "x"},
            recorded,
            WINDOW,
        )
        is None
    )


def test_projection_requires_a_successful_recorded_page_without_media():
    recorded = {"limit": 3}
    assert project_store_list({"limit": 1}, recorded, {**WINDOW, "success": False}) is None
    assert project_store_list({"limit": 1}, recorded, {"success": True, "total": 1}) is None
    media = {**WINDOW, "items": [{"id": "a", "data": {"img": {"type": "image", "data": "AA"}}}]}
    assert project_store_list({"limit": 1}, recorded, media) is None


def test_projection_window_bounds():
    recorded = {"offset": 2, "limit": 3}
    page = {**WINDOW, "items": _rows("c", "d", "e")}
    assert project_store_list({"offset": 1, "limit": 1}, recorded, page) is None  # start < 0
    assert project_store_list({"offset": 6, "limit": 1}, recorded, page) is None  # start > len
    # no new limit: end = total - recordedOffset, past a non-tail page → rejected
    assert project_store_list({"offset": 2}, recorded, page) is None
    tail = {**WINDOW, "total": 5, "items": _rows("c", "d", "e")}
    served = project_store_list({"offset": 3, "limit": 10}, recorded, tail)
    assert [r["id"] for r in served["items"]] == ["d", "e"]  # a short tail page is fine


def test_projection_fields_rules():
    page = {**WINDOW, "items": _rows("a", "b", data={"url": "u", "text": "t"})}
    recorded = {"type": "mention", "fields": ["url", "text"], "limit": 3}
    served = project_store_list(
        {"type": "mention", "fields": ["url", "id", "title"], "limit": 2}, recorded, page
    )
    assert served["items"][0]["data"] == {"url": "u"} and served["items"][0]["id"] == "a"
    # a field the recording never fetched is unknown → candidate rejected
    assert (
        project_store_list({"type": "mention", "fields": ["author"], "limit": 1}, recorded, page)
        is None
    )
    # … unless the recording used includeData (known absence) …
    served = project_store_list(
        {"type": "mention", "fields": ["author"], "limit": 1},
        {**recorded, "includeData": True},
        page,
    )
    assert served["items"][0]["missingFields"] == ["author"]
    # … or the row already lists it as missing
    missing = {**page, "items": [dict(_rows("a", data={"url": "u"})[0], missingFields=["author"])]}
    assert project_store_list(
        {"type": "mention", "fields": ["author"], "limit": 1}, recorded, missing
    )["items"][0]["missingFields"] == ["author"]
    # without fields, rows carry metadata only
    assert (
        "data"
        not in project_store_list({"type": "mention", "limit": 1}, recorded, page)["items"][0]
    )


def test_projection_preconditions():
    recorded = rec("store_list", {"type": "mention", "limit": 3}, WINDOW)
    for bad in (
        {"type": "mention", "countOnly": True},
        {"type": "mention", "includeData": True},
        {"type": "mention", "fields": "url"},
    ):
        assert not hit(tape(recorded), "store_list", bad), bad
