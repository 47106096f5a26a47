"""External replayers: replay a stored run in another runtime (aioc in Node, agentuse, ...).

recstore writes ONE JSON request to the command's stdin (protocol
``schema/replayer-protocol.json``: the source record or session, mode, input mode, matching rules
and the tool tape) and reads the replay from its stdout: a RunRecord JSON object, or an agentuse
session directory (``{"agentuseSession": PATH}`` or a bare path line), which is folded into a
record. recstore selects, schedules, stores and compares; the command only runs its agent.

Every way the command can end is kept as a stored replay with a status, never lost:

* exit 0 with a valid replay → the replay record, verdict from comparing it with the source;
* non-zero exit → a ``failed`` replay record whose error carries the stderr tail;
* timeout → a ``failed`` replay record, ``timed out after Ns`` (the command's whole process
  group is killed);
* garbage on stdout (not UTF-8, not a replay) or a command that cannot run (not found, not
  executable, no ``#!`` line) → a ``failed`` replay record naming what was wrong.

A replay whose ``runId`` names a stored run (its source, or any other) is stored under a fresh
id, never as a revision of that run (:mod:`recstore.replay.lineage`).

Example:
    >>> request = build_request(source, mode="strict", matching="agentuse")   # doctest: +SKIP
    >>> outcome = replay_external(source, ["node", "replayer.js"], request)    # doctest: +SKIP
    >>> outcome.report.status                                                  # doctest: +SKIP
    'completed'
"""

from __future__ import annotations

import json
import shlex
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from recstore.errors import InputError
from recstore.formats.agentuse import assemble_run, scan_tree, to_run_record
from recstore.formats.aioc import validate_run_record
from recstore.jsonout import dumps
from recstore.process import (
    DEFAULT_MAX_OUTPUT_BYTES,
    CommandError,
    Finished,
    run_command,
    utf8_output,
)
from recstore.progress import NO_PROGRESS, Progress
from recstore.records import compare_records
from recstore.replay.agentuse_match import (
    STRIP_INTENT,
    RecordingSet,
    match_key,
    recordings_from_record,
)
from recstore.replay.replay import (
    FIDELITY_SECTIONS,
    ReplayReport,
    ReplayStats,
    _report_status,
    replay_input,
)
from recstore.replay.tape import build_tape
from recstore.runtime import ABSENT

__all__ = [
    "PROTOCOL",
    "ExternalOutcome",
    "build_request",
    "parse_replayer_output",
    "replay_external",
    "replay_stored_external",
    "split_command",
]

PROTOCOL = "recstore-replayer/1"
STDERR_TAIL_CHARS = 2000
MATCHINGS = ("aioc", "agentuse")


@dataclass
class ExternalOutcome:
    """A finished external replay: the record to store (always one) and its report."""

    record: dict
    report: ReplayReport
    exit_code: int | None
    stderr_tail: str
    seconds: float
    provider: str


def split_command(command: str | Sequence[str]) -> list[str]:
    """``'CMD ARG …'`` (shell-style quoting, no shell) or an argv list → argv.

    Raises:
        InputError: the command is empty.
    """
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if not argv:
        raise InputError("the replayer command is empty", param="command")
    return argv


# ----------------------------------------------------------------------------------------------
# Request


def _aioc_tape(source: dict) -> list[dict]:
    tape = build_tape(source)
    entries = sorted(
        (e for q in tape.queues.values() for e in q), key=lambda e: e.output_item_index
    )
    out = []
    for e in entries:
        entry = {
            "tool": e.name,
            "key": e.key,
            "argsCanonicalJson": e.args_canonical_json,
            "status": "completed",
            "source": e.provenance(),
        }
        if e.value is not ABSENT:
            entry["output"] = e.value
        out.append(entry)
    return out


def _agentuse_tape(recordings: RecordingSet, strip: frozenset[str]) -> list[dict]:
    out = []
    for rec in recordings.recordings:
        entry: dict[str, Any] = {
            "tool": rec.tool,
            "key": match_key(rec.tool, rec.input, recordings.cwd, strip),
            "arguments": rec.input,
            "status": rec.status,
            "source": {"sourceRunId": recordings.source_id, "partId": rec.part_id},
        }
        if rec.status == "error":
            entry["error"] = rec.error
        else:
            entry["output"] = rec.output
        out.append(entry)
    return out


def _matching_rules(matching: str, recordings: RecordingSet | None, strip: frozenset[str]) -> dict:
    if matching == "aioc":
        return {
            "name": "aioc",
            "key": "tool name + U+001F + sha256(canonical JSON of the validated arguments)",
            "queues": "FIFO per key, shared by all agents",
            "envelopes": "ok envelopes serve their data; denied and approval_required are not replayable",
            "onMissing": "strict: stop with REPLAY_INPUT_MISSING; hybrid: run the live tool",
        }
    return {
        "name": "agentuse",
        "key": "canonical JSON of [tool, arguments], object keys sorted at every depth "
        "(array-index keys first; canonically equivalent keys keep their order; __proto__ kept)",
        "ignoreTopLevelKeys": sorted(strip),
        "resolvePath": {
            "tool": "tools__filesystem_read",
            "field": "file_path",
            "sourceRoot": recordings.cwd if recordings else None,
        },
        "queues": "FIFO per key",
        "outputs": "handed to the model as recorded, no envelope added (an aioc output keeps its own)",
        "recordedErrors": "raised as tool errors with the recorded message",
        "recordedUntil": "the first await_human call or follow-up user prompt of the source",
        "storeList": "served from a wider recorded page when the window and fields fit (agentuse §3.5)",
        "storeCreate": "isolated in-memory store, ids prefixed replay-",
        "onMissing": "stop with REPLAY_INPUT_MISSING; no live call, no fabrication",
    }


def build_request(
    source: dict,
    *,
    run_key: str | None = None,
    source_uri: str | None = None,
    mode: str = "strict",
    input_mode: str = "recorded",
    matching: str = "aioc",
    strip_keys: frozenset[str] = STRIP_INTENT,
    timeout: float = 300.0,
    recordings: RecordingSet | None = None,
) -> dict:
    """The JSON request an external replayer reads on stdin (``schema/replayer-protocol.json``).

    ``recordings`` overrides the agentuse-rule recordings derived from ``source`` (pass
    :func:`~recstore.replay.agentuse_match.recordings_from_session` for agentuse runs).

    Raises:
        InputError: unknown matching; ReplaySourceError: a source agentuse rules refuse.
    """
    if matching not in MATCHINGS:
        raise InputError(f"unknown matching {matching!r} (use aioc or agentuse)", param="matching")
    replay_in, input_source = replay_input(source, input_mode)
    if matching == "agentuse":
        recordings = recordings or recordings_from_record(source)
        tape = _agentuse_tape(recordings, strip_keys)
    else:
        tape = _aioc_tape(source)
    fmt = run_key.split(":", 1)[0] if run_key else "aioc"
    return {
        "protocol": PROTOCOL,
        "mode": mode,
        "inputMode": input_mode,
        "matching": matching,
        "matchingRules": _matching_rules(matching, recordings, strip_keys),
        "timeoutSeconds": timeout,
        "source": {
            "runKey": run_key or f"aioc:{source.get('runId')}",
            "format": fmt,
            "runId": source.get("runId"),
            "sourceUri": source_uri,
            "record": source,
        },
        "input": {"source": input_source, "value": replay_in},
        "toolTape": tape,
    }


# ----------------------------------------------------------------------------------------------
# Running and reading the answer


def parse_replayer_output(stdout: str, name: str) -> tuple[dict, str | None]:
    """(replay record, agentuse session path or None) from the command's stdout.

    Raises:
        InputError: stdout is neither a RunRecord, ``{"agentuseSession": PATH}`` nor a path to
            an agentuse session directory.
    """
    text = stdout.strip()
    where = f"replayer {name!r} output"
    if not text:
        raise InputError("the replayer printed nothing on stdout", source=where)
    if not text.startswith(("{", "[")):
        lines = text.splitlines()
        if len(lines) == 1 and _is_dir(lines[0]):
            return _session_record(lines[0], where), lines[0]
        raise InputError(f"not JSON and not a session directory: {_short(text)!r}", source=where)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})", source=where
        ) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read", source=where) from None
    except ValueError:  # the stdlib's cap on integer digits
        raise InputError(f"a number with more than {sys.get_int_max_str_digits()} digits",
                         source=where) from None
    if isinstance(value, dict) and isinstance(value.get("agentuseSession"), str):
        path = value["agentuseSession"]
        return _session_record(path, where), path
    if not isinstance(value, dict):
        raise InputError(f"expected a RunRecord object, got {type(value).__name__}", source=where)
    validate_run_record(value, source=where)
    return value, None


def _is_dir(text: str) -> bool:
    """Whether ``text`` names a directory (False for what cannot be a path: a line too long for
    the file system, or one holding a NUL)."""
    try:
        return Path(text).is_dir()
    except (OSError, ValueError):
        return False


def _session_record(path: str, where: str) -> dict:
    if not _is_dir(path):
        raise InputError(f"agentuse session {path} does not exist", source=where)
    scan = scan_tree(path)
    if not scan.trees:
        raise InputError(f"{path} holds no agentuse session", source=where)
    return to_run_record(assemble_run(scan.trees[0].files))[0]


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n % 2**20 == 0 else f"{n:,} bytes"


def _short(text: str, width: int = 120) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _tail(stderr: str) -> str:
    return stderr[-STDERR_TAIL_CHARS:].strip()


def replay_external(
    source: dict,
    command: str | Sequence[str],
    request: dict,
    *,
    timeout: float | None = None,
    cwd: str | None = None,
    max_output: int = DEFAULT_MAX_OUTPUT_BYTES,
) -> ExternalOutcome:
    """Run the replayer on ``request`` and turn whatever happens into a stored-replay outcome.

    The command and everything it starts are killed at the timeout, when its stdout passes
    ``max_output`` bytes, and when it ends (see :mod:`recstore.process`)."""
    argv = split_command(command)
    limit = timeout if timeout is not None else float(request.get("timeoutSeconds") or 300)
    started = _iso_now()
    t0 = time.monotonic()
    exit_code: int | None = None
    stderr = ""
    record: dict | None = None
    try:
        done = run_command(argv, dumps(request, indent=None, ascii_only=True).encode("ascii"),
                           limit, role="replayer", cwd=cwd,  # ASCII: a pipe of unknown encoding
                           max_output=max_output)
        exit_code, stderr = done.returncode, done.stderr.decode("utf-8", "replace")
        record, failure = _replay_of(done, argv[0], limit, max_output)
    except (CommandError, InputError) as exc:
        failure = str(exc)
    seconds = time.monotonic() - t0
    provider = f"external:{argv[0]}"
    if record is None:
        record = _failed_record(source, request, argv, failure or "unknown failure", started)
        report = _report(source, record, request, "error", failure)
    else:
        record = _with_lineage(record, source, argv)
        equal = compare_records(source, record, include_sections=FIDELITY_SECTIONS)["equal"]
        status, reason = _report_status(source, record, equal)
        report = _report(source, record, request, status, reason)
    report.error = (
        {"name": "ExternalReplayerError", "message": failure, "code": None} if failure else None
    )
    return ExternalOutcome(record, report, exit_code, _tail(stderr), seconds, provider)


def _replay_of(done: Finished, name: str, limit: float, max_output: int
               ) -> tuple[dict | None, str | None]:
    """(the replay record, None) from a finished replayer, or (None, why there is none)."""
    if done.output_exceeded:
        return None, (f"replayer output exceeded {_size(max_output)} "
                      "(the largest record recstore reads); the replayer was stopped")
    if done.timed_out:
        return None, f"replayer timed out after {limit:g}s"
    if done.returncode != 0:
        tail = _tail(done.stderr.decode("utf-8", "replace")) or "no stderr output"
        return None, f"replayer exited with status {done.returncode}: {tail}"
    record, _session = parse_replayer_output(
        utf8_output(done.stdout, f"replayer {name!r} output"), name)
    return record, None


def _iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _harness(argv: list[str]) -> dict:
    return {"kind": "external", "command": argv}


def _with_lineage(record: dict, source: dict, argv: list[str]) -> dict:
    """recstore's lineage convention (aioc §6.9): the replay names its source run."""
    metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
    record = dict(record)
    record["metadata"] = {
        "replayOfRunId": source.get("runId"),
        "harness": _harness(argv),
        **metadata,
    }
    return record


def _failed_record(
    source: dict, request: dict, argv: list[str], message: str, started: str
) -> dict:
    """A ``failed`` replay record standing for a replayer that produced no usable replay."""
    value = request.get("input", {}).get("value")
    items = (
        value
        if isinstance(value, list)
        else [{"type": "message", "role": "user", "content": value or ""}]
    )
    return {
        "runId": f"replay-{uuid.uuid4()}",
        "startedAt": started,
        "completedAt": _iso_now(),
        "status": "failed",
        "agentName": source.get("agentName", ""),
        "question": source.get("question", ""),
        "response": "",
        "contextSnapshot": {},
        "contextRedacted": False,
        "items": items,
        "inputItemCount": len(items),
        "promptSnapshots": [],
        "requestFingerprints": [],
        "policyDecisions": [],
        "errorName": "ExternalReplayerError",
        "errorMessage": message,
        "metadata": {"replayOfRunId": source.get("runId"), "harness": _harness(argv)},
    }


def _report(
    source: dict, record: dict, request: dict, status: str, reason: str | None
) -> ReplayReport:
    stats = ReplayStats(
        recordedToolCalls=len(request.get("toolTape", [])), inputSource=request["input"]["source"]
    )
    return ReplayReport(
        status=status,
        reason=reason,
        source_run_id=source.get("runId"),
        replay_run_id=record.get("runId"),
        mode=request["mode"],
        input_mode=request["inputMode"],
        source_status=source.get("status"),
        replay_status=record.get("status"),
        source_response=source.get("response"),
        replay_response=record.get("response"),
        stats=stats,
        calls=[],
        unconsumed=0,
    )


def replay_stored_external(
    store: Any,
    run_keys: Sequence[str],
    command: str | Sequence[str],
    *,
    mode: str = "strict",
    input_mode: str = "recorded",
    matching: str = "aioc",
    timeout: float = 300.0,
    save: bool = True,
    progress: Progress = NO_PROGRESS,
    max_connections: int = 1,
) -> list[Any]:
    """``recstore replay --command``: hand each stored run to an external replayer and store
    every outcome (failures as failed replays). Up to ``max_connections`` commands run at once
    (each under its own timeout and process-group kill); outcomes are stored in ``run_keys``
    order. Returns ``ReplayResult`` rows."""
    from recstore.replay.agentuse_match import source_recordings
    from recstore.replay.batch import ReplayResult
    from recstore.replay.concurrent import run_many
    from recstore.replay.lineage import load_sources, store_replays
    argv = split_command(command)

    def requests() -> Any:  # sources are read here, in the consuming thread (one store reader)
        for source in load_sources(store, list(run_keys)):
            recordings = (
                source_recordings(store, source.run_key, source.record)
                if matching == "agentuse"
                else None
            )
            yield source, build_request(
                source.record,
                run_key=source.run_key,
                source_uri=source.source_uri,
                mode=mode,
                input_mode=input_mode,
                matching=matching,
                timeout=timeout,
                recordings=recordings,
            )

    results = []
    for (source, _), outcome in run_many(
            lambda job: replay_external(job[0].record, argv, job[1], timeout=timeout),
            requests(), threads=max_connections):
        key = None
        if save:  # the replay's own key, also when the same replay was stored before
            (key,) = store_replays(store, [(source, outcome.record, outcome.report,
                                             outcome.provider)])
        results.append(ReplayResult(source.run_key, key, outcome.report))
        progress.update(len(results), len(run_keys))
    return results
