"""Model providers for replays: ``recorded``, ``scripted`` and ``openai``.

All follow :class:`recstore.runtime.provider.Provider` (``name`` plus
``complete(ModelRequest) -> ModelResponse``), so another provider is one small class.

* :class:`RecordedProvider` plays back the source run's model turns request by request: the tool
  calls of each request's output interval with their raw argument strings
  (``rawItem.arguments``), and the final text.
* ``scripted`` is :class:`recstore.runtime.provider.ScriptedProvider` (a JSON list of turns).
* :class:`OpenAIProvider` talks to any OpenAI-compatible chat-completions endpoint with the
  standard library only; the API key comes from an environment variable and is never logged.
"""

from __future__ import annotations

import http.client
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from recstore.errors import InputError
from recstore.jsonout import dumps
from recstore.records import input_scope
from recstore.records import requests as record_requests
from recstore.runtime.errors import AgentRunError
from recstore.runtime.provider import ModelRequest, ModelResponse, ProviderToolCall

__all__ = [
    "OpenAIProvider",
    "OpenAISettings",
    "ProviderError",
    "RecordedProvider",
    "RecordedRequest",
    "recorded_requests",
    "recorded_turns",
]


class ProviderError(AgentRunError):
    """A provider could not answer; the replay run fails with this error."""


class RecordedProviderError(AgentRunError):
    """The source run ended with a provider failure at this request; replaying it fails the same
    way, under the source's ``errorName``."""

    def __init__(self, error_name: str, message: str):
        super().__init__(message)
        self.error_name = error_name


# Failures the runtime itself raises; any other errorName on a source whose last request emitted
# nothing came from the provider (stream errors, timeouts, connection resets).
_RUNTIME_ERROR_NAMES = frozenset(
    {
        "ToolCallPolicyDeniedError",
        "ToolCallApprovalRequiredError",
        "HandoffPolicyDeniedError",
        "HandoffApprovalRequiredError",
        "OutputGuardrailTripwireTriggered",
        "MaxTurnsExceededError",
        "ToolCallError",
        "ZodError",
    }
)


def _raw_arguments(item: dict) -> str:
    raw = item.get("rawItem")
    if isinstance(raw, dict) and isinstance(raw.get("arguments"), str):
        return raw["arguments"]
    if "arguments" not in item:
        return ""  # parses back to {} like extract's missing-arguments rule
    return json.dumps(item["arguments"], ensure_ascii=False, separators=(",", ":"))


def _interval_response(interval: list) -> ModelResponse:
    calls = [
        ProviderToolCall(str(item.get("callId")), str(item.get("name")), _raw_arguments(item))
        for item in interval
        if isinstance(item, dict) and item.get("type") == "tool_call_item"
    ]
    texts = [
        item.get("content")
        for item in interval
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") == "assistant"
    ]
    text = texts[-1] if texts and isinstance(texts[-1], str) else None
    return ModelResponse(text=text, tool_calls=calls)


@dataclass(frozen=True)
class RecordedRequest:
    """One model request of a source run: its turn, agent, model and output item interval."""

    turn: Any
    agent: Any
    model: Any
    start: int
    end: int


def recorded_requests(source: dict) -> list[RecordedRequest]:
    """The source's model requests with their output intervals (§8.2).

    A record without request fingerprints (hand-written or converted) gets one request per run
    of emitted tool calls — the assistant text that closes a run opens the next request — and a
    last one for the rest; without an input scope nothing counts as emitted.
    """
    reqs = record_requests(source)
    if reqs:
        return [RecordedRequest(r.turn, r.agent, r.model, r.output_start, r.output_end) for r in reqs]
    items = source.get("items") or []
    scope = input_scope(source).count
    start = len(items) if scope is None else scope
    agent, model = source.get("agentName"), source.get("model")
    out: list[RecordedRequest] = []
    has_calls = False
    for index in range(start, len(items)):
        item = items[index] if isinstance(items[index], dict) else {}
        if item.get("type") == "tool_call_item":
            has_calls = True
        elif has_calls and item.get("type") == "message" and item.get("role") == "assistant":
            out.append(RecordedRequest(len(out) + 1, agent, model, start, index))
            start, has_calls = index, False
    out.append(RecordedRequest(len(out) + 1, agent, model, start, len(items)))
    return out


def recorded_turns(source: dict) -> list[ModelResponse | RecordedProviderError]:
    """The model turns of a source record, one per request (see :class:`RecordedProvider`)."""
    items = source.get("items") or []
    completed = source.get("status") == "completed"
    reqs = recorded_requests(source)
    turns: list[ModelResponse | RecordedProviderError] = []
    for position, req in enumerate(reqs):
        last = position == len(reqs) - 1
        turn = _interval_response(items[req.start : req.end])
        if last and completed and not turn.tool_calls:
            # `response` is the run's final text even when the message item was edited away.
            turn = ModelResponse(text=source.get("response") or "")
        elif last and not completed and not turn.tool_calls and turn.text is None:
            error_name = source.get("errorName") or "Error"
            if error_name not in _RUNTIME_ERROR_NAMES:
                turns.append(RecordedProviderError(error_name, source.get("errorMessage") or ""))
                continue
            turn = ModelResponse(text="")  # a guardrail trip: the checked text was not recorded
        turns.append(turn)
    if completed and turns and isinstance(turns[-1], ModelResponse) and turns[-1].tool_calls:
        # Synthesized requests of a completed run: the final answer is one more request.
        turns.append(ModelResponse(text=source.get("response") or ""))
    return turns


class RecordedProvider:
    """Replays a source run's model turns: request *t* of the replay gets the source's request *t*.

    A request the source never made (the candidate took a different path) fails the run with
    :class:`ProviderError`; a source that failed inside the provider fails at the same request
    under the same ``errorName``.
    """

    name = "RecordedProvider"

    def __init__(self, source: dict):
        self._turns = recorded_turns(source)
        self._run_id = source.get("runId")

    def complete(self, request: ModelRequest) -> ModelResponse:
        index = request.turn - 1
        if not 0 <= index < len(self._turns):
            raise ProviderError(
                f"recorded provider: source run {self._run_id} has {len(self._turns)} model "
                f"request(s); request {request.turn} was asked for"
            )
        turn = self._turns[index]
        if isinstance(turn, RecordedProviderError):
            raise RecordedProviderError(turn.error_name, str(turn))
        return turn


# --- OpenAI-compatible chat completions -------------------------------------------------------

_MODEL_SETTING_KEYS = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "stop",
    "parallel_tool_calls",
    "tool_choice",
)
# aioc camelCase settings and their chat-completions names.
_SETTING_ALIASES = {
    "topP": "top_p",
    "maxTokens": "max_tokens",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
    "parallelToolCalls": "parallel_tool_calls",
    "toolChoice": "tool_choice",
}


@dataclass(frozen=True)
class OpenAISettings:
    """Where and how to call a chat-completions endpoint."""

    base_url: str = "https://api.openai.com/v1"
    model: str | None = None  # overrides the agent's model when set
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 3
    backoff: float = 0.5  # first retry delay in seconds; doubles each retry
    max_backoff: float = 8.0


def _as_tool_message(item: dict) -> dict:
    output = item.get("output")
    content = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    return {"role": "tool", "tool_call_id": str(item.get("callId")), "content": content}


def chat_messages(system_prompt: str, history: Any) -> list[dict]:
    """Chat-completions messages for a system prompt and an aioc item history.

    Consecutive tool calls become one assistant message with ``tool_calls``; outputs become
    ``tool`` messages; other item types are skipped.
    """
    messages: list[dict] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    for item in history:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            content = item.get("content")
            messages.append({"role": item.get("role", "user"), "content": content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)})
        elif kind == "tool_call_item":
            call = {
                "id": str(item.get("callId")),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": _raw_arguments(item)},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "tool_call_output_item":
            messages.append(_as_tool_message(item))
    return messages


def _settings_payload(model_settings: dict) -> dict:
    payload = {}
    for key, value in (model_settings or {}).items():
        name = _SETTING_ALIASES.get(key, key)
        if name in _MODEL_SETTING_KEYS:
            payload[name] = value
    return payload


class OpenAIProvider:
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Retries 429 and 5xx answers and timeouts up to ``max_retries`` times with exponential backoff
    (honouring ``Retry-After``); anything else fails at once with the server's error message.
    """

    name = "OpenAIProvider"

    def __init__(
        self,
        settings: OpenAISettings | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.settings = settings or OpenAISettings()
        self._sleep = sleep
        self._api_key: str | None = None
        env = self.settings.api_key_env
        if env:
            key = os.environ.get(env)
            if not key:
                raise InputError(
                    f"environment variable {env} is not set (the openai provider reads its API key from it)",
                    source="provider openai",
                )
            self._api_key = key
        self._url = self.settings.base_url.rstrip("/") + "/chat/completions"

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIProvider(base_url={self.settings.base_url!r}, model={self.settings.model!r})"

    def payload(self, request: ModelRequest) -> dict:
        """The JSON body sent for ``request``."""
        body: dict[str, Any] = {
            "model": self.settings.model or request.model,
            "messages": chat_messages(request.system_prompt, request.messages),
        }
        if request.tools:
            body["tools"] = [{"type": "function", "function": dict(tool)} for tool in request.tools]
        body.update(_settings_payload(request.model_settings))
        return body

    def complete(self, request: ModelRequest) -> ModelResponse:
        body = dumps(self.payload(request), indent=None).encode("utf-8")
        answer = self._post_with_retries(body)
        return _parse_completion(answer, self._url)

    def _post_with_retries(self, body: bytes) -> Any:
        attempt = 0
        while True:
            try:
                return self._post(body)
            except _Retryable as exc:
                if attempt >= self.settings.max_retries:
                    raise ProviderError(
                        f"openai provider: {exc} from {self._url} (gave up after {attempt + 1} attempts)"
                    ) from None
                delay = exc.retry_after
                if delay is None:
                    delay = min(self.settings.backoff * (2**attempt), self.settings.max_backoff)
                self._sleep(delay)
                attempt += 1

    def _post(self, body: bytes) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        req = urllib.request.Request(self._url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.settings.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = _error_detail(exc)
            if exc.code == 429 or exc.code >= 500:
                raise _Retryable(f"HTTP {exc.code}{detail}", _retry_after(exc)) from None
            raise ProviderError(f"openai provider: HTTP {exc.code}{detail} from {self._url}") from None
        except TimeoutError:
            raise _Retryable(f"timed out after {self.settings.timeout:g}s", None) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                raise _Retryable(f"timed out after {self.settings.timeout:g}s", None) from None
            raise ProviderError(f"openai provider: cannot reach {self._url}: {exc.reason}") from None
        except (http.client.HTTPException, ConnectionError) as exc:
            raise _Retryable(f"connection failed ({type(exc).__name__})", None) from None
        try:
            return json.loads(raw)
        except ValueError:
            raise ProviderError(f"openai provider: {self._url} answered with invalid JSON") from None


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None):
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(exc: urllib.error.HTTPError) -> float | None:
    value = exc.headers.get("Retry-After") if exc.headers else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        data = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return ""
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return f": {message}" if isinstance(message, str) and message else ""


def _parse_completion(answer: Any, url: str) -> ModelResponse:
    try:
        message = answer["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ProviderError(f"openai provider: {url} answered without choices[0].message") from None
    calls = []
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(ProviderToolCall(str(call.get("id") or f"call_{index}"), str(function.get("name", "")), arguments))
    content = message.get("content")
    return ModelResponse(text=content if isinstance(content, str) else None, tool_calls=calls)
