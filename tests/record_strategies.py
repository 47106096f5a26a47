"""Hypothesis strategies for compare tests: RunRecords, and pairs of a record and a variant.

Small value pools, so that equal values, duplicate callIds and orphan outputs happen often.
``valid=True`` draws only what ingest accepts (every required field, object entries, object or
absent metadata), for tests that go through a real store; otherwise entries and metadata may be
of any JSON type, as in-memory records can be.
"""

from __future__ import annotations

import copy

from hypothesis import strategies as st

JSON_SCALARS = st.sampled_from([None, True, 0, 1, 1.0, -0.0, 1e21, "x", "é", "😀", "\ud800"])
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=2)
        | st.dictionaries(st.sampled_from(["a", "b", "10", "9", "__proto__"]), inner, max_size=2)
    ),
    max_leaves=4,
)
CALL_IDS = st.sampled_from(["c1", "c2", "c3"])
NAMES = st.sampled_from(["lookup", "search", "handoff_to_b", ""])


@st.composite
def tool_call_items(draw):
    item = {"type": "tool_call_item", "callId": draw(CALL_IDS), "name": draw(NAMES)}
    if draw(st.booleans()):
        item["arguments"] = draw(JSON_VALUES)
    return item


@st.composite
def output_items(draw):
    item = {"type": "tool_call_output_item", "callId": draw(CALL_IDS)}
    if draw(st.integers(0, 4)):  # mostly present; sometimes the key is missing
        item["output"] = draw(JSON_VALUES)
    return item


ITEMS = st.lists(
    st.one_of(
        st.just({"type": "message", "role": "user", "content": "hi"}),
        tool_call_items(),
        output_items(),
    ),
    max_size=6,
)


@st.composite
def policy_entries(draw, valid: bool = False):
    entry = draw(
        st.fixed_dictionaries(
            {
                "timestamp": st.sampled_from(["t1", "t2"]),
                "turn": st.sampled_from([1, 2]),
                "callId": CALL_IDS,
                "decision": st.sampled_from(["allow", "deny", "require_approval"]),
                "reason": st.sampled_from(["ok", "nope"]),
                "resource": st.fixed_dictionaries(
                    {"kind": st.sampled_from(["tool", "handoff"]), "name": NAMES}
                ),
            }
        )
    )
    return entry if valid else draw(st.sampled_from([entry, entry, entry, None, "odd"]))


GUARDRAILS = st.lists(
    st.fixed_dictionaries(
        {
            "timestamp": st.sampled_from(["t1", "t2"]),
            "turn": st.sampled_from([1, 2]),
            "guardrailName": st.sampled_from(["g1", "g2"]),
            "decision": st.sampled_from(["pass", "triggered"]),
        }
    ),
    max_size=2,
)
OBJECT_METADATA = st.dictionaries(
    st.sampled_from(["caseId", "build", "__proto__"]), JSON_SCALARS, max_size=2
)
METADATA = st.one_of(st.none(), OBJECT_METADATA, st.just([1]))


@st.composite
def run_records(draw, valid: bool = False):
    record = {
        "status": draw(st.sampled_from(["completed", "failed"])),
        "response": draw(st.sampled_from(["", "ok", "x😀", "ok "])),
        "items": draw(ITEMS),
        "policyDecisions": draw(st.lists(policy_entries(valid), max_size=3)),
    }
    guardrails = draw(st.sampled_from(["absent", "null", "list"]))
    if guardrails != "absent":
        record["guardrailDecisions"] = None if guardrails == "null" else draw(GUARDRAILS)
    if draw(st.booleans()):
        record["metadata"] = draw(st.one_of(st.none(), OBJECT_METADATA) if valid else METADATA)
    if valid:
        record = {
            "runId": "run",  # tests that store records give each a unique id
            "startedAt": "2026-01-15T10:00:00.000Z",
            "completedAt": "2026-01-15T10:00:01.000Z",
            "agentName": "A",
            "question": "q",
            "promptSnapshots": [],
            "requestFingerprints": [],
            **record,
        }
    return record


@st.composite
def record_pairs(draw, valid: bool = False):
    """A record and a variant: identical, or with some top-level fields redrawn."""
    left = draw(run_records(valid))
    right = copy.deepcopy(left)
    other = draw(run_records(valid))
    for key in draw(st.sets(st.sampled_from(sorted((set(left) | set(other)) - {"runId"})))):
        if key in other:
            right[key] = copy.deepcopy(other[key])
        else:
            right.pop(key, None)
    # Small edits inside entries, so ignoring one field decides equality.
    for key, fields in (
        ("policyDecisions", ["timestamp", "callId", "decision"]),
        ("guardrailDecisions", ["timestamp", "decision"]),
    ):
        entries = right.get(key)
        if isinstance(entries, list) and entries and draw(st.booleans()):
            index = draw(st.integers(0, len(entries) - 1))
            if isinstance(entries[index], dict):
                entries[index][draw(st.sampled_from(fields))] = draw(st.sampled_from(["t3", "x"]))
    if isinstance(right.get("metadata"), dict) and draw(st.booleans()):
        right["metadata"][draw(st.sampled_from(["caseId", "build"]))] = draw(JSON_SCALARS)
    if draw(st.booleans()):
        return right, left
    return left, right
