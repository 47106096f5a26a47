"""Model endpoints over HTTP: one pooled client and one adaptive limit per endpoint and key.

Every model request of a process goes through :func:`post_json`: it takes a slot of the
endpoint's :class:`~recstore.replay.ratelimit.AdaptiveLimit`, posts on the endpoint's pooled
``httpx.Client`` (keep-alive, as many connections as the ceiling), gives the slot back, and
retries what can be retried — 429 and 503/529 (rate limits: the limit is cut, the server's delay
honoured), other 5xx answers, timeouts and dropped connections — sleeping *without* a slot, so
the other runs go on. A request that exhausts its retries, or would wait past its run's deadline,
raises :class:`ProviderError` with the reason: the replay is stored as failed.

:func:`live_session` sets the ceiling (``--max-connections``) for a command and closes the
clients at its end; :func:`stop_requests` (Ctrl-C) wakes every waiter and closes the clients so
in-flight requests end at once. :data:`STATS` counts what the progress display and ``--json``
totals show.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from recstore.replay.ratelimit import AdaptiveLimit, Stopped, exhausted_for, retry_delay
from recstore.runtime.errors import AgentRunError

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "STATS",
    "Endpoint",
    "LiveStats",
    "ProviderError",
    "RetryPolicy",
    "Usage",
    "endpoint_for",
    "configure",
    "live_session",
    "post_json",
    "stop_requests",
    "sum_usage",
]

DEFAULT_MAX_CONNECTIONS = 16
# Answers that mean "too many requests now": the limit is cut and the retry waits.
_RATE_LIMITED = frozenset({429, 503, 529})


class ProviderError(AgentRunError):
    """A provider could not answer; the replay run fails with this error."""


@dataclass(frozen=True)
class RetryPolicy:
    """How one provider retries: ``max_retries`` for errors (5xx, timeouts, dropped
    connections), ``rate_limit_retries`` for 429s (a rate limit is not a failure), backoff
    doubling from ``backoff`` up to ``max_backoff`` when the server names no delay."""

    timeout: float = 60.0
    max_retries: int = 3
    rate_limit_retries: int = 10
    backoff: float = 0.5
    max_backoff: float = 8.0


@dataclass
class Usage:
    """Token usage and request counts of one replay run (kept with the replay)."""

    requests: int = 0
    retries: int = 0
    rate_limited: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def add_tokens(self, prompt: Any, completion: Any, total: Any = None) -> None:
        """Add one answer's usage (missing or non-numeric fields count 0)."""
        p, c = _count(prompt), _count(completion)
        self.prompt_tokens += p
        self.completion_tokens += c
        self.total_tokens += _count(total) if total is not None else p + c
        STATS.add_tokens(p + c if total is None else _count(total))

    def to_json(self) -> dict:
        return {
            "requests": self.requests, "retries": self.retries, "rateLimited": self.rate_limited,
            "promptTokens": self.prompt_tokens, "completionTokens": self.completion_tokens,
            "totalTokens": self.total_tokens,
        }


def sum_usage(usages: Iterable[dict | None]) -> dict:
    """The sum of several :meth:`Usage.to_json` dicts (None entries: replays that called no
    HTTP model); ``replaysWithUsage`` counts the others."""
    total = Usage().to_json()
    seen = 0
    for usage in usages:
        if not usage:
            continue
        seen += 1
        for key in total:
            total[key] += _count(usage.get(key))
    return {**total, "replaysWithUsage": seen}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


@dataclass
class LiveStats:
    """Counters of the model requests of this process (thread-safe)."""

    requests: int = 0
    answered: int = 0
    retries: int = 0
    rate_limited: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _final: dict | None = field(default=None, repr=False)

    def bump(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    def add_tokens(self, n: int) -> None:
        with self._lock:
            self.tokens += n

    def reset(self) -> None:
        with self._lock:
            self.requests = self.answered = self.retries = self.rate_limited = self.tokens = 0
            self.started = time.monotonic()
            self._final = None

    def freeze(self) -> None:
        """Keep the figures of the endpoints about to be closed."""
        self._final = None
        self._final = self.to_json()

    def to_json(self) -> dict:
        """Totals for ``--json``: requests, retries, rate limits, peak in flight, limits now
        (after the session: as it ended)."""
        limits = [e.limit for e in list(_ENDPOINTS.values())]
        if not limits and self._final is not None:
            return self._final
        return {
            "requests": self.requests, "retries": self.retries, "rateLimited": self.rate_limited,
            "inFlight": sum(limit.in_flight for limit in limits),
            "peakInFlight": max((limit.peak_in_flight for limit in limits), default=0),
            "limit": min((limit.current for limit in limits), default=None),
            "limitCuts": sum(limit.cuts for limit in limits),
        }

    def line(self) -> str:
        """One short line for the progress display (empty before the first model request)."""
        if not self.requests:
            return ""
        live = self.to_json()
        rate = self.answered / max(time.monotonic() - self.started, 1e-9)
        return (f"{rate:,.1f} req/s, {live['inFlight']} in flight, limit {live['limit']}, "
                f"{self.retries} retries ({self.rate_limited} rate-limited), {self.tokens:,} tokens")


#: The model-request counters of this process.
STATS = LiveStats()


_THREAD_SHARD = threading.local()
_SHARDS = itertools.count()

#: Connections per pooled client. httpcore's pool scans its connections under one lock for
#: every request, so one client for 256 connections spends its time in that lock (measured:
#: a third of all samples at 256); clients of at most this many keep the scan short.
CONNECTIONS_PER_CLIENT = 16


class Endpoint:
    """One endpoint and key: pooled HTTP clients and the adaptive limit of its requests. Each
    thread keeps to one client (so its connection stays warm); the limit bounds them all."""

    def __init__(self, ceiling: int):
        import httpx  # imported when a model is first called: the CLI starts without it

        self.limit = AdaptiveLimit(ceiling)
        shards = max(1, -(-ceiling // CONNECTIONS_PER_CLIENT))
        self.clients = [
            httpx.Client(limits=httpx.Limits(max_connections=ceiling, max_keepalive_connections=ceiling),
                         follow_redirects=False, trust_env=False)
            for _ in range(shards)]

    @property
    def client(self):
        """This thread's client (threads take the clients in turn)."""
        shard = getattr(_THREAD_SHARD, "index", None)
        if shard is None:
            shard = _THREAD_SHARD.index = next(_SHARDS)
        return self.clients[shard % len(self.clients)]

    def close(self) -> None:
        for client in self.clients:
            client.close()


_ENDPOINTS: dict[tuple[str, str], Endpoint] = {}
_ENDPOINTS_LOCK = threading.Lock()
_STOP = threading.Event()
_ceiling = DEFAULT_MAX_CONNECTIONS


def endpoint_for(base_url: str, api_key: str | None) -> Endpoint:
    """The shared endpoint for ``base_url`` and this key (keyed by the key's hash, never the key)."""
    key = (base_url.rstrip("/"), hashlib.sha256((api_key or "").encode()).hexdigest())
    with _ENDPOINTS_LOCK:
        endpoint = _ENDPOINTS.get(key)
        if endpoint is None:
            endpoint = _ENDPOINTS[key] = Endpoint(_ceiling)
        return endpoint


@contextmanager
def live_session(max_connections: int = DEFAULT_MAX_CONNECTIONS) -> Iterator[LiveStats]:
    """Model requests of this block are bounded by ``max_connections`` per endpoint and key;
    the clients are closed at its end."""
    global _ceiling
    _close_endpoints()
    _STOP.clear()
    STATS.reset()
    _ceiling = max_connections
    try:
        yield STATS
    finally:
        STATS.freeze()
        _close_endpoints()
        _ceiling = DEFAULT_MAX_CONNECTIONS


def configure(max_connections: int) -> None:
    """Set the ceiling of endpoints opened from now on (a worker process's share)."""
    global _ceiling
    _ceiling = max_connections


def _close_endpoints() -> None:
    with _ENDPOINTS_LOCK:
        endpoints = list(_ENDPOINTS.values())
        _ENDPOINTS.clear()
    for endpoint in endpoints:
        endpoint.close()


def stop_requests() -> None:
    """Ctrl-C: waiting requests give up, in-flight ones are cut off (their clients closed)."""
    _STOP.set()
    with _ENDPOINTS_LOCK:
        endpoints = list(_ENDPOINTS.values())
    for endpoint in endpoints:
        endpoint.limit.stop()
        endpoint.close()


def stopping() -> bool:
    """True once :func:`stop_requests` was called in this session."""
    return _STOP.is_set()


def _wait(seconds: float) -> None:
    if _STOP.wait(seconds):
        raise Stopped()


class _Retry(Exception):
    def __init__(self, message: str, delay: float | None, rate_limited: bool):
        super().__init__(message)
        self.delay = delay
        self.rate_limited = rate_limited


def post_json(endpoint: Endpoint, url: str, headers: dict[str, str], body: bytes, *,
              policy: RetryPolicy, usage: Usage, who: str, deadline: float | None = None,
              error_detail: Callable[[Any], str], sleep: Callable[[float], None] | None = None) -> Any:
    """POST ``body`` and return the JSON answer, retrying as the module docstring says.

    ``who`` starts error messages (``"openai provider"``); ``error_detail(json)`` pulls the
    server's message out of an error body; ``deadline`` (monotonic seconds) bounds the whole run.
    """
    wait = sleep or _wait
    errors = rate_limits = 0
    while True:
        timeout = policy.timeout
        if deadline is not None:
            timeout = min(timeout, deadline - time.monotonic())
            if timeout <= 0:
                raise ProviderError(f"{who}: the run's deadline passed before a request to {url}")
        try:
            return _post_once(endpoint, url, headers, body, timeout, usage, error_detail, who)
        except _Retry as retry:
            attempts = errors + rate_limits + 1
            if retry.rate_limited:
                rate_limits += 1
                over = rate_limits > policy.rate_limit_retries
            else:
                errors += 1
                over = errors > policy.max_retries
            if over:
                raise ProviderError(f"{who}: {retry} from {url} (gave up after {attempts} attempts)") from None
            delay = retry.delay
            if delay is None:
                delay = min(policy.backoff * (2 ** (attempts - 1)), policy.max_backoff)
            if deadline is not None and time.monotonic() + delay >= deadline:
                raise ProviderError(f"{who}: {retry} from {url}; the run's deadline passes before "
                                    f"the retry in {delay:g}s") from None
            usage.retries += 1
            STATS.bump("retries")
            try:
                wait(delay)
            except Stopped:
                raise ProviderError(f"{who}: interrupted") from None
        except Stopped:
            raise ProviderError(f"{who}: interrupted") from None


def _post_once(endpoint: Endpoint, url: str, headers: dict[str, str], body: bytes, timeout: float,
               usage: Usage, error_detail: Callable[[Any], str], who: str) -> Any:
    import httpx

    limit = endpoint.limit
    limit.acquire()
    usage.requests += 1
    STATS.bump("requests")
    try:
        response = endpoint.client.post(url, content=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        raise _Retry(f"timed out after {timeout:g}s", None, False) from None
    except (httpx.TransportError, RuntimeError) as exc:  # RuntimeError: the client was closed
        if stopping():
            raise Stopped() from None
        raise _Retry(f"connection failed ({type(exc).__name__})", None, False) from None
    finally:
        limit.release()
    STATS.bump("answered")
    status = response.status_code
    if status == 200:
        limit.succeeded()
        limit.hold(exhausted_for(response.headers))
        try:
            return response.json()
        except ValueError:
            raise ProviderError(f"{who}: {url} answered with invalid JSON") from None
    detail = _detail(response, error_detail)
    if status in _RATE_LIMITED:
        delay = retry_delay(response.headers)
        limit.refused(delay)
        if status == 429:
            usage.rate_limited += 1
            STATS.bump("rate_limited")
        raise _Retry(f"HTTP {status}{detail}", delay, status == 429)
    if status >= 500:
        raise _Retry(f"HTTP {status}{detail}", retry_delay(response.headers), False)
    raise ProviderError(f"{who}: HTTP {status}{detail} from {url}")


def _detail(response: Any, error_detail: Callable[[Any], str]) -> str:
    try:
        message = error_detail(response.json())
    except ValueError:
        return ""
    return f": {message}" if message else ""
