"""Paired statistics of a comparison: exact McNemar and the Wilson interval of a proportion."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.compare.stats import mcnemar_exact, wilson_interval


def brute_mcnemar(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


def test_known_values():
    assert mcnemar_exact(1, 9) == close_to(0.021484375)
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 20) == close_to(2 / 2**20)


def close_to(value: float):
    return pytest.approx(value, rel=1e-9, abs=1e-15)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemar_equals_exact_binomial_and_is_symmetric(b, c):
    p = mcnemar_exact(b, c)
    assert p == close_to(brute_mcnemar(b, c))
    assert p == mcnemar_exact(c, b)
    assert 0.0 < p <= 1.0
    if c >= b:  # one more discordant pair in the majority direction is stronger evidence
        assert mcnemar_exact(b, c + 1) <= p + 1e-15


# Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I, method 3
# (Wilson score, no continuity correction), plus 0 of 200: the interval the bootstrap printed as
# "0.0–0.0%".
WILSON_KNOWN = [
    (81, 263, 0.2553, 0.3662),
    (15, 148, 0.0624, 0.1605),
    (0, 20, 0.0, 0.1611),
    (1, 29, 0.0061, 0.1718),
    (0, 10, 0.0, 0.2775),
    (29, 29, 0.8830, 1.0),
    (0, 200, 0.0, 0.0188),
]


@pytest.mark.parametrize(("k", "n", "low", "high"), WILSON_KNOWN)
def test_wilson_known_values(k, n, low, high):
    got = wilson_interval(k, n)
    assert got is not None
    assert got[0] == pytest.approx(low, abs=5e-5) and got[1] == pytest.approx(high, abs=5e-5)


def test_no_interval_for_zero_trials():
    assert wilson_interval(0, 0) is None


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 100_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_brackets_the_rate_and_never_collapses(kn):
    k, n = kn
    low, high = wilson_interval(k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert high - low > 0.0  # at 0 or n successes too: uncertainty never reads as certainty
    mirrored = wilson_interval(n - k, n)  # symmetric in successes and failures
    assert mirrored[0] == pytest.approx(1.0 - high, abs=1e-12)
    assert mirrored[1] == pytest.approx(1.0 - low, abs=1e-12)
    wider = wilson_interval(k, n, level=0.99)
    assert wider[0] <= low + 1e-12 and wider[1] >= high - 1e-12
