"""The corpus's vocabulary: the scenarios, the change kinds a candidate may carry and their
weights, the corpus epoch, and :class:`CaseChange`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

SCENARIOS = (
    "qa", "tools", "policy_soft", "policy_throw", "unknown_tool", "handoff", "cycle",
    "two_handoffs", "conditional", "guardrail", "maxturns", "thread", "edge_args",
    "large_output", "validation", "provider_error", "reused_call_ids",
)


# Common scenarios repeat in the schedule after each scenario has appeared once.
_SCHEDULE = SCENARIOS + ("tools", "qa", "handoff", "tools", "policy_soft", "thread", "guardrail",
                         "cycle")


CHANGE_KINDS = ("tool_argument", "final_wording", "drop_tool_call", "add_tool_call", "status_flip")


_CHANGE_WEIGHTS = (("none", 60), ("tool_argument", 10), ("final_wording", 10),
                   ("drop_tool_call", 7), ("add_tool_call", 7), ("status_flip", 6))


_EPOCH_MS = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp() * 1000)


_ESCAPED = re.compile("[\u2028\u2029\ud800-\udfff]")


_ALLOW = {"decision": "allow", "reason": "allowed_by_default"}


@dataclass(frozen=True)
class CaseChange:
    """What the candidate variant changes in one case: ``kind`` is ``"none"`` or one of
    ``CHANGE_KINDS``; ``detail`` says what exactly, in words."""

    case_id: str
    scenario: str
    kind: str
    detail: str = ""
