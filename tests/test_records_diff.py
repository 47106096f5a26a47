"""The report's differences: the tool-call alignment is a minimal edit script, the word diff and
the JSON value diff give both sides back."""

from __future__ import annotations

from functools import cache

from hypothesis import given
from hypothesis import strategies as st

from recstore.records.diff import align_calls, value_diff, word_diff

calls = st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("12")), max_size=9).map(
    lambda seq: [{"name": n, "argsHash": h} for n, h in seq])


def edit_distance(a: list[dict], b: list[dict]) -> int:
    """Reference: insert/delete 1, a same-name substitution 1, a match 0 (plain recursion)."""
    @cache
    def d(i: int, j: int) -> int:
        if i == len(a) or j == len(b):
            return len(a) - i + len(b) - j
        best = 1 + min(d(i + 1, j), d(i, j + 1))
        if a[i]["name"] == b[j]["name"]:
            best = min(best, d(i + 1, j + 1) + (a[i]["argsHash"] != b[j]["argsHash"]))
        return best

    return d(0, 0)


@given(calls, calls)
def test_alignment_is_a_minimal_edit_script_that_gives_both_sides_back(a, b):
    steps = align_calls(a, b)
    assert [s.a for s in steps if s.a is not None] == list(range(len(a)))
    assert [s.b for s in steps if s.b is not None] == list(range(len(b)))
    for s in steps:
        if s.op == "matched":
            assert a[s.a] == b[s.b]
        elif s.op == "changed":
            assert a[s.a]["name"] == b[s.b]["name"] and a[s.a] != b[s.b]
        else:
            assert (s.op, s.a is None, s.b is None) in {("added", True, False), ("removed", False, True)}
    assert sum(s.op != "matched" for s in steps) == edit_distance(a, b)


def test_long_sequences_align_around_a_change_in_the_middle():
    a = [{"name": f"t{i % 7}", "argsHash": str(i)} for i in range(400)]
    b = a[:150] + [{"name": "new", "argsHash": "x"}] + a[150:300] + a[301:]
    b[200] = {"name": b[200]["name"], "argsHash": "changed"}
    ops = [s.op for s in align_calls(a, b)]
    assert ops.count("added") == 1 and ops.count("removed") == 1 and ops.count("changed") == 1
    assert ops.count("matched") == 398


@given(st.text(max_size=60), st.text(max_size=60))
def test_word_diff_gives_both_texts_back(a, b):
    segments = word_diff(a, b)
    assert "".join(t for op, t in segments if op != "insert") == a
    assert "".join(t for op, t in segments if op != "delete") == b


def test_value_diff_names_paths_and_sides():
    assert value_diff({"a": [1, 2], "b x": {"c": None}}, {"a": [1], "b x": {"c": 1}, "d": True}) == [
        ("$.a[1]", "removed", "2", None),
        ('$["b x"].c', "changed", "null", "1"),
        ("$.d", "added", None, "true"),
    ]
    assert value_diff("same", "same") == []
    assert len(value_diff(list(range(100)), [], limit=5)) == 5
