"""OpenTelemetry GenAI interchange: runs as OTLP/JSON traces, GenAI traces as runs.

**Export** (:func:`to_otlp`): one trace per run, as an OTLP/JSON ``ExportTraceServiceRequest``
(the protocol's JSON encoding: hex ids, integer enums, 64-bit integers as strings). Spans follow
the GenAI semantic conventions (Development status):

- ``invoke_agent {agent}`` — the run (root, INTERNAL); one child ``invoke_agent {agent}`` span
  per agent visit, linked to the handoff call that opened it;
- ``chat {model}`` — one per model request (CLIENT), spanning the request's output interval;
- ``execute_tool {tool}`` — one per tool call made during the run (INTERNAL), with policy
  decisions as span events (aioc's governance-event names, §9 of the aioc notes).

Attributes: ``gen_ai.operation.name``, ``gen_ai.agent.name``, ``gen_ai.provider.name``,
``gen_ai.request.model``, ``gen_ai.usage.*`` (where recorded), ``gen_ai.tool.name``,
``gen_ai.tool.call.id``; content (``gen_ai.tool.call.arguments``/``result``,
``gen_ai.input.messages``/``output.messages``) only under the ``full`` content policy. What
OTLP has no field for (exact aioc timestamps, request hashes, run id) rides in ``aioc.*``
attributes, named like aioc's own OTel exporter. Trace and span ids are derived from the run
key and positions, so an export is reproducible and a replay's root span links to its source
run's trace. Lineage parents become span links on the root span.

**Ingest** (:func:`iter_traces`, :func:`to_run_record`): spans are grouped by trace id; a trace
with GenAI spans (``gen_ai.operation.name``, or OpenInference's ``openinference.span.kind``)
becomes one aioc-shaped RunRecord: ``chat`` spans are requests, ``execute_tool`` spans are tool
calls with their arguments and results, agent spans name the agents. What the trace lacks stays
absent (no arguments, no output, no model); aioc's own empty values are used only where aioc
requires a string (``question``/``response`` ``""`` as aioc writes for no user message / no
final text, ``agentName`` ``""`` when no span names an agent). A trace without GenAI spans is
rejected with that reason.

Example:
    >>> record = {"runId": "r1", "startedAt": "2026-01-15T10:00:00.000Z",
    ...     "completedAt": "2026-01-15T10:00:02.000Z", "status": "completed", "agentName": "A",
    ...     "question": "q", "response": "done", "items": [
    ...         {"type": "message", "role": "user", "content": "q"},
    ...         {"type": "message", "role": "assistant", "content": "done"}],
    ...     "inputItemCount": 1, "promptSnapshots": [], "policyDecisions": [],
    ...     "requestFingerprints": [{"timestamp": "2026-01-15T10:00:01.000Z", "turn": 1,
    ...         "agentName": "A", "providerName": "openai", "model": "gpt-4o",
    ...         "requestHash": "h", "messageCount": 1}]}
    >>> request = to_otlp(record, "aioc:r1", content="full")
    >>> [s["name"] for s in request["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    ['invoke_agent A', 'invoke_agent A', 'chat gpt-4o']
    >>> [trace] = iter_traces([request])
    >>> to_run_record(trace)["response"], to_run_record(trace)["requestFingerprints"][0]["model"]
    ('done', 'gpt-4o')
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from recstore.canonical import JSONParseError, loads_strict
from recstore.formats.jsontext import dumps_json
from recstore.records import analyze

__all__ = [
    "CONTENT_POLICIES",
    "OtlpError",
    "Span",
    "Trace",
    "iter_traces",
    "looks_like_otlp",
    "span_id_for",
    "to_otlp",
    "to_run_record",
    "trace_id_for",
]

CONTENT_POLICIES = ("none", "metadata", "full")
SCOPE_NAME = "recstore"

# OTLP enums (integers in OTLP/JSON)
KIND_INTERNAL, KIND_CLIENT = 1, 3
STATUS_UNSET, STATUS_OK, STATUS_ERROR = 0, 1, 2
_KIND_NAMES = {"SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
               "SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5, "SPAN_KIND_UNSPECIFIED": 0}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}

# operation names by role; OpenInference span kinds map onto them
INVOKE_AGENT, CHAT, EXECUTE_TOOL = "invoke_agent", "chat", "execute_tool"
_MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_OPENINFERENCE_KINDS = {"AGENT": INVOKE_AGENT, "LLM": CHAT, "TOOL": EXECUTE_TOOL, "CHAIN": "chain"}

_POLICY_EVENTS = {"allow": "aioc.policy.allowed", "deny": "aioc.policy.denied",
                  "require_approval": "aioc.approval.required"}
# policy decision field -> event attribute (aioc's governance-event names, §9)
_POLICY_FIELDS = (("decision", "aioc.policy.decision"), ("reason", "aioc.policy.reason"),
                  ("publicReason", "aioc.policy.public_reason"),
                  ("resultMode", "aioc.policy.result_mode"),
                  ("policyVersion", "aioc.policy.version"),
                  ("expiresAt", "aioc.policy.expires_at"),
                  ("handoffApplied", "aioc.policy.handoff_applied"))
# request fingerprint fields with no GenAI attribute -> chat span attribute (timestamp, turn,
# agent, provider and model are written separately)
_FINGERPRINT_FIELDS = (("runtimeVersion", "aioc.runtime_version"),
                       ("fingerprintSchemaVersion", "aioc.trace.fingerprint_schema_version"),
                       ("requestHash", "aioc.trace.request_hash"),
                       ("systemPromptHash", "aioc.trace.system_prompt_hash"),
                       ("messagesHash", "aioc.trace.messages_hash"),
                       ("toolsHash", "aioc.trace.tools_hash"),
                       ("modelSettingsHash", "aioc.trace.model_settings_hash"),
                       ("messageCount", "aioc.request.message_count"),
                       ("toolCount", "aioc.request.tool_count"))
# token usage key in the fingerprint -> GenAI attribute, OpenInference attribute
_USAGE = (("input_tokens", "gen_ai.usage.input_tokens", "llm.token_count.prompt"),
          ("output_tokens", "gen_ai.usage.output_tokens", "llm.token_count.completion"))
_PROVIDER_KEYS = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
_MODEL_KEYS = ("gen_ai.request.model", "gen_ai.response.model", "llm.model_name")


class OtlpError(ValueError):
    """A trace or document that cannot become a run; the message is the reject reason."""


# ----------------------------------------------------------------------------------------------
# Ids and times


def _digest(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(("recstore.otlp", *parts)).encode("utf-8")).digest()


def _nonzero_hex(data: bytes) -> str:
    # all-zero ids are invalid in OTLP; a sha256 prefix of zeros is astronomically unlikely
    return data.hex() if any(data) else "01" + data[1:].hex()


def trace_id_for(run_key: str) -> str:
    """The 32-hex-digit trace id of a run's export (stable per run key)."""
    return _nonzero_hex(_digest("trace", run_key)[:16])


def span_id_for(run_key: str, *position: object) -> str:
    """A 16-hex-digit span id from the run key and the span's position in the run."""
    return _nonzero_hex(_digest("span", run_key, *map(str, position))[:8])


def _nanos(text: Any) -> int | None:
    """Unix nanoseconds of an ISO-8601 timestamp, or None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _iso(nanos: int | None) -> str | None:
    """aioc's timestamp form (``2026-01-15T10:00:00.000Z``) of Unix nanoseconds."""
    if not nanos:
        return None
    moment = datetime.fromtimestamp(nanos // 1_000_000 / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ----------------------------------------------------------------------------------------------
# OTLP/JSON values


def _any_value(value: Any) -> dict:
    """A JSON value as an OTLP AnyValue; objects and arrays stay structured (kvlist, array)."""
    if value is None:
        return {}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": _any_value(v)}
                                           for k, v in value.items()]}}
    return {"stringValue": value if isinstance(value, str) else dumps_json(value)}


def _attributes(pairs: Iterable[tuple[str, Any]]) -> list[dict]:
    """OTLP key/value list of ``pairs``, skipping ``None`` values."""
    return [{"key": key, "value": _any_value(v)} for key, v in pairs if v is not None]


def _from_any_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return None
    if "arrayValue" in value:
        return [_from_any_value(v) for v in (value["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in value:
        return {kv.get("key"): _from_any_value(kv.get("value"))
                for kv in (value["kvlistValue"] or {}).get("values") or [] if isinstance(kv, dict)}
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def _attribute_map(attributes: Any) -> dict[str, Any]:
    if not isinstance(attributes, list):
        return {}
    return {kv["key"]: _from_any_value(kv.get("value"))
            for kv in attributes if isinstance(kv, dict) and isinstance(kv.get("key"), str)}


# ----------------------------------------------------------------------------------------------
# Export: record -> ExportTraceServiceRequest


def _message(role: str, parts: list[dict], **extra: Any) -> dict:
    return {"role": role, "parts": parts, **extra}


def _item_message(item: dict) -> dict | None:
    """One aioc item as a GenAI-convention chat message (input or output form)."""
    kind = item.get("type")
    if kind == "message":
        return _message(item.get("role"), [{"type": "text", "content": item.get("content")}])
    if kind == "tool_call_item":
        part = {"type": "tool_call", "id": item.get("callId"), "name": item.get("name")}
        if "arguments" in item:
            part["arguments"] = item["arguments"]
        return _message("assistant", [part])
    if kind == "tool_call_output_item":
        part = {"type": "tool_call_response", "id": item.get("callId")}
        if "output" in item:
            part["response"] = item["output"]
        return _message("tool", [part])
    return None


@dataclass
class _Exporter:
    """Builds the spans of one run (see :func:`to_otlp`)."""

    record: dict
    run_key: str
    content: str
    spans: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.trace_id = trace_id_for(self.run_key)
        self.analysis = analyze(self.record)
        self.start = _nanos(self.record.get("startedAt")) or 0
        self.end = max(_nanos(self.record.get("completedAt")) or self.start, self.start)
        self.full = self.content == "full"
        self.with_metadata = self.content in ("metadata", "full")

    def span(self, span_id: str, parent: str | None, name: str, kind: int, start: int, end: int,
             attributes: list[dict], **extra: Any) -> dict:
        span = {"traceId": self.trace_id, "spanId": span_id}
        if parent:
            span["parentSpanId"] = parent
        span.update(name=name, kind=kind, startTimeUnixNano=str(start),
                    endTimeUnixNano=str(max(end, start)), attributes=attributes, **extra)
        self.spans.append(span)
        return span

    def build(self, links: list[tuple[str, str]]) -> list[dict]:
        rec = self.record
        root_id = span_id_for(self.run_key, "run")
        failed = rec.get("status") == "failed"
        status = {"code": STATUS_ERROR if failed else STATUS_UNSET}
        if failed and self.full and isinstance(rec.get("errorMessage"), str):
            status["message"] = rec["errorMessage"]
        root = self.span(
            root_id, None, _agent_span_name(self.analysis.initial_agent), KIND_INTERNAL,
            self.start, self.end, self._run_attributes(), status=status,
        )
        if links:
            root["links"] = [
                {"traceId": trace_id_for(key), "spanId": span_id_for(key, "run"),
                 "attributes": _attributes([("recstore.link.relation", relation),
                                            ("recstore.link.run_key", key)])}
                for key, relation in links
            ]
        self._visits(root_id)
        self._unjoined_decisions(root)
        return self.spans

    def _run_attributes(self) -> list[dict]:
        rec = self.record
        pairs: list[tuple[str, Any]] = [
            ("gen_ai.operation.name", INVOKE_AGENT),
            ("gen_ai.agent.name", _str(self.analysis.initial_agent)),
            ("gen_ai.provider.name", _str(rec.get("providerName"))),
            ("gen_ai.request.model", _str(rec.get("model"))),
            ("error.type", _str(rec.get("errorName")) if rec.get("status") == "failed" else None),
            ("aioc.run.id", _str(rec.get("runId"))),
            ("aioc.run.status", _str(rec.get("status"))),
            ("aioc.run.started_at", _str(rec.get("startedAt"))),
            ("aioc.run.completed_at", _str(rec.get("completedAt"))),
            ("aioc.agent.name", _str(rec.get("agentName"))),
            ("aioc.provider.name", _str(rec.get("providerName"))),
            ("aioc.model", _str(rec.get("model"))),
            ("aioc.run.input_item_count", rec.get("inputItemCount")),
            ("aioc.error.name", _str(rec.get("errorName"))),
        ]
        if self.with_metadata and isinstance(rec.get("metadata"), dict):
            pairs.extend((f"aioc.metadata.{k}", v) for k, v in rec["metadata"].items())
        if self.full:
            inputs = [m for item in self.record["items"][: self._input_end()]
                      if (m := _item_message(item)) is not None]
            pairs += [
                ("aioc.error.message", _str(rec.get("errorMessage"))),
                ("aioc.run.question", _str(rec.get("question"))),
                ("gen_ai.input.messages", dumps_json(inputs)),
                ("gen_ai.output.messages", dumps_json([_message(
                    "assistant", [{"type": "text", "content": rec.get("response")}],
                    finish_reason="stop")])),
            ]
        return _attributes(pairs)

    def _input_end(self) -> int:
        requests = self.analysis.requests
        if requests:
            return requests[0].output_start
        count = self.analysis.scope.count
        return len(self.record["items"]) if count is None else count

    def _visits(self, root_id: str) -> None:
        analysis = self.analysis
        visit_of_turn: dict[Any, int] = {}
        for visit in analysis.visits:
            for turn in visit.turns:
                visit_of_turn.setdefault(turn, visit.index)
        starts = self._request_starts()
        tool_span_of_call: dict[Any, str] = {}
        for visit in analysis.visits:
            mine = [r for r in analysis.requests if visit_of_turn.get(r.turn, 0) == visit.index]
            start = starts[mine[0].index] if mine else self._visit_start(visit, starts)
            end = self._request_end(mine[-1].index, starts) if mine else start
            visit_id = span_id_for(self.run_key, "visit", visit.index)
            span = self.span(
                visit_id, root_id, _agent_span_name(visit.agent), KIND_INTERNAL, start, end,
                _attributes([("gen_ai.operation.name", INVOKE_AGENT),
                             ("gen_ai.agent.name", _str(visit.agent)),
                             ("recstore.visit.index", visit.index),
                             ("recstore.visit.transition", visit.transition)]),
            )
            if visit.via_call_id is not None and visit.via_call_id in tool_span_of_call:
                span["links"] = [{"traceId": self.trace_id,
                                  "spanId": tool_span_of_call[visit.via_call_id],
                                  "attributes": _attributes([("recstore.link.relation",
                                                              "handoff")])}]
            for request in mine:
                self._request(request, visit_id, starts, tool_span_of_call)

    def _request_starts(self) -> list[int]:
        """Start of each request span: its fingerprint time, never before the previous one, so
        spans sorted by start time read in record order."""
        starts, previous = [], self.start
        for request in self.analysis.requests:
            stamp = _nanos(request.fingerprint.get("timestamp"))
            previous = max(stamp if stamp is not None else previous, previous)
            starts.append(previous)
        return starts

    def _request_end(self, index: int, starts: list[int]) -> int:
        return starts[index + 1] if index + 1 < len(starts) else max(self.end, starts[index])

    def _visit_start(self, visit: Any, starts: list[int]) -> int:
        later = [starts[r.index] for r in self.analysis.requests
                 if isinstance(r.turn, (int, float)) and isinstance(visit.entered_after_turn,
                                                                     (int, float))
                 and r.turn > visit.entered_after_turn]
        return later[0] if later else self.end

    def _request(self, request: Any, parent: str, starts: list[int],
                 tool_span_of_call: dict[Any, str]) -> None:
        start, end = starts[request.index], self._request_end(request.index, starts)
        fp = request.fingerprint
        model = _str(fp.get("model"))
        usage = fp.get("usage") if isinstance(fp.get("usage"), dict) else {}
        pairs: list[tuple[str, Any]] = [
            ("gen_ai.operation.name", CHAT),
            ("gen_ai.provider.name", _str(fp.get("providerName"))),
            ("gen_ai.request.model", model),
            *((attr, usage.get(key)) for key, attr, _ in _USAGE),
            ("aioc.request.timestamp", _str(fp.get("timestamp"))),
            ("aioc.request.turn", fp.get("turn")),
            ("aioc.agent.name", _str(fp.get("agentName"))),
            *((attr, fp.get(key)) for key, attr in _FINGERPRINT_FIELDS),
        ]
        interval = self.record["items"][request.output_start:request.output_end]
        if self.full:
            parts = [part for item in interval if item.get("type") != "tool_call_output_item"
                     and (m := _item_message(item)) is not None and m["role"] == "assistant"
                     for part in m["parts"]]
            calls = any(p["type"] == "tool_call" for p in parts)
            pairs.append(("gen_ai.output.messages", dumps_json([_message(
                "assistant", parts, finish_reason="tool_call" if calls else "stop")])))
        chat_id = span_id_for(self.run_key, "request", request.index)
        span = self.span(chat_id, parent, f"chat {model}" if model else "chat", KIND_CLIENT,
                         start, end, _attributes(pairs))
        self._guardrail_events(span, request.turn, start)
        outputs = [item for item in interval if item.get("type") == "tool_call_output_item"]
        for offset, item in enumerate(interval):
            if item.get("type") == "tool_call_item":
                index = request.output_start + offset
                span_id = self._tool(item, index, outputs, parent, start, end)
                tool_span_of_call[item.get("callId")] = span_id

    def _tool(self, item: dict, index: int, outputs: list[dict], parent: str, start: int,
              end: int) -> str:
        call_id = item.get("callId")
        output = next((o for o in outputs if o.get("callId") == call_id), None)
        if output is not None:
            outputs.remove(output)  # a repeated call id takes the next output
        join = next((c for c in self.analysis.tool_calls if c.call_item_index == index), None)
        pairs: list[tuple[str, Any]] = [
            ("gen_ai.operation.name", EXECUTE_TOOL),
            ("gen_ai.tool.name", _str(item.get("name"))),
            ("gen_ai.tool.call.id", _str(call_id)),
            ("gen_ai.tool.type", "function"),
        ]
        if self.with_metadata and join is not None:
            pairs += [("aioc.tool.args_hash", join.call.get("argsHash")),
                      ("aioc.tool.output.status", join.envelope_status),
                      ("aioc.tool.output.code", _str(join.envelope_code))]
        if self.full:
            if "arguments" in item:
                pairs.append(("gen_ai.tool.call.arguments", dumps_json(item["arguments"])))
            if output is not None and "output" in output:
                pairs.append(("gen_ai.tool.call.result", dumps_json(output["output"])))
        span_id = span_id_for(self.run_key, "item", index)
        status = {"code": STATUS_UNSET}
        if join is not None and join.envelope_status in ("denied", "approval_required"):
            status = {"code": STATUS_ERROR, "message": join.envelope_status}
        span = self.span(span_id, parent, f"execute_tool {item.get('name')}", KIND_INTERNAL,
                         start, end, _attributes(pairs), status=status)
        if join is not None and join.policy_decision_index is not None:
            self._policy_event(span, join.policy_decision_index, start)
        return span_id

    def _policy_event(self, span: dict, index: int, default_time: int) -> None:
        decision = self.record["policyDecisions"][index]
        resource = decision.get("resource") if isinstance(decision.get("resource"), dict) else {}
        name = _POLICY_EVENTS.get(decision.get("decision"), "aioc.policy.decided")
        pairs = [("aioc.policy.index", index), ("aioc.timestamp", _str(decision.get("timestamp"))),
                 ("aioc.subject.kind", _str(resource.get("kind"))),
                 ("aioc.subject.name", _str(resource.get("name"))),
                 ("aioc.subject.turn", decision.get("turn")),
                 ("aioc.subject.call_id", _str(decision.get("callId"))),
                 *((attr, decision.get(key)) for key, attr in _POLICY_FIELDS)]
        if self.with_metadata:
            pairs.append(("aioc.policy.metadata", decision.get("metadata")))
        when = _nanos(decision.get("timestamp")) or default_time
        span.setdefault("events", []).append(
            {"timeUnixNano": str(when), "name": name, "attributes": _attributes(pairs)})

    def _guardrail_events(self, span: dict, turn: Any, default_time: int) -> None:
        for entry in self.record.get("guardrailDecisions") or []:
            if isinstance(entry, dict) and entry.get("turn") == turn:
                decision = entry.get("decision")
                span.setdefault("events", []).append({
                    "timeUnixNano": str(_nanos(entry.get("timestamp")) or default_time),
                    "name": "aioc.guardrail.triggered" if decision == "triggered"
                    else "aioc.guardrail.passed",
                    "attributes": _attributes([
                        ("aioc.guardrail.name", _str(entry.get("guardrailName"))),
                        ("aioc.guardrail.decision", _str(decision)),
                        ("aioc.guardrail.reason", _str(entry.get("reason"))),
                        ("aioc.guardrail.metadata",
                         entry.get("metadata") if self.with_metadata else None),
                        ("aioc.timestamp", _str(entry.get("timestamp")))]),
                })

    def _unjoined_decisions(self, root: dict) -> None:
        joined = {c.policy_decision_index for c in self.analysis.tool_calls
                  if c.call_item_index is not None and self._has_tool_span(c.call_item_index)}
        for index in range(len(self.record.get("policyDecisions") or [])):
            if index not in joined:
                self._policy_event(root, index, self.start)

    def _has_tool_span(self, item_index: int) -> bool:
        return any(r.output_start <= item_index < r.output_end for r in self.analysis.requests)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _agent_span_name(agent: Any) -> str:
    return f"{INVOKE_AGENT} {agent}" if isinstance(agent, str) and agent else INVOKE_AGENT


def to_otlp(record: dict, run_key: str, *, content: str = "metadata",
            links: Iterable[tuple[str, str]] = (), service_name: str = "recstore",
            version: str | None = None) -> dict:
    """One run as an OTLP/JSON ``ExportTraceServiceRequest`` (one resource, one scope, one
    trace). ``content``: ``none`` (names, ids, models, timings), ``metadata`` (adds argument
    hashes, envelope status and record metadata) or ``full`` (adds tool arguments and results,
    input and output messages, error messages). ``links``: ``(parent run key, relation)`` pairs
    (lineage) that become links to the parents' exported root spans."""
    if content not in CONTENT_POLICIES:
        raise ValueError(f"content policy must be one of {', '.join(CONTENT_POLICIES)}")
    spans = _Exporter(record, run_key, content).build(list(links))
    scope: dict[str, Any] = {"name": SCOPE_NAME}
    if version:
        scope["version"] = version
    return {"resourceSpans": [{
        "resource": {"attributes": _attributes([("service.name", service_name)])},
        "scopeSpans": [{"scope": scope, "spans": spans}],
    }]}


# ----------------------------------------------------------------------------------------------
# Ingest: OTLP/JSON documents -> traces -> records


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
