"""Model providers for replays: ``recorded``, ``scripted`` and ``openai``.

All follow :class:`recstore.runtime.provider.Provider` (``name`` plus
``complete(ModelRequest) -> ModelResponse``), so another provider is one small class.

* :class:`RecordedProvider` plays back the source run's model turns request by request: the tool
  calls of each request's output interval with their raw argument strings
  (``rawItem.arguments``), and the final text.
* ``scripted`` is :class:`recstore.runtime.provider.ScriptedProvider` (a JSON list of turns).
* :class:`OpenAIProvider` talks to any OpenAI-compatible chat-completions endpoint, and
  :class:`recstore.replay.anthropic.AnthropicProvider` to the Anthropic Messages API, both over
  the pooled, rate-limited clients of :mod:`recstore.replay.endpoints`; the API key comes from an
  environment variable and is never logged.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from recstore.errors import InputError
from recstore.jsonout import dumps
from recstore.records import input_scope
from recstore.records import requests as record_requests
from recstore.replay.endpoints import ProviderError, RetryPolicy, Usage, endpoint_for, post_json
from recstore.runtime.errors import AgentRunError
from recstore.runtime.provider import ModelRequest, ModelResponse, ProviderToolCall

__all__ = [
    "HTTPModel",
    "OpenAIProvider",
    "OpenAISettings",
    "ProviderError",
    "RecordedProvider",
    "RecordedRequest",
    "recorded_requests",
    "recorded_turns",
]


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
    """Where and how to call a chat-completions endpoint. ``timeout`` bounds each request,
    ``deadline`` (seconds, None: none) the whole run's model requests, retries included."""

    base_url: str = "https://api.openai.com/v1"
    model: str | None = None  # overrides the agent's model when set
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout: float = 60.0
    max_retries: int = 3
    rate_limit_retries: int = 10
    deadline: float | None = None
    backoff: float = 0.5  # first retry delay in seconds; doubles each retry
    max_backoff: float = 8.0

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.timeout, self.max_retries, self.rate_limit_retries,
                           self.backoff, self.max_backoff)


def api_key_from(env: str | None, kind: str) -> str | None:
    """The API key in the environment variable ``env`` (None when ``env`` is None or empty)."""
    if not env:
        return None
    key = os.environ.get(env)
    if not key:
        raise InputError(
            f"environment variable {env} is not set (the {kind} provider reads its API key from it)",
            source=f"provider {kind}",
        )
    return key


class HTTPModel:
    """What the HTTP providers share: the pooled endpoint, retries, the run deadline and the
    run's token usage (``usage``, kept with the replay)."""

    kind = "http"

    def __init__(self, base_url: str, api_key: str | None, policy: RetryPolicy,
                 deadline: float | None, sleep: Callable[[float], None] | None):
        self.usage = Usage()
        self._base_url = base_url
        self._api_key = api_key
        self._policy = policy
        self._deadline_seconds = deadline
        self._deadline: float | None = None  # set at the run's first request
        self._sleep = sleep
        self._endpoint = None

    def _post(self, url: str, headers: dict[str, str], body: dict) -> Any:
        if self._deadline is None and self._deadline_seconds is not None:
            self._deadline = time.monotonic() + self._deadline_seconds
        if self._endpoint is None:
            self._endpoint = endpoint_for(self._base_url, self._api_key)
        return post_json(self._endpoint, url, headers,
                         dumps(body, indent=None).encode("utf-8"), policy=self._policy,
                         usage=self.usage, who=f"{self.kind} provider", deadline=self._deadline,
                         error_detail=_error_message, sleep=self._sleep)


def _error_message(data: Any) -> str:
    """The server's message in an error body (OpenAI's and Anthropic's ``error.message``)."""
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return message if isinstance(message, str) else ""


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


class OpenAIProvider(HTTPModel):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Retries 429 and 5xx answers, timeouts and dropped connections (honouring the server's
    delay headers; see :mod:`recstore.replay.endpoints`); anything else fails at once with the
    server's error message. Each answer's ``usage`` is added to :attr:`usage`.
    """

    name = "OpenAIProvider"
    kind = "openai"

    def __init__(
        self,
        settings: OpenAISettings | None = None,
        *,
        sleep: Callable[[float], None] | None = None,
    ):
        self.settings = settings or OpenAISettings()
        key = api_key_from(self.settings.api_key_env, self.kind)
        super().__init__(self.settings.base_url, key, self.settings.retry_policy(),
                         self.settings.deadline, sleep)
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
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        answer = self._post(self._url, headers, self.payload(request))
        usage = answer.get("usage") if isinstance(answer, dict) else None
        if isinstance(usage, dict):
            self.usage.add_tokens(usage.get("prompt_tokens"), usage.get("completion_tokens"),
                                  usage.get("total_tokens"))
        return _parse_completion(answer, self._url)


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
