"""The ``anthropic`` provider: a model behind the Anthropic Messages API (``POST /v1/messages``).

The runtime's history maps onto Messages blocks: user and assistant messages become text
content, the tool calls of a turn become the assistant's ``tool_use`` blocks (``id`` = the call
id, ``input`` = the parsed arguments), their outputs the next user message's ``tool_result``
blocks; adjacent messages of one role are merged, since the API wants the roles to alternate.
An answer's ``tool_use`` blocks become the runtime's tool calls (arguments as compact JSON), its
text blocks the final text. Requests go through the same pooled client, adaptive limits and
retries as the openai provider (:mod:`recstore.replay.endpoints`); ``usage.input_tokens`` and
``output_tokens`` are kept as prompt and completion tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from recstore.replay.endpoints import ProviderError, RetryPolicy
from recstore.replay.providers import HTTPModel, _raw_arguments, api_key_from
from recstore.runtime.provider import ModelRequest, ModelResponse, ProviderToolCall

__all__ = ["ANTHROPIC_VERSION", "AnthropicProvider", "AnthropicSettings", "messages_payload"]

ANTHROPIC_VERSION = "2023-06-01"
# aioc model settings and their Messages names.
_SETTINGS = {"temperature": "temperature", "top_p": "top_p", "topP": "top_p", "top_k": "top_k",
             "stop": "stop_sequences", "stop_sequences": "stop_sequences",
             "max_tokens": "max_tokens", "maxTokens": "max_tokens", "tool_choice": "tool_choice"}


@dataclass(frozen=True)
class AnthropicSettings:
    """Where and how to call the Messages API (``max_tokens`` is required by the API)."""

    base_url: str = "https://api.anthropic.com/v1"
    model: str | None = None  # overrides the agent's model when set
    api_key_env: str | None = "ANTHROPIC_API_KEY"
    max_tokens: int = 1024
    timeout: float = 60.0
    max_retries: int = 3
    rate_limit_retries: int = 10
    deadline: float | None = None


def _arguments_object(text: str) -> Any:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"__raw": text}
    return value if isinstance(value, dict) else {"__raw": text}


def _output_text(output: Any) -> str:
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


def _block_for(item: dict) -> tuple[str, dict] | None:
    """(role, content block) for one history item, or None for items the model does not see."""
    kind = item.get("type")
    if kind == "message":
        content = item.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        return item.get("role", "user"), {"type": "text", "text": text}
    if kind == "tool_call_item":
        return "assistant", {"type": "tool_use", "id": str(item.get("callId")),
                             "name": item.get("name"),
                             "input": _arguments_object(_raw_arguments(item))}
    if kind == "tool_call_output_item":
        return "user", {"type": "tool_result", "tool_use_id": str(item.get("callId")),
                        "content": _output_text(item.get("output"))}
    return None


def messages_payload(system_prompt: str, history: Sequence[dict]) -> tuple[str, list[dict]]:
    """The ``system`` text and ``messages`` list for a system prompt and an aioc history."""
    system = [system_prompt] if system_prompt else []
    messages: list[dict] = []
    for item in history:
        mapped = _block_for(item) if isinstance(item, dict) else None
        if mapped is None:
            continue
        role, block = mapped
        if role == "system":
            system.append(block["text"])
            continue
        if role not in ("user", "assistant"):
            role = "user"
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].append(block)
        else:
            messages.append({"role": role, "content": [block]})
    return "\n\n".join(system), messages


class AnthropicProvider(HTTPModel):
    """A model behind the Anthropic Messages API (see the module docstring)."""

    name = "AnthropicProvider"
    kind = "anthropic"

    def __init__(self, settings: AnthropicSettings | None = None, *,
                 sleep: Callable[[float], None] | None = None):
        self.settings = settings or AnthropicSettings()
        s = self.settings
        super().__init__(s.base_url, api_key_from(s.api_key_env, self.kind),
                         RetryPolicy(s.timeout, s.max_retries, s.rate_limit_retries),
                         s.deadline, sleep)
        self._url = s.base_url.rstrip("/") + "/messages"

    def __repr__(self) -> str:  # never show the key
        return f"AnthropicProvider(base_url={self.settings.base_url!r}, model={self.settings.model!r})"

    def payload(self, request: ModelRequest) -> dict:
        """The JSON body sent for ``request``."""
        system, messages = messages_payload(request.system_prompt, request.messages)
        body: dict[str, Any] = {"model": self.settings.model or request.model,
                                "max_tokens": self.settings.max_tokens, "messages": messages}
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [{"name": t.get("name"), "description": t.get("description") or "",
                              "input_schema": t.get("parameters") or {"type": "object"}}
                             for t in request.tools]
        for key, value in (request.model_settings or {}).items():
            if key in _SETTINGS:
                body[_SETTINGS[key]] = value
        return body

    def complete(self, request: ModelRequest) -> ModelResponse:
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        answer = self._post(self._url, headers, self.payload(request))
        usage = answer.get("usage") if isinstance(answer, dict) else None
        if isinstance(usage, dict):
            self.usage.add_tokens(usage.get("input_tokens"), usage.get("output_tokens"))
        return _parse_message(answer, self._url)


def _parse_message(answer: Any, url: str) -> ModelResponse:
    content = answer.get("content") if isinstance(answer, dict) else None
    if not isinstance(content, list):
        raise ProviderError(f"anthropic provider: {url} answered without a content list")
    calls, texts = [], []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use":
            arguments = json.dumps(block.get("input", {}), ensure_ascii=False, separators=(",", ":"))
            calls.append(ProviderToolCall(str(block.get("id") or f"toolu_{index}"),
                                          str(block.get("name", "")), arguments))
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
    return ModelResponse(text="".join(texts) if texts else None, tool_calls=calls)
