"""Export: a stored record as one OTLP/JSON ``ExportTraceServiceRequest`` (:func:`to_otlp`), spans
after the GenAI semantic conventions."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from recstore.formats.jsontext import dumps_json
from recstore.formats.otlp.common import (
    _FINGERPRINT_FIELDS,
    _POLICY_EVENTS,
    _POLICY_FIELDS,
    _USAGE,
    CHAT,
    CONTENT_POLICIES,
    EXECUTE_TOOL,
    INVOKE_AGENT,
    KIND_CLIENT,
    KIND_INTERNAL,
    SCOPE_NAME,
    STATUS_ERROR,
    STATUS_UNSET,
    _attributes,
    _nanos,
    _str,
    span_id_for,
    trace_id_for,
)
from recstore.records import analyze


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
