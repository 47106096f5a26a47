"""The corpus's agent graphs (support, research, finance suites), with their guardrails and
handoffs; the candidate variant changes prompt versions and instructions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recstore.runtime import (
    Agent,
    Handoff,
    OutputGuardrail,
    handoff_tool_name,
)
from recstore.synth.tools import _tool


def _blocklist(text: str, ctx: Any) -> tuple[bool, str | None, dict | None]:
    hit = next((w for w in ("password", "ssn", "iban") if w in text.lower()), None)
    return (hit is not None, "blocked_term" if hit else None, {"term": hit} if hit else None)


def _max_length(text: str, ctx: Any) -> tuple[bool, str | None, dict | None]:
    too_long = len(text) > 600
    return (too_long, f"too_long: {len(text)} > 600" if too_long else None, None)


@dataclass(frozen=True)
class _Suite:
    name: str
    agents: dict[str, Agent]
    entry: str


def _agent(name: str, text: str, model: str, version: str, tools: list[str], candidate: bool,
           **extra: Any) -> Agent:
    instructions = text + (" Prefer citing tool results verbatim." if candidate else "")
    slug = name.lower().replace(" ", "-")
    return Agent(name, instructions, model=model, prompt_version=f"{slug}.{'v2' if candidate else version}",
                 tools=[_tool(t) for t in tools], **extra)


def _support_suite(candidate: bool) -> _Suite:
    guards = [OutputGuardrail("blocklist", _blocklist), OutputGuardrail("max_length", _max_length)]
    triage = _agent("Triage", "Route the customer to the right team.", "gpt-4.1-mini", "v1",
                    ["lookup_customer", "search_docs", "get_time"], candidate, output_guardrails=guards)
    billing = _agent("Billing", "Resolve invoices and refunds.", "gpt-4.1", "v3",
                     ["get_invoice", "refund", "get_time"], candidate,
                     handoff_description="Invoices, refunds and payment questions.")
    tech = _agent("Tech Support", "Diagnose connectivity problems.", "gpt-4.1", "v2",
                  ["run_diagnostic", "search_docs"], candidate)
    triage.handoffs += [billing, Handoff(tech, enabled=lambda ctx: ctx.get("tier") != "free")]
    billing.handoffs.append(triage)
    tech.handoffs += [triage, billing]
    return _Suite("support", {a.name: a for a in (triage, billing, tech)}, "Triage")


def _research_suite(candidate: bool) -> _Suite:
    researcher = _agent("Researcher", "Find primary sources and cite them.", "gpt-4.1", "v1",
                        ["web_search", "fetch_document", "echo", "get_time"], candidate,
                        output_guardrails=[OutputGuardrail("max_length", _max_length)])
    summarizer = _agent("Summarizer", "Summarize in three bullet points.", "gpt-4.1-mini", "v1",
                        ["echo", "fetch_document"], candidate)
    checker = _agent("Fact Checker", "Verify every claim against a source.", "o4-mini", "v1",
                     ["web_search"], candidate)
    researcher.handoffs += [summarizer, Handoff(checker, enabled=lambda ctx: bool(ctx.get("strict")))]
    summarizer.handoffs += [researcher, checker]
    checker.handoffs.append(researcher)
    return _Suite("research", {a.name: a for a in (researcher, summarizer, checker)}, "Researcher")


def _finance_suite(candidate: bool) -> _Suite:
    analyst = _agent("Analyst", "Answer with figures from reports only.", "gpt-4.1", "v4",
                     ["get_finance_report", "get_stock_quote", "get_time"], candidate,
                     output_guardrails=[OutputGuardrail("blocklist", _blocklist)])
    compliance = _agent("Compliance Officer", "Check trades against policy.", "gpt-4.1", "v1",
                        ["get_finance_report"], candidate)
    analyst.handoffs.append(Handoff(compliance, enabled=lambda ctx: ctx.get("region") == "EU"))
    compliance.handoffs.append(analyst)
    return _Suite("finance", {a.name: a for a in (analyst, compliance)}, "Analyst")


_SUITES = {variant: [f(variant == "candidate") for f in (_support_suite, _research_suite, _finance_suite)]
           for variant in ("baseline", "candidate")}


def _handoff_name(source: Agent, target_name: str) -> str:
    """The tool name the runtime gives ``source``'s handoff to ``target_name`` (all enabled)."""
    taken = {t.name for t in source.tools}
    for rule in source.handoff_rules():
        name = handoff_tool_name(rule.target.name, taken)
        taken.add(name)
        if rule.target.name == target_name:
            return name
    raise KeyError(target_name)
