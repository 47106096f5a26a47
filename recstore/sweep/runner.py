"""Running a sweep: select cases, replay each against the candidate, compare, classify, record.

:func:`run_sweep` is resumable. A sweep run first freezes its selection (the source runs, with
revision and record hash) in ``sweep_selection``; finished cases are committed shortly after they
finish (``sweep_case_results``), so a run that is interrupted — even by SIGKILL — loses only the
cases in flight. Running the same spec again continues the unfinished run with the cases that
have no result yet; ``rerun=True`` supersedes it and starts a fresh run.

*Exactly one stored replay per case.* The parent process is the single writer; workers are
processes that only compute (replay, compare, classify, judge). Finished cases are written in
small groups — at most :data:`FLUSH_CASES` cases or :data:`FLUSH_SECONDS` seconds of work — as
two commits through one writer: the replay records (prepared by the worker as ingest prepares a
record, stored with a ``sweep_case`` lineage row each), then the case results. A crash before the
first commit loses only computation. A crash between the two leaves replays whose cases have no
result; on resume the runner finds them by their lineage rows and judges them instead of
replaying again.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any

from recstore.canonical import canonical_json
from recstore.errors import (
    EmptySelectionError,
    JudgeError,
    NotFoundError,
    RecstoreError,
)
from recstore.process import exit_with_parent
from recstore.progress import NO_PROGRESS, Progress
from recstore.replay.concurrent import run_many, run_threads
from recstore.replay.endpoints import configure, live_session
from recstore.store import Store
from recstore.store.db import transaction
from recstore.store.tables import insert_rows
from recstore.sweep.candidate import STOPPED, CaseReplay, prepare_candidate
from recstore.sweep.classify import case_signals, classify, judge_input
from recstore.sweep.judge import run_judge
from recstore.sweep.locks import sweep_run_lock
from recstore.sweep.spec import SweepSpec, spec_json


@dataclass
class SweepRun:
    """What one ``run_sweep`` call did, and where the run stands. ``run_number`` counts the runs
    of this sweep from 1 (what people see: ``label``, ``NAME#N``); ``sweep_run_id`` is the
    store-wide id the views key on."""

    sweep_run_id: int
    sweep_name: str
    resumed: bool
    case_count: int
    run_number: int = 1
    processed: int = 0  # cases finished by this call
    recovered: int = 0  # cases whose replay was already stored (a crash between two writes)
    counts: dict[str, int] = field(default_factory=lambda: {"pass": 0, "warn": 0, "fail": 0})
    # cases (of any outcome) whose replay failed as their source did: reproduced, not regressed
    still_failing: int = 0
    seconds: float = 0.0
    compared: dict = field(default_factory=dict)  # CompareSpec.compared(): what was compared
    usage: dict = field(default_factory=dict)  # run_usage(): model requests and tokens of the run
    live: dict = field(default_factory=dict)  # this call's model-request counters (LiveStats)

    @property
    def failed(self) -> bool:
        """True when any case of the run failed (the CI gate)."""
        return self.counts["fail"] > 0

    @property
    def label(self) -> str:
        """``NAME#N``: run N of the sweep, as ``recstore sweep report`` takes it."""
        return run_label(self.sweep_name, self.run_number)

    def summary_line(self) -> str:
        """One line for people and scheduler logs."""
        c = self.counts
        verb = "resumed" if self.resumed else "ran"
        still = (f"; still failing {self.still_failing} (failed as their source did)"
                 if self.still_failing else "")
        return (f"sweep {self.label} ({verb}): {self.case_count} cases, "
                f"{c['pass']} pass, {c['warn']} warn, {c['fail']} fail{still}")

    def to_json(self) -> dict:
        """JSON form for ``--json``."""
        return {
            "sweep": self.sweep_name,
            "run": self.label,
            "run_number": self.run_number,
            "sweep_run_id": self.sweep_run_id,
            "resumed": self.resumed,
            "case_count": self.case_count,
            "processed": self.processed,
            "recovered": self.recovered,
            "counts": self.counts,
            "still_failing": self.still_failing,
            "compared": self.compared,
            "usage": self.usage,
            "live": self.live,
            "status": "fail" if self.failed else ("warn" if self.counts["warn"] else "pass"),
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class CaseInput:
    """One case handed to a worker (picklable). ``source`` is a replay-layer ``SourceRun``."""

    case_index: int
    source: Any
    replay: dict | None = None  # an already stored replay (recovery): judge it, do not replay
    replay_detail: dict | None = None  # its replay_of lineage detail (status, reason, calls)


@dataclass
class CaseResult:
    """A worker's answer for one case (picklable); the parent stores it."""

    case_index: int
    source_run_key: str
    outcome: str
    signals: list[str]
    drift: dict
    # the replay record prepared for storing and its replay_of lineage row (None: no record,
    # or it is already stored)
    replay: Any  # recstore.store.prepare.Prepared | Refused | None
    replay_lineage: dict | None
    replay_report: Any  # the replay layer's ReplayReport (None for a recovered case)
    provider: str
    comparison: dict | None
    judge: dict | None
    error: str | None
    calls: list[dict]
    replay_status: str | None
    duration_ms: float
    source_status: str | None
    candidate_status: str | None
    already_stored: bool = False


def run_sweep(
    store: Store,
    spec: SweepSpec,
    *,
    rerun: bool = False,
    progress: Progress = NO_PROGRESS,
    trigger: str = "manual",
    scheduled_for: datetime | None = None,
    spec_path: str | Path | None = None,
    allow_empty: bool = False,
) -> SweepRun:
    """Run (or resume) a sweep of ``spec`` against ``store`` and return what happened;
    ``progress.update(done, total)`` follows the recorded cases.

    A new run whose selection matches no runs is not opened: it would check nothing and pass.

    Raises:
        StoreLockedError: another process is running this sweep on this store.
        EmptySelectionError: the selection is empty, unless ``allow_empty`` or
            ``select.allow_empty``.
    """
    started = time.perf_counter()
    candidate = prepare_candidate(spec)  # a bad harness fails here, before a run is opened
    with sweep_run_lock(store.path, spec.name):
        run_id, resumed = _open_run(store, spec, rerun, trigger, scheduled_for, spec_path,
                                    allow_empty or spec.select.allow_empty)
        cases = _pending_cases(store, run_id)
        case_count, run_number = _run_facts(store, run_id)
        result = SweepRun(run_id, spec.name, resumed, case_count, run_number,
                          compared=spec.compare.compared())
        writer = _CaseWriter(store, spec, run_id)
        done = result.case_count - len(cases)
        progress.update(done, result.case_count)
        with live_session(spec.candidate.max_connections) as stats:
            for case in _kept_on_interrupt(
                    _execute(spec, candidate, _case_inputs(store, run_id, cases), len(cases)), writer):
                writer.add(case)
                result.processed += 1
                result.recovered += case.already_stored
                done += 1
                progress.update(done, result.case_count)
            writer.flush()
        result.live = stats.to_json()
        _end_run(store, run_id, "finished", None)
        result.counts, result.still_failing = _outcome_counts(store, run_id)
        result.usage = run_usage(store, run_id)
    result.seconds = time.perf_counter() - started
    return result


def _kept_on_interrupt(results: Iterator[CaseResult], writer: _CaseWriter) -> Iterator[CaseResult]:
    """``results``, committing the cases finished so far when Ctrl-C stops their computation
    (the run then resumes from there)."""
    try:
        yield from results
    except KeyboardInterrupt:
        writer.flush()
        raise


# --- opening a run -----------------------------------------------------------------------------

def _open_run(store: Any, spec: SweepSpec, rerun: bool, trigger: str,
              scheduled_for: datetime | None, spec_path: str | Path | None,
              allow_empty: bool) -> tuple[int, bool]:
    """The run to work on: the unfinished run of this spec, or a new one with a frozen selection."""
    with store.reader() as con:
        row = con.execute(
            "SELECT sweep_run_id, spec_hash FROM sweep_run_starts s WHERE sweep_name = ? "
            "AND NOT EXISTS (SELECT 1 FROM sweep_run_ends e WHERE e.sweep_run_id = s.sweep_run_id) "
            "ORDER BY sweep_run_id DESC LIMIT 1",
            [spec.name],
        ).fetchone()
    if row and not rerun and row[1] == spec.spec_hash:
        return row[0], True
    selection, matched = select_cases(store, spec)
    if not selection and not allow_empty:
        replays = "" if spec.select.include_replays else " (replays are left out unless " \
            "select.include_replays)"
        raise EmptySelectionError(
            f"sweep {spec.name}: select.query {spec.select.query!r} selects no runs{replays}: "
            "nothing would be checked (select.allow_empty = true or `allow_empty` accepts an "
            "empty sweep)", what="select.query")
    snapshot = store.last_seq()
    with store.writer() as con, transaction(con):
        # one transaction: a run never exists without its full selection
        if row:
            reason = "--rerun" if rerun else "the spec changed"
            _insert_end(con, row[0], "superseded", reason)
        run_id = con.execute("SELECT nextval('sweep_run_seq')").fetchone()[0]
        con.execute(
            "INSERT INTO sweep_run_starts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [run_id, spec.name, spec.spec_hash, spec_json(spec),
             str(spec_path) if spec_path else None, spec.candidate.describe(), trigger,
             _utc_naive(scheduled_for), _utc_naive(datetime.now(UTC)), snapshot,
             spec.select.query, matched, len(selection), os.getpid()],
        )
        insert_rows(con, "sweep_selection", [
            {"sweep_run_id": run_id, "case_index": i, "source_run_key": key,
             "source_revision": rev, "source_record_hash": h}
            for i, (key, rev, h) in enumerate(selection)])
    return run_id, False


def select_cases(store: Any, spec: SweepSpec) -> tuple[list[tuple[str, int, str]], int]:
    """The sweep's cases ``[(run_key, revision, record_hash)]`` and how many runs matched.

    Runs that are themselves replays are left out unless ``select.include_replays``, so a
    sweep never sweeps its own earlier results. A sample is drawn from the matched keys in
    sorted order with the spec's seed, so the same store and spec always give the same cases.
    """
    keys = _selected_keys(store, spec.select.query, spec.select.params)
    revisions = _revisions(store, keys, spec.select.include_replays)
    keys = [k for k in keys if k in revisions]
    matched = len(keys)
    if spec.select.sample is not None and spec.select.sample < len(keys):
        picked = set(random.Random(spec.select.seed).sample(sorted(keys), spec.select.sample))
        keys = [k for k in keys if k in picked]
    if spec.select.limit is not None:
        keys = keys[: spec.select.limit]
    return [(k, *revisions[k]) for k in keys], matched


def _selected_keys(store: Any, query: str, params: dict[str, str]) -> list[str]:
    """Run keys a DSL filter, SQL query or ``@saved`` query selects (with its parameters)."""
    from recstore.query import load_saved, select_run_keys

    where = "select.query"
    bound: dict[str, Any] = dict(params)
    if query.startswith("@"):
        saved = load_saved(query)
        query, bound, where = saved.text, saved.bind(params), f"saved query @{saved.name}"
    return select_run_keys(store, query, params=bound or None, what=where)


def _revisions(store: Any, keys: Sequence[str], include_replays: bool) -> dict[str, tuple[int, str]]:
    """Current revision and record hash of each key (replays only when ``include_replays``)."""
    if not keys:
        return {}
    with store.reader() as con:
        rows = con.execute(
            "SELECT run_key, revision, record_hash, replay_of_run_id IS NOT NULL FROM runs "
            "WHERE list_contains(?, run_key)",
            [list(keys)],
        ).fetchall()
    return {key: (rev, h) for key, rev, h, is_replay in rows if include_replays or not is_replay}


def _pending_cases(store: Any, run_id: int) -> list[tuple[int, str, int | None, str | None]]:
    """``(case_index, run_key, revision, record_hash)`` of the cases without a result."""
    with store.reader() as con:
        return con.execute(
            "SELECT s.case_index, s.source_run_key, s.source_revision, s.source_record_hash "
            "FROM sweep_selection s "
            "WHERE s.sweep_run_id = ? AND NOT EXISTS (SELECT 1 FROM sweep_case_results c "
            "WHERE c.sweep_run_id = s.sweep_run_id AND c.case_index = s.case_index) "
            "ORDER BY s.case_index",
            [run_id],
        ).fetchall()


def _run_facts(store: Any, run_id: int) -> tuple[int, int]:
    """The run's case count and its number among the runs of its sweep."""
    with store.reader() as con:
        return con.execute(
            "SELECT case_count, run_number FROM sweep_runs WHERE sweep_run_id = ?", [run_id]
        ).fetchone()


# --- computing cases ---------------------------------------------------------------------------

#: Source records read per reader connection (opening one costs tens of milliseconds).
READ_CHUNK = 100


def _case_inputs(store: Any, run_id: int, cases: list[tuple[int, str, int | None, str | None]]
                 ) -> Iterator[CaseInput]:
    """Each pending case with its source run at the frozen revision, plus any stored replay."""
    from recstore.replay.lineage import SourceRun, load_sources

    with store.reader() as con:
        stored = _stored_replays(con, run_id)
    for start in range(0, len(cases), READ_CHUNK):
        chunk = cases[start:start + READ_CHUNK]
        sources = load_sources(store, [key for _, key, _, _ in chunk])
        recovered = [stored[i][0] for i, *_ in chunk if i in stored]
        replays = {s.run_key: s.record for s in load_sources(store, recovered)} if recovered else {}
        for (case_index, _, revision, record_hash), source in zip(chunk, sources, strict=True):
            if revision is not None and source.revision != revision:
                # The source got a new revision after the sweep run froze its selection: replay
                # the revision the run selected, so a resumed run stays what it started as.
                record = store.get_record(source.run_key, revision=revision)
                source = SourceRun(source.run_key, revision, record_hash, source.source_uri, record)
            replay_key, detail = stored.get(case_index, (None, None))
            yield CaseInput(case_index, source, replays.get(replay_key), detail)


def _stored_replays(con: Any, run_id: int) -> dict[int, tuple[str, dict]]:
    """Replays of this sweep run already in the store, by case index: their run key and the
    replay layer's ``replay_of`` detail (status, reason, served calls). See the module docstring."""
    rows = con.execute(
        "SELECT CAST(s.detail->>'$.case_index' AS INTEGER), s.child_run_key, r.detail "
        "FROM lineage_log s LEFT JOIN lineage_log r "
        "ON r.child_run_key = s.child_run_key AND r.relation = 'replay_of' "
        "WHERE s.relation = 'sweep_case' AND CAST(s.detail->>'$.sweep_run_id' AS BIGINT) = ?",
        [run_id],
    ).fetchall()
    return {index: (key, json.loads(detail) if detail else {}) for index, key, detail in rows}


_WORKER: dict[str, Any] = {}


def _init_worker(spec: SweepSpec, parent_pid: int, connections: int) -> None:
    exit_with_parent(parent_pid)  # a killed sweep must not leave workers replaying
    configure(connections)  # this worker's share of candidate.max_connections
    _WORKER["spec"] = spec
    _WORKER["candidate"] = prepare_candidate(spec)


def _compute_in_worker(cases: list[CaseInput], threads: int) -> list[CaseResult]:
    spec, candidate = _WORKER["spec"], _WORKER["candidate"]
    return [result for _, result in run_many(lambda case: compute_case(spec, candidate, case),
                                             cases, threads=threads, ordered=False)]


def _execute(spec: SweepSpec, candidate: Any, cases: Iterator[CaseInput], count: int
             ) -> Iterator[CaseResult]:
    """Compute cases in this process (1 worker) or a process pool, yielding results as they end.

    At most :data:`FLUSH_CASES` (or ``2 * workers``) cases are in flight, so memory stays flat
    however many cases there are, yet the workers keep busy while this process commits a group.
    A candidate that waits (an HTTP model, an external command) runs many cases at once on
    threads (:mod:`recstore.replay.concurrent`), each worker with its share of
    ``candidate.max_connections``.
    """
    connections = spec.candidate.max_connections
    if spec.workers == 1 or count <= 1:  # a process pool only pays off for several cases
        threads = _case_threads(candidate, connections)
        for _, result in run_many(lambda case: compute_case(spec, candidate, case), cases,
                                  threads=threads, ordered=False,
                                  window=max(FLUSH_CASES, 2 * threads)):
            yield result
        return
    share = max(1, -(-connections // spec.workers))
    threads = _case_threads(candidate, share)
    # spawn, not fork: this process has used DuckDB, whose threads must not be forked.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(spec.workers, mp_context=context, initializer=_init_worker,
                             initargs=(spec, os.getpid(), share)) as pool:
        in_flight: set[Future] = set()
        todo = iter(cases)
        while batch := list(islice(todo, max(1, threads))):
            in_flight.add(pool.submit(_compute_in_worker, batch, threads))
            if len(in_flight) * len(batch) >= max(2 * spec.workers * len(batch), FLUSH_CASES):
                finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
                yield from (r for f in finished for r in f.result())
        while in_flight:
            finished, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
            yield from (r for f in finished for r in f.result())


def _case_threads(candidate: Any, connections: int) -> int:
    """Cases computed at once: one without waiting; a thread per command; for a model over
    HTTP more threads than request slots (a case sleeping before a retry holds none)."""
    if not candidate.waits:
        return 1
    return connections if candidate.spec.candidate.command else run_threads(connections)


def compute_case(spec: SweepSpec, candidate: Any, case: CaseInput) -> CaseResult:
    """Replay one case (unless its replay is already stored), compare, judge and classify."""
    from recstore.compare.ignore import parse_ignore, strip_record
    from recstore.records import compare_records
    from recstore.replay.lineage import prepare_replay

    started = time.perf_counter()
    source = case.source.record
    if case.replay is not None:
        replayed, calls, replay_status = _recovered(case)
    else:
        try:
            replayed = candidate.replay(source, case.source.run_key, case.source.source_uri)
            calls = [c.to_json() for c in replayed.report.calls]
            replay_status = replayed.report.status
        except Exception as exc:  # noqa: BLE001 - one broken case must not end a long sweep
            replayed = CaseReplay(None, None, f"the replay crashed: {type(exc).__name__}: {exc}", "")
            calls, replay_status = [], "error"
    comparison = None
    if replayed.record is not None:
        ignore = parse_ignore(spec.compare.ignore, preset=spec.compare.preset)
        excluded = set(spec.compare.exclude_sections or ()) | set(ignore.sections)
        comparison = compare_records(
            strip_record(source, ignore),
            strip_record(replayed.record, ignore),
            include_sections=spec.compare.include_sections,
            exclude_sections=sorted(excluded),
        )
    signals, drift = case_signals(spec, source, replayed.record, comparison, replayed.error, calls)
    verdict, error = None, replayed.error
    prepared = lineage = None
    if case.replay is None and replayed.record is not None:  # stored by the parent, prepared here
        prepared, lineage = prepare_replay(case.source, replayed.record, replayed.report,
                                           replayed.provider)
    if spec.judge is not None and replayed.record is not None:
        try:
            verdict = run_judge(spec.judge, judge_input(spec, source, replayed.record,
                                                        comparison, candidate.descriptor))
        except JudgeError as exc:
            signals.append("judge_error")
            error = f"{error}; {exc}" if error else str(exc)
    return CaseResult(
        case_index=case.case_index,
        source_run_key=case.source.run_key,
        outcome=classify(spec, signals, verdict),
        signals=signals,
        drift=drift,
        replay=prepared,
        replay_lineage=lineage,
        replay_report=replayed.report,
        provider=replayed.provider,
        comparison=comparison,
        judge=verdict,
        error=error,
        calls=calls,
        replay_status=replay_status,
        duration_ms=(time.perf_counter() - started) * 1000,
        source_status=source.get("status"),
        candidate_status=replayed.record.get("status") if replayed.record else None,
        already_stored=case.replay is not None,
    )


def _recovered(case: CaseInput) -> tuple[CaseReplay, list[dict], str | None]:
    """A replay stored before a crash, rebuilt from its record and lineage detail."""
    detail = case.replay_detail or {}
    status = detail.get("status")
    error = (detail.get("reason") or status) if status in STOPPED else None
    return CaseReplay(case.replay, None, error, detail.get("provider") or ""), detail.get("calls") or [], status


# --- recording ---------------------------------------------------------------------------------

#: A group of finished cases is committed when it has this many cases ...
FLUSH_CASES = 100
#: ... or when its oldest case finished this many seconds ago.
FLUSH_SECONDS = 5.0


class _CaseWriter:
    """The single writer of a sweep run: buffers finished cases and commits them in groups."""

    def __init__(self, store: Any, spec: SweepSpec, run_id: int):
        self.store = store
        self.spec = spec
        self.run_id = run_id
        self.pending: list[CaseResult] = []
        self.oldest = 0.0

    def add(self, case: CaseResult) -> None:
        """Queue a finished case; commit when the group is due."""
        if not self.pending:
            self.oldest = time.monotonic()
        self.pending.append(case)
        if len(self.pending) >= FLUSH_CASES or time.monotonic() - self.oldest >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Commit the replays, then the case results (see the module docstring for why)."""
        if not self.pending:
            return
        with self.store.writer() as con:
            replay_keys = self._store_replays(con, [c for c in self.pending if c.replay is not None])
            if any(case.already_stored for case in self.pending):
                replay_keys |= {i: key for i, (key, _) in _stored_replays(con, self.run_id).items()}
            rows = [self._row(case, replay_keys.get(case.case_index)) for case in self.pending]
            insert_rows(con, "sweep_case_results", rows)  # one statement: one transaction
        self.pending = []

    def _store_replays(self, con: Any, pending: list[CaseResult]) -> dict[int, str]:
        """Store the prepared replay records through the writer ``con``, each with the replay
        layer's ``replay_of`` lineage row and a ``sweep_case`` row naming the sweep run and case."""
        from recstore.replay.lineage import ReplayWriter
        from recstore.store.prepare import Prepared

        if not pending:
            return {}
        source_uri = f"recstore:sweep/{self.spec.name}/{self.run_id}"
        tags = {"kind": "replay", "sweep": self.spec.name, "sweep_run": str(self.run_id)}
        placed = {}
        with ReplayWriter(con, source_uri, tags) as writer:
            for case in pending:
                stored = isinstance(case.replay, Prepared)  # a refused record has no lineage
                placed[case.case_index] = writer.add(case.replay, [case.replay_lineage, {
                    "relation": "sweep_case",
                    "parent_run_key": case.source_run_key,
                    "child": case.replay.run_id,
                    "detail": {"sweep": self.spec.name, "sweep_run_id": self.run_id,
                               "case_index": case.case_index},
                }] if stored else [])
            summary = writer.close()
        if summary.rejected:
            raise RecstoreError(f"sweep {self.spec.name}: the store rejected "
                                f"{summary.rejected} replay record(s); see `recstore rejects`")
        return {index: where.run_key for index, where in placed.items()}

    def _row(self, case: CaseResult, replay_key: str | None) -> dict:
        return {
            "sweep_run_id": self.run_id, "case_index": case.case_index,
            "source_run_key": case.source_run_key, "replay_run_key": replay_key,
            "outcome": case.outcome, "replay_status": case.replay_status,
            "source_status": case.source_status, "candidate_status": case.candidate_status,
            "signals": canonical_json(case.signals), "drift": canonical_json(case.drift),
            "error": case.error, "comparison": _json_or_none(case.comparison),
            "judge": _json_or_none(case.judge), "duration_ms": case.duration_ms,
            "finished_at": _utc_naive(datetime.now(UTC)),
        }


def _end_run(store: Any, run_id: int, status: str, reason: str | None) -> None:
    with store.writer() as con:
        _insert_end(con, run_id, status, reason)


def _insert_end(con: Any, run_id: int, status: str, reason: str | None) -> None:
    con.execute("INSERT INTO sweep_run_ends VALUES (?, ?, ?, ?)",
                [run_id, _utc_naive(datetime.now(UTC)), status, reason])


def run_usage(store: Any, run_id: int) -> dict:
    """The model usage of a sweep run's stored replays, summed (the ``replays`` view's usage
    columns): requests, retries, 429s and tokens, and how many replays reported usage."""
    with store.reader() as con:
        row = con.execute(
            "SELECT count(r.model_requests), sum(r.model_requests), sum(r.model_retries), "
            "sum(r.rate_limited), sum(r.prompt_tokens), sum(r.completion_tokens), "
            "sum(r.total_tokens) FROM sweep_case_results c JOIN replays r "
            "ON r.replay_run_key = c.replay_run_key WHERE c.sweep_run_id = ?", [run_id]).fetchone()
    names = ("replaysWithUsage", "requests", "retries", "rateLimited", "promptTokens",
             "completionTokens", "totalTokens")
    return {name: int(value or 0) for name, value in zip(names, row, strict=True)}


def _outcome_counts(store: Any, run_id: int) -> tuple[dict[str, int], int]:
    """Cases per outcome, and the cases that raised ``still_failing``."""
    with store.reader() as con:
        rows = con.execute(
            "SELECT outcome, count(*) FROM sweep_case_results WHERE sweep_run_id = ? GROUP BY 1",
            [run_id],
        ).fetchall()
        (still,) = con.execute(
            "SELECT count(*) FROM sweep_case_results WHERE sweep_run_id = ? "
            "AND list_contains(CAST(signals AS VARCHAR[]), 'still_failing')", [run_id],
        ).fetchone()
    return {"pass": 0, "warn": 0, "fail": 0} | dict(rows), still


def _json_or_none(value: Any) -> str | None:
    return None if value is None else canonical_json(value)


def _utc_naive(moment: datetime | None) -> datetime | None:
    """DuckDB TIMESTAMP columns hold naive UTC."""
    return None if moment is None else moment.astimezone(UTC).replace(tzinfo=None)


def run_label(sweep_name: str, run_number: int) -> str:
    """How people name run ``run_number`` of a sweep: ``NAME#N``."""
    return f"{sweep_name}#{run_number}"


def resolve_run_id(store: Any, ref: str) -> int:
    """The store-wide ``sweep_run_id`` of ``RUN``: ``NAME#N`` (run N of sweep NAME), ``NAME``
    (its latest run), or a bare number (the store-wide id itself, as ``--json`` and the views
    show it)."""
    name, hash_sign, number = ref.rpartition("#")
    with store.reader() as con:
        if hash_sign and number.isdigit():
            row = con.execute("SELECT sweep_run_id FROM sweep_runs WHERE sweep_name = ? "
                              "AND run_number = ?", [name, int(number)]).fetchone()
        elif ref.isdigit():
            row = con.execute("SELECT sweep_run_id FROM sweep_run_starts WHERE sweep_run_id = ?",
                              [int(ref)]).fetchone()
        else:
            row = con.execute("SELECT max(sweep_run_id) FROM sweep_run_starts WHERE sweep_name = ?",
                              [ref]).fetchone()
    if not row or row[0] is None:
        raise NotFoundError(f"no sweep run {ref!r} in the store (give NAME, NAME#N or a "
                            "sweep_run_id; see `recstore sweep status`)")
    return int(row[0])


__all__ = ["CaseInput", "CaseResult", "SweepRun", "compute_case", "resolve_run_id", "run_label",
           "run_sweep", "run_usage", "select_cases"]
