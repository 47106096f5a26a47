"""Canonical JSON and hashes against aioc's own outputs, plus invariants, on both backends (the C
extension when it is built, and the pure-Python path)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recstore import canonical
from recstore.canonical import (
    JSONParseError,
    canonical_bytes,
    canonical_bytes_reusing,
    canonical_json,
    canonical_json_exact,
    js_number,
    loads_strict,
    sha256_canonical,
    sha256_text,
)

from .conftest import AIOC_FIXTURES

try:
    from recstore._canonical import dumps as c_dumps
except ImportError:
    c_dumps = None


@pytest.fixture(scope="module", autouse=True, params=["c", "python"])
def backend(request):
    """Every test of this module once per backend (module-scoped: hypothesis allows it)."""
    if request.param == "c" and c_dumps is None:
        pytest.skip("the C extension is not built")
    saved = canonical._c_dumps
    canonical._c_dumps = c_dumps if request.param == "c" else None
    yield request.param
    canonical._c_dumps = saved


def test_all_dev_cases_match_aioc():
    mismatches = []
    count = 0
    with open(AIOC_FIXTURES / "canonical-cases-dev.jsonl", encoding="utf-8") as fh:
        for line in fh:
            case = json.loads(line)
            value = loads_strict(case["text"])
            count += 1
            if canonical_json(value) != case["canonical"] or sha256_canonical(value) != case["hash"]:
                mismatches.append(case["text"][:80])
    assert count == 3000
    assert mismatches == []


def test_record_hashes_match_aioc(aioc_records, expected_aioc):
    got = {name: sha256_canonical(rec) for name, rec in aioc_records.items()}
    assert got == expected_aioc["recordCanonicalSha256"]


@pytest.mark.parametrize(
    "value, text",
    [
        (1.0, "1"), (1e21, "1e+21"), (1e20, "100000000000000000000"), (1e-7, "1e-7"),
        (0.000001, "0.000001"), (-0.0, "0"), (2**53 + 1, "9007199254740992"),
        (12345678901234567890, "12345678901234567000"), (10**400, "null"),
        (123e-20, "1.23e-18"), (1.5e300, "1.5e+300"),
    ],
)
def test_js_number(value, text):
    assert js_number(value) == text


def test_key_order_and_proto():
    keys = {"9": 7, "10": 6, "": 9, "B": 4, "_": 5, "a": 3, "é": 8, "😀": 2, "｡": 1}
    assert list(json.loads(canonical_json(keys))) == ["9", "10", "", "B", "_", "a", "é", "😀", "｡"]
    odd = {"4294967294": 1, "4294967295": 2, "01": 4, "-1": 5, "1.5": 6, "0": 7, "10": 8, "2": 9}
    assert canonical_json(odd) == (
        '{"0":7,"2":9,"10":8,"4294967294":1,"-1":5,"01":4,"1.5":6,"4294967295":2}'
    )
    assert canonical_json({"__proto__": {"x": 1}, "a": 1}) == '{"a":1}'


def test_strings_and_surrogates():
    assert canonical_json("\ud800x\udfff") == '"\\ud800x\\udfff"'
    assert canonical_json("\u2028\x7f/") == '"\u2028\x7f/"'
    assert sha256_text("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_text("\ud800") == sha256_text("\ufffd")


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}', "{", '{"a":1} x'])
def test_strict_parsing_rejects(text):
    with pytest.raises(JSONParseError):
        loads_strict(text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_is_idempotent(value):
    once = canonical_json(value)
    assert canonical_json(loads_strict(once)) == once


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6), st.randoms())
def test_canonical_ignores_key_order(value, rnd):
    items = list(value.items())
    rnd.shuffle(items)
    assert canonical_json(dict(items)) == canonical_json(value)


@given(json_values)
def test_fast_path_equals_general_path(value):
    assert canonical_json(value) == canonical_json_exact(value)
    assert canonical_bytes(value) == canonical_json_exact(value).encode("utf-8", "surrogatepass")


# Every shape where orjson's sorted output differs from aioc's (see canonical._MARKS).
ORJSON_DIFFERS = [
    1.0, -0.0, [100.0], {"a": 1e16}, {"a": 1e20}, 1.5e-6, 0.000001, 9.999e-6, 2**53 + 1, -(2**60),
    {"9": 1, "10": 2}, {"__proto__": 1, "a": 2}, {"\uff61": 1, "\U0001f600": 2}, "\ud800",
    {"a": [1.0, {"b": 3.0}]}, 2**70, float("inf"),
]


@pytest.mark.parametrize("value", ORJSON_DIFFERS, ids=repr)
def test_fast_path_never_returns_what_orjson_prints_differently(value):
    assert canonical_json(value) == canonical_json_exact(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_matches_the_exact_path(x):
    assert canonical_json([x, {"k": x}]) == canonical_json_exact([x, {"k": x}])


@given(st.dictionaries(st.sampled_from(["items", "__proto__", "9", "a"]) | st.text(max_size=4),
                       json_values, max_size=6))
def test_reusing_known_members_prints_the_whole(value):
    known = {key: canonical_bytes(v) for key, v in list(value.items())[:2]}
    assert canonical_bytes_reusing(value, known) == canonical_bytes(value)


def test_record_hash_reuses_the_items_canonical_json(aioc_records, expected_aioc):
    from recstore.store.prepare import record_hash

    got = {name: record_hash(r, [canonical_bytes(i) for i in r["items"]]).hex()
           for name, r in aioc_records.items()}
    assert got == expected_aioc["recordCanonicalSha256"]
