"""Adaptive rate limits for model endpoints: what a server's headers say, and an AIMD limit.

:func:`retry_delay` reads how long a refused request must wait: ``retry-after-ms``,
``Retry-After`` (seconds or an HTTP date), else the ``x-ratelimit-reset-*`` /
``anthropic-ratelimit-*-reset`` headers (``1s``, ``6m0s``, ``250ms``, seconds or an RFC 3339
time). :func:`exhausted_for` reads ``x-ratelimit-remaining-*`` on any answer: a window with
nothing left holds new requests until it resets.

:class:`AdaptiveLimit` bounds the requests in flight to one endpoint and key. It starts at the
ceiling (``--max-connections``), is multiplied by :data:`DECREASE` on a 429/503 (at most once
per cool-down, so one burst of refusals is one cut, as TCP cuts once per round trip) and
adds one slot per success, never below 1 or above the ceiling. A request waiting for a retry
holds no slot, so the others go on.

Example:
    >>> retry_delay({"retry-after-ms": "250"}, now=0.0)
    0.25
    >>> retry_delay({"x-ratelimit-reset-requests": "1m30s"}, now=0.0)
    90.0
    >>> limit = AdaptiveLimit(8); limit.refused(1.0, now=10.0); limit.current
    5
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["DECREASE", "AdaptiveLimit", "Stopped", "exhausted_for", "parse_duration", "retry_delay"]

#: Factor applied to the limit on a rate-limit answer (429, 503).
DECREASE = 0.7
#: Cuts are at least this many seconds apart (or the server's own delay, when longer).
MIN_COOL_DOWN = 1.0
#: A server delay longer than this is taken as this (a broken header must not park a run for days).
MAX_DELAY = 600.0

_RESET_HEADERS = (
    "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens", "x-ratelimit-reset",
    "anthropic-ratelimit-requests-reset", "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-reset", "anthropic-ratelimit-output-tokens-reset",
)
# remaining-* header -> its reset-* header
_REMAINING_HEADERS = {
    "x-ratelimit-remaining-requests": "x-ratelimit-reset-requests",
    "x-ratelimit-remaining-tokens": "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-remaining": "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-remaining": "anthropic-ratelimit-tokens-reset",
}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


class Stopped(Exception):
    """The command is stopping (Ctrl-C): a waiting request gives up."""


def parse_duration(text: str, *, now: float | None = None) -> float | None:
    """Seconds a reset header names: ``"1.5"``, ``"20ms"``, ``"6m0s"``, ``"1h2m"``, an HTTP date or
    an RFC 3339 time (relative to ``now``, Unix seconds); None when it is none of these."""
    text = text.strip()
    if not text:
        return None
    try:
        return _bounded(float(text))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if parts and "".join(n + u for n, u in parts) == text:
        scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
        return _bounded(sum(float(n) * scale[u] for n, u in parts))
    moment = _parse_time(text)
    if moment is None:
        return None
    current = time.time() if now is None else now
    return _bounded(moment.timestamp() - current)


def _parse_time(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _bounded(seconds: float) -> float | None:
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_DELAY)


def retry_delay(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """How long the server asks a refused request to wait, or None when it does not say.

    ``headers`` is a case-insensitive mapping (httpx's ``Headers``) or a dict of lower-case names.
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return _bounded(float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is not None:
        seconds = parse_duration(value, now=now)
        if seconds is not None:
            return seconds
    resets = [parse_duration(headers[name], now=now) for name in _RESET_HEADERS if headers.get(name)]
    resets = [r for r in resets if r is not None]
    return max(resets) if resets else None


def exhausted_for(headers: Mapping[str, str], *, now: float | None = None) -> float:
    """Seconds until a rate-limit window with nothing remaining resets (0 when none is empty)."""
    wait = 0.0
    for remaining, reset in _REMAINING_HEADERS.items():
        value = headers.get(remaining)
        if value is None or value.strip() not in ("0", "0.0"):
            continue
        seconds = parse_duration(headers.get(reset) or "", now=now)
        wait = max(wait, seconds if seconds is not None else MIN_COOL_DOWN)
    return wait


class AdaptiveLimit:
    """Slots for the requests in flight to one endpoint and key, between 1 and ``ceiling``.

    ``acquire`` waits for a slot (and while an exhausted window is held); ``release`` gives it
    back. ``succeeded`` and ``refused`` move the limit (additive increase, multiplicative
    decrease). Thread-safe; ``stop()`` wakes every waiter with :class:`Stopped`.
    """

    def __init__(self, ceiling: int):
        if ceiling < 1:
            raise ValueError("a limit needs at least one slot")
        self.ceiling = ceiling
        self._limit = float(ceiling)
        self.in_flight = 0
        self.peak_in_flight = 0
        self.cuts = 0
        self._hold_until = 0.0
        self._next_cut = 0.0
        self._stopped = False
        self._cond = threading.Condition()

    @property
    def current(self) -> int:
        """The number of slots now."""
        return max(1, int(self._limit))

    def acquire(self) -> None:
        """Take a slot, waiting while all are taken or a window is held."""
        with self._cond:
            while True:
                if self._stopped:
                    raise Stopped()
                held = self._hold_until - time.monotonic()
                if held <= 0 and self.in_flight < self.current:
                    break
                self._cond.wait(held if held > 0 else None)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def release(self) -> None:
        """Give a slot back."""
        with self._cond:
            self.in_flight -= 1
            self._cond.notify()

    def succeeded(self) -> None:
        """An answer came: one slot more, up to the ceiling."""
        with self._cond:
            if self._limit < self.ceiling:
                self._limit = min(float(self.ceiling), self._limit + 1.0)
                self._cond.notify()

    def refused(self, delay: float | None, *, now: float | None = None) -> None:
        """A 429/503 came: cut the limit unless it was cut within the cool-down."""
        moment = time.monotonic() if now is None else now
        with self._cond:
            if moment < self._next_cut:
                return
            self._limit = max(1.0, self._limit * DECREASE)
            self._next_cut = moment + max(MIN_COOL_DOWN, delay or 0.0)
            self.cuts += 1

    def hold(self, seconds: float) -> None:
        """Start no request for ``seconds`` (a window with nothing remaining)."""
        if seconds <= 0:
            return
        with self._cond:
            self._hold_until = max(self._hold_until, time.monotonic() + seconds)

    def stop(self) -> None:
        """Refuse every waiting and later ``acquire`` (Ctrl-C)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
