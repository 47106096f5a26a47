"""Limits on one running query: a statement timeout, a row cap, and Ctrl-C.

A query holds the store's read lock while it runs, and a recursive CTE or a cross join can run
for ever, so the CLI gives every query a time limit and a row cap (``--timeout``,
``--max-rows``); the library applies them only when asked (:class:`QueryLimits`).

Stopping uses DuckDB's own ``interrupt()``, called from a watcher thread: DuckDB checks for it
between chunks of work and fails the statement. The watcher also wakes on Ctrl-C: Python runs
its SIGINT handler only between bytecodes, and the main thread is inside DuckDB, so the signal is
seen through ``signal.set_wakeup_fd`` instead. One scalar call that builds a huge value
(``repeat('x', 2000000000)``) does not check for interruption until it returns; for that,
``exit_after`` ends the process when the statement has not stopped that many seconds after the
interrupt (the CLI's last resort; a read-only query leaves nothing half-written in the store).

Both clocks count only time spent inside DuckDB: the caller's own work between batches (drawing
a table, writing to a slow pipe or a pager) is not the query's, so it neither uses up the time
limit nor ends the process as a DuckDB that "did not stop".
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from recstore.errors import InputError, QueryLimitError

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from recstore.query.output import ResultStream

__all__ = ["QUERY_MAX_ROWS", "QUERY_TIMEOUT", "LimitWatch", "QueryLimitError", "QueryLimits",
           "cap_rows"]

# The limits `recstore query` and the served SQL console apply (the library sets none unless
# asked): a query holds the store's read lock while it runs, and a runaway one (a recursive CTE,
# a cross join) would otherwise never end.
QUERY_TIMEOUT = 120.0
QUERY_MAX_ROWS = 1_000_000

_WAKE = b"\0"  # not a signal number: stop() wakes the watcher with it
_RESUME = b"\xff"  # nor this: resume() wakes it to start the clock again
_LONGEST_WAIT = 86_400.0  # select() overflows on a huge timeout; the watcher waits in steps


@dataclass(frozen=True)
class QueryLimits:
    """``timeout`` seconds of DuckDB's time for the statement, fetching its results included
    but not the caller's work between batches (None: no limit);
    ``max_rows`` rows at most (None: all; the result says ``truncated`` when rows were cut);
    ``interruptible``: Ctrl-C stops the statement (main thread only); ``exit_after``: seconds
    after an interrupt the statement ignores before the process exits (None: never)."""

    timeout: float | None = None
    max_rows: int | None = None
    interruptible: bool = False
    exit_after: float | None = None

    @property
    def watched(self) -> bool:
        return self.timeout is not None or self.interruptible


class LimitWatch:
    """Watches one statement on ``cursor``: interrupts it at the timeout or on Ctrl-C, cuts its
    rows at the cap, and turns what DuckDB raises into one clear error. :meth:`stop` ends it."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, limits: QueryLimits):
        self.cursor = cursor
        self.limits = limits
        self.timed_out = False
        self.interrupted = False
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._clock = threading.Lock()
        self._in_duckdb = 0.0  # seconds DuckDB has worked on the statement, up to _since
        self._since: float | None = time.monotonic()  # None: the caller has the statement
        self._old_wakeup: int | None = None
        if limits.watched:
            self._read, self._write = os.pipe()
            os.set_blocking(self._write, False)
            if limits.interruptible and threading.current_thread() is threading.main_thread():
                self._old_wakeup = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
            self._thread = threading.Thread(target=self._watch, name="recstore-query-limit",
                                            daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        timeout = self.limits.timeout
        woke = self._wait(timeout, stop_on_ctrl_c=True)
        if woke == "stopped":
            return
        self.timed_out, self.interrupted = woke == "elapsed", woke == "ctrl-c"
        self.cursor.interrupt()
        if self.limits.exit_after is None:
            return
        if self._wait(self.limits.exit_after, stop_on_ctrl_c=False) == "elapsed":
            why = (f"query stopped after its {timeout:g}s time limit"
                   if self.timed_out else "interrupted")
            sys.stderr.write(f"recstore: error: {why}; DuckDB did not stop within "
                             f"{self.limits.exit_after:g}s, exiting\n")
            sys.stderr.flush()
            os._exit(130 if self.interrupted else QueryLimitError.exit_code)

    def _wait(self, seconds: float | None, stop_on_ctrl_c: bool) -> str:
        """Wait until DuckDB has spent ``seconds`` more on the statement (``elapsed``; None:
        never), :meth:`stop` is called (``stopped``) or Ctrl-C arrives (``ctrl-c``)."""
        start = self._duckdb_time()
        while True:
            left = None if seconds is None else seconds - (self._duckdb_time() - start)
            if left is not None and left <= 0 and self._since is not None:
                return "elapsed"
            paused = self._since is None
            wait = None if paused or left is None else min(left, _LONGEST_WAIT)
            ready, _, _ = select.select([self._read], [], [], wait)
            if not ready:
                continue  # the clock is checked again at the top
            woken = os.read(self._read, 512)
            if _WAKE in woken or self._stopped.is_set():
                return "stopped"
            if stop_on_ctrl_c and signal.SIGINT.value in woken:
                return "ctrl-c"

    def _duckdb_time(self) -> float:
        with self._clock:
            running = 0.0 if self._since is None else time.monotonic() - self._since
            return self._in_duckdb + running

    def pause(self) -> None:
        """The caller has the statement (between batches): stop its clock."""
        with self._clock:
            if self._since is not None:
                self._in_duckdb += time.monotonic() - self._since
                self._since = None

    def resume(self) -> None:
        """DuckDB works on the statement again (a batch is fetched): start its clock."""
        with self._clock:
            if self._since is not None:
                return
            self._since = time.monotonic()
        if self._thread is not None and not self._stopped.is_set():
            try:
                os.write(self._write, _RESUME)
            except (BlockingIOError, OSError):
                pass  # full of wake-ups already, or the watch just ended

    def stop(self) -> None:
        """End the watch (idempotent); restores the previous Ctrl-C wake-up file."""
        if self._thread is None or self._stopped.is_set():
            return
        self._stopped.set()
        if self._old_wakeup is not None:
            signal.set_wakeup_fd(self._old_wakeup)
        try:
            os.write(self._write, _WAKE)
        except BlockingIOError:
            pass  # the pipe is full of wake-ups already
        self._thread.join()
        os.close(self._read)
        os.close(self._write)

    def close(self) -> None:
        """End the watch and the statement: its cursor closes (rows not read are dropped), so
        nothing keeps the database open once the caller closes its connection."""
        self.stop()
        self.cursor.close()

    def error(self, exc: BaseException) -> BaseException:
        """What to raise for ``exc``, raised by DuckDB or the result reader."""
        if self.interrupted or _ctrl_c_in_duckdb(exc):
            return KeyboardInterrupt()
        import duckdb  # loaded by the query that raised

        if isinstance(exc, RuntimeError) and not isinstance(exc, duckdb.Error):
            return exc  # not DuckDB's: a bug, shown as such
        if self.timed_out:
            return QueryLimitError(
                f"query stopped after its {self.limits.timeout:g}s time limit; narrow it, or "
                "raise the limit (`timeout` SECONDS, 0 for none)", param="timeout")
        return query_error(exc)

    def batches(self, reader: pa.RecordBatchReader, result: ResultStream
                ) -> Iterator[pa.RecordBatch]:
        """``reader``'s batches up to the row cap (``result.truncated`` is set when rows were
        cut); the watch stops when they end or the consumer closes them (read or not)."""
        return _Watched(_capped(_translated(reader, self), self.limits.max_rows, result), self,
                        reader)


class _Watched(Iterator["pa.RecordBatch"]):
    """Batches whose end — exhausted, failed or closed before the first one — ends the watch."""

    def __init__(self, batches: Iterator[pa.RecordBatch], watch: LimitWatch,
                 reader: pa.RecordBatchReader):
        self._batches = batches
        self._watch = watch
        self._reader = reader

    def __next__(self) -> pa.RecordBatch:
        try:
            return next(self._batches)
        except BaseException:
            self._watch.stop()
            raise

    def close(self) -> None:
        self._reader.close()  # an unread stream holds the database open
        self._watch.close()


def query_error(exc: BaseException, source: str = "query") -> InputError:
    """DuckDB's error for a query (conversion, binder, out of range ...) as one line naming
    ``source``: its first line, without the LINE/caret excerpt that follows."""
    return InputError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                      source=source)


def cap_rows(result: ResultStream, max_rows: int | None) -> ResultStream:
    """``result`` with at most ``max_rows`` rows (for results not run by :class:`LimitWatch`,
    such as Spark's); ``result.truncated`` says whether rows were cut."""
    result.batches = _capped(result.batches, max_rows, result)
    return result


def _capped(batches: Iterator[pa.RecordBatch], cap: int | None, result: ResultStream
            ) -> Iterator[pa.RecordBatch]:
    count = 0
    for batch in batches:
        if cap is not None and count + batch.num_rows > cap:
            if cap > count:
                yield batch.slice(0, cap - count)
            result.truncated = True
            return
        count += batch.num_rows
        yield batch


def _translated(reader: pa.RecordBatchReader, watch: LimitWatch) -> Iterator[pa.RecordBatch]:
    # Errors of a streamed statement surface while reading: DuckDB's as duckdb.Error, through
    # Arrow's reader as OSError ("INTERRUPT Error: Interrupted!").
    import duckdb

    iterator = iter(reader)
    while True:
        watch.resume()
        try:
            batch = next(iterator)
        except StopIteration:
            return
        except (duckdb.Error, OSError, RuntimeError) as exc:
            raise watch.error(exc) from None
        finally:
            watch.pause()
        yield batch


def _ctrl_c_in_duckdb(exc: BaseException) -> bool:
    # While a statement runs, DuckDB itself polls Python's signal handlers and turns a Ctrl-C it
    # catches that way into this RuntimeError (the KeyboardInterrupt is consumed).
    return type(exc) is RuntimeError and str(exc) == "Query interrupted"
