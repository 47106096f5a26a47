"""Replay many stored runs: worker processes compute, this process alone writes.

DuckDB lets one process write a file, so replays run in a process pool (``workers > 1``) that
never opens the store; the parent reads the sources up front, collects finished replays and
stores them in batches through one writer (:func:`recstore.replay.lineage.store_replays`).
"""

from __future__ import annotations

import functools
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass

from recstore.errors import RecstoreError
from recstore.process import exit_with_parent
from recstore.progress import NO_PROGRESS, Progress
from recstore.replay.harness import Harness, ProviderSpec, harness_from_source, load_harness
from recstore.replay.lineage import SourceRun, load_sources, store_replays
from recstore.replay.replay import ReplayReport, error_outcome, provider_for, replay_run
from recstore.store import Store, run_key_for

__all__ = ["ReplayJob", "ReplayResult", "replay_one", "replay_stored"]

STORE_BATCH = 500  # replays per write transaction (opening the writer costs ~0.25 s)
READ_CHUNK = 2000  # sources held in memory at once
CHUNK = 25  # sources per task sent to a worker


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


def _replay_chunk(job: ReplayJob, sources: list[dict]) -> list[tuple[dict | None, ReplayReport, str]]:
    return [replay_one(job, source) for source in sources]


@contextmanager
def _pool(workers: int) -> Iterator[ProcessPoolExecutor | None]:
    """A process pool for ``workers > 1`` (``None`` means replay in this process).

    fork where available: spawn re-imports the package in every worker, which costs more than the
    replays of a typical selection. Forking is safe here: the executor forks all workers at its
    first submit, after the first sources were read and their reader closed and before this
    process writes, and workers never open the store.
    """
    if workers <= 1:
        yield None
        return
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method),
                             initializer=exit_with_parent, initargs=(os.getpid(),)) as pool:
        yield pool


def _computed(pool: ProcessPoolExecutor | None, job: ReplayJob, sources: list[SourceRun]) -> Iterator[tuple[int, tuple]]:
    """``(index into sources, replay_one result)`` as replays finish."""
    if pool is None:
        for index, source in enumerate(sources):
            yield index, replay_one(job, source.record)
        return
    futures = {
        pool.submit(_replay_chunk, job, [s.record for s in sources[start : start + CHUNK]]): start
        for start in range(0, len(sources), CHUNK)
    }
    pending = set(futures)
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            for offset, result in enumerate(future.result()):
                yield futures[future] + offset, result


def replay_stored(
    store: Store,
    run_keys: list[str],
    job: ReplayJob,
    *,
    workers: int = 1,
    save: bool = True,
    progress: Progress = NO_PROGRESS,
) -> list[ReplayResult]:
    """Replay the stored runs ``run_keys`` and store every replay record with its lineage
    (unless ``save`` is false). Sources are read :data:`READ_CHUNK` at a time, so memory stays
    bounded; results come back in ``run_keys`` order."""
    results: list[ReplayResult] = []
    done = 0
    with _pool(workers) as pool:
        for start in range(0, len(run_keys), READ_CHUNK):
            sources = load_sources(store, run_keys[start : start + READ_CHUNK])
            chunk: list[ReplayResult | None] = [None] * len(sources)
            pending: list[tuple[int, tuple]] = []
            for index, result in _computed(pool, job, sources):
                pending.append((index, result))
                if len(pending) >= STORE_BATCH:
                    _flush(store, sources, pending, chunk, save)
                done += 1
                progress.update(done, len(run_keys))
            _flush(store, sources, pending, chunk, save)
            results.extend(r for r in chunk if r is not None)
    return results


def _flush(store: Store, sources: list[SourceRun], pending: list[tuple[int, tuple]],
           out: list[ReplayResult | None], save: bool) -> None:
    """Store the finished replays in ``pending`` (one transaction) and record their results."""
    if save and pending:
        store_replays(store, [(sources[i], rec, rep, prov) for i, (rec, rep, prov) in pending])
    for index, (record, report, _) in pending:
        key = run_key_for("aioc", record["runId"]) if record is not None and save else None
        out[index] = ReplayResult(sources[index].run_key, key, report)
    pending.clear()
