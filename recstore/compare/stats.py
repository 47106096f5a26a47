"""Paired statistics for a comparison, in pure Python (no scipy): is a difference noise?

* :func:`mcnemar_exact` — McNemar's exact test on the discordant pairs of a paired pass/fail
  outcome (baseline passed and candidate failed: ``b``; the reverse: ``c``). Under the null
  hypothesis each discordant pair goes either way with probability 1/2, so
  ``p = min(1, 2 * P[X <= min(b, c)])`` with ``X ~ Binomial(b + c, 1/2)``.
* :func:`bootstrap_rate_ci` — a seeded percentile bootstrap confidence interval for a rate
  (e.g. the share of pairs that changed). Resampling ``n`` pairs with replacement from a sample
  with ``k`` changed pairs makes the resampled count ``Binomial(n, k/n)``, so each replicate is one
  exact binomial draw (inverse CDF) instead of ``n`` random picks: the same bootstrap distribution
  at a cost independent of ``n``.

Example:
    >>> round(mcnemar_exact(1, 9), 6)
    0.021484
    >>> bootstrap_rate_ci(0, 50)
    (0.0, 0.0)
"""

from __future__ import annotations

import bisect
import math
import random

__all__ = ["binomial_log_pmf", "bootstrap_rate_ci", "mcnemar_exact"]


def binomial_log_pmf(k: int, n: int, p: float) -> float:
    """``log P[X = k]`` for ``X ~ Binomial(n, p)`` (``-inf`` where the probability is 0)."""
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def _log_sum_exp(values: list[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs (1.0 when none)."""
    if b < 0 or c < 0:
        raise ValueError("discordant pair counts must be >= 0")
    n = b + c
    if n == 0:
        return 1.0
    tail = _log_sum_exp([binomial_log_pmf(k, n, 0.5) for k in range(min(b, c) + 1)])
    return min(1.0, 2.0 * math.exp(tail))


def _binomial_cdf(n: int, p: float) -> tuple[int, list[float]]:
    """``(first_k, cdf)`` over the support that carries all but ~1e-30 of the mass."""
    mean = n * p
    spread = 15.0 * math.sqrt(max(n * p * (1.0 - p), 1.0)) + 2.0
    low = max(0, int(mean - spread))
    high = min(n, int(mean + spread) + 1)
    pmf = [math.exp(binomial_log_pmf(k, n, p)) for k in range(low, high + 1)]
    total = 0.0
    cdf = []
    for value in pmf:
        total += value
        cdf.append(total)
    return low, [v / total for v in cdf]


def bootstrap_rate_ci(
    k: int, n: int, *, replicates: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the rate ``k / n`` (seeded, so reports reproduce)."""
    if not 0 <= k <= n:
        raise ValueError("need 0 <= k <= n")
    if n == 0:
        return (0.0, 0.0)
    low, cdf = _binomial_cdf(n, k / n)
    rng = random.Random(seed)
    last = len(cdf) - 1
    draws = sorted(
        (low + min(bisect.bisect_left(cdf, rng.random()), last)) / n for _ in range(replicates)
    )
    alpha = (1.0 - level) / 2.0
    lower = draws[int(math.floor(alpha * replicates))]
    upper = draws[min(replicates - 1, int(math.ceil((1.0 - alpha) * replicates)) - 1)]
    return (lower, upper)
