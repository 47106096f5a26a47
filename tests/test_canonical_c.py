"""The C encoder (recstore._canonical) prints the same bytes as the Python reference and as aioc:
its backend switch, the fixtures (the 3,000 canonical cases, every fixture and dev-corpus record
hash), a property over random JSON values, and what it leaves to the Python path."""

from __future__ import annotations

import enum
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore import canonical
from recstore.canonical import canonical_bytes, canonical_json_exact, loads_strict

from .conftest import AIOC_FIXTURES, CORPUS_DEV, REPO_ROOT, read_ndjson_gz

try:
    from recstore._canonical import dumps as c_dumps
except ImportError:  # no compiler at install time: the pure-Python path is the only one
    c_dumps = None

needs_c = pytest.mark.skipif(c_dumps is None, reason="the C extension is not built")


def _backend(env: dict[str, str]) -> str:
    return subprocess.run(
        [sys.executable, "-c", "import recstore.canonical as c; print(c.BACKEND)"],
        capture_output=True, text=True, check=True, env=env, cwd=REPO_ROOT, timeout=120,
    ).stdout.strip()


def test_the_environment_switch_forces_the_python_path():
    base = {k: v for k, v in os.environ.items() if k != "RECSTORE_PURE_PYTHON"}
    assert _backend({**base, "RECSTORE_PURE_PYTHON": "1"}) == "python"
    assert _backend({**base, "RECSTORE_PURE_PYTHON": "0"}) == ("python" if c_dumps is None else "c")


@pytest.mark.skipif(not (os.environ.get("CI") and shutil.which("gcc")),
                    reason="only in CI with a compiler (there the extension must be built)")
def test_ci_builds_and_uses_the_c_extension():
    assert c_dumps is not None, "gcc is present but pip install did not build recstore._canonical"
    forced = os.environ.get("RECSTORE_PURE_PYTHON", "") not in ("", "0")
    assert canonical.BACKEND == ("python" if forced else "c")


def _python_bytes(value) -> bytes:
    return canonical_json_exact(value).encode("utf-8")


@needs_c
def test_the_3000_canonical_cases_match_aioc_and_python():
    mismatches = []
    with open(AIOC_FIXTURES / "canonical-cases-dev.jsonl", encoding="utf-8") as fh:
        cases = [json.loads(line) for line in fh]
    assert len(cases) == 3000
    for case in cases:
        value = loads_strict(case["text"])
        out = c_dumps(value)
        if (out != case["canonical"].encode("utf-8") or out != _python_bytes(value)
                or hashlib.sha256(out).hexdigest() != case["hash"]):
            mismatches.append(case["text"][:80])
    assert mismatches == []


@needs_c
def test_fixture_and_corpus_record_hashes_match_aioc(aioc_records, expected_aioc):
    got = {name: hashlib.sha256(c_dumps(r)).hexdigest() for name, r in aioc_records.items()}
    assert got == expected_aioc["recordCanonicalSha256"]
    oracle = read_ndjson_gz(CORPUS_DEV / "oracle-hashes.ndjson.gz")
    expected = {(r["set"], r["runId"]): r["recordCanonicalSha256"] for r in oracle}
    corpus = {
        "baseline": read_ndjson_gz(CORPUS_DEV / "corpus-baseline.ndjson.gz"),
        "candidate": read_ndjson_gz(CORPUS_DEV / "corpus-candidate.ndjson.gz"),
        "replay": [r["replayRunRecord"]
                   for r in read_ndjson_gz(CORPUS_DEV / "corpus-replays.ndjson.gz")],
    }
    actual = {(name, r["runId"]): hashlib.sha256(c_dumps(r)).hexdigest()
              for name, records in corpus.items() for r in records}
    assert len(actual) == len(expected) == 1320
    assert actual == expected


# Strings: any code point, lone surrogates included (Python strings can hold them, json.loads
# makes them from \udXXX escapes), non-BMP characters and the characters JSON escapes.
characters = st.one_of(
    st.characters(),
    st.integers(0xD800, 0xDFFF).map(chr),
    st.integers(0x10000, 0x10FFFF).map(chr),
    st.sampled_from('"\\\b\f\n\r\t\x00\x1f\x7f\u2028\u2029/\ue000\uff61\uffff'),
)
strings = st.text(characters, max_size=8)
keys = st.one_of(
    strings,
    st.sampled_from(["__proto__", "0", "9", "10", "01", "-1", "1.5", "4294967294", "4294967295",
                     "\U0001f600", "\uff61", "\ud83d", "\ud83d\ude00"]),
    st.integers(0, 2**33).map(str),
)
numbers = st.one_of(
    st.integers(),
    st.integers(-(2**80), 2**80),
    st.integers(2**1023, 2**1100),  # beyond the double range: null
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([-0.0, 0.0, 1e21, 1e20, 1e-7, 1e-6, 5e-324, -5e-324, 1.7976931348623157e308,
                     2.0**53, 2.0**53 + 2, -(2.0**53), 9007199254740993, 123e-20, 0.1]),
)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | strings,
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(keys, children, max_size=6),
    max_leaves=40,
)


def _shuffled_keys(value, rnd):
    if isinstance(value, dict):
        items = [(k, _shuffled_keys(v, rnd)) for k, v in value.items()]
        rnd.shuffle(items)
        return dict(items)
    if isinstance(value, list):
        return [_shuffled_keys(v, rnd) for v in value]
    return value


@needs_c
@settings(max_examples=400)
@given(json_values, st.randoms())
def test_c_equals_python_on_random_json(value, rnd):
    assert c_dumps(value) == _python_bytes(value)
    # in any key order (not always the same text: keys whose UTF-16 forms are equal, such as
    # "\U0001f600" and "\ud83d\ude00", keep their dict order in both paths)
    shuffled = _shuffled_keys(value, rnd)
    assert c_dumps(shuffled) == _python_bytes(shuffled)


def _nested(depth: int, leaf) -> list | dict:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value, "__proto__": 1}
    return value


@needs_c
@pytest.mark.parametrize("depth", [1, 100, 512])
def test_nesting_within_the_limit_is_encoded_in_c(depth):
    value = _nested(depth, -0.0)
    assert c_dumps(value) == _python_bytes(value)


@needs_c
@pytest.mark.parametrize("depth", [513, 900, 200_000])
def test_deeper_nesting_is_left_to_the_python_path(depth):
    value = _nested(depth, 1e21)
    assert c_dumps(value) is None  # and the C stack is untouched however deep the value
    try:
        expected = _python_bytes(value)
    except RecursionError:
        with pytest.raises(RecursionError):
            canonical_bytes(value)
    else:
        assert canonical_bytes(value) == expected


class Colour(enum.IntEnum):
    RED = 1


class Text(str):
    pass


@needs_c
@pytest.mark.parametrize("value", [
    Colour.RED, Text("x"), {"a": Text("x")}, [1, {2: "int key"}], {1.5: 1}, {"a": {1, 2}},
    b"bytes", object(),
], ids=lambda value: type(value).__name__ if type(value) is object else repr(value))
def test_what_c_leaves_to_python_behaves_as_python(value):
    assert c_dumps(value) is None
    try:
        expected = canonical_json_exact(value)
    except TypeError:
        with pytest.raises(TypeError):
            canonical.canonical_json(value)
    else:
        assert canonical.canonical_json(value) == expected


@needs_c
@pytest.mark.parametrize("unit", ["é", "\u4e00", "\U0001f600", "\ud800", "\n", "a"])
@pytest.mark.parametrize("length", [4095, 4096, 4097, 3 * 4096 + 5])
def test_long_strings_across_the_encoders_blocks(unit, length):
    text = "é" + unit * (length - 1)  # never ASCII-only: the wide loop, block by block
    assert c_dumps({"k": text, "é": [text]}) == _python_bytes({"k": text, "é": [text]})


@needs_c
@settings(max_examples=60)
@given(st.integers(0, 700), json_values)
def test_c_equals_python_at_any_depth(depth, leaf):
    value = _nested(depth, leaf)
    try:
        expected = _python_bytes(value)
    except RecursionError:  # too deep for the Python reference: then both paths refuse
        assert c_dumps(value) is None
        with pytest.raises(RecursionError):
            canonical_bytes(value)
        return
    assert c_dumps(value) in (expected, None)  # None: deeper than the C limit, Python prints it
    assert canonical_bytes(value) == expected


def _container_depth(value) -> int:
    """Levels of lists/dicts in ``value`` (a scalar is 0): the reference for the depth walk."""
    if isinstance(value, dict):
        value = list(value.values())
    elif not isinstance(value, list):
        return 0
    return 1 + max(map(_container_depth, value), default=0)


def _python_walk(value, text):
    """nested_too_deep on the pure-Python path."""
    saved = canonical._c_too_deep
    canonical._c_too_deep = None
    try:
        return canonical.nested_too_deep(value, text)
    finally:
        canonical._c_too_deep = saved


@needs_c
@settings(max_examples=150)
@given(st.integers(0, 420), json_values, st.lists(json_values, max_size=3), st.integers(1, 512))
def test_the_depth_walk_in_c_answers_as_python(depth, leaf, siblings, limit):
    from recstore._canonical import too_deep

    value = [*siblings, _nested(depth, leaf)]  # a deep branch among shallow ones
    assert too_deep(value, limit) == (_container_depth(value) > limit)
    text = json.dumps(value)
    assert canonical.nested_too_deep(value, text) == _python_walk(value, text)
    assert canonical.nested_too_deep(value) == _python_walk(value, None)


class Mapping(dict):
    pass


@needs_c
@pytest.mark.parametrize("deep", [False, True])
def test_the_depth_walk_leaves_subclasses_and_scalars_to_python(deep):
    from recstore._canonical import too_deep

    value = [Mapping(k=_nested(250 if deep else 3, 1))]
    assert too_deep(value, 200) is None
    assert too_deep("[[[", 200) is None
    assert canonical.nested_too_deep(value) is deep
    with pytest.raises(ValueError):
        too_deep([], 513)  # past the C limit: a caller's limit cannot deepen the C stack


def _python_scan(text: bytes) -> bool:
    """has_wide_integer on the pure-Python path."""
    saved = canonical._c_wide_integer
    canonical._c_wide_integer = None
    try:
        return canonical.has_wide_integer(text)
    finally:
        canonical._c_wide_integer = saved


def _holds_wide_int(value) -> bool:
    """The reference: an int orjson cannot hold anywhere in a parsed value (json.dumps writes
    ints as integer literals, floats always with a '.' or an exponent)."""
    if isinstance(value, dict):
        return any(map(_holds_wide_int, value.values()))
    if isinstance(value, list):
        return any(map(_holds_wide_int, value))
    return type(value) is int and not -(2**63) <= value <= 2**64 - 1


_BOUNDS = [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**19, -(10**19), 10**20]
# Digits in strings and keys, float literals with long digit runs, and integers either side of
# orjson's bounds: the cases the scan must tell apart.
_digit_heavy = st.one_of(
    json_values,
    st.one_of(st.integers(-(2**65), 2**65), st.sampled_from(_BOUNDS))
    .map(lambda i: [i, str(i), {str(i): float(i)}]),
    st.sampled_from([1e21, 1234567890123456789.5, 12345678901234567890e-3, -(2.0**64)]),
)


@settings(max_examples=150)
@given(_digit_heavy, st.booleans())
def test_the_wide_integer_scan_finds_exactly_what_orjson_cannot_hold(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert _python_scan(text) is _holds_wide_int(value)
    assert canonical.has_wide_integer(text) is _holds_wide_int(value)


@needs_c
@settings(max_examples=200)
@given(st.lists(st.sampled_from([b'"', b"\\", b"-", b".", b"e", b"E", b"+", b"0", b"7", b"x",
                                 b"\n", b"9223372036854775808", b"18446744073709551615",
                                 b"18446744073709551616"]), max_size=30).map(b"".join))
def test_the_wide_integer_scan_in_c_answers_as_python_on_any_text(text):
    # not JSON at all: open strings, trailing backslashes, bare signs, leading zeros
    assert canonical.has_wide_integer(text) is _python_scan(text)


def test_the_wide_integer_scan_reads_a_hostile_open_string_as_a_string():
    # one string that never closes, of escaped quotes (a backtracking scan would be quadratic
    # here: the regex is possessive and the C scan reads each byte once)
    opened = b'"' + b'\\"' * 200_000
    for text, wide in ((opened + b"1" * 30, False), (opened + b'" ' + b"1" * 30, True)):
        assert _python_scan(text) is wide  # the digits in the open string are not a number
        assert canonical.has_wide_integer(text) is wide
