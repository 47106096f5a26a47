"""Paired statistics for a comparison, in pure Python (no scipy): is a difference noise?

* :func:`mcnemar_exact` — McNemar's exact test on the discordant pairs of a paired pass/fail
  outcome (baseline passed and candidate failed: ``b``; the reverse: ``c``). Under the null
  hypothesis each discordant pair goes either way with probability 1/2, so
  ``p = min(1, 2 * P[X <= min(b, c)])`` with ``X ~ Binomial(b + c, 1/2)``.
* :func:`wilson_interval` — the Wilson score interval for a proportion (e.g. the share of pairs
  that changed). Unlike the normal (Wald) interval or a bootstrap, it does not collapse to a
  point at 0 or n successes: 0 of 200 changed gives 0.0–1.9%, not 0.0–0.0%. There is no
  interval for 0 trials (``None``). Recommended by Brown, Cai & DasGupta (2001).

Example:
    >>> round(mcnemar_exact(1, 9), 6)
    0.021484
    >>> [round(x, 4) for x in wilson_interval(0, 200)]
    [0.0, 0.0188]
    >>> wilson_interval(0, 0) is None
    True
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["binomial_log_pmf", "mcnemar_exact", "wilson_interval"]


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


def wilson_interval(k: int, n: int, *, level: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval of the proportion ``k / n`` at ``level`` (``None`` when ``n == 0``).

    ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)`` with ``z`` the normal quantile of
    ``1 - (1 - level) / 2``; the bounds are clamped to [0, 1] (they only leave it by rounding).
    """
    if not 0 <= k <= n:
        raise ValueError("need 0 <= k <= n")
    if not 0.0 < level < 1.0:
        raise ValueError("level must be between 0 and 1")
    if n == 0:
        return None
    z = NormalDist().inv_cdf(1.0 - (1.0 - level) / 2.0)
    p = k / n
    scale = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / scale
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / scale
    low = 0.0 if k == 0 else max(0.0, center - half)
    high = 1.0 if k == n else min(1.0, center + half)
    return (low, high)
