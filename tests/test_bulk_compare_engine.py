"""The set-based engine equals compare_records pair by pair (hypothesis over generated records).

The records here are in-memory ones, entries and metadata of any JSON type, so their features
go the way of a pinned revision's (computed from the record, cached in cmp_pinned_*);
test_compare_features.py covers the features the projections hold, through a real store.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recstore.canonical import canonical_json
from recstore.compare.bulk import aioc_result
from recstore.compare.engine import compare_pairs
from recstore.compare.features import record_features, store_fields, store_pinned
from recstore.compare.ignore import IgnoreSpec, parse_ignore, strip_record
from recstore.records import SECTIONS, compare_records, resolve_sections
from recstore.store import Store

from .compare_contract import difference_flags
from .record_strategies import record_pairs

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
def con(tmp_path_factory):
    with Store(tmp_path_factory.mktemp("engine") / "engine.duckdb").writer() as connection:
        yield connection


def engine_results(con, pairs, sections, ignore):
    """Per-pair results of the set-based engine for in-memory record pairs."""
    for table in ("cmp_pinned_runs", "cmp_pinned_calls", "cmp_pinned_entries",
                  "cmp_field_features", "cmp_field_revisions"):
        con.execute(f"DELETE FROM {table}")
    records = [record for pair in pairs for record in pair]
    ids = store_pinned(
        con, [(f"r{i}", 1, record_features(record)) for i, record in enumerate(records)]
    )
    store_fields(con, list(zip(ids, records, strict=True)))
    con.execute(
        "CREATE OR REPLACE TEMP TABLE _cmp_pairs AS "
        "SELECT (i - 1)::INTEGER AS pair_index, ids[2 * i - 1] AS a_fid, ids[2 * i] AS b_fid "
        "FROM (SELECT ?::BIGINT[] AS ids), range(1, ? + 1) t(i)",
        [ids, len(pairs)],
    )
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
        flags = difference_flags(want["differences"])
        assert {key: row[key] for key in flags} == flags, (a, b)


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
