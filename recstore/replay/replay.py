"""Replay a recorded run against a candidate agent (aioc §6), with recorded tool outputs.

``replay_run(source, candidate, mode)`` rebuilds the input (``inputItemCount`` → the first
request's ``messageCount`` → ``question``, or ``question`` on request), runs the candidate with
the source's context snapshot, and serves tool calls from the source's tool tape:

* ``live``: tools run for real; nothing is served;
* ``strict``: a call with no recorded output stops the run with ``REPLAY_INPUT_MISSING`` naming
  the tool and its canonical arguments; the live tool is never called and nothing is made up;
* ``hybrid``: a call with no recorded output runs the live tool.

An ``on_missing`` hook overrides the default for misses: ``"throw"``, ``"use_live"`` or
``{"action": "use_output", "output": value}`` (counted as replayed, as aioc counts it).
Policies are never bypassed: the tape is consulted only after the candidate's policy allowed the
call and its arguments passed the tool schema, and the lookup key is computed on those validated
arguments. A candidate without policies therefore denies every call (``policy_not_configured``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from recstore.canonical import canonical_json, sha256_text
from recstore.errors import InputError
from recstore.records import compare_records, input_scope
from recstore.replay.harness import Candidate, Harness, ProviderSpec
from recstore.replay.providers import OpenAIProvider, OpenAISettings, RecordedProvider
from recstore.replay.tape import ToolTape, build_tape
from recstore.runtime import (
    AgentRunError,
    Halt,
    ModelRequest,
    ModelResponse,
    PolicyInput,
    Provider,
    ScriptedProvider,
    Tool,
    error_name_of,
    run,
)

__all__ = [
    "MODES",
    "MissingToolCall",
    "ReplayInputMissingError",
    "ReplayOutcome",
    "ReplayReport",
    "ReplayStats",
    "ServedCall",
    "error_outcome",
    "provider_for",
    "replay_input",
    "replay_run",
]

Mode = Literal["live", "strict", "hybrid"]
InputMode = Literal["recorded", "question"]
MODES = ("live", "strict", "hybrid")
INPUT_MODES = ("recorded", "question")
REPORT_STATUSES = ("completed", "incomplete", "mismatch", "error")
FIDELITY_SECTIONS = ["response", "toolCalls"]


class ReplayInputMissingError(AgentRunError):
    """A strict replay asked for a tool output the source never recorded (aioc's message)."""

    error_name = "REPLAY_INPUT_MISSING"
    code = "REPLAY_INPUT_MISSING"

    def __init__(self, tool_name: str, args_hash: str, args_canonical_json: str):
        super().__init__(
            f'Missing recorded tool output for "{tool_name}". argsHash={args_hash}. '
            f"argsCanonicalJson={args_canonical_json}"
        )
        self.tool_name = tool_name
        self.args_canonical_json = args_canonical_json


class NoLiveImplementationError(AgentRunError):
    """A live or fallback call reached a tool that has no Python implementation."""

    def __init__(self, tool_name: str):
        super().__init__(f'Tool "{tool_name}" has no implementation for a live call.')


@dataclass(frozen=True)
class MissingToolCall:
    """What ``on_missing`` receives (aioc's ``onMissingToolCall`` input)."""

    mode: str
    tool_name: str
    arguments: Any
    args_canonical_json: str
    args_hash: str


OnMissing = Callable[[MissingToolCall], Any]


@dataclass
class ReplayStats:
    """aioc's ``replayStats`` plus where the input came from."""

    recordedToolCalls: int = 0
    replayedFromRecord: int = 0
    missingToolCalls: int = 0
    liveFallbackCalls: int = 0
    inputSource: str = "inputItemCount"

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class ServedCall:
    """One tool execution of the replay and how its output was obtained."""

    turn: int
    call_id: str
    agent: str
    name: str
    args_hash: str
    resolution: Literal["recorded", "use_output", "live", "missing"]
    provenance: dict | None = None  # the tape entry's source run and item indexes

    def to_json(self) -> dict:
        return {
            "turn": self.turn,
            "callId": self.call_id,
            "agent": self.agent,
            "name": self.name,
            "argsHash": self.args_hash,
            "resolution": self.resolution,
            "provenance": self.provenance,
        }


@dataclass
class ReplayReport:
    """The per-replay verdict: ``completed`` (finished like the source and equal on response and
    tool calls), ``mismatch`` (finished, but different), ``incomplete`` (the replay stopped where
    the source did not, e.g. a strict miss), ``error`` (no replay record could be produced)."""

    status: str
    reason: str | None
    source_run_id: Any
    replay_run_id: Any
    mode: str
    input_mode: str
    source_status: Any
    replay_status: Any
    source_response: Any
    replay_response: Any
    stats: ReplayStats
    calls: list[ServedCall]
    unconsumed: int
    differences: list[dict] = field(default_factory=list)
    error: dict | None = None
    usage: dict | None = None  # an HTTP provider's requests, retries and tokens (Usage.to_json)

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "reason": self.reason,
            "sourceRunId": self.source_run_id,
            "replayRunId": self.replay_run_id,
            "mode": self.mode,
            "inputMode": self.input_mode,
            "sourceStatus": self.source_status,
            "replayStatus": self.replay_status,
            "sourceResponse": self.source_response,
            "replayResponse": self.replay_response,
            "replayStats": self.stats.to_json(),
            "calls": [call.to_json() for call in self.calls],
            "unconsumedRecordedOutputs": self.unconsumed,
            "differences": self.differences,
            "error": self.error,
            "usage": self.usage,
        }

    def render(self) -> str:
        """A short human-readable report."""
        s = self.stats
        lines = [
            f"replay {self.replay_run_id} of {self.source_run_id}: {self.status.upper()}"
            + (f" ({self.reason})" if self.reason else ""),
            f"  mode {self.mode}, input {self.input_mode} ({s.inputSource}); "
            f"source {self.source_status}, replay {self.replay_status}",
            f"  tool calls: {s.recordedToolCalls} recorded, {s.replayedFromRecord} replayed, "
            f"{s.missingToolCalls} missing, {s.liveFallbackCalls} live; {self.unconsumed} recorded outputs unused",
            f"  source output: {_short(self.source_response)}",
            f"  replay output: {_short(self.replay_response)}",
        ]
        for call in self.calls:
            where = ""
            if call.provenance:
                p = call.provenance
                where = f" <- {p['sourceRunId']} items[{p['outputItemIndex']}]"
            lines.append(f"  turn {call.turn} {call.name} [{call.call_id}] {call.resolution}{where}")
        for diff in self.differences[:10]:
            lines.append(f"  differs at {diff['path']} ({diff['kind']})")
        return "\n".join(lines)


def _short(text: Any, width: int = 100) -> str:
    text = text if isinstance(text, str) else repr(text)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class ReplayOutcome:
    """What :func:`replay_run` returns. ``record`` is the replay RunRecord (``None`` only when
    the replay could not start); ``error`` is what failed the replay run, if anything."""

    record: dict | None
    stats: ReplayStats
    report: ReplayReport
    error: Exception | None
    calls: list[ServedCall]


def replay_input(source: dict, input_mode: str = "recorded") -> tuple[str | list[dict], str]:
    """The replay's input and its ``inputSource`` (§6.2)."""
    if input_mode not in INPUT_MODES:
        raise InputError(f"unknown input mode {input_mode!r} (use recorded or question)")
    question = source.get("question")
    question = question if isinstance(question, str) else ""
    if input_mode == "question":
        return question, "question"
    scope = input_scope(source)
    if scope.count is not None:
        return copy.deepcopy(source["items"][: scope.count]), scope.source
    return question, "questionFallback"


def provider_for(spec: ProviderSpec | None, source: dict) -> Provider:
    """The provider a harness asks for (``recorded`` when it names none)."""
    if spec is None or spec.kind == "recorded":
        return RecordedProvider(source)
    if spec.kind == "scripted":
        if spec.script is None:
            raise InputError("the scripted provider needs a script", path="provider.script")
        if isinstance(spec.script, list):
            return ScriptedProvider(spec.script)
        return ScriptedProvider.from_json(spec.script)
    if spec.kind == "anthropic":
        from recstore.replay.anthropic import AnthropicProvider, AnthropicSettings

        return AnthropicProvider(AnthropicSettings(
            base_url=spec.base_url or AnthropicSettings.base_url, model=spec.model,
            api_key_env=spec.api_key_env, max_tokens=spec.max_tokens, timeout=spec.timeout,
            max_retries=spec.max_retries, rate_limit_retries=spec.rate_limit_retries,
            deadline=spec.deadline))
    settings = OpenAISettings(
        base_url=spec.base_url or OpenAISettings.base_url,
        model=spec.model,
        api_key_env=spec.api_key_env,
        timeout=spec.timeout,
        max_retries=spec.max_retries,
        rate_limit_retries=spec.rate_limit_retries,
        deadline=spec.deadline,
    )
    return OpenAIProvider(settings)


class _TurnTracking:
    """Passes requests through, noting each request's turn for turn-bound guardrails."""

    def __init__(self, inner: Provider, candidate: Candidate):
        self.inner = inner
        self.name = inner.name
        self._state = candidate.turn_state

    def complete(self, request: ModelRequest) -> ModelResponse:
        self._state.turn = request.turn
        return self.inner.complete(request)


class _TapeExecutor:
    """The ``tool_executor`` of a strict or hybrid replay."""

    def __init__(self, tape: ToolTape, mode: str, stats: ReplayStats, on_missing: OnMissing | None):
        self.tape = tape
        self.mode = mode
        self.stats = stats
        self.on_missing = on_missing
        self.calls: list[ServedCall] = []

    def __call__(self, tool: Tool, arguments: Any, call: PolicyInput) -> Any:
        args_json = canonical_json(arguments)
        args_hash = sha256_text(args_json)

        def served(resolution: str, provenance: dict | None = None) -> None:
            self.calls.append(ServedCall(call.turn, call.call_id, call.agent_name, tool.name, args_hash, resolution, provenance))

        entry = self.tape.take(tool.name, args_hash)
        if entry is not None:
            self.stats.replayedFromRecord += 1
            served("recorded", entry.provenance())
            return entry.value
        self.stats.missingToolCalls += 1
        action, output = self._resolve(MissingToolCall(self.mode, tool.name, arguments, args_json, args_hash))
        if action == "use_output":
            self.stats.replayedFromRecord += 1
            served("use_output")
            return output
        if action == "use_live":
            self.stats.liveFallbackCalls += 1
            served("live")
            return _call_live(tool, arguments, call)
        served("missing")
        raise ReplayInputMissingError(tool.name, args_hash, args_json)

    def _resolve(self, missing: MissingToolCall) -> tuple[str, Any]:
        if self.on_missing is None:
            return ("use_live" if self.mode == "hybrid" else "throw"), None
        resolution = self.on_missing(missing)
        if isinstance(resolution, str) and resolution in ("throw", "use_live"):
            return resolution, None
        if isinstance(resolution, dict) and resolution.get("action") in ("throw", "use_live", "use_output"):
            return resolution["action"], resolution.get("output")
        raise InputError(
            f"on_missing returned {resolution!r}; expected 'throw', 'use_live' or "
            "{'action': 'use_output', 'output': ...}"
        )


def _call_live(tool: Tool, arguments: Any, call: PolicyInput) -> Any:
    if tool.func is None:
        raise NoLiveImplementationError(tool.name)
    return tool.func(arguments, call.context)


def _live_executor(calls: list[ServedCall]) -> Callable[[Tool, Any, PolicyInput], Any]:
    def execute(tool: Tool, arguments: Any, call: PolicyInput) -> Any:
        args_hash = sha256_text(canonical_json(arguments))
        calls.append(ServedCall(call.turn, call.call_id, call.agent_name, tool.name, args_hash, "live"))
        return _call_live(tool, arguments, call)

    return execute


def _report_status(source: dict, record: dict, equal: bool) -> tuple[str, str | None]:
    source_failed = source.get("status") == "failed"
    replay_failed = record.get("status") == "failed"
    failure = f"{record.get('errorName')}: {record.get('errorMessage')}" if replay_failed else None
    if replay_failed and (not source_failed or not equal):
        return "incomplete", failure
    if not replay_failed and source_failed:
        return "mismatch", "the source run failed; the replay completed"
    if not equal:
        return "mismatch", "response or tool calls differ from the source"
    return "completed", None


def replay_run(
    source_record: dict,
    candidate: Candidate | Harness,
    mode: str = "strict",
    input_mode: str = "recorded",
    on_missing: OnMissing | None = None,
    metadata_overrides: dict | None = None,
    *,
    provider: Provider | None = None,
    context: Any = None,
    run_id: str | None = None,
    clock: Callable[[], str] | None = None,
    tool_executor: Callable[[Tool, Any, PolicyInput], Any] | None = None,
    input_override: tuple[str | list[dict], str] | None = None,
    envelope_outputs: bool = True,
    halt: Halt | None = None,
) -> ReplayOutcome:
    """Replay ``source_record`` (JSON form) against ``candidate`` in ``mode``.

    ``provider`` overrides the candidate's provider settings (default: the ``recorded``
    provider). ``context`` overrides the source's ``contextSnapshot``. ``tool_executor`` replaces
    the aioc tape in strict/hybrid mode (other matching rules, e.g. agentuse's). ``input_override``
    replaces the rebuilt input with ``(input, inputSource)``; ``envelope_outputs`` and ``halt``
    go to :func:`recstore.runtime.run`. The replay record's ``metadata`` is
    ``{replayOfRunId, harness, **metadata_overrides}``.
    """
    if mode not in MODES:
        raise InputError(f"unknown replay mode {mode!r} (use live, strict or hybrid)")
    built = candidate.build() if isinstance(candidate, Harness) else candidate
    replay_in, input_source = input_override or replay_input(source_record, input_mode)
    rules = built.tape_rules
    tape = build_tape(source_record, rules)
    stats = ReplayStats(recordedToolCalls=tape.recorded_tool_calls, inputSource=input_source)
    calls: list[ServedCall] = []
    if mode == "live":
        executor = _live_executor(calls)
    elif tool_executor is not None:
        executor = tool_executor
    else:
        tape_executor = _TapeExecutor(tape, mode, stats, on_missing)
        calls = tape_executor.calls
        executor = tape_executor
    model = _TurnTracking(provider or provider_for(built.provider, source_record), built)
    usage = getattr(model.inner, "usage", None)
    if context is None:
        snapshot = source_record.get("contextSnapshot")
        context = copy.deepcopy(snapshot) if snapshot is not None else {}
    metadata: dict = {"replayOfRunId": source_record.get("runId")}
    if built.harness:
        metadata["harness"] = built.harness
    metadata.update(metadata_overrides or {})
    result = run(
        built.entry,
        replay_in,
        provider=model,
        context=context,
        max_turns=built.max_turns,
        policies=built.policies,
        run_id=run_id,
        metadata=metadata,
        include_prompt_text=built.include_prompt_text,
        clock=clock,
        tool_executor=executor,
        envelope_outputs=envelope_outputs,
        halt=halt,
    )
    record = result.record
    comparison = compare_records(source_record, record, include_sections=FIDELITY_SECTIONS)
    status, reason = _report_status(source_record, record, comparison["equal"])
    error = None
    if result.error is not None:
        error = {
            "name": error_name_of(result.error),
            "message": str(result.error),
            "code": getattr(result.error, "code", None),
        }
    report = ReplayReport(
        status=status,
        reason=reason,
        source_run_id=source_record.get("runId"),
        replay_run_id=record.get("runId"),
        mode=mode,
        input_mode=input_mode,
        source_status=source_record.get("status"),
        replay_status=record.get("status"),
        source_response=source_record.get("response"),
        replay_response=record.get("response"),
        stats=stats,
        calls=calls,
        unconsumed=len(tape) if mode != "live" else 0,
        differences=comparison["differences"],
        error=error,
        usage=usage.to_json() if usage is not None else None,
    )
    return ReplayOutcome(record=record, stats=stats, report=report, error=result.error, calls=calls)


def error_outcome(source_record: dict, mode: str, input_mode: str, exc: Exception) -> ReplayOutcome:
    """The outcome of a replay that could not start (bad harness, missing API key, ...)."""
    stats = ReplayStats()
    report = ReplayReport(
        status="error",
        reason=str(exc),
        source_run_id=source_record.get("runId"),
        replay_run_id=None,
        mode=mode,
        input_mode=input_mode,
        source_status=source_record.get("status"),
        replay_status=None,
        source_response=source_record.get("response"),
        replay_response=None,
        stats=stats,
        calls=[],
        unconsumed=0,
        error={"name": error_name_of(exc), "message": str(exc), "code": None},
    )
    return ReplayOutcome(record=None, stats=stats, report=report, error=exc, calls=[])
