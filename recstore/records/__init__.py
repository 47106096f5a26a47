"""Pure functions over one JSON-form aioc RunRecord: tool calls, comparison, input scope,
requests, visits and the joined analysis. No I/O; records are dicts as parsed from JSON.

Example:
    >>> from recstore.records import compare_records
    >>> rec = {"response": "ok", "items": [], "policyDecisions": []}
    >>> compare_records(rec, rec)["equal"]
    True
"""

from __future__ import annotations

from recstore.records.compare import SECTIONS, compare_records, resolve_sections, utf16_length
from recstore.records.structure import (
    DecisionJoin,
    Finding,
    HandoffTransition,
    InputScope,
    RecordAnalysis,
    Request,
    ToolCallJoin,
    Visit,
    analyze,
    envelope_of,
    handoff_transitions,
    initial_agent,
    input_scope,
    requests,
    visits,
)
from recstore.records.toolcalls import extract_tool_calls, locate_tool_calls

__all__ = [
    "SECTIONS",
    "DecisionJoin",
    "Finding",
    "HandoffTransition",
    "InputScope",
    "RecordAnalysis",
    "Request",
    "ToolCallJoin",
    "Visit",
    "analyze",
    "compare_records",
    "envelope_of",
    "extract_tool_calls",
    "handoff_transitions",
    "initial_agent",
    "input_scope",
    "locate_tool_calls",
    "requests",
    "resolve_sections",
    "utf16_length",
    "visits",
]
