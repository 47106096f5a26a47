"""agentuse strict-replay matching: invariants (property tests), the fixture session, aioc
sources and the ``replay.json``-shaped report. The rule-by-rule cases (keys, reads, dispatcher,
selection, status) are data in tests/cases/agentuse/, run by test_agentuse_fidelity.py."""

from __future__ import annotations

import hashlib
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.formats.agentuse import assemble_run, scan_tree
from recstore.replay.agentuse_match import (
    MISMATCH_REASON,
    NO_OUTCOME_ERROR,
    AgentuseTape,
    Recording,
    RecordingSet,
    ReplaySourceError,
    match_key,
    recordings_from_record,
    recordings_from_session,
    snapshot_references,
)

from .conftest import AGENTUSE_DATA, reverse_key_order

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
# §3.1–§3.2 invariants


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


def _no_equivalent_keys(value) -> bool:
    """True unless some object holds two canonically equivalent keys (NFC and NFD spellings):
    agentuse's localeCompare ties those and keeps their insertion order (a data case)."""
    if isinstance(value, dict):
        forms = [unicodedata.normalize("NFD", k) for k in value]
        return len(set(forms)) == len(forms) and all(map(_no_equivalent_keys, value.values()))
    if isinstance(value, list):
        return all(map(_no_equivalent_keys, value))
    return True


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(max_size=4).filter(lambda k: k != "intent"), _json, max_size=5).filter(
        _no_equivalent_keys
    ),
    st.text(max_size=5),
)
def test_property_key_ignores_key_order_and_top_level_intent(args, intent):
    assert match_key("t", args, "/r") == match_key(
        "t", {"intent": intent, **reverse_key_order(args)}, "/r"
    )


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


def test_outputs_are_deep_copies():
    recorded = rec("t", {}, {"rows": [1]})
    t = tape(recorded, recorded)
    t.call("t", {}).value["rows"].append(2)
    assert t.call("t", {}).value == {"rows": [1]}


# ---------------------------------------------------------------------------------------------
# §3.3 the fixture session and aioc sources


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


def test_aioc_recordings_stop_at_follow_up_and_keep_outputs_as_recorded():
    """agentuse hands recorded outputs to the model as they are: an aioc output keeps its
    envelope (the aioc model saw it), denied ones included."""
    ok = {"status": "ok", "code": None, "publicReason": None, "data": "A"}
    denied = {"status": "denied", "code": "no", "publicReason": "Not allowed.", "data": None}
    items = [
        {"type": "message", "role": "user", "content": "q"},
        {"type": "tool_call_item", "callId": "1", "name": "a", "arguments": {}},
        {"type": "tool_call_output_item", "callId": "1", "output": ok},
        {"type": "tool_call_item", "callId": "2", "name": "d", "arguments": {}},
        {"type": "tool_call_output_item", "callId": "2", "output": denied},
        {"type": "message", "role": "user", "content": "follow-up"},
        {"type": "tool_call_item", "callId": "3", "name": "b", "arguments": {}},
        {"type": "tool_call_output_item", "callId": "3", "output": "B"},
    ]
    recs = recordings_from_record({"runId": "r", "items": items, "inputItemCount": 1})
    assert [(r.tool, r.status, r.output) for r in recs.recordings] == [
        ("a", "completed", ok),
        ("d", "completed", denied),
    ]


# ---------------------------------------------------------------------------------------------
# §3.6 the report


def test_gate_captures_proposal_and_everything_after_is_stopped():
    t = tape(rec("t", {}, "x"))
    t.call("await_human", {"prompt": "Post?", "draft": "d"})
    t.call("t", {})  # even a call that would match
    report = t.report(session_id="new", model="m")
    assert report["status"] == "proposal" and report["success"] is True
    assert report["current"] == {"text": "", "proposal": {"prompt": "Post?", "draft": "d"}}
    assert [c["source"] for c in report["calls"]] == ["proposal", "stopped"]


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


def test_report_errors_name_the_mismatch_or_the_missing_outcome():
    t = tape()
    t.call("tools__bash", {"command": "rm -rf /"})
    report = t.report(session_id="n", model="m")
    assert report["status"] == "mismatch" and report["error"] == MISMATCH_REASON
    assert report["calls"] == [
        {"tool": "tools__bash", "input": {"command": "rm -rf /"}, "source": "missing"}
    ]
    nothing = tape().report(session_id="n", model="m", finish_reason="stop", final_text="  ")
    assert (nothing["status"], nothing["error"]) == ("error", NO_OUTCOME_ERROR)
    assert NO_OUTCOME_ERROR == "Replay ended without a proposal or final output."


def test_report_keeps_a_null_proposal_and_omits_an_absent_one():
    null_gate = RecordingSet("s", [], original_proposal=None)
    assert AgentuseTape(null_gate).report(session_id="n", model="m")["original"] == {
        "proposal": None,
        "text": "",
    }
    assert tape().report(session_id="n", model="m")["original"] == {"text": ""}


def test_current_reference_is_snapshotted_hashed_and_reported(tmp_path):
    ref = tmp_path / "guide.md"
    ref.write_text("line one\nline two\nline three\n")
    refs = snapshot_references(["guide.md"], str(tmp_path))
    ref.write_text("changed after the snapshot")
    t = tape(
        rec("tools__filesystem_read", {"file_path": "guide.md"}, "OLD"),
        cwd=str(tmp_path),
        references=refs,
    )
    paged = t.call("tools__filesystem_read", {"file_path": str(ref), "offset": 2, "limit": 1})
    assert paged.value == {"output": "[Reading lines 2-2 of 4 total]\n\n2\tline two"}
    digest = hashlib.sha256(b"line one\nline two\nline three\n").hexdigest()
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


def test_store_list_after_a_temporary_write_stops_with_agentuses_exact_text():
    t = tape()
    t.call("store_create", {"title": "draft"})
    result = t.call("store_list", {"fields": ["title"]})
    assert result.value["reason"] == (
        "Store queries after temporary writes require a complete snapshot; "
        "returning the old list would be stale."
    )
    assert t.stop_reason == result.value["reason"]
