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

from recstore.errors import OtlpError
from recstore.formats.otlp.common import CONTENT_POLICIES, span_id_for, trace_id_for
from recstore.formats.otlp.export import to_otlp
from recstore.formats.otlp.ingest import (
    Span,
    Trace,
    iter_spans,
    iter_traces,
    looks_like_otlp,
    to_run_record,
)

__all__ = [
    "CONTENT_POLICIES",
    "OtlpError",
    "Span",
    "Trace",
    "iter_spans",
    "iter_traces",
    "looks_like_otlp",
    "span_id_for",
    "to_otlp",
    "to_run_record",
    "trace_id_for",
]
