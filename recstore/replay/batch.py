"""Replay many stored runs: worker processes replay and prepare, this process alone writes.

DuckDB lets one process write a file, so replays run in a process pool (``workers > 1``) that
never opens the store. This process holds one writer for the whole selection: it reads the
sources a chunk per query through a cursor of that writer (in the order the log holds them),
sends their events to the workers, and places what comes back. A worker reassembles each
source, replays it and prepares the replay record as ingest would (validation, hashes, events,
projection), so this process only places prepared records and commits them in the background
(:class:`recstore.replay.lineage.ReplayWriter`). With one worker the same steps run in this
process.
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice

from recstore.errors import RecstoreError
from recstore.process import worker_pool
from recstore.progress import NO_PROGRESS, Progress
from recstore.replay.concurrent import run_many, run_threads
from recstore.replay.endpoints import DEFAULT_MAX_CONNECTIONS, configure, live_session
from recstore.replay.harness import Harness, ProviderSpec, harness_from_source, load_harness
from recstore.replay.lineage import Placed, ReplayWriter, prepare_replay
from recstore.replay.replay import ReplayReport, error_outcome, provider_for, replay_run
from recstore.store import Store
from recstore.store.chunks import (
    Schema,
    chunkable,
    import_lazy_modules,
    store_schema,
    to_chunk,
)
from recstore.store.prepare import Prepared, Refused
from recstore.store.store import StoredEvents, read_runs

__all__ = ["ReplayJob", "ReplayResult", "batch_totals", "replay_one", "replay_stored"]

READ_CHUNK = 500  # sources read per query (the first chunk is read before any worker starts)
# Sources per task sent to a worker: up to CHUNK, for a task's results cross the pipe as one
# pickle and its records make one chunk of Arrow rows, both cheaper per replay in bigger tasks
# (100 against 25: pickling 0.12 -> 0.06 ms a replay, unpickling 0.08 -> 0.045); at least
# MIN_CHUNK; else four tasks per worker, so that a small selection keeps every worker busy.
CHUNK = 100
MIN_CHUNK = 25
# Sources per worker sent ahead (at least 3 tasks), so workers keep busy while this process
# commits; it bounds the memory that sources and replays in flight take.
IN_FLIGHT_SOURCES = 300
# Beside a server (_StoredInGroups), replays are stored this many at a time, or this often.
GROUP_REPLAYS = 200
GROUP_SECONDS = 5.0


@dataclass(frozen=True)
class ReplayJob:
    """What to replay every source against (picklable: workers rebuild the candidate)."""

    harness_path: str | None = None  # None: --from-source
    mode: str = "strict"
    input_mode: str = "recorded"
    provider: ProviderSpec | None = None  # overrides the harness's provider settings
    allow_outside: bool = False  # the harness may read files outside its folder

    def candidate_for(self, source: dict) -> Harness:
        harness = (_cached_harness(self.harness_path, self.allow_outside) if self.harness_path
                   else harness_from_source(source))
        if self.provider is not None:
            # The descriptor hash stays the file's: aioc's hash covers the descriptor, not models.
            harness = harness.model_copy(update={"provider": self.provider})
        return harness

    def calls_models(self) -> bool:
        """Whether replays wait on a model over HTTP (then many run at once on threads)."""
        spec = self.provider
        if spec is None and self.harness_path:
            spec = _cached_harness(self.harness_path, self.allow_outside).provider
        return spec is not None and spec.kind in HTTP_PROVIDERS


#: Provider kinds that wait on a server.
HTTP_PROVIDERS = ("openai", "anthropic")


@functools.lru_cache(maxsize=4)
def _cached_harness(path: str, allow_outside: bool) -> Harness:
    return load_harness(path, allow_outside=allow_outside)


@dataclass(frozen=True)
class ReplayResult:
    """One replay as the batch reports it."""

    source_run_key: str
    replay_run_key: str | None
    report: ReplayReport


def replay_one(job: ReplayJob, source: dict) -> tuple[dict | None, ReplayReport, str]:
    """Replay one source record: ``(replay record or None, report, provider name)``. Errors a
    user can cause (bad harness, missing API key) become an ``error`` report, not an exception."""
    try:
        harness = job.candidate_for(source)
        provider = provider_for(harness.provider, source)
        outcome = replay_run(source, harness, job.mode, job.input_mode, provider=provider)
    except RecstoreError as exc:
        outcome = error_outcome(source, job.mode, job.input_mode, exc)
        return None, outcome.report, ""
    return outcome.record, outcome.report, provider.name


@dataclass(frozen=True)
class _Replayed:
    """What replaying one source gives the writer: the report, and the replay record prepared
    for storing with its lineage row (None when there is no record or nothing is stored)."""

    report: ReplayReport
    prepared: Prepared | Refused | None = None
    lineage: dict | None = None


def _replay_stored_run(job: ReplayJob, stored: StoredEvents, line: int, save: bool) -> _Replayed:
    source = stored.run()
    record, report, provider = replay_one(job, source.record)
    if record is None or not save:
        return _Replayed(report)
    return _Replayed(report, *prepare_replay(source, record, report, provider, line))


def _replay_task(job: ReplayJob, sources: list[tuple[int, StoredEvents]], schema: Schema | None,
                 threads: int = 1, connections: int = DEFAULT_MAX_CONNECTIONS) -> list[_Replayed]:
    """Replay a task's sources in a worker: on ``threads`` threads when they call a model (this
    worker's share of ``--max-connections``), in order; with the store's ``schema`` (None: not
    stored) the replay records come as one chunk of Arrow rows, as ingest's records do."""
    save = schema is not None
    if threads <= 1:
        replays = [_replay_stored_run(job, stored, pos + 1, save) for pos, stored in sources]
    else:
        configure(connections)
        replays = [replayed for _, replayed in run_many(
            lambda entry: _replay_stored_run(job, entry[1], entry[0] + 1, save), sources,
            threads=threads)]
    return _chunked(replays, schema)


def _chunked(replays: list[_Replayed], schema: Schema | None) -> list[_Replayed]:
    """``replays`` with their records' rows made one chunk here in the worker (see
    :meth:`recstore.replay.lineage.ReplayWriter.add`), off the writer's CPU."""
    records = [r.prepared for r in replays if chunkable(r.prepared)] if schema else []
    if records:
        to_chunk(records, schema)
    return replays


def _replayed(pool: ProcessPoolExecutor | None, workers: int, job: ReplayJob,
              sources: Iterable[tuple[int, StoredEvents]], total: int, schema: Schema | None,
              max_connections: int) -> Iterator[tuple[int, str, _Replayed]]:
    """``(position, source run key, replay)`` for each of the ``total`` sources, in the order
    of ``sources``; a few tasks per worker are sent ahead (:data:`IN_FLIGHT_SOURCES`), so
    memory stays flat. Replays that call
    a model run many at a time on threads (:mod:`recstore.replay.concurrent`); with several
    workers each gets its share of ``max_connections``."""
    calls_models = job.calls_models()
    if pool is None:
        threads = run_threads(max_connections) if calls_models else 1
        for (pos, stored), replayed in run_many(  # the writer makes the chunks (ReplayWriter)
                lambda entry: _replay_stored_run(job, entry[1], entry[0] + 1, schema is not None),
                sources, threads=threads):
            yield pos, stored.run_key, replayed
        return
    share = max(1, -(-max_connections // workers))
    threads = run_threads(share) if calls_models else 1
    if calls_models:  # a task's replays wait on models, on its threads at once
        chunk = max(MIN_CHUNK, 2 * threads)
    else:
        chunk = max(MIN_CHUNK, min(CHUNK, -(-total // (4 * workers))))
    in_flight = workers * max(3, IN_FLIGHT_SOURCES // chunk)
    pending: deque[tuple[list[tuple[int, StoredEvents]], Future]] = deque()

    def finished() -> Iterator[tuple[int, str, _Replayed]]:
        task, future = pending.popleft()
        for (pos, stored), replayed in zip(task, future.result(), strict=True):
            yield pos, stored.run_key, replayed

    todo = iter(sources)
    while task := list(islice(todo, chunk)):
        pending.append((task, pool.submit(_replay_task, job, task, schema, threads, share)))
        while len(pending) >= in_flight:
            yield from finished()
    while pending:
        yield from finished()


@dataclass
class _Session:
    """The source runs (read a chunk at a time) and, when replays are stored, their writer and
    the store's projection schema (for the workers' chunks)."""

    sources: Iterable[tuple[int, StoredEvents]]
    writer: ReplayWriter | _StoredInGroups | None = None
    schema: Schema | None = None


@contextmanager
def _session(store: Store, save: bool, run_keys: list[str]) -> Iterator[_Session]:
    """The sources and, when ``save``, the one writer of the replays; beside a server, see
    :class:`_StoredInGroups`."""
    if store.serves_others:
        with store.reader() as con:
            sources = list(read_runs(con, run_keys, READ_CHUNK))
            schema = store_schema(con) if save else None
        yield _Session(sources, _StoredInGroups(store) if save else None, schema)
        return
    if not save:
        with store.reader() as con:
            yield _Session(read_runs(con, run_keys, READ_CHUNK))
        return
    with store.writer() as con, ReplayWriter(con) as writer:
        reader = con.cursor()  # reads while the writer's batches commit on ``con``
        try:
            yield _Session(read_runs(reader, run_keys, READ_CHUNK), writer, writer.schema)
        finally:
            reader.close()


class _StoredInGroups:
    """The replays of a store that ``recstore serve`` holds, stored a group at a time (every
    :data:`GROUP_REPLAYS` replays or :data:`GROUP_SECONDS`, and at :meth:`close`), each group in
    one short write: holding the writer while models answer (as the CLI's one writer does)
    would stop every page and POST of the server for the whole replay, and keeping every
    replay until the end would lose them all to a crash. The sources were read up front for
    the same reason."""

    def __init__(self, store: Store):
        self._store = store
        self._queued: list[tuple[Prepared | Refused, list[dict], Placed]] = []
        self._since = time.monotonic()

    def add(self, prepared: Prepared | Refused, lineage: Iterable[dict]) -> Placed:
        """Queue a replay as :meth:`ReplayWriter.add` does; store the group when it is due."""
        placed = Placed()
        if not self._queued:  # a group's time counts from its first replay
            self._since = time.monotonic()
        self._queued.append((prepared, list(lineage), placed))
        if (len(self._queued) >= GROUP_REPLAYS
                or time.monotonic() - self._since >= GROUP_SECONDS):
            self.close()
        return placed

    def close(self) -> None:
        """Store what is queued, in one write."""
        queued, self._queued = self._queued, []
        if queued:
            with self._store.writer() as con, ReplayWriter(con) as writer:
                for prepared, lineage, placed in queued:
                    writer.add(prepared, lineage, placed)
                writer.close()


def replay_stored(
    store: Store,
    run_keys: list[str],
    job: ReplayJob,
    *,
    workers: int = 1,
    save: bool = True,
    progress: Progress = NO_PROGRESS,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
) -> list[ReplayResult]:
    """Replay the stored runs ``run_keys`` and store every replay record with its lineage
    (unless ``save`` is false), through one writer for the whole selection. Sources are read
    a chunk at a time, so memory stays bounded (beside a server they are all read up front,
    see :class:`_StoredInGroups`: memory then grows with the selection); results come back in
    ``run_keys`` order, and
    stored in that order whatever ``max_connections`` (the bound on model requests in flight
    per endpoint and key).

    Ctrl-C stops the model requests in flight, stores every replay that had finished, and
    raises ``KeyboardInterrupt``.

    Raises:
        NotFoundError: a run key is not stored (before anything is replayed).
    """
    results: list[ReplayResult | None] = [None] * len(run_keys)
    if workers > 1:
        import_lazy_modules()  # once here, not in every worker (as Store.ingest does)
    with (live_session(max_connections), worker_pool(workers if workers > 1 else 0) as pool,
          _session(store, save, run_keys) as session):
        writer = session.writer
        replays = _replayed(pool, workers, job, session.sources, len(run_keys),
                            session.schema, max_connections)
        placed: dict[int, Placed] = {}  # where each stored replay went, known after close
        try:
            for done, (pos, key, replayed) in enumerate(replays, 1):
                if writer is not None and replayed.prepared is not None:
                    placed[pos] = writer.add(replayed.prepared, [replayed.lineage])
                results[pos] = ReplayResult(key, None, replayed.report)
                progress.update(done, len(run_keys))
        except KeyboardInterrupt:
            if writer is not None:
                writer.close()  # keep every replay that finished
            raise
        if writer is not None:
            writer.close()
    for pos, where in placed.items():
        result = results[pos]
        if where.run_key is not None:
            result.report.replay_run_id = where.run_id
            results[pos] = ReplayResult(result.source_run_key, where.run_key, result.report)
    return results  # type: ignore[return-value] - every position was filled


def batch_totals(results: Iterable[ReplayResult]) -> dict:
    """What a batch did, for ``--json`` and the summary line: replays per report status, and the
    model requests, retries, rate limits and tokens of all replays summed."""
    from recstore.replay.endpoints import sum_usage

    results = list(results)
    statuses: dict[str, int] = {}
    for r in results:
        statuses[r.report.status] = statuses.get(r.report.status, 0) + 1
    return {"replays": len(results), "statuses": dict(sorted(statuses.items())),
            "usage": sum_usage(r.report.usage for r in results)}
