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
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import duckdb

from recstore.errors import NotFoundError
from recstore.progress import NO_PROGRESS, Progress
from recstore.query.guard import lock_down
from recstore.serve.group import GroupCommit
from recstore.store import Store, VerifyReport
from recstore.store import db as store_db
from recstore.store.counts import IngestSummary
from recstore.store.ingest import BatchWriter
from recstore.store.prepare import LOCAL_BYTES, Preparer

#: Bytes of small inputs (at most ``LOCAL_BYTES`` each) in one write from which its records are
#: prepared in the server's worker processes: the pool is running already, so the second it
#: costs ``recstore ingest`` to start one (``WORKER_BYTES``) is not paid per POST; below this
#: the pickling to and from a worker costs more than it saves.
POOL_BYTES = 2**20
#: The WAL size from which a write checkpoints when it ends (see ServedStore._defer_checkpoint).
WAL_BYTES = 16 * 2**20
#: Seconds the writer stays open after a write (see ServedStore.__init__).
LINGER_SECONDS = 1.0

__all__ = ["ServedStore"]


class _Gate:
    """A readers-writer lock: any number of readers, or one writer (writers go first)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._waiting_writers = 0
        self.waiting_readers = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            self.waiting_readers += 1
            while self._writing or self._waiting_writers:
                self._cond.wait()
            self.waiting_readers -= 1
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    def let_readers_in(self) -> None:
        """Wait until the readers waiting now have started (call it holding nothing): a writer
        that writes again at once would otherwise keep them out."""
        with self._cond:
            while self.waiting_readers and not (self._writing or self._waiting_writers):
                self._cond.wait()

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
    #: Other shells' commands run here too (``recstore.serve.capture``): a long one must not
    #: hold the gate while it works (``recstore.replay.batch`` stores its replays a group at a time).
    serves_others = True

    def __init__(self, path: str | Path, lock_timeout: float = store_db.DEFAULT_LOCK_TIMEOUT,
                 pool: ProcessPoolExecutor | None = None, workers: int = 0):
        super().__init__(path, lock_timeout=lock_timeout)
        self._pool = pool  # prepares large bodies (recstore.process.worker_pool, forked first)
        self._workers = workers if pool is not None else 0
        self._gate = _Gate()
        self._open = threading.Lock()
        self._read_con: duckdb.DuckDBPyConnection | None = None
        self._local = threading.local()
        self._schema_ready = False
        # the writer stays open `linger` seconds after a write, for the next POST of a burst
        # (opening and closing it cost a fifth of an 8 MB POST); a read closes it at once
        self.linger = LINGER_SECONDS
        self._held: tuple[ExitStack, duckdb.DuckDBPyConnection] | None = None
        self._linger_until = 0.0
        self._timed = False  # a timer will close the lingering writer
        self._group = GroupCommit(self)  # stores POSTs (ingest_posted)

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
            if self._held is None:
                stack = ExitStack()
                self._held = stack, stack.enter_context(super().writer())
            con = self._held[1]
            self._local.writer = con
            done = False
            try:
                yield con
                done = True
            finally:
                self._local.writer = None
                if done and self.linger > 0:
                    self._linger_until = time.monotonic() + self.linger
                    if not self._timed:  # one timer at a time; it waits out later writes
                        self._timed = True
                        self._start_timer(self.linger)
                else:
                    self._release_writer()

    def _start_timer(self, seconds: float) -> None:
        timer = threading.Timer(seconds, self._end_linger)
        timer.daemon = True
        timer.start()

    def _end_linger(self) -> None:
        """Close the writer once it has lingered :attr:`linger` seconds unused."""
        with self._gate.exclusive():
            left = self._linger_until - time.monotonic()
            if self._held is not None and left > 0:  # written again since: wait for that
                self._start_timer(left)
                return
            self._timed = False
            self._release_writer()

    def _release_writer(self) -> None:
        """Close the lingering writer (under the gate, or a shared gate: no write runs)."""
        with self._open:
            if self._held is not None:
                stack, con = self._held
                self._held = None
                try:
                    self._defer_checkpoint(con)
                finally:
                    stack.close()

    def _defer_checkpoint(self, con: duckdb.DuckDBPyConnection) -> None:
        """Close the writer without a checkpoint while the WAL is under :data:`WAL_BYTES`.

        A commit is durable in the WAL (DuckDB writes a large insert's blocks to the file and
        logs their place), so what a POST was answered as stored survives a crash either way;
        the checkpoint DuckDB runs when the last connection closes rewrote the partly filled
        row groups of every table on every POST (a fifth of an 8 MB POST's time). The next
        connection replays the WAL; a large WAL is checkpointed, and so is any at exit."""
        wal = Path(f"{self.path}.wal")
        try:
            size = wal.stat().st_size
        except OSError:
            return
        if size < WAL_BYTES:
            con.execute("PRAGMA disable_checkpoint_on_shutdown")

    def ingest_sources(self, sources: Iterable, tags: dict[str, str] | None = None
                       ) -> IngestSummary:
        """Store the records of ``sources`` (``SourceFile``s, OTLP sources) as one ingest, the
        batch writer ``Store.ingest`` uses for files. Their records are prepared in the server's
        worker processes when they hold at least :data:`POOL_BYTES` of inputs a worker takes (as
        ``recstore ingest`` prepares a large input), else in this process."""
        sources = list(sources)
        with self.writer() as con, BatchWriter(con, tags=tags,
                                               preparer=self.preparer_for(sources)) as batch:
            return batch.ingest_sources(sources)

    @property
    def readers_waiting(self) -> bool:
        """Whether reads wait for the write in progress to end."""
        return self._gate.waiting_readers > 0

    def let_readers_in(self) -> None:
        """Let the reads waiting start before this thread writes again (see _Gate)."""
        self._gate.let_readers_in()

    def ingest_posted(self, sources: list) -> IngestSummary:
        """Store the sources of one POST, in a batch shared with the POSTs that arrive while
        one commits (:mod:`recstore.serve.group`); their own summary, once they are
        committed."""
        return self._group.ingest(sources)

    def preparer_for(self, sources: list) -> Preparer | None:
        """The server's worker processes, when ``sources`` hold enough small inputs for them
        (:data:`POOL_BYTES`); None: prepare in this process."""
        if self._pool is None or getattr(self._pool, "_broken", False):  # a worker died
            return None
        small = sum(s.small_input_bytes(LOCAL_BYTES, POOL_BYTES)
                    for s in sources if hasattr(s, "small_input_bytes"))
        return Preparer(self._pool, self._workers) if small >= POOL_BYTES else None

    @contextmanager
    def file_reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection that reads the store and may write files (``recstore export``): the
        held readers are locked down (no file access), so the file is attached read-only to a
        database of its own, while no write runs (reads go on)."""
        with self.reader():  # the shared gate; a lingering writer is closed
            con = store_db.connect_attached(self.path, "store", lock_timeout=self.lock_timeout)
            try:
                yield con
            finally:
                con.close()

    def verify(self, progress: Progress = NO_PROGRESS) -> VerifyReport:
        """:meth:`Store.verify` while no write runs (reads go on): it attaches the file
        read-only to a database of its own."""
        with self.reader():
            return super().verify(progress)

    def _upgrade(self) -> None:
        """Nothing: the server brought the schema up to date when it took the store."""

    def close(self) -> None:
        """Checkpoint what the WAL holds and release the store file (the server stops)."""
        self._group.close()
        with self._gate.exclusive():
            self._close_reader()
            self._release_writer()
            if Path(f"{self.path}.wal").exists():
                # explicitly: closing this connection did not checkpoint on its own (after one
                # POST and Ctrl-C the 7.7 kB WAL stayed; tests/test_serve_http.py, SIGTERM test)
                with Store.writer(self) as con:
                    con.execute("CHECKPOINT")

    def _read_connection(self) -> duckdb.DuckDBPyConnection:
        if self._held is not None:  # the gate is shared: no write runs, the writer lingers
            self._release_writer()
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
