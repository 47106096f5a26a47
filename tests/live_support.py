"""A model server on 127.0.0.1 for the live-replay tests: OpenAI chat completions and the
Anthropic Messages API, answering like the agent of :func:`source_record` (a ``lookup`` call,
then ``answer N``).

The server counts requests in flight (and the peak), and a *plan* decides per request what it
does: answer after a delay, refuse with a status and headers (then it records when the retry
may come and notes any retry that comes earlier), hang, send garbage, or reset the connection.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

API_KEY_ENV = "RECSTORE_LIVE_API_KEY"
API_KEY = "sk-live-test-secret"
_CASE = re.compile(r"case (\d+)")


@dataclass
class Action:
    """What the server does with one request."""

    kind: str = "ok"  # ok | status | hang | garbage | reset
    delay: float = 0.0
    status: int = 200
    headers: dict = field(default_factory=dict)
    not_before: float | None = None  # seconds: a retry of this request earlier is a violation


Plan = Callable[[str, int], Action]  # (request key, attempt number from 1) -> Action


def always_ok(delay: float = 0.0) -> Plan:
    return lambda _key, _attempt: Action(delay=delay)


class ModelServer:
    """See the module docstring. ``base_url`` ends in ``/v1``."""

    def __init__(self, plan: Plan | None = None):
        self.plan = plan or always_ok()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.in_flight_samples: list[int] = []
        self.attempts: Counter = Counter()
        self.not_before: dict[str, float] = {}
        self.early: list[tuple[str, float]] = []  # (key, seconds too early)
        self.answered = 0
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real API

            def do_POST(self):  # noqa: N802 - http.server API
                server.handle(self)

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # the default 5 drops connections opened at once
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- one request ---------------------------------------------------------------------------

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = json.loads(handler.rfile.read(int(handler.headers.get("Content-Length", 0))))
        key = json.dumps(body.get("messages"), sort_keys=True)
        now = time.monotonic()
        with self.lock:
            self.attempts[key] += 1
            attempt = self.attempts[key]
            earliest = self.not_before.pop(key, None)
            if earliest is not None and now < earliest:
                self.early.append((key, earliest - now))
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.in_flight_samples.append(self.in_flight)
            self.bodies.append(body)
            self.headers.append(dict(handler.headers))
        try:
            self._act(handler, body, key, self.plan(key, attempt))
        finally:
            with self.lock:
                self.in_flight -= 1

    def _act(self, handler, body: dict, key: str, action: Action) -> None:
        if action.delay:
            time.sleep(action.delay)
        if action.kind == "hang":
            self.stopping.wait(60)
            handler.close_connection = True
            return
        if action.kind == "reset":
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.connection.close()
            handler.close_connection = True
            return
        if action.kind == "garbage":
            self._send(handler, 200, b"<html>not json", {})
            return
        if action.kind == "status":
            if action.not_before is not None:
                with self.lock:
                    self.not_before[key] = time.monotonic() + action.not_before
            error = json.dumps({"error": {"message": f"planned {action.status}"}}).encode()
            self._send(handler, action.status, error, action.headers)
            return
        anthropic = handler.path.endswith("/messages")
        expected = ("x-api-key", API_KEY) if anthropic else ("Authorization", f"Bearer {API_KEY}")
        if handler.headers.get(expected[0]) != expected[1]:
            self._send(handler, 401, b'{"error": {"message": "bad key"}}', {})
            return
        answer = anthropic_answer(body) if anthropic else openai_answer(body)
        with self.lock:
            self.answered += 1
        self._send(handler, 200, json.dumps(answer).encode(), action.headers)

    @staticmethod
    def _send(handler, status: int, data: bytes, headers: dict) -> None:
        try:
            handler.send_response(status)
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up


def case_of(key: str) -> int:
    """The case number a request (its key or body text) is about."""
    match = _CASE.search(key)
    return int(match.group(1)) if match else -1


def _case_number(messages: list) -> str:
    match = _CASE.search(json.dumps(messages))
    return match.group(1) if match else "0"


def openai_answer(body: dict) -> dict:
    messages = body["messages"]
    n = _case_number(messages)
    if any(m.get("role") == "tool" for m in messages):
        message = {"role": "assistant", "content": f"answer {n}"}
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{n}", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"id": n})}}]}
    prompt = len(json.dumps(messages)) // 4
    return {"id": "cmpl", "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7}}


def anthropic_answer(body: dict) -> dict:
    messages = body["messages"]
    n = _case_number(messages)
    results = [b for m in messages for b in m["content"] if b.get("type") == "tool_result"]
    if results:
        content = [{"type": "text", "text": f"answer {n}"}]
    else:
        content = [{"type": "text", "text": "Let me look."},
                   {"type": "tool_use", "id": f"call_{n}", "name": "lookup", "input": {"id": n}}]
    return {"id": "msg", "type": "message", "role": "assistant", "content": content,
            "stop_reason": "end_turn", "usage": {"input_tokens": len(json.dumps(messages)) // 4,
                                                 "output_tokens": 9}}


# --- the stored runs and the harness ------------------------------------------------------------

def source_record(n: int) -> dict:
    """A completed run: the user asks ``case n``, the agent calls lookup {"id": n} and answers."""
    ok = {"status": "ok", "code": None, "publicReason": None, "data": {"id": str(n), "name": f"item {n}"}}
    return {
        "runId": f"live-{n:04d}", "startedAt": "2026-01-01T00:00:00.000Z",
        "completedAt": "2026-01-01T00:00:01.000Z", "status": "completed", "agentName": "A",
        "question": f"case {n}", "response": f"answer {n}", "contextSnapshot": {},
        "contextRedacted": False,
        "items": [
            {"type": "message", "role": "user", "content": f"case {n}"},
            {"type": "tool_call_item", "callId": f"call_{n}", "name": "lookup", "arguments": {"id": str(n)},
             "rawItem": {"type": "function_call", "id": f"call_{n}", "name": "lookup",
                         "arguments": json.dumps({"id": str(n)})}},
            {"type": "tool_call_output_item", "callId": f"call_{n}", "output": ok},
            {"type": "message", "role": "assistant", "content": f"answer {n}"},
        ],
        "inputItemCount": 1, "promptSnapshots": [], "requestFingerprints": [], "policyDecisions": [],
    }


def write_harness(folder: Path, base_url: str, *, kind: str = "openai", timeout: float = 5.0,
                  max_retries: int = 2, extra: str = "") -> Path:
    """A harness for :func:`source_record` runs whose model is the server at ``base_url``."""
    path = folder / f"live-{kind}.toml"
    path.write_text(f"""
[runtime]
entry_agent = "A"

[agents.A]
instructions = "Be brief."
model = "model-test"
tools = ["lookup"]

[tools.lookup]
description = "Find a record."
parameters = {{ type = "object", properties = {{ id = {{ type = "string" }} }}, required = ["id"], additionalProperties = false }}

[policies]
default = "allow"

[provider]
kind = "{kind}"
base_url = "{base_url}"
api_key_env = "{API_KEY_ENV}"
timeout = {timeout}
max_retries = {max_retries}
{extra}
""", encoding="utf-8")
    return path
