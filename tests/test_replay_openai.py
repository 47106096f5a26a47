"""The ``openai`` provider against a real chat-completions HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from recstore.errors import InputError
from recstore.replay import OpenAIProvider, OpenAISettings, replay_run
from recstore.replay.harness import Candidate
from recstore.runtime import Agent, ModelRequest, Policies, Tool

KEY = "sk-test-secret-value"
ALLOW = Policies(tool=lambda p: {"decision": "allow", "reason": "ok"})


class ChatServer:
    """Answers POST /v1/chat/completions from a queue of planned replies and keeps requests."""

    def __init__(self):
        self.replies: list[tuple[int, dict, float, dict]] = []
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length))
                server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                status, payload, delay, headers = server.replies.pop(0)
                if delay:
                    time.sleep(delay)
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def reply(self, status=200, payload=None, *, delay=0.0, headers=None):
        self.replies.append((status, payload or {}, delay, headers or {}))

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("RECSTORE_TEST_KEY", KEY)
    srv = ChatServer()
    yield srv
    srv.close()


def completion(content=None, tool_calls=None):
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"id": "cmpl", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def provider(server, sleeps=None, **settings):
    options = {"base_url": server.base_url, "api_key_env": "RECSTORE_TEST_KEY", "timeout": 5.0, "max_retries": 2}
    options.update(settings)
    return OpenAIProvider(OpenAISettings(**options), sleep=(sleeps.append if sleeps is not None else lambda s: None))


def request(turn=1):
    return ModelRequest("A", "gpt-test", "Be brief.", [{"type": "message", "role": "user", "content": "hi"}],
                        [], {"temperature": 0}, turn)


def test_replay_with_tool_calls_and_a_final_answer(server):
    server.reply(payload=completion(tool_calls=[{"id": "call_1", "type": "function",
                                                 "function": {"name": "lookup", "arguments": "{\"id\":\"7\"}"}}]))
    server.reply(payload=completion(content="Found 7."))
    ok = {"status": "ok", "code": None, "publicReason": None, "data": {"id": "7", "source": "recorded"}}
    source = {"runId": "src", "status": "completed", "agentName": "A", "question": "find 7", "response": "x",
              "contextSnapshot": {}, "items": [
                  {"type": "message", "role": "user", "content": "find 7"},
                  {"type": "tool_call_item", "callId": "r1", "name": "lookup", "arguments": {"id": "7"},
                   "rawItem": {"type": "function_call", "id": "r1", "name": "lookup", "arguments": "{\"id\":\"7\"}"}},
                  {"type": "tool_call_output_item", "callId": "r1", "output": ok}],
              "inputItemCount": 1, "promptSnapshots": [], "requestFingerprints": [], "policyDecisions": []}
    lookup = Tool("lookup", "Find a record.", {"type": "object", "properties": {"id": {"type": "string"}},
                                               "required": ["id"], "additionalProperties": False})
    agent = Agent("A", "Be brief.", model="gpt-test", model_settings={"temperature": 0}, tools=[lookup])
    outcome = replay_run(source, Candidate(agent, policies=ALLOW), "strict", provider=provider(server))
    record = outcome.record
    assert record["status"] == "completed" and record["response"] == "Found 7."
    assert record["providerName"] == "OpenAIProvider"
    assert record["items"][2]["output"] == ok
    first, second = (r["body"] for r in server.requests)
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert server.requests[0]["auth"] == f"Bearer {KEY}"
    assert first["model"] == "gpt-test" and first["temperature"] == 0
    assert first["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "find 7"}]
    assert first["tools"][0]["function"]["name"] == "lookup"
    assert second["messages"][2]["tool_calls"][0]["function"] == {"name": "lookup", "arguments": "{\"id\":\"7\"}"}
    assert second["messages"][3]["role"] == "tool" and json.loads(second["messages"][3]["content"]) == ok
    text = json.dumps(record) + json.dumps(outcome.report.to_json()) + repr(provider(server))
    assert KEY not in text


def test_429_then_success_is_retried_with_retry_after(server):
    server.reply(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "0.25"})
    server.reply(payload=completion(content="done"))
    sleeps: list[float] = []
    answer = provider(server, sleeps).complete(request())
    assert answer.text == "done" and answer.tool_calls == []
    assert len(server.requests) == 2
    assert sleeps == [0.25]


def test_500_is_retried_with_backoff_then_fails_clearly(server):
    for _ in range(3):
        server.reply(500, {"error": {"message": "upstream broke"}})
    sleeps: list[float] = []
    with pytest.raises(Exception) as info:
        provider(server, sleeps, max_retries=2).complete(request())
    message = str(info.value)
    assert type(info.value).__name__ == "ProviderError"
    assert "HTTP 500: upstream broke" in message and server.base_url in message and "3 attempts" in message
    assert KEY not in message
    assert sleeps == [0.5, 1.0]
    assert len(server.requests) == 3


def test_timeout_fails_after_retries(server):
    server.reply(payload=completion(content="late"), delay=1.0)
    server.reply(payload=completion(content="late"), delay=1.0)
    with pytest.raises(Exception, match=r"timed out after 0\.2s .*gave up after 2 attempts"):
        provider(server, timeout=0.2, max_retries=1).complete(request())


def test_client_errors_are_not_retried(server):
    server.reply(401, {"error": {"message": "bad key"}})
    with pytest.raises(Exception, match="HTTP 401: bad key"):
        provider(server).complete(request())
    assert len(server.requests) == 1


def test_provider_failure_fails_the_replay_run_with_its_reason(server):
    for _ in range(2):
        server.reply(503, {"error": {"message": "maintenance"}})
    source = {"runId": "s", "status": "completed", "question": "q", "response": "r", "items": [], "policyDecisions": []}
    outcome = replay_run(source, Candidate(Agent("A", model="m")), "strict", provider=provider(server, max_retries=1))
    assert outcome.record["status"] == "failed" and outcome.record["errorName"] == "ProviderError"
    assert "HTTP 503: maintenance" in outcome.record["errorMessage"]
    assert outcome.report.status == "incomplete"


def test_missing_api_key_variable_is_a_clear_input_error(monkeypatch):
    monkeypatch.delenv("RECSTORE_ABSENT_KEY", raising=False)
    with pytest.raises(InputError, match="RECSTORE_ABSENT_KEY is not set"):
        OpenAIProvider(OpenAISettings(api_key_env="RECSTORE_ABSENT_KEY"))
