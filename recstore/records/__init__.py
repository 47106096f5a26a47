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
from recstore.records.toolcalls import extract_tool_calls

__all__ = [
    "SECTIONS",
    "compare_records",
    "extract_tool_calls",
    "resolve_sections",
    "utf16_length",
]
