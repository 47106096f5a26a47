"""Many runs in flight from one process: each run's synchronous loop on its own thread.

The runtime loop is synchronous and deterministic per run: it sees only its own model answers
and tool outputs. So a run is the unit of concurrency: :func:`run_many` calls ``work(item)`` for
up to ``threads`` items at once and yields the results as they finish (or in input order), with
at most ``window`` items taken from the input ahead, so memory stays flat. Model requests are
bounded separately, per endpoint, by the adaptive limit of :mod:`recstore.replay.endpoints`;
there are more run threads than request slots (:func:`run_threads`) so that runs waiting for a
retry, or doing their CPU work, leave the slots to others.

Ctrl-C (``KeyboardInterrupt`` in the consuming thread): waiting and in-flight model requests are
stopped (:func:`~recstore.replay.endpoints.stop_requests`), external commands killed, items not
started are dropped, and the results that had already finished are still yielded before the
interrupt is raised again, so the caller stores every replay that finished.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from itertools import islice
from typing import Any, TypeVar

__all__ = ["MAX_THREADS", "run_many", "run_threads"]

T = TypeVar("T")
R = TypeVar("R")

#: Run threads never exceed this (each is a thread stack; 256 slots want no more).
MAX_THREADS = 512


def run_threads(max_connections: int) -> int:
    """Run threads for a ceiling of ``max_connections`` model requests in flight: twice as many,
    so a run sleeping before a retry (holding no slot) does not leave a slot idle."""
    return max(1, min(MAX_THREADS, 2 * max_connections))


def run_many(work: Callable[[T], R], items: Iterable[T], *, threads: int, ordered: bool = True,
             window: int | None = None) -> Iterator[tuple[T, R]]:
    """``(item, work(item))`` for every item, computed on ``threads`` threads.

    One thread (``threads <= 1``) calls ``work`` in the caller's thread. ``ordered`` yields in
    input order (a slow item holds back the ones behind it, never their
    work); otherwise as they finish. An exception from ``work`` is raised when its result is
    yielded. See the module docstring for Ctrl-C.
    """
    if threads <= 1:  # nothing waits: no thread to hand work to
        for item in items:
            yield item, work(item)
        return
    limit = window or 4 * threads
    pool = _DaemonPool(threads)
    pending: deque[tuple[T, Future]] = deque()
    todo = iter(items)
    try:
        while True:
            pending.extend((item, pool.submit(work, item)) for item in islice(todo, limit - len(pending)))
            if not pending:
                break
            if ordered:
                item, future = pending.popleft()
                yield item, future.result()
            else:
                wait([f for _, f in pending], return_when=FIRST_COMPLETED)
                for entry in [e for e in pending if e[1].done()]:
                    pending.remove(entry)
                    yield entry[0], entry[1].result()
    except KeyboardInterrupt:
        for _, future in pending:
            future.cancel()  # not started: dropped
        _stop_everything()
        for item, future in pending:
            if future.done() and not future.cancelled() and future.exception() is None:
                yield item, future.result()
        raise
    finally:
        for _, future in pending:
            future.cancel()
        pool.shutdown()


def _stop_everything() -> None:
    from recstore.process import kill_running_commands
    from recstore.replay.endpoints import stop_requests

    stop_requests()
    kill_running_commands()


class _DaemonPool:
    """Threads that run submitted calls. Daemon threads, unlike ``ThreadPoolExecutor``'s: after
    Ctrl-C a thread still blocked on a socket read must not keep the process from exiting."""

    def __init__(self, size: int):
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"recstore-run-{i}", daemon=True)
                         for i in range(size)]
        for thread in self._threads:
            thread.start()

    def submit(self, work: Callable[[Any], Any], item: Any) -> Future:
        future: Future = Future()
        self._tasks.put((future, work, item))
        return future

    def _work(self) -> None:
        while (task := self._tasks.get()) is not None:
            future, work, item = task
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(work(item))
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer with the result
                future.set_exception(exc)

    def shutdown(self) -> None:
        """Let every thread end once the calls queued before are done (or cancelled)."""
        for _ in self._threads:
            self._tasks.put(None)
