"""aioc's replay unit-test facts (§10.4) and the tool tape's matching rules (§6.6–§6.8)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.replay import AIOC, REPRODUCE, Candidate, build_tape, replay_input, replay_run
from recstore.runtime import (
    ABSENT,
    Agent,
    Handoff,
    ModelRequest,
    ModelResponse,
    Policies,
    ScriptedProvider,
    Tool,
)

ALLOW = Policies(
    tool=lambda p: {"decision": "allow", "reason": "ok"},
    handoff=lambda p: {"decision": "allow", "reason": "ok"},
)
OK = {"status": "ok", "code": None, "publicReason": None}
LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string"}},
    "required": ["id"],
    "additionalProperties": False,
}


def call_item(call_id, name, arguments):
    import json

    raw = json.dumps(arguments)
    return {"type": "tool_call_item", "callId": call_id, "name": name, "arguments": arguments,
            "rawItem": {"type": "function_call", "id": call_id, "name": name, "arguments": raw}}


def output_item(call_id, output):
    return {"type": "tool_call_output_item", "callId": call_id, "output": output,
            "rawItem": {"type": "function_call_result", "call_id": call_id, "output": output}}


def user(text):
    return {"type": "message", "role": "user", "content": text}


def source_record(items, *, input_count=1, question="q", fingerprints=None, context=None, **extra):
    record = {"runId": "src-1", "status": "completed", "agentName": "A", "question": question,
              "response": "done", "contextSnapshot": context or {}, "contextRedacted": False,
              "items": items, "promptSnapshots": [],
              "requestFingerprints": fingerprints if fingerprints is not None else [],
              "policyDecisions": []}
    if input_count is not None:
        record["inputItemCount"] = input_count
    record.update(extra)
    return record


class LiveTool:
    """A tool implementation that records every live call (so a test sees any live call)."""

    def __init__(self, result=None):
        self.calls: list = []
        self.result = result

    def __call__(self, args, context):
        self.calls.append(args)
        return self.result if self.result is not None else {"source": "live", "args": args}


class Recording:
    """A provider wrapper that keeps every request it was given."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.requests: list[ModelRequest] = []

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return self.inner.complete(request)


def candidate(live: LiveTool | None = None, *, policies=ALLOW, schema=None, handoffs=()) -> Candidate:
    tool = Tool("lookup", "Find.", schema or LOOKUP_SCHEMA, func=live)
    agent = Agent("A", "Be brief.", model="m", tools=[tool], handoffs=list(handoffs))
    return Candidate(agent, policies=policies)


def script(*turns):
    return Recording(ScriptedProvider(list(turns)))


def lookup_turn(*ids, call_prefix="c"):
    return {"tool_calls": [{"call_id": f"{call_prefix}{i}", "name": "lookup", "arguments": {"id": v}}
                           for i, v in enumerate(ids, start=1)]}


# --- replay input (§6.2) -------------------------------------------------------------------------

def test_input_item_count_gives_exactly_the_input_items():
    items = [user("a"), {"type": "message", "role": "assistant", "content": "b"}, user("c"),
             {"type": "message", "role": "assistant", "content": "done"}]
    source = source_record(items, input_count=3)
    provider = script("done")
    outcome = replay_run(source, candidate(), "strict", provider=provider)
    assert outcome.stats.inputSource == "inputItemCount"
    assert list(provider.requests[0].messages) == items[:3]
    assert len(outcome.record["items"]) == 4
    assert outcome.record["inputItemCount"] == 3


def test_fingerprint_message_count_is_the_second_choice():
    items = [user("a"), user("b"), {"type": "message", "role": "assistant", "content": "done"}]
    source = source_record(items, input_count=None, fingerprints=[{"turn": 1, "messageCount": 2}])
    outcome = replay_run(source, candidate(), "strict", provider=script("done"))
    assert outcome.stats.inputSource == "requestFingerprint"
    assert outcome.record["items"][:2] == items[:2]


def test_question_fallback_and_question_mode():
    source = source_record([user("x")], input_count=None, question="What now?")
    provider = script("done")
    outcome = replay_run(source, candidate(), "strict", provider=provider)
    assert outcome.stats.inputSource == "questionFallback"
    assert list(provider.requests[0].messages) == [user("What now?")]
    with_count = source_record([user("x"), user("y")], input_count=2, question="only this")
    assert replay_input(with_count, "question") == ("only this", "question")
    outcome = replay_run(with_count, candidate(), "strict", input_mode="question", provider=script("done"))
    assert outcome.stats.inputSource == "question"


@pytest.mark.parametrize("count, expected", [(2.0, "inputItemCount"), (True, "questionFallback"),
                                             (-1, "questionFallback"), (9, "questionFallback"),
                                             (0, "inputItemCount")])
def test_input_item_count_validity(count, expected):
    source = source_record([user("a"), user("b")], input_count=count)
    replay_in, where = replay_input(source)
    assert where == expected
    if count == 0:
        assert replay_in == []


# --- strict, hybrid, live -----------------------------------------------------------------------

def recorded_lookup_source(output=None):
    output = output if output is not None else dict(OK, data={"source": "recorded"})
    items = [user("q"), call_item("r1", "lookup", {"id": "1"}), output_item("r1", output),
             {"type": "message", "role": "assistant", "content": "done"}]
    return source_record(items)


def test_strict_with_an_ok_envelope_rewraps_once_and_takes_metadata_overrides():
    live = LiveTool()
    outcome = replay_run(recorded_lookup_source(), candidate(live), "strict",
                         metadata_overrides={"scenario": "unit"},
                         provider=script(lookup_turn("1"), "done"))
    s = outcome.stats
    assert (s.recordedToolCalls, s.replayedFromRecord, s.missingToolCalls, s.liveFallbackCalls) == (1, 1, 0, 0)
    output = outcome.record["items"][2]["output"]
    assert output == {"status": "ok", "code": None, "publicReason": None, "data": {"source": "recorded"}}
    assert outcome.record["metadata"]["scenario"] == "unit"
    assert outcome.record["metadata"]["replayOfRunId"] == "src-1"
    assert live.calls == []
    assert outcome.calls[0].resolution == "recorded"
    assert outcome.calls[0].provenance == {"sourceRunId": "src-1", "callId": "r1",
                                           "callItemIndex": 1, "outputItemIndex": 2}


def test_strict_without_policies_denies_by_default_and_calls_nothing():
    live = LiveTool()
    outcome = replay_run(recorded_lookup_source(), candidate(live, policies=None), "strict",
                         provider=script(lookup_turn("1"), "done"))
    record = outcome.record
    assert record["status"] == "failed"
    assert record["errorName"] == "ToolCallPolicyDeniedError"
    decision = record["policyDecisions"][0]
    assert (decision["decision"], decision["reason"], decision["resultMode"]) == ("deny", "policy_not_configured", "throw")
    assert live.calls == []
    assert outcome.stats.replayedFromRecord == 0
    assert outcome.report.status == "incomplete"


def test_strict_miss_names_tool_and_arguments_and_never_calls_the_live_tool():
    live = LiveTool()
    outcome = replay_run(recorded_lookup_source(), candidate(live), "strict",
                         provider=script(lookup_turn("2"), "done"))
    record = outcome.record
    assert record["status"] == "failed"
    assert record["errorName"] == "REPLAY_INPUT_MISSING"
    assert '"lookup"' in record["errorMessage"]
    assert 'argsCanonicalJson={"id":"2"}' in record["errorMessage"]
    assert record["items"][-1]["type"] == "tool_call_item"  # stopped at the call: nothing made up
    assert live.calls == []
    assert outcome.stats.missingToolCalls == 1
    assert outcome.report.status == "incomplete"
    assert outcome.report.error["code"] == "REPLAY_INPUT_MISSING"


def test_hybrid_falls_back_to_the_live_tool():
    live = LiveTool()
    outcome = replay_run(recorded_lookup_source(), candidate(live), "hybrid",
                         provider=script(lookup_turn("1", "2"), "done"))
    s = outcome.stats
    assert (s.recordedToolCalls, s.replayedFromRecord, s.missingToolCalls, s.liveFallbackCalls) == (1, 1, 1, 1)
    assert live.calls == [{"id": "2"}]
    assert [c.resolution for c in outcome.calls] == ["recorded", "live"]


def test_live_mode_replays_nothing():
    live = LiveTool()
    outcome = replay_run(recorded_lookup_source(), candidate(live), "live",
                         provider=script(lookup_turn("1"), "done"))
    s = outcome.stats
    assert (s.recordedToolCalls, s.replayedFromRecord, s.missingToolCalls, s.liveFallbackCalls) == (1, 0, 0, 0)
    assert live.calls == [{"id": "1"}]


def test_handoff_rules_are_kept_in_strict_replay():
    target = Agent("Replay Target", "t", model="m")

    def build(enabled):
        agent = Agent("A", "a", model="m",
                      handoffs=[Handoff(target, enabled=lambda ctx: ctx.get("actorId") == enabled)])
        return Candidate(agent, policies=ALLOW)

    source = source_record([user("q"), {"type": "message", "role": "assistant", "content": "done"}],
                           context={"actorId": "user-1"})
    for enabled, names in (("user-1", ["handoff_to_replay_target"]), ("someone-else", [])):
        provider = script("done")
        outcome = replay_run(source, build(enabled), "strict", provider=provider)
        assert [t["name"] for t in provider.requests[0].tools] == names
        assert outcome.record["requestFingerprints"][0]["toolCount"] == len(names)


def test_on_missing_hook():
    live = LiveTool()
    seen = []

    def use_output(missing):
        seen.append(missing)
        return {"action": "use_output", "output": {"made": "by hook"}}

    outcome = replay_run(recorded_lookup_source(), candidate(live), "strict", on_missing=use_output,
                         provider=script(lookup_turn("2"), "done"))
    assert outcome.record["status"] == "completed"
    assert outcome.stats.replayedFromRecord == 1 and outcome.stats.missingToolCalls == 1
    assert seen[0].tool_name == "lookup" and seen[0].args_canonical_json == '{"id":"2"}'
    assert seen[0].mode == "strict"
    assert live.calls == []
    hybrid_throw = replay_run(recorded_lookup_source(), candidate(live), "hybrid",
                              on_missing=lambda m: "throw", provider=script(lookup_turn("2"), "done"))
    assert hybrid_throw.record["errorName"] == "REPLAY_INPUT_MISSING"
    assert live.calls == []
    use_live = replay_run(recorded_lookup_source(), candidate(live), "strict",
                          on_missing=lambda m: "use_live", provider=script(lookup_turn("2"), "done"))
    assert use_live.stats.liveFallbackCalls == 1 and live.calls == [{"id": "2"}]


def test_lookup_key_uses_schema_validated_arguments():
    # Recorded {id, extra}; the candidate's schema strips `extra`, so the validated key differs.
    items = [user("q"), call_item("r1", "lookup", {"id": "1", "extra": True}),
             output_item("r1", dict(OK, data="recorded")),
             {"type": "message", "role": "assistant", "content": "done"}]
    provider = script({"tool_calls": [{"call_id": "c1", "name": "lookup", "arguments": {"id": "1", "extra": True}}]}, "done")
    outcome = replay_run(source_record(items), candidate(LiveTool()), "strict", provider=provider)
    assert outcome.record["errorName"] == "REPLAY_INPUT_MISSING"
    assert 'argsCanonicalJson={"id":"1"}' in outcome.record["errorMessage"]


def test_duplicate_calls_consume_the_queue_in_order_then_go_live():
    items = [user("q"), call_item("r1", "lookup", {"id": "1"}), output_item("r1", dict(OK, data="first")),
             call_item("r2", "lookup", {"id": "1"}), output_item("r2", "second-raw"),
             {"type": "message", "role": "assistant", "content": "done"}]
    live = LiveTool(result="live")
    outcome = replay_run(source_record(items), candidate(live), "hybrid",
                         provider=script(lookup_turn("1", "1", "1"), "done"))
    outputs = [it["output"]["data"] for it in outcome.record["items"] if it["type"] == "tool_call_output_item"]
    assert outputs == ["first", "second-raw", "live"]


# --- the tape itself ----------------------------------------------------------------------------

def test_tape_rules():
    denied = {"status": "denied", "code": "no", "publicReason": "No.", "data": None}
    approval = {"status": "approval_required", "code": "mgr", "publicReason": "Ask.", "data": None}
    no_data = dict(OK)  # an ok envelope whose data was undefined (JSON dropped the key)
    items = [user("old"), call_item("h1", "lookup", {"id": "h"}), output_item("h1", dict(OK, data="history")),
             user("new"),
             output_item("orphan", dict(OK, data="orphan")),
             call_item("d1", "lookup", {"id": "d"}), output_item("d1", denied),
             call_item("a1", "lookup", {"id": "a"}), output_item("a1", approval),
             call_item("n1", "lookup", {"id": "n"}), output_item("n1", no_data),
             call_item("l1", "lookup", {"id": "l"}), output_item("l1", ["legacy", "raw"]),
             call_item("x1", "lookup", {"id": "x"})]
    source = source_record(items, input_count=4)
    tape = build_tape(source, AIOC)
    # recordedToolCalls counts every call with an output: history, orphan, denied, approval too.
    assert tape.recorded_tool_calls == 6
    values = {e.call_id: e.value for e in tape.remaining()}
    assert values == {"h1": "history", "n1": no_data, "l1": ["legacy", "raw"]}
    reproduce = build_tape(source, REPRODUCE)
    values = {e.call_id: e.value for e in reproduce.remaining()}
    assert values == {"n1": ABSENT, "l1": ["legacy", "raw"]}
    assert reproduce.take("lookup", tape.remaining()[0].args_hash) is None  # history not served


def test_tape_queue_is_shared_across_agents_and_keyed_by_name_and_args():
    items = [user("q"), call_item("c1", "lookup", {"b": 2, "a": 1}), output_item("c1", dict(OK, data=1)),
             call_item("c2", "other", {"a": 1, "b": 2}), output_item("c2", dict(OK, data=2))]
    tape = build_tape(source_record(items))
    key_hash = tape.remaining()[0].args_hash
    assert tape.remaining()[1].args_hash == key_hash  # key order does not matter
    assert tape.take("lookup", key_hash).value == 1
    assert tape.take("lookup", key_hash) is None
    assert tape.take("other", key_hash).value == 2


# --- invariants ---------------------------------------------------------------------------------

ids = st.lists(st.sampled_from(["1", "2", "3"]), max_size=6)


@settings(max_examples=60, deadline=None)
@given(recorded=ids, requested=ids, mode=st.sampled_from(["strict", "hybrid"]))
def test_property_tape_serves_fifo_and_strict_never_goes_live(recorded, requested, mode):
    items = [user("q")]
    for n, value in enumerate(recorded):
        items += [call_item(f"r{n}", "lookup", {"id": value}), output_item(f"r{n}", dict(OK, data=f"{value}#{n}"))]
    live = LiveTool(result="live")
    turns = [lookup_turn(*requested)] if requested else []
    outcome = replay_run(source_record(items), candidate(live), mode, provider=script(*turns, "done"))
    s = outcome.stats
    assert s.recordedToolCalls == len(recorded)
    queues = {v: [f"{v}#{n}" for n, r in enumerate(recorded) if r == v] for v in "123"}
    expected_outputs, expected_live = [], []
    for value in requested:
        if queues[value]:
            expected_outputs.append(queues[value].pop(0))
        elif mode == "hybrid":
            expected_outputs.append("live")
            expected_live.append({"id": value})
        else:
            break  # a strict miss stops the run
    outputs = [it["output"]["data"] for it in outcome.record["items"] if it["type"] == "tool_call_output_item"]
    assert outputs == expected_outputs
    assert live.calls == expected_live
    assert s.replayedFromRecord + s.missingToolCalls == len(outcome.calls)
    assert s.liveFallbackCalls == len(expected_live)
    if mode == "strict":
        assert s.liveFallbackCalls == 0 and s.missingToolCalls <= 1
        assert (outcome.record["status"] == "failed") == (s.missingToolCalls == 1)
