"""The set-based engine equals compare_records pair by pair (hypothesis over generated records)."""

from __future__ import annotations

import copy

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.canonical import canonical_json
from recstore.compare.bulk import aioc_result
from recstore.compare.engine import compare_pairs
from recstore.compare.features import record_features, store_features
from recstore.compare.ignore import IgnoreSpec, parse_ignore, strip_record
from recstore.records import SECTIONS, compare_records, resolve_sections
from recstore.resources import resource_dir

# Small pools so that equal values, duplicate callIds and orphans happen often.
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
def policy_entries(draw):
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
    return draw(st.sampled_from([entry, entry, entry, None, "odd"]))


GUARDRAILS = st.lists(
    st.fixed_dictionaries(
        {
            "timestamp": st.sampled_from(["t1", "t2"]),
            "guardrailName": st.sampled_from(["g1", "g2"]),
            "decision": st.sampled_from(["pass", "triggered"]),
        }
    ),
    max_size=2,
)
METADATA = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["caseId", "build", "__proto__"]), JSON_SCALARS, max_size=2),
    st.just([1]),
)


@st.composite
def run_records(draw):
    record = {
        "status": draw(st.sampled_from(["completed", "failed"])),
        "response": draw(st.sampled_from(["", "ok", "x😀", "ok "])),
        "items": draw(ITEMS),
        "policyDecisions": draw(st.lists(policy_entries(), max_size=3)),
    }
    guardrails = draw(st.sampled_from(["absent", "null", "list"]))
    if guardrails != "absent":
        record["guardrailDecisions"] = None if guardrails == "null" else draw(GUARDRAILS)
    metadata = draw(st.sampled_from(["absent", "value"]))
    if metadata == "value":
        record["metadata"] = draw(METADATA)
    return record


@st.composite
def record_pairs(draw):
    """A record and a variant: identical, or with some top-level fields redrawn."""
    left = draw(run_records())
    right = copy.deepcopy(left)
    other = draw(run_records())
    for key in draw(st.sets(st.sampled_from(sorted(set(left) | set(other))))):
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


IGNORE_PATHS = [
    "policy.timestamp",
    "policy.callId",
    "guardrails.timestamp",
    "metadata.build",
    "metadata.caseId",
    "toolCalls.output",
    "metadata",
    "response",
]


@pytest.fixture(scope="module")
def con():
    connection = duckdb.connect()
    connection.execute((resource_dir("schema") / "010_compare.sql").read_text())
    yield connection
    connection.close()


def engine_results(con, pairs, sections, ignore):
    """Per-pair results of the set-based engine for in-memory record pairs."""
    for table in (
        "cmp_run_features",
        "cmp_call_features",
        "cmp_entry_features",
        "cmp_field_features",
    ):
        con.execute(f"DELETE FROM {table}")
    features = []
    for index, (a, b) in enumerate(pairs):
        features.append(record_features(a, run_key=f"a{index}", record_hash="h"))
        features.append(record_features(b, run_key=f"b{index}", record_hash="h"))
    ids = store_features(con, features)
    con.register(
        "_pairs_in",
        pa.table(
            {
                "pair_index": list(range(len(pairs))),
                "a_fid": [ids[(f"a{i}", "h")] for i in range(len(pairs))],
                "b_fid": [ids[(f"b{i}", "h")] for i in range(len(pairs))],
            }
        ),
    )
    con.execute("CREATE OR REPLACE TEMP TABLE _cmp_pairs AS SELECT * FROM _pairs_in")
    con.unregister("_pairs_in")
    compare_pairs(con, sections, ignore)
    cursor = con.execute("SELECT * FROM _cmp_result ORDER BY pair_index")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def expected(a, b, include, exclude, ignore: IgnoreSpec) -> dict:
    result = compare_records(
        strip_record(a, ignore),
        strip_record(b, ignore),
        include_sections=include,
        exclude_sections=set(exclude or ()) | ignore.sections,
    )
    return result


SECTION_OPTIONS = st.one_of(st.none(), st.lists(st.sampled_from(SECTIONS), unique=True))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pairs=st.lists(record_pairs(), min_size=1, max_size=6),
    include=SECTION_OPTIONS,
    exclude=st.one_of(st.none(), st.lists(st.sampled_from(SECTIONS), unique=True)),
    ignore_paths=st.lists(st.sampled_from(IGNORE_PATHS), unique=True, max_size=3),
)
def test_engine_equals_compare_records(con, pairs, include, exclude, ignore_paths):
    ignore = parse_ignore(ignore_paths)
    rows = engine_results(con, pairs, resolve_sections(include, exclude), ignore)
    assert len(rows) == len(pairs)
    for (a, b), row in zip(pairs, rows, strict=True):
        want = expected(a, b, include, exclude, ignore)
        got = aioc_result(row)
        assert canonical_json(got) == canonical_json(
            {k: want[k] for k in ("equal", "summary", "metrics")}
        ), (a, b)
        assert row["difference_count"] == len(want["differences"])


def test_empty_records_are_equal(con):
    empty = {"response": "", "items": [], "policyDecisions": []}
    (row,) = engine_results(con, [(empty, dict(empty))], set(SECTIONS), IgnoreSpec())
    assert row["equal"] and row["difference_count"] == 0
    assert row["first_divergence_index"] is None


def test_first_divergence_names_both_tools(con):
    def rec(*names):
        items = [
            {"type": "tool_call_item", "callId": f"c{i}", "name": n, "arguments": {}}
            for i, n in enumerate(names)
        ]
        return {"response": "", "items": items, "policyDecisions": []}

    (row,) = engine_results(con, [(rec("a", "b", "c"), rec("a", "x"))], set(SECTIONS), IgnoreSpec())
    assert (
        row["first_divergence_index"],
        row["first_divergence_tool_a"],
        row["first_divergence_tool_b"],
    ) == (1, "b", "x")
    assert not row["same_tool_call_shape"]
