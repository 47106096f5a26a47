"""The per-record work of an ingest, as pure functions that can run in worker processes.

:func:`prepare` turns one read input into either a :class:`Prepared` record (validated, hashed,
decomposed into events, projected) or a :class:`Refused` one (why, and what to keep of it).
Nothing here knows the store: a record is prepared as if it were the first revision of a new
stream whose first event has seq 0; the writer then places it (its revision, seqs and tags)
with cheap arithmetic. :class:`Preparer` runs :func:`prepare` over a stream of inputs, in
worker processes when the input is large enough to pay for them, keeping input order.
"""

from __future__ import annotations

import ctypes
import gc
import hashlib
import os
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from recstore.canonical import (
    TOO_DEEP,
    canonical_bytes,
    canonical_bytes_reusing,
    json_type_name,
    nested_too_deep,
)
from recstore.errors import InputError
from recstore.formats.aioc import validate_run_record
from recstore.formats.events import event_count, record_to_events
from recstore.formats.jsontext import dumps_json
from recstore.formats.reader import PENDING, RawInput, parse_input
from recstore.formats.replay_line import replay_line
from recstore.records.structure import input_scope
from recstore.store.chain import line_digests
from recstore.store.chunks import ChunkRows, Schema, chunkable, to_chunk
from recstore.store.projection import ItemsKeys, Projection, RunContext, project_record
from recstore.store.spool import Spooled, open_spool, spool_rows

__all__ = [
    "Prepared",
    "Preparer",
    "Refused",
    "prepare",
    "record_hash",
    "run_key_for",
    "trim_heap",
    "utf8_safe",
]

# Inputs sent to a worker at a time, and chunks kept in flight per worker.
CHUNK = 200
IN_FLIGHT = 3
# An input larger than this is prepared in the calling process, never sent to a worker: pickling
# it there and its events back held two more copies of it, and the worker kept its peak memory.
# A chunk sent to a worker holds about this many bytes of input at most.
LOCAL_BYTES = 8 * 2**20
# Input (of inputs the workers would get) below which no worker process is started.
WORKER_BYTES = 32 * 2**20
# Stands in for a record's items while the rest is printed: canonical JSON escapes every control
# character, so a NUL byte in its text can only be this.
_ITEMS_MARK = b"\x00"
# Strings at most this long are copied out of a big parsed record (see _own); longer ones are not
# in Python's small-object arenas.
_OWNED_CHARS = 128
# How much of a refused value that cannot be written as JSON its reject keeps (as Python repr).
_KEPT_REPR = 64 * 2**10
# Allocations between two young-generation collections while records are prepared and placed:
# a parsed record makes thousands of dicts and lists, and with Python's 700 the collector ran
# every few records (about a tenth of the writer's and the workers' CPU on 6,000 records).
GC_THRESHOLD = 50_000


def utf8_safe(text: str) -> str:
    """``text`` with lone surrogates as U+FFFD (keys and ids must be storable UTF-8)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def run_key_for(fmt: str, run_id: str) -> str:
    """Store key of a run: ``aioc:<runId>`` / ``agentuse:<sessionId>`` / ``otlp:<runId>``."""
    return utf8_safe(f"{fmt}:{run_id}")


def record_hash(record: dict, item_canons: Iterable[bytes]) -> bytes:
    """sha256 of aioc's canonical JSON of ``record`` (32 bytes), reusing its items' canonical
    JSON."""
    # The record is printed with a mark where its items go, and the items are hashed one by one
    # in its place: printing them into the record held two more copies of a big record.
    text = canonical_bytes_reusing(record, {"items": _ITEMS_MARK})
    at = text.find(_ITEMS_MARK)
    if at < 0:  # a backend printed the whole record (one orjson call), items and all
        return hashlib.sha256(text).digest()
    view = memoryview(text)
    digest = hashlib.sha256(view[:at])
    digest.update(b"[")
    for i, canon in enumerate(item_canons):
        digest.update(b"," if i else b"")
        digest.update(canon)
    digest.update(b"]")
    digest.update(view[at + len(_ITEMS_MARK):])
    return digest.digest()


@dataclass(slots=True)
class Prepared:
    """A valid record ready to store: its events (type, idx, turn, payload), each event's
    digest as the first revision of a new stream, and its projection with seqs counted from
    the record's first event."""

    key: str
    run_id: str
    fmt: str
    line: int | None
    record_hash: bytes
    events: list[tuple[str, int | None, int | None, str | bytes]]
    digests: str
    projection: Projection
    record: dict | None = None  # kept only for in-process callers that need it
    # lineage the input itself carries: an aioc replay line's ``replay_of`` row (its source
    # named by ``parent_run_id``), which the writer places as a replay (``store.derived``)
    lineage: list[dict] | None = None
    # in a chunk (``store.chunks``): its rows (``events`` and ``projection`` are then None),
    # its place in them, its first event's row and its payloads' size
    rows: ChunkRows | None = None
    rec: int = 0
    first_event: int = 0
    event_count: int = 0
    payload_bytes: int = 0


@dataclass(slots=True)
class Refused:
    """An input that is not a valid record, with what the rejects table keeps of it."""

    raw: RawInput
    reason: str
    path: str | None
    problems: list[dict] | None = None  # every problem ({path, problem}) when there are several


def prepare(raw: RawInput, fmt: str = "aioc", keep_record: bool = False) -> Prepared | Refused:
    """The work of storing one input that does not depend on the store; a value that cannot
    be stored (nested too deep, a number beyond what the writers hold) is refused, never raised,
    so one poison input cannot stop the inputs after it."""
    try:
        return _prepare(raw, fmt, keep_record)
    except RecursionError:
        reason = TOO_DEEP
    except (ValueError, OverflowError) as exc:
        reason = f"cannot store this record: {str(exc).partition('; use sys.')[0]}"
    return Refused(_lean(RawInput(raw.source_uri, raw.line, raw.text, raw.value, None, raw.raw,
                                  raw.data, raw.sha256, raw.size, raw.complete)), reason, None)


def _prepare(raw: RawInput, fmt: str, keep_record: bool) -> Prepared | Refused:
    given = raw.value is not PENDING  # parsed by the caller (OTLP, replays): not depth-checked
    raw = parse_input(raw)
    record = raw.value
    if raw.error is not None:
        return Refused(_lean(raw), raw.error, None)
    if given and nested_too_deep(record):
        return Refused(_lean(raw), TOO_DEEP, None)
    if not isinstance(record, dict):
        return Refused(_lean(raw), f"not a JSON object (got {json_type_name(record)})", None)
    try:
        line = replay_line(record, source=raw.source_uri)
        if line is None:
            validate_run_record(record, source=raw.source_uri)
        else:
            record = line.record
    except InputError as exc:
        return Refused(_lean(raw), exc.problem, exc.path, exc.problems)
    run_id = record["runId"]
    key = run_key_for(fmt, run_id)
    # each item printed once, for the record's hash and its items' keys, and then dropped
    items = ItemsKeys(input_scope(record).count)
    canons = map(items.add, map(canonical_bytes, record["items"]))
    digest = record_hash(record, canons)
    deque(canons, maxlen=0)  # record_hash printed the record whole: the keys still need them
    # A big record parsed here is projected first, and then its elements are dropped as their
    # events are made: its rows and events keep none of its small values (see _own).
    own = _own if not (keep_record or given) and raw.data is not None \
        and len(raw.data) > LOCAL_BYTES else None
    ctx = RunContext(key, utf8_safe(run_id), fmt, 1, "{}", 0, raw.line, 0, 0,
                     event_count(record) - 1)
    lineage = None
    if line is not None:
        lineage = [{"relation": "replay_of", "parent_run_id": line.source_run_id,
                    "child": run_id, "detail": line.lineage_detail()}]
    projection = project_record(record, ctx, items.keys())
    if own is not None:
        for rows in projection.values():
            for i, row in enumerate(rows):  # in place: each old row goes as its copy is made
                rows[i] = tuple(map(own, row))
    events = [
        (etype, idx, turn, payload) if own is None else (etype, idx, own(turn), payload)
        for etype, idx, turn, payload in record_to_events(record, consume=own is not None)
    ]
    digests = line_digests(key, 1, events)
    return Prepared(
        key, ctx.run_id, fmt, raw.line, digest, events, digests, projection,
        record if keep_record else None, lineage,
    )


def _own(value: Any) -> Any:
    """``value``, or an equal copy of it when it is a small ``str`` or ``int``.

    Python keeps small objects in 1 MiB arenas and returns an arena to the system only once
    every object in it is freed: a parsed record's item types, call ids and turns kept in its
    rows kept nearly all of its arenas (a 25 MB record of many items: 84 MiB resident through
    the write for 4 MiB of such values)."""
    kind = type(value)
    if kind is int:
        return value if -5 <= value <= 256 else value + 0  # not the cached small ints: a new int
    if kind is str and 1 < len(value) <= _OWNED_CHARS:
        return value[:1] + value[1:]
    return value


def _lean(raw: RawInput) -> RawInput:
    """A refused input without its parsed value (the rejects table keeps the text)."""
    if raw.value is None:
        return raw
    data = raw.data
    if data is None:
        try:
            data = dumps_json(raw.value).encode("utf-8", "surrogatepass")
        except (RecursionError, ValueError):  # what made it a reject: the reason says so
            data = _kept_repr(raw.value)
    return RawInput(raw.source_uri, raw.line, raw.text, None, raw.error, raw.raw, data,
                    raw.sha256, raw.size, raw.complete)


def _kept_repr(value: object) -> bytes:
    """The start of a value's Python repr, for a reject whose value JSON cannot write."""
    try:
        return repr(value)[:_KEPT_REPR].encode("utf-8", "surrogatepass")
    except (RecursionError, ValueError):  # ints past the digit limit, deep nesting
        return b""


@contextmanager
def relaxed_gc() -> Iterator[None]:
    """Python's cyclic collector runs less often inside the block (:data:`GC_THRESHOLD`)."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], GC_THRESHOLD), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _prepare_in_worker(raws: list[RawInput], fmt: str, schema: Schema | None,
                       spool: str | None = None) -> list[Prepared | Refused] | Spooled:
    """:func:`_prepare_chunk` in a worker process, which does nothing else meanwhile; with a
    ``spool`` directory, the chunk's rows go back through it (:mod:`recstore.store.spool`)."""
    if gc.get_threshold()[0] < GC_THRESHOLD:
        gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    prepared = _prepare_chunk(raws, fmt, schema)
    return spool_rows(prepared, spool) if spool is not None else prepared


def _prepare_chunk(raws: list[RawInput], fmt: str, schema: Schema | None = None
                   ) -> list[Prepared | Refused]:
    """Every input prepared; with the store's ``schema``, the records' rows as one chunk of
    Arrow tables (:func:`recstore.store.chunks.to_chunk`), ready for the writer to place."""
    prepared = [prepare(raw, fmt) for raw in raws]
    if schema is not None:
        records = [p for p in prepared if chunkable(p)]
        if records:
            to_chunk(records, schema)
    return prepared


class Preparer:
    """Runs :func:`prepare` over inputs, in the ``workers`` processes of ``pool`` (None: in this
    process; see :func:`recstore.process.worker_pool`, which must be opened before the store).
    With ``schema`` (set by the writer: its projection tables' column types) records come in
    chunks of Arrow rows (:mod:`recstore.store.chunks`)."""

    def __init__(self, pool: ProcessPoolExecutor | None = None, workers: int = 0) -> None:
        self._pool = pool
        # chunks sent ahead per worker, so the workers keep busy while the writer places a chunk
        self._in_flight = IN_FLIGHT * workers if pool is not None else 0
        self.schema: Schema | None = None

    def prepared(self, raws: Iterable[RawInput], fmt: str = "aioc") -> Iterator[Prepared | Refused]:
        """Every input prepared, in input order."""
        with open_spool(self._pool is not None and self.schema is not None) as spool:
            yield from self._prepared(raws, fmt, spool)

    def _prepared(self, raws: Iterable[RawInput], fmt: str, spool: str | None
                  ) -> Iterator[Prepared | Refused]:
        pending: deque[Future | list] = deque()
        chunk: list[RawInput] = []
        chunk_bytes = 0
        for raw in raws:
            size = len(raw.data) if raw.data is not None else 0
            if size > LOCAL_BYTES:  # prepared here, once what came before it is
                if chunk:
                    pending.append(self._submit(chunk, fmt, spool))
                    chunk, chunk_bytes = [], 0
                while pending:
                    yield from _result(pending.popleft())
                yield _prepare_here(raw, fmt)
                continue
            chunk.append(raw)
            chunk_bytes += size
            # a chunk is pickled whole to its worker (and back when no spool takes its rows):
            # bounded in bytes as in inputs
            if len(chunk) >= CHUNK or chunk_bytes >= LOCAL_BYTES:
                pending.append(self._submit(chunk, fmt, spool))
                chunk, chunk_bytes = [], 0
                while len(pending) >= max(self._in_flight, 1):
                    yield from _result(pending.popleft())
        if chunk:
            pending.append(self._submit(chunk, fmt, spool))
        while pending:
            yield from _result(pending.popleft())

    def _submit(self, chunk: list[RawInput], fmt: str, spool: str | None) -> Future | list:
        if self._pool is None:
            return _prepare_chunk(chunk, fmt, self.schema)
        return self._pool.submit(_prepare_in_worker, chunk, fmt, self.schema, spool)


def _result(pending: Future | list) -> list[Prepared | Refused]:
    done = pending if isinstance(pending, list) else pending.result()
    return done.unspool() if isinstance(done, Spooled) else done


def _prepare_here(raw: RawInput, fmt: str) -> Prepared | Refused:
    """:func:`prepare` in this process; after a big input, the memory its parsed value took is
    given back to the system (see :func:`trim_heap`)."""
    prepared = prepare(raw, fmt)
    if raw.data is not None and len(raw.data) > LOCAL_BYTES:
        trim_heap()
    return prepared


def trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere
    nothing). Freeing a big parsed record leaves its pages to this process's heap, where the
    writer's Arrow and DuckDB allocators (their own heaps) cannot reuse them: they stayed
    resident through the insert, about the size of the parsed record."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "malloc_trim") else None  # musl has none
    except OSError:
        return None


_LIBC = _libc()


def default_workers(total_bytes: int) -> int:
    """Worker processes worth starting for ``total_bytes`` of input they would prepare (inputs
    of at most ``LOCAL_BYTES``): none below ``WORKER_BYTES`` (starting one costs about a second),
    else one per core but the writer's own."""
    if total_bytes < WORKER_BYTES:
        return 0
    return max(0, min(4, (os.cpu_count() or 1)))
