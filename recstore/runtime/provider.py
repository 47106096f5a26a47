"""The model side of the loop: a small ``Provider`` protocol and ``ScriptedProvider``.

A provider gets one ``ModelRequest`` per turn and answers with a ``ModelResponse``: final text, or
tool calls (then any text is discarded, as aioc does). ``name`` becomes the record's
``providerName`` and every fingerprint's ``providerName``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from recstore.canonical import loads_strict
from recstore.errors import InputError

__all__ = [
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ProviderFailure",
    "ProviderToolCall",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "ScriptedProviderError",
    "response_from_data",
]


@dataclass(frozen=True)
class ProviderToolCall:
    """One tool call as the model emitted it. ``arguments`` is the raw argument string, kept
    untouched in ``rawItem.arguments``; the loop parses it like aioc (blank → ``{}``, invalid JSON
    → ``{"__raw": s}``)."""

    call_id: str
    name: str
    arguments: str = ""


@dataclass(frozen=True)
class ModelResponse:
    """A model's answer to one request."""

    text: str | None = None
    tool_calls: list[ProviderToolCall] = field(default_factory=list)


@dataclass(frozen=True)
class ModelRequest:
    """Everything a model sees for one turn (what the request fingerprint hashes).

    ``messages`` is the history at request time (``items[:messageCount]``); do not mutate it.
    ``tools`` are ``{name, description, parameters}`` dicts: the agent's tools, then its enabled
    handoff tools.
    """

    agent_name: str
    model: str
    system_prompt: str
    messages: Sequence[dict]
    tools: list[dict]
    model_settings: dict
    turn: int


@runtime_checkable
class Provider(Protocol):
    """A model. ``name`` is recorded as ``providerName``."""

    name: str

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request; raising fails the run with that error."""
        ...


class ScriptExhaustedError(Exception):
    """A ``ScriptedProvider`` was asked for more turns than its script has."""


@dataclass(frozen=True)
class ProviderFailure:
    """A scripted turn on which the model call fails (a timeout, a dropped stream): the provider
    raises ``ScriptedProviderError`` and the record says ``errorName = name``."""

    name: str
    message: str


class ScriptedProviderError(Exception):
    """The failure a ``ProviderFailure`` turn raises; ``error_name`` is the scripted name."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.error_name = name


def _raw_arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def response_from_data(turn: Any, where: str = "turn") -> ModelResponse | ProviderFailure:
    """A ``ModelResponse`` (or ``ProviderFailure``) from JSON data.

    Accepted shapes: a string (final text), ``{"text": ...}``, ``{"tool_calls": [{"call_id"
    (or "id"), "name", "arguments"}], "text"?: ...}``, or ``{"error": {"name", "message"}}``.
    ``arguments`` is the raw string, or any JSON value (serialized compactly).
    """
    if isinstance(turn, (ModelResponse, ProviderFailure)):
        return turn
    if isinstance(turn, str):
        return ModelResponse(text=turn)
    if not isinstance(turn, dict):
        raise InputError(f"expected a string or an object, got {type(turn).__name__}", path=where)
    if "error" in turn:
        error = turn["error"]
        if not isinstance(error, dict) or not isinstance(error.get("name"), str):
            raise InputError("error needs a string name", path=f"{where}.error")
        return ProviderFailure(error["name"], str(error.get("message", "")))
    text = turn.get("text")
    if text is not None and not isinstance(text, str):
        raise InputError("text must be a string", path=f"{where}.text")
    calls = []
    for i, call in enumerate(turn.get("tool_calls") or []):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise InputError("a tool call needs a string name", path=f"{where}.tool_calls[{i}]")
        call_id = call.get("call_id", call.get("id", f"call_{i}"))
        calls.append(ProviderToolCall(str(call_id), call["name"], _raw_arguments(call.get("arguments", ""))))
    return ModelResponse(text=text, tool_calls=calls)


class ScriptedProvider:
    """A model that plays back a script, one entry per request.

    ``script`` is either a list of turns (``ModelResponse`` objects or the JSON shapes
    ``response_from_data`` accepts) or a callable ``(request) -> turn`` for generators.
    """

    def __init__(
        self,
        script: Sequence[Any] | Callable[[ModelRequest], Any],
        *,
        name: str = "ScriptedProvider",
    ):
        self.name = name
        self._next: Callable[[ModelRequest], Any]
        if callable(script):
            self._next = script
        else:
            turns = [response_from_data(t, f"$[{i}]") for i, t in enumerate(script)]
            position = iter(turns)

            def next_turn(request: ModelRequest) -> ModelResponse | ProviderFailure:
                try:
                    return next(position)
                except StopIteration:
                    raise ScriptExhaustedError(
                        f"script has {len(turns)} turns; turn {request.turn} was requested"
                    ) from None

            self._next = next_turn

    @classmethod
    def from_json(cls, source: str | Path, *, name: str = "ScriptedProvider") -> ScriptedProvider:
        """Load a script from a JSON file path, or from JSON text if ``source`` starts with ``[``."""
        text = source if isinstance(source, str) and source.lstrip().startswith("[") else None
        label = "script"
        if text is None:
            label = str(source)
            try:
                text = Path(source).read_text(encoding="utf-8")
            except OSError as exc:
                raise InputError(f"cannot read script: {exc.strerror}", source=label) from None
        try:
            data = loads_strict(text)
        except ValueError as exc:
            raise InputError(str(exc), source=label) from None
        if not isinstance(data, list):
            raise InputError("a script must be a JSON array of turns", source=label, path="$")
        return cls(data, name=name)

    def complete(self, request: ModelRequest) -> ModelResponse:
        """The next scripted turn (raising ``ScriptedProviderError`` on a failure turn)."""
        turn = response_from_data(self._next(request))
        if isinstance(turn, ProviderFailure):
            raise ScriptedProviderError(turn.name, turn.message)
        return turn
