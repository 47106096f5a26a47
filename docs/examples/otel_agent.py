"""A small agent loop instrumented with the OpenTelemetry SDK, for docs/interop.md.

It answers support questions with a scripted "model" and two tools, and records each run as a
trace following the OpenTelemetry GenAI semantic conventions: an ``invoke_agent`` span, one
``chat`` span per model call (model, provider, token usage) and one ``execute_tool`` span per
tool call. The SDK's OTLP/JSON file exporter writes the spans, one JSON line per batch, exactly
as a collector's file exporter would. Nothing here talks to a network.

    python docs/examples/otel_agent.py traces.jsonl            # with message and tool content
    python docs/examples/otel_agent.py traces.jsonl --no-content
    python docs/examples/otel_agent.py traces.jsonl --variant v2  # the refund tool changed

Needs ``pip install opentelemetry-sdk opentelemetry-exporter-otlp-json-file``.
"""

from __future__ import annotations

import argparse
import json

from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

MODEL, PROVIDER, AGENT = "gpt-4o-mini", "openai", "Support"
QUESTIONS = ["Where is order A-17?", "Please refund order B-4.", "What are your opening hours?"]


def tools(variant: str) -> dict:
    def lookup_order(args: dict) -> dict:
        return {"order": args["order"], "status": "shipped", "eta": "2026-05-02"}

    def refund(args: dict) -> dict:
        amount = 40 if variant == "v1" else 45  # v2 changed how refunds are computed
        return {"order": args["order"], "refunded": amount, "currency": "EUR"}

    return {"lookup_order": lookup_order, "refund": refund}


def model(messages: list[dict]) -> dict:
    """A scripted model: one tool call for an order question, then a final answer."""
    question = messages[0]["parts"][0]["content"]
    results = [p for m in messages for p in m["parts"] if p["type"] == "tool_call_response"]
    if results:
        return {"text": f"Done: {json.dumps(results[-1]['response'])}"}
    if "refund" in question.lower():
        return {"call": ("refund", {"order": question.split()[-1].rstrip(".")})}
    if "order" in question.lower():
        return {"call": ("lookup_order", {"order": question.split()[-1].rstrip("?")})}
    return {"text": "We are open 9-17 on weekdays."}


def run_agent(tracer, question: str, run: int, variant: str, content: bool) -> str:
    """One agent run: model calls and tool calls until the model answers."""
    messages = [{"role": "user", "parts": [{"type": "text", "content": question}]}]
    registry = tools(variant)
    with tracer.start_as_current_span(f"invoke_agent {AGENT}", kind=SpanKind.INTERNAL) as agent:
        agent.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT,
                              "gen_ai.provider.name": PROVIDER, "gen_ai.request.model": MODEL,
                              "gen_ai.conversation.id": f"conv-{run}"})
        if content:
            agent.set_attribute("gen_ai.input.messages", json.dumps(messages))
        for turn in range(1, 5):
            with tracer.start_as_current_span(f"chat {MODEL}", kind=SpanKind.CLIENT) as chat:
                chat.set_attributes({"gen_ai.operation.name": "chat",
                                     "gen_ai.provider.name": PROVIDER,
                                     "gen_ai.request.model": MODEL,
                                     "gen_ai.usage.input_tokens": 20 * turn + len(question),
                                     "gen_ai.usage.output_tokens": 12})
                reply = model(messages)
                if "call" in reply:
                    name, args = reply["call"]
                    call_id = f"call_{run}_{turn}"
                    part = {"type": "tool_call", "id": call_id, "name": name, "arguments": args}
                    finish = "tool_call"
                else:
                    part, finish = {"type": "text", "content": reply["text"]}, "stop"
                output = [{"role": "assistant", "parts": [part], "finish_reason": finish}]
                chat.set_attribute("gen_ai.response.finish_reasons", [finish])
                if content:
                    chat.set_attribute("gen_ai.input.messages", json.dumps(messages))
                    chat.set_attribute("gen_ai.output.messages", json.dumps(output))
            messages.append(output[0])
            if "text" in reply:
                if content:
                    agent.set_attribute("gen_ai.output.messages", json.dumps(output))
                return reply["text"]
            with tracer.start_as_current_span(f"execute_tool {name}") as tool:
                tool.set_attributes({"gen_ai.operation.name": "execute_tool",
                                     "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
                                     "gen_ai.tool.type": "function"})
                result = registry[name](args)
                if content:
                    tool.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
                    tool.set_attribute("gen_ai.tool.call.result", json.dumps(result))
            messages.append({"role": "tool", "parts": [
                {"type": "tool_call_response", "id": call_id, "response": result}]})
        agent.set_status(Status(StatusCode.ERROR, "max turns exceeded"))
        agent.set_attribute("error.type", "MaxTurnsExceeded")
        return ""


def write_traces(path: str, variant: str = "v1", content: bool = True) -> None:
    """Run the agent on every question, appending one trace per run to ``path``."""
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(path)))
    tracer = provider.get_tracer("docs.examples.otel_agent")
    for run, question in enumerate(QUESTIONS):
        run_agent(tracer, question, run, variant, content)
    provider.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="OTLP/JSON lines file to append to")
    parser.add_argument("--variant", choices=["v1", "v2"], default="v1")
    parser.add_argument("--no-content", action="store_true",
                        help="record no messages, arguments or results (the default of most "
                        "instrumentations)")
    args = parser.parse_args()
    write_traces(args.path, args.variant, not args.no_content)


if __name__ == "__main__":
    main()
