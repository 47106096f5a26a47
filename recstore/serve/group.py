"""Group commit: POSTs that arrive while a batch commits are stored together.

A POST's records are prepared in the thread that took the POST as soon as its body is read (in
the server's worker processes when it is large enough, :data:`recstore.serve.hold.POOL_BYTES`),
so preparing overlaps the commit of the POSTs before it, as ``recstore ingest`` prepares the
next batch while the writer commits. One committer thread places every prepared POST waiting
into one writer session (:class:`~recstore.store.ingest.BatchWriter`), each POST its own source
(its ``post:`` URI, the lineage of how its records arrived), and commits a batch in the
background while it places the POSTs that arrived meanwhile. A POST is answered with its own
summary (its records' counts, rejects and run keys) once the batch holding its last record is
committed, so its records are queryable when it is answered; a refused record is a reject of
its own POST and never fails another's.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from recstore.store.chunks import store_schema
from recstore.store.counts import IngestSummary
from recstore.store.ingest import BatchWriter, source_units
from recstore.store.prepare import Prepared, Preparer, Refused

__all__ = ["COMMIT_POLL", "GROUP_BYTES", "GroupCommit"]

#: A POST over this many bytes is stored alone, its records prepared as they are placed: a
#: POST waiting in a group holds its records prepared, a few times its bytes.
GROUP_BYTES = 16 * 2**20
#: Seconds between two looks at a commit that may have failed (one that succeeds wakes the
#: committer thread at once).
COMMIT_POLL = 0.1


@dataclass(eq=False)
class _Post:
    """One POST's sources with their prepared records, and what storing them came to."""

    prepared: list[tuple[Any, list[Prepared | Refused]]]
    summary: IngestSummary = field(default_factory=IngestSummary)
    received: float = field(default_factory=time.monotonic)
    first_batch: int = 0
    last_batch: int = 0
    placed: bool = False
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)

    def answer(self, error: BaseException | None = None) -> None:
        self.error = error
        self.summary.batches = self.last_batch - self.first_batch + 1
        self.summary.seconds = time.monotonic() - self.received
        self.done.set()


class GroupCommit:
    """Stores POSTed sources of a :class:`~recstore.serve.hold.ServedStore` in shared batches
    (see the module docstring); :meth:`ingest` returns once the POST's records are committed."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._cond = threading.Condition()
        self._waiting: deque[_Post] = deque()  # prepared, not yet placed
        self._taken: deque[_Post] = deque()  # being placed or committed, in batch order
        self._thread: threading.Thread | None = None
        self._closed = False
        # the store's projection column types, for the workers to make Arrow chunks (learnt
        # once, from the first POST's writer)
        self._schema: dict | None = None

    def ingest(self, sources: list) -> IngestSummary:
        """Store ``sources`` (one POST) with whatever POSTs join them; their summary."""
        if sum(getattr(source, "size_hint", 0) for source in sources) > GROUP_BYTES:
            return self._store.ingest_sources(sources)  # prepared as it is stored, alone
        post = _Post(self._prepare(sources))
        with self._cond:
            if self._closed:
                raise RuntimeError("the server is stopping")
            self._waiting.append(post)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="recstore-group-commit",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()
        post.done.wait()
        if post.error is not None:
            raise post.error
        return post.summary

    def close(self) -> None:
        """Store the POSTs waiting, then stop the committer thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _prepare(self, sources: list) -> list[tuple[Any, list[Prepared | Refused]]]:
        preparer = self._store.preparer_for(sources) or Preparer()
        preparer.schema = self._schema or self._learn_schema()
        return [(source, list(preparer.prepared(*source_units(source)))) for source in sources]

    def _learn_schema(self) -> dict:
        """The store's projection column types (its first write creates its tables): records
        prepared without them are placed row by row, a slower path for the first POSTs."""
        with self._store.writer() as con:
            self._schema = store_schema(con)
        return self._schema

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if not self._waiting:
                    return
            self._session()

    def _session(self) -> None:
        """Place and commit POSTs until none is waiting; a failure fails the POSTs taken and
        not yet committed (their records were not stored: each is answered with the error)."""
        self._store.let_readers_in()  # reads that waited for the last session go first
        group = self._take()
        try:
            with self._store.writer() as con, BatchWriter(
                    con, on_committed=self._committed) as writer:
                while group:
                    for post in group:
                        self._place(writer, post)
                    writer.submit()  # commits in the background; the next group is placed
                    group = self._next_group(writer)
                writer.flush()
        except BaseException as exc:  # noqa: BLE001 - answered to every POST it stopped
            self._fail(exc)

    def _next_group(self, writer: BatchWriter) -> list[_Post]:
        """The POSTs that arrive while the batch in flight commits (none: it is committed, or
        a read waits, which the session ends for: a record is queryable within a commit)."""
        with self._cond:
            while not self._waiting and self._taken and writer.committing:
                self._cond.wait(COMMIT_POLL)  # woken by _committed; a failed commit is polled
        return [] if self._store.readers_waiting else self._take()

    def _take(self) -> list[_Post]:
        """The POSTs waiting, now in the session (answered in this order)."""
        with self._cond:
            group = list(self._waiting)
            self._waiting.clear()
            self._taken.extend(group)
            return group

    def _place(self, writer: BatchWriter, post: _Post) -> None:
        writer.summary = post.summary  # what is stored now counts for this POST
        post.first_batch = writer.pending_batch_id
        for source, prepared in post.prepared:
            writer.store_source(source, prepared)
        writer.summary = IngestSummary()  # commits counted from now on count for no POST
        with self._cond:
            post.prepared = []  # its rows are in the batch now
            post.last_batch = writer.pending_batch_id
            post.placed = True

    def _committed(self, batch_id: int) -> None:
        """Answer the POSTs whose last record was in batch ``batch_id`` (the commit thread)."""
        with self._cond:
            while self._taken and self._taken[0].placed \
                    and self._taken[0].last_batch <= batch_id:
                self._taken.popleft().answer()
            self._cond.notify_all()

    def _fail(self, error: BaseException) -> None:
        with self._cond:
            while self._taken:
                self._taken.popleft().answer(error)
