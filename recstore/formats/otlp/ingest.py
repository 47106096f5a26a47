"""Ingest: OTLP/JSON documents -> spans -> traces -> aioc-shaped RunRecords (:func:`iter_traces`,
:func:`to_run_record`)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from recstore.canonical import JSONParseError, loads_strict
from recstore.errors import OtlpError
from recstore.formats.otlp.common import (
    _FINGERPRINT_FIELDS,
    _KIND_NAMES,
    _MODEL_KEYS,
    _MODEL_OPERATIONS,
    _OPENINFERENCE_KINDS,
    _POLICY_FIELDS,
    _PROVIDER_KEYS,
    _STATUS_NAMES,
    _USAGE,
    CHAT,
    EXECUTE_TOOL,
    INVOKE_AGENT,
    STATUS_ERROR,
    _attribute_map,
    _iso,
    _str,
)


@dataclass
class Span:
    """One span as read from OTLP/JSON, with its position in the input (``order``, ``line``)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: int
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[tuple[int, str, dict[str, Any]]]
    status_code: int
    status_message: str | None
    order: int
    line: int | None
    raw: dict

    @property
    def operation(self) -> str | None:
        """The GenAI operation of this span (OpenInference kinds mapped), or None."""
        op = self.attributes.get("gen_ai.operation.name")
        if isinstance(op, str) and op:
            return op
        kind = self.attributes.get("openinference.span.kind")
        if isinstance(kind, str):
            return _OPENINFERENCE_KINDS.get(kind.upper(), kind.lower())
        if "gen_ai.tool.name" in self.attributes:
            return EXECUTE_TOOL
        if any(k in self.attributes for k in ("gen_ai.request.model", "gen_ai.system",
                                              "gen_ai.provider.name")):
            return CHAT
        return None


@dataclass
class Trace:
    """All spans of one trace id found in the input, in input order."""

    trace_id: str
    spans: list[Span]

    @property
    def line(self) -> int | None:
        return self.spans[0].line if self.spans else None

    def to_request(self) -> dict:
        """The trace's spans as one ExportTraceServiceRequest (kept whole in rejects)."""
        return {"resourceSpans": [{"scopeSpans": [{"spans": [s.raw for s in self.spans]}]}]}


def _hex_id(value: Any, length: int, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise OtlpError(f"span has no {what}")
    if len(value) == length * 2:
        try:
            bytes.fromhex(value)
            return value.lower()
        except ValueError:
            pass
    try:  # the proto3 JSON mapping (base64) that some producers emit
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        data = b""
    if len(data) != length:
        raise OtlpError(f"{what} {value!r} is neither {length * 2} hex digits nor base64")
    return data.hex()


def _enum(value: Any, names: dict[str, int]) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return names.get(value, 0) if isinstance(value, str) else 0


def _time(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _read_span(raw: Any, order: int, line: int | None) -> Span:
    if not isinstance(raw, dict):
        raise OtlpError("a span is not a JSON object")
    parent = raw.get("parentSpanId")
    status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
    events = [
        (_time(e.get("timeUnixNano")), str(e.get("name") or ""), _attribute_map(e.get("attributes")))
        for e in raw.get("events") or [] if isinstance(e, dict)
    ]
    return Span(
        trace_id=_hex_id(raw.get("traceId"), 16, "traceId"),
        span_id=_hex_id(raw.get("spanId"), 8, "spanId"),
        parent_id=_hex_id(parent, 8, "parentSpanId") if parent else None,
        name=str(raw.get("name") or ""),
        kind=_enum(raw.get("kind"), _KIND_NAMES),
        start=_time(raw.get("startTimeUnixNano")),
        end=_time(raw.get("endTimeUnixNano")),
        attributes=_attribute_map(raw.get("attributes")),
        events=events,
        status_code=_enum(status.get("code"), _STATUS_NAMES),
        status_message=_str(status.get("message")),
        order=order,
        line=line,
        raw=raw,
    )


def looks_like_otlp(value: Any) -> bool:
    """Whether a parsed JSON document is an OTLP trace export (has ``resourceSpans``)."""
    return isinstance(value, dict) and "resourceSpans" in value


def iter_spans(document: Any, line: int | None = None, start_order: int = 0) -> Iterator[Span]:
    """Every span of one ``ExportTraceServiceRequest`` document.

    Raises:
        OtlpError: the document is not a trace export, or a span has unusable ids.
    """
    if not looks_like_otlp(document):
        raise OtlpError("not an OTLP trace export (no top-level resourceSpans)")
    order = start_order
    for resource_spans in document.get("resourceSpans") or []:
        if not isinstance(resource_spans, dict):
            raise OtlpError("resourceSpans entry is not a JSON object")
        scopes = resource_spans.get("scopeSpans") or resource_spans.get(
            "instrumentationLibrarySpans") or []
        for scope_spans in scopes:
            for raw in (scope_spans or {}).get("spans") or []:
                yield _read_span(raw, order, line)
                order += 1


def iter_traces(documents: Iterable[Any]) -> list[Trace]:
    """Group the spans of ``documents`` (parsed ExportTraceServiceRequests) by trace id, in
    order of first appearance."""
    traces: dict[str, Trace] = {}
    order = 0
    for document in documents:
        for span in iter_spans(document, None, order):
            traces.setdefault(span.trace_id, Trace(span.trace_id, [])).spans.append(span)
            order += 1
    return list(traces.values())


def _parse_json_text(value: Any) -> Any:
    """A JSON-string attribute parsed, else the value as given (structured form)."""
    if isinstance(value, str):
        try:
            return loads_strict(value)
        except JSONParseError:
            return value
    return value


def _messages(value: Any) -> list[dict]:
    parsed = _parse_json_text(value)
    return [m for m in parsed if isinstance(m, dict)] if isinstance(parsed, list) else []


def _openinference_messages(attrs: dict[str, Any], prefix: str) -> list[dict]:
    """``llm.input_messages.N.message.*`` flattened attributes as convention messages."""
    found: dict[int, dict] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[len(prefix):].partition(".")
        if not index.isdigit():
            continue
        message = found.setdefault(int(index), {"role": None, "parts": [], "calls": {}})
        if rest == "message.role":
            message["role"] = value
        elif rest == "message.content" and isinstance(value, str):
            message["parts"].insert(0, {"type": "text", "content": value})
        elif rest.startswith("message.tool_calls."):
            n, _, field_name = rest[len("message.tool_calls."):].partition(".")
            call = message["calls"].setdefault(n, {"type": "tool_call"})
            if field_name == "tool_call.id":
                call["id"] = value
            elif field_name == "tool_call.function.name":
                call["name"] = value
            elif field_name == "tool_call.function.arguments":
                call["arguments"] = _parse_json_text(value)
    out = []
    for index in sorted(found):
        message = found[index]
        calls = [message["calls"][n] for n in sorted(message["calls"], key=_int_key)]
        out.append({"role": message["role"], "parts": message["parts"] + calls})
    return out


def _int_key(text: str) -> int:
    return int(text) if text.isdigit() else 0


def _span_messages(span: Span, direction: str) -> list[dict]:
    attrs = span.attributes
    messages = _messages(attrs.get(f"gen_ai.{direction}.messages"))
    if not messages:
        messages = _openinference_messages(attrs, f"llm.{direction}_messages.")
    return messages


def _message_items(messages: list[dict]) -> list[dict]:
    """aioc items of convention messages (text, tool_call, tool_call_response parts)."""
    items: list[dict] = []
    for message in messages:
        role = message.get("role")
        parts = message.get("parts")
        if not isinstance(parts, list):  # legacy form: {"role", "content"}
            content = message.get("content")
            parts = [{"type": "text", "content": content}] if isinstance(content, str) else []
        for part in parts:
            if isinstance(part, dict):
                items.extend(_part_items(role, part))
    return items


def _part_items(role: Any, part: dict) -> list[dict]:
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("content"), str):
        return [{"type": "message", "role": role if isinstance(role, str) else "assistant",
                 "content": part["content"]}]
    if kind == "tool_call" and isinstance(part.get("name"), str):
        item = {"type": "tool_call_item", "callId": _str(part.get("id")) or "",
                "name": part["name"]}
        if "arguments" in part and part["arguments"] is not None:
            item["arguments"] = _parse_json_text(part["arguments"])
        return [item]
    if kind == "tool_call_response":
        item = {"type": "tool_call_output_item", "callId": _str(part.get("id")) or ""}
        for key in ("response", "result"):
            if key in part:
                item["output"] = part[key]
                break
        return [item]
    return []


def _question(items: list[dict]) -> str:
    """aioc's question of an item input: non-blank user messages, trimmed, joined by a blank
    line (§1.1); ``""`` when there is none."""
    texts = [i["content"].strip() for i in items
             if i.get("type") == "message" and i.get("role") == "user"
             and isinstance(i.get("content"), str)]
    return "\n\n".join(t for t in texts if t)


def _agent_name(span: Span) -> str | None:
    name = span.attributes.get("gen_ai.agent.name") or span.attributes.get("agent.name")
    if isinstance(name, str) and name:
        return name
    prefix = f"{INVOKE_AGENT} "
    return span.name[len(prefix):] if span.name.startswith(prefix) else None


def _first(attrs: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if attrs.get(key) is not None:
            return attrs[key]
    return None


class _Reader:
    """Builds the record of one trace (see :func:`to_run_record`)."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.by_id = {s.span_id: s for s in trace.spans}
        self.genai = sorted((s for s in trace.spans if s.operation),
                            key=lambda s: (s.start, s.order))
        if not self.genai:
            raise OtlpError(
                f"trace {trace.trace_id} has no GenAI spans (no gen_ai.operation.name or "
                f"openinference.span.kind attribute on any of its {len(trace.spans)} spans)"
            )
        self.tops = [s for s in self.genai if self._genai_parent(s) is None]
        agents = [s for s in self.tops if s.operation == INVOKE_AGENT]
        self.run_span = agents[0] if len(self.tops) == 1 and agents else None
        self.chats = [s for s in self.genai if s.operation in _MODEL_OPERATIONS]
        # tool spans by the request whose output they belong to: the last chat started before
        # them (None: before the first request)
        self.tools_of: dict[int | None, list[Span]] = {}
        current: int | None = None
        for span in self.genai:
            if span.operation in _MODEL_OPERATIONS:
                current = 0 if current is None else current + 1
            elif span.operation == EXECUTE_TOOL:
                self.tools_of.setdefault(current, []).append(span)
        self.has_input = False

    def _ancestors(self, span: Span) -> Iterator[Span]:
        seen = {span.span_id}
        parent = self.by_id.get(span.parent_id or "")
        while parent is not None and parent.span_id not in seen:
            seen.add(parent.span_id)
            yield parent
            parent = self.by_id.get(parent.parent_id or "")

    def _genai_parent(self, span: Span) -> Span | None:
        return next((p for p in self._ancestors(span) if p.operation), None)

    def _agent_of(self, span: Span) -> str | None:
        own = span.attributes.get("aioc.agent.name")
        if isinstance(own, str):
            return own
        if span.operation == INVOKE_AGENT and (name := _agent_name(span)):
            return name
        return next((name for p in self._ancestors(span) if p.operation == INVOKE_AGENT
                     and (name := _agent_name(p))), None)

    def record(self) -> dict:
        run = self.run_span.attributes if self.run_span else {}
        inputs = self._input_items()
        items = list(inputs)
        for tool in self.tools_of.get(None, []):
            items.extend(self._call_items(tool, None))
        fingerprints = [self._request(i, chat, items) for i, chat in enumerate(self.chats)]
        record: dict[str, Any] = {
            "runId": _str(run.get("aioc.run.id")) or self.trace.trace_id,
            "startedAt": _str(run.get("aioc.run.started_at"))
            or _iso(min(s.start for s in self.tops)) or "",
            "completedAt": _str(run.get("aioc.run.completed_at"))
            or _iso(max(s.end for s in self.tops)) or "",
            "status": self._status(run),
            "agentName": self._final_agent(run),
            "providerName": self._run_value(run, "aioc.provider.name", *_PROVIDER_KEYS),
            "model": self._run_value(run, "aioc.model", *_MODEL_KEYS),
            "question": self._question(run, inputs),
            "response": self._response(),
            "items": items,
            "inputItemCount": self._input_item_count(run, inputs),
            "promptSnapshots": [],
            "requestFingerprints": fingerprints,
            "policyDecisions": self._policy_decisions(),
            "guardrailDecisions": self._guardrail_decisions() or None,
        }
        if record["status"] == "failed":
            record["errorName"] = self._error_name(run)
            record["errorMessage"] = _str(run.get("aioc.error.message")) or self._error_message()
        metadata = {k[len("aioc.metadata."):]: v for k, v in run.items()
                    if k.startswith("aioc.metadata.")}
        record["metadata"] = metadata or None
        return {k: v for k, v in record.items() if v is not None}

    # -- run level

    def _status(self, run: dict) -> str:
        status = _str(run.get("aioc.run.status"))
        if status:
            return status
        return "failed" if any(s.status_code == STATUS_ERROR for s in self.tops) else "completed"

    def _final_agent(self, run: dict) -> str:
        """aioc's agentName is the last active agent: the agent of the last request."""
        name = _str(run.get("aioc.agent.name"))
        if name is not None:
            return name
        for span in reversed(self.chats):
            if (agent := self._agent_of(span)) is not None:
                return agent
        agents = [name for s in self.genai if s.operation == INVOKE_AGENT
                  and (name := _agent_name(s))]
        return agents[-1] if agents else ""

    def _run_value(self, run: dict, *keys: str) -> str | None:
        """A run attribute, else the same fact on the last request (aioc records the last
        agent's model and provider)."""
        value = _first(run, *keys)
        if value is None and self.chats:
            value = _first(self.chats[-1].attributes, *keys[1:])
        return _str(value)

    def _input_items(self) -> list[dict]:
        for span in ([self.run_span] if self.run_span else []) + self.chats[:1]:
            messages = _span_messages(span, "input")
            if messages:
                self.has_input = True
                return _message_items(messages)
        return []

    def _input_item_count(self, run: dict, inputs: list[dict]) -> Any:
        if "aioc.run.id" in run:  # exported by recstore: the record's own value, or none
            return run.get("aioc.run.input_item_count")
        return len(inputs) if self.has_input else None

    def _question(self, run: dict, inputs: list[dict]) -> str:
        question = _str(run.get("aioc.run.question"))
        return question if question is not None else _question(inputs)

    def _response(self) -> str:
        for span in ([self.run_span] if self.run_span else []) + self.chats[-1:]:
            texts = [i["content"] for i in _message_items(_span_messages(span, "output"))
                     if i["type"] == "message"]
            if texts:
                return texts[-1]
        return ""

    def _error_name(self, run: dict) -> str:
        name = _first(run, "aioc.error.name", "error.type")
        if isinstance(name, str):
            return name
        for span in self.tops:
            for _, event_name, attrs in span.events:
                if event_name == "exception" and isinstance(attrs.get("exception.type"), str):
                    return attrs["exception.type"]
            if isinstance(span.attributes.get("error.type"), str):
                return span.attributes["error.type"]
        return "Error"

    def _error_message(self) -> str | None:
        return next((s.status_message for s in self.tops
                     if s.status_code == STATUS_ERROR and s.status_message), None)

    # -- requests and tool calls

    def _request(self, index: int, chat: Span, items: list[dict]) -> dict:
        attrs = chat.attributes
        fp: dict[str, Any] = {
            "timestamp": _str(attrs.get("aioc.request.timestamp")) or _iso(chat.start) or "",
            "turn": attrs.get("aioc.request.turn", index + 1),
            "agentName": self._agent_of(chat),
            "providerName": _str(_first(attrs, *_PROVIDER_KEYS)),
            "model": _str(_first(attrs, *_MODEL_KEYS)),
            **{key: attrs.get(attr) for key, attr in _FINGERPRINT_FIELDS},
        }
        if fp["messageCount"] is None:  # what the model had seen: every item before its output
            fp["messageCount"] = len(items)
        usage = {key: _first(attrs, attr, oi) for key, attr, oi in _USAGE}
        fp["usage"] = {k: v for k, v in usage.items() if isinstance(v, int)} or None
        self._output_items(index, chat, items)
        return {k: v for k, v in fp.items() if v is not None}

    def _output_items(self, index: int, chat: Span, items: list[dict]) -> None:
        """The request's output: the model's text and tool calls in part order, each call with
        its recorded result; tool spans the output does not name follow in start order."""
        pending = list(self.tools_of.get(index, []))
        for item in _message_items(_span_messages(chat, "output")):
            if item["type"] == "message":
                items.append(item)
            elif item["type"] == "tool_call_item":
                tool = self._take_tool(pending, item)
                items.extend(self._call_items(tool, item) if tool else [item])
        for tool in pending:
            items.extend(self._call_items(tool, None))

    def _take_tool(self, pending: list[Span], requested: dict) -> Span | None:
        """The tool span that executed a requested call: same call id, else the first span of
        the same tool name that records no call id."""
        for match_id in (True, False):
            for tool in pending:
                call_id = self._recorded_call_id(tool)
                if (call_id == requested["callId"]) if match_id else (
                        call_id is None and self._tool_name(tool) == requested["name"]):
                    pending.remove(tool)
                    return tool
        return None

    @staticmethod
    def _recorded_call_id(tool: Span) -> str | None:
        return _str(_first(tool.attributes, "gen_ai.tool.call.id", "tool_call.id"))

    @staticmethod
    def _tool_name(tool: Span) -> str:
        name = _str(_first(tool.attributes, "gen_ai.tool.name", "tool.name"))
        return name if name is not None else tool.name.removeprefix(f"{EXECUTE_TOOL} ")

    def _call_items(self, tool: Span, requested: dict | None) -> list[dict]:
        """A tool span as a call item (and an output item when its result was recorded). The
        call id is the recorded one, else the model's, else the span id."""
        attrs = tool.attributes
        call_id = self._recorded_call_id(tool) or (requested or {}).get("callId") or tool.span_id
        call: dict[str, Any] = {"type": "tool_call_item", "callId": call_id,
                                "name": self._tool_name(tool)}
        args = _first(attrs, "gen_ai.tool.call.arguments", "input.value")
        if args is not None:
            call["arguments"] = _parse_json_text(args)
        elif requested is not None and "arguments" in requested:
            call["arguments"] = requested["arguments"]
        result = _first(attrs, "gen_ai.tool.call.result", "output.value")
        if result is None:
            return [call]
        return [call, {"type": "tool_call_output_item", "callId": call_id,
                       "output": _parse_json_text(result)}]

    # -- decisions (span events written by to_otlp)

    def _events(self, *prefixes: str) -> list[tuple[tuple, Span, dict]]:
        return [((when, span.start, span.order, n), span, attrs)
                for span in self.genai for n, (when, name, attrs) in enumerate(span.events)
                if name.startswith(prefixes)]

    def _policy_decisions(self) -> list[dict]:
        events = self._events("aioc.policy.", "aioc.approval.")
        events.sort(key=lambda e: (e[2].get("aioc.policy.index", 0), e[0]))
        decisions = []
        for key, _, attrs in events:
            entry: dict[str, Any] = {
                "timestamp": _str(attrs.get("aioc.timestamp")) or _iso(key[0]) or "",
                "turn": attrs.get("aioc.subject.turn"),
                "callId": _str(attrs.get("aioc.subject.call_id")),
                **{k: attrs.get(attr) for k, attr in _POLICY_FIELDS[:5]},
                "resource": {"kind": attrs.get("aioc.subject.kind"),
                             "name": attrs.get("aioc.subject.name")},
                **{k: attrs.get(attr) for k, attr in _POLICY_FIELDS[5:]},
                "metadata": attrs.get("aioc.policy.metadata"),
            }
            decisions.append({k: v for k, v in entry.items() if v is not None})
        return decisions

    def _guardrail_decisions(self) -> list[dict]:
        out = []
        for key, span, attrs in sorted(self._events("aioc.guardrail."), key=lambda e: e[0]):
            entry = {"timestamp": _str(attrs.get("aioc.timestamp")) or _iso(key[0]) or "",
                     "turn": span.attributes.get("aioc.request.turn"),
                     "guardrailName": attrs.get("aioc.guardrail.name"),
                     "decision": attrs.get("aioc.guardrail.decision"),
                     "reason": attrs.get("aioc.guardrail.reason"),
                     "metadata": attrs.get("aioc.guardrail.metadata")}
            out.append({k: v for k, v in entry.items() if v is not None})
        return out


def to_run_record(trace: Trace) -> dict:
    """The aioc-shaped RunRecord of one trace (see the module docstring for the mapping).

    Raises:
        OtlpError: the trace has no GenAI spans.
    """
    return _Reader(trace).record()
