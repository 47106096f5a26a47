"""Paired statistics of a comparison: exact McNemar and the binomial bootstrap."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recstore.compare.stats import bootstrap_rate_ci, mcnemar_exact


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


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 5000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_bootstrap_interval_brackets_the_rate(kn):
    k, n = kn
    low, high = bootstrap_rate_ci(k, n, replicates=500)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert (low, high) == bootstrap_rate_ci(k, n, replicates=500)  # seeded: reproducible
    if k in (0, n):
        assert low == high == k / n


def test_bootstrap_matches_resampling_the_pairs():
    """The binomial shortcut gives the same percentiles as resampling pair outcomes."""
    outcomes = [1] * 60 + [0] * 140
    rng = random.Random(3)
    rates = sorted(sum(rng.choices(outcomes, k=len(outcomes))) / 200 for _ in range(4000))
    brute = (rates[100], rates[3899])
    low, high = bootstrap_rate_ci(60, 200, replicates=4000)
    assert abs(low - brute[0]) <= 0.015 and abs(high - brute[1]) <= 0.015
