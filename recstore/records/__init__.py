"""Pure functions over one JSON-form aioc RunRecord: tool calls, comparison, input scope,
requests, visits and the joined analysis. No I/O; records are dicts as parsed from JSON.

Example:
    >>> from recstore.records import compare_records
    >>> rec = {"response": "ok", "items": [], "policyDecisions": []}
    >>> compare_records(rec, rec)["equal"]
    True
"""

from __future__ import annotations

# The names load on first use: a caller that needs only `render.printable` (every table the CLI
# prints) does not pay for the analysis module's dataclasses.
from typing import TYPE_CHECKING

from recstore.lazy import lazy_exports

if TYPE_CHECKING:
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

__all__ = [  # noqa: F822 - the names resolve through __getattr__
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

_MODULES = {
    "recstore.records.compare": "SECTIONS compare_records resolve_sections utf16_length",
    "recstore.records.structure": "DecisionJoin Finding HandoffTransition InputScope "
                                  "RecordAnalysis Request ToolCallJoin Visit analyze envelope_of "
                                  "handoff_transitions initial_agent input_scope requests visits",
    "recstore.records.toolcalls": "extract_tool_calls locate_tool_calls",
}

__getattr__, __dir__ = lazy_exports(
    "recstore.records",
    {name: module for module, names in _MODULES.items() for name in names.split()}, globals())
