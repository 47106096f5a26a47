"""How a serving process holds its store: many readers or one writer, inside one process.

DuckDB lets one process write a file or several read it, and inside a process every connection
to a file shares one database instance with one configuration. A query must run on a read-only,
locked-down instance (``recstore.query.guard.lock_down``: no file or network access, settings
locked); an ingest needs a read-write instance whose Arrow staging works. So the server
alternates: between writes it keeps one read-only, locked-down connection open and every read
is a cursor of it (opening the file costs ~0.1 s; a cursor costs nothing); a write waits for the
reads in flight, closes that connection, writes through :meth:`Store.writer` exactly as the CLI
does, and the next read opens the read-only connection again. Writes are serialized; reads run
in parallel. A record is therefore queryable as soon as its POST is answered.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from recstore.errors import NotFoundError
from recstore.query.guard import lock_down
from recstore.store import Store
from recstore.store import db as store_db
from recstore.store.ingest import BatchWriter, IngestSummary

__all__ = ["ServedStore"]


class _Gate:
    """A readers-writer lock: any number of readers, or one writer (writers go first)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._waiting_writers = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._writing or self._waiting_writers:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting_writers += 1
            while self._writing or self._readers:
                self._cond.wait()
            self._waiting_writers -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


class ServedStore(Store):
    """A :class:`Store` held by one serving process (see the module docstring).

    ``reader()`` yields a cursor of the read-only, locked-down connection (so
    :func:`recstore.query.open_reader` does not lock it down again: ``locked_down``);
    ``writer()`` takes the store exclusively. A thread that is writing and reads gets a cursor
    of its writer, so library calls that read inside a write keep working.
    """

    locked_down = True  # recstore.query.api.open_reader: readers are locked down already

    def __init__(self, path: str | Path, lock_timeout: float = store_db.DEFAULT_LOCK_TIMEOUT):
        super().__init__(path, lock_timeout=lock_timeout)
        self._gate = _Gate()
        self._open = threading.Lock()
        self._read_con: duckdb.DuckDBPyConnection | None = None
        self._local = threading.local()
        self._schema_ready = False

    @contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor for reading (of the writer, if this thread is writing)."""
        own = getattr(self._local, "writer", None)
        if own is not None:
            cur = own.cursor()
            try:
                yield cur
            finally:
                cur.close()
            return
        with self._gate.shared():
            cur = self._read_connection().cursor()
            try:
                yield cur
            finally:
                cur.close()

    @contextmanager
    def writer(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The store's read-write connection, once the reads in flight are done."""
        own = getattr(self._local, "writer", None)
        if own is not None:  # nested in this thread's write
            yield own
            return
        with self._gate.exclusive():
            self._close_reader()
            with super().writer() as con:
                self._local.writer = con
                try:
                    yield con
                finally:
                    self._local.writer = None

    def ingest_sources(self, sources: Iterable, tags: dict[str, str] | None = None
                       ) -> IngestSummary:
        """Store the records of ``sources`` (``SourceFile``s, OTLP sources) as one ingest, the
        batch writer ``Store.ingest`` uses for files."""
        with self.writer() as con, BatchWriter(con, tags=tags) as batch:
            return batch.ingest_sources(list(sources))

    def close(self) -> None:
        """Release the store file (the server stops)."""
        with self._gate.exclusive():
            self._close_reader()

    def _read_connection(self) -> duckdb.DuckDBPyConnection:
        with self._open:
            if self._read_con is None:
                if not self.path.exists():
                    raise NotFoundError(f"{self.path}: no store here yet")
                if not self._schema_ready:  # create or upgrade the schema once, as reader() does
                    with Store.writer(self):
                        pass
                    self._schema_ready = True
                con = store_db.connect(self.path, read_only=True, lock_timeout=self.lock_timeout)
                lock_down(con)
                self._read_con = con
            return self._read_con

    def _close_reader(self) -> None:
        with self._open:
            if self._read_con is not None:
                self._read_con.close()
                self._read_con = None
