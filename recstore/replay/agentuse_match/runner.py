"""Running a candidate under agentuse's rules: the tape as the run's tool executor, agentuse's
stops as the run's halts (subagent calls included: every call of the run goes to the one tape),
and the stored replay of ``recstore replay --match agentuse``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from recstore.canonical import (
    canonical_json,
    sha256_text,
)
from recstore.progress import NO_PROGRESS, Progress
from recstore.replay.agentuse_match.reads import snapshot_references
from recstore.replay.agentuse_match.recordings import RecordingSet, ReferenceFile, source_recordings
from recstore.replay.agentuse_match.rules import STRIP_INTENT
from recstore.replay.agentuse_match.tape import AgentuseTape
from recstore.replay.harness import Harness
from recstore.replay.replay import replay_run
from recstore.runtime import AgentRunError, RunHalted


class AgentuseReplayStop(AgentRunError):
    """The tape stopped the replay short of success: ``report_incomplete`` (``INCOMPLETE``)."""

    error_name = "INCOMPLETE"


class AgentuseInputMissing(AgentRunError):
    """The tape found no recording for a call (agentuse's ``REPLAY_INPUT_MISSING`` session error)."""

    error_name = "REPLAY_INPUT_MISSING"
    code = "REPLAY_INPUT_MISSING"


# agentuse replay status -> recstore replay report status (``replays.report_status``, exit code)
_REPORT_STATUS = {
    "proposal": "completed",
    "completed": "completed",
    "incomplete": "incomplete",
    "mismatch": "incomplete",
    "error": "error",
}


_SERVED = ("recording", "store-projection", "temporary-store", "current-reference")


@dataclass
class AgentuseReplay:
    """A replay under agentuse's rules: aioc's outcome (record, report) and the
    ``replay.json``-shaped report, which the record also carries as ``metadata.agentuseReplay``."""

    outcome: Any  # recstore.replay.replay.ReplayOutcome
    report: dict


def _tape_executor(tape: AgentuseTape) -> Any:
    """Every call goes to the tape and its answer to the model as is: a recorded output as
    recorded, a recorded error as its message (agentuse re-raises it as a tool error, which the
    model reads as that text), a stop's ``{replay, ...}`` object."""

    def execute(tool: Any, arguments: Any, call: Any) -> Any:
        result = tape.call(tool.name, arguments)
        return result.error_message if result.is_error else result.value

    return execute


def _tape_halt(tape: AgentuseTape) -> Any:
    """After a step with a stop, end the run as agentuse's runner does (``replay.stopped()``):
    cleanly after a proposal or ``report_complete``, failed otherwise."""

    def halt() -> Exception | None:
        if tape.stop in ("proposal", "complete"):
            return RunHalted(tape.stop)
        if tape.stop == "incomplete":
            return AgentuseReplayStop("Agent reported incomplete")
        if tape.stop == "missing":
            missing = next(c for c in tape.calls if c["source"] == "missing")
            return AgentuseInputMissing(
                f"{tape.stop_reason} Unmatched call: {missing['tool']} "
                f"{canonical_json(missing['input'])}"
            )
        return None

    return halt


def current_instructions(candidate: Any, context: Any = None) -> str:
    """The candidate entry agent's instructions, as its first request would resolve them."""
    built = candidate.build() if isinstance(candidate, Harness) else candidate
    return built.entry.resolve_instructions({} if context is None else context)


def agentuse_user_message(instructions: str, user_prompt: str | None) -> str:
    """The one user message of an agentuse replay: the current instructions, then two newlines
    and the recorded user prompt when the source had one (never the old instructions)."""
    return f"{instructions}\n\n{user_prompt}" if user_prompt else instructions


def replay_agentuse(
    source_record: dict,
    candidate: Any,
    recordings: RecordingSet,
    *,
    input_mode: str = "recorded",
    project_root: str | None = None,
    references: Sequence[ReferenceFile] = (),
    strip_keys: Iterable[str] = STRIP_INTENT,
    provider: Any = None,
    run_id: str | None = None,
) -> AgentuseReplay:
    """Strictly replay ``source_record`` against ``candidate`` (a harness or candidate), serving
    every tool call from ``recordings`` under agentuse's rules.

    The model gets :func:`agentuse_user_message` as its input and tool results without aioc's
    envelope. The report's status follows agentuse (``proposal`` and ``completed`` succeed); the
    aioc comparison with the source is kept in the report's ``differences`` and ``reason`` but no
    longer decides the verdict. ``input_mode`` is recorded but agentuse has a single input rule.
    """
    tape = AgentuseTape(
        recordings, project_root=project_root, references=references, strip_keys=strip_keys
    )
    instructions = current_instructions(candidate, source_record.get("contextSnapshot"))
    message = agentuse_user_message(instructions, recordings.user_prompt)
    outcome = replay_run(
        source_record,
        candidate,
        "strict",
        input_mode,
        metadata_overrides={"matching": "agentuse"},
        provider=provider,
        run_id=run_id,
        tool_executor=_tape_executor(tape),
        input_override=(message, "agentuse"),
        envelope_outputs=False,
        halt=_tape_halt(tape),
    )
    record = outcome.record or {}
    failure = outcome.error
    error = (
        None
        if failure is None or isinstance(failure, (AgentuseReplayStop, AgentuseInputMissing))
        else str(failure)
    )
    finish = "stop" if record.get("status") == "completed" and tape.stop is None else None
    harness = (record.get("metadata") or {}).get("harness") or {}
    report = tape.report(
        session_id=str(record.get("runId")),
        model=record.get("model"),
        final_text=record.get("response") or "",
        finish_reason=finish,
        error=error,
        instructions_sha256=sha256_text(instructions),
        agent_sha256=str(harness.get("descriptorHash", "")).removeprefix("sha256:") or None,
    )
    if outcome.record is not None:
        outcome.record.setdefault("metadata", {})["agentuseReplay"] = report
    served = sum(c["source"] in _SERVED for c in tape.calls)
    outcome.stats.recordedToolCalls = len(recordings.recordings)
    outcome.stats.replayedFromRecord = served
    outcome.stats.missingToolCalls = sum(c["source"] == "missing" for c in tape.calls)
    _agentuse_verdict(outcome.report, report)
    outcome.report.unconsumed = sum(len(q) for q in tape.queues.values())
    return AgentuseReplay(outcome, report)


def _agentuse_verdict(verdict: Any, report: dict) -> None:
    """agentuse's status decides ``verdict.status`` (and so the exit code); the aioc comparison
    stays in ``differences`` and is named in ``reason``."""
    compared = "the same response and tool calls as the source"
    if verdict.differences:
        compared = "a different response or tool calls than the source (reported, not judged)"
    status = report["status"]
    verdict.status = _REPORT_STATUS[status]
    detail = report.get("error") or compared
    missing = next((c for c in report["calls"] if c["source"] == "missing"), None)
    if missing is not None:  # agentuse's CLI names the call and its exact input
        detail += f" Unmatched call: {missing['tool']} {canonical_json(missing['input'])}"
    verdict.reason = f"agentuse {status}: {detail}"


def replay_stored_agentuse(
    store: Any,
    run_keys: Sequence[str],
    job: Any,
    *,
    project_root: str | None = None,
    reference_paths: Sequence[str] = (),
    strip_keys: Iterable[str] = STRIP_INTENT,
    save: bool = True,
    progress: Progress = NO_PROGRESS,
) -> list[Any]:
    """``recstore replay --match agentuse``: replay stored runs (any format) with agentuse's
    strict rules against ``job``'s candidate and store each replay with its lineage.

    Returns ``ReplayResult`` rows like :func:`recstore.replay.batch.replay_stored`.

    Raises:
        ReplaySourceError: a source agentuse refuses (mock, still running, corrupt, ...);
            nothing is replayed or stored for it, as with an external replayer.
    """
    from recstore.errors import RecstoreError
    from recstore.replay.batch import ReplayResult
    from recstore.replay.lineage import load_sources, store_replays
    from recstore.replay.replay import error_outcome, provider_for

    results = []
    for source in load_sources(store, list(run_keys)):
        recordings = source_recordings(store, source.run_key, source.record)
        try:
            root = project_root or recordings.cwd
            references = snapshot_references(reference_paths, root) if reference_paths else ()
            candidate = job.candidate_for(source.record)
            done = replay_agentuse(
                source.record,
                candidate,
                recordings,
                input_mode=job.input_mode,
                project_root=root,
                references=references,
                strip_keys=strip_keys,
            )
            outcome = done.outcome
            provider = provider_for(candidate.provider, source.record).name
        except RecstoreError as exc:
            outcome, provider = error_outcome(source.record, "strict", job.input_mode, exc), "none"
        key = None
        if save and outcome.record is not None:
            (key,) = store_replays(store, [(source, outcome.record, outcome.report, provider)])
        results.append(ReplayResult(source.run_key, key, outcome.report))
        progress.update(len(results), len(run_keys))
    return results
