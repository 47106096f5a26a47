"""The closed dispatcher of a strict replay: :class:`AgentuseTape` sends each call to the
family that serves it (gates and outcome tools, reference reads, store operations, then an
exact recording) and stops at the first call it cannot serve."""

from __future__ import annotations

import copy
from typing import Any

from recstore.replay.agentuse_match.media import MEDIA_REASON, has_media
from recstore.replay.agentuse_match.reads import ReadSteps
from recstore.replay.agentuse_match.recordings import TapeResult
from recstore.replay.agentuse_match.reports import ReportSteps
from recstore.replay.agentuse_match.rules import (
    GATE_TOOL,
    MISMATCH_REASON,
    OUTCOME_TOOLS,
    STALE_LIST_REASON,
    match_key,
)
from recstore.replay.agentuse_match.store_ops import StoreSteps


class AgentuseTape(ReadSteps, StoreSteps, ReportSteps):
    """The closed dispatcher of a strict replay: every tool call goes through :meth:`call`.

    ``project_root`` is the replay's own root (new relative read paths resolve against it);
    recordings resolve against the source's ``cwd``. ``strip_keys`` is ``{"intent"}`` by default
    (agentuse's documented rule); pass :data:`STRIP_RUNTIME_KEYS` to ignore ``recovers`` too.
    """

    def call(self, tool: str, value: Any) -> TapeResult:
        """Answer one tool call of the replay."""
        if self.stop is not None:
            self._log(tool, value, "stopped")
            return TapeResult({"replay": True, "stopped": True})
        if tool == GATE_TOOL:
            self.proposal = copy.deepcopy(value)
            self.stop = "proposal"
            self._log(tool, value, "proposal")
            return TapeResult({"replay": True, "captured": True, "approved": False})
        if tool in OUTCOME_TOOLS:
            self.stop, self.outcome = OUTCOME_TOOLS[tool], copy.deepcopy(value)
            self._log(tool, value, "outcome")
            return TapeResult({"replay": True, "captured": True})
        reference = self._reference(tool, value)
        if reference is not None:
            return reference
        if isinstance(value, dict):
            served = self._store(tool, value)
            if served is not None:
                return served
        if tool == "store_list" and self.store_changed:
            return self._missing(tool, value, STALE_LIST_REASON)
        return self._exact(tool, value)

    def _exact(self, tool: str, value: Any) -> TapeResult:
        queue = self.queues.get(match_key(tool, value, self.project_root, self.strip_keys))
        if not queue:
            return self._missing(tool, value, MISMATCH_REASON)
        rec = queue.popleft()
        if has_media(rec.output):
            return self._missing(tool, value, MEDIA_REASON, rec.part_id)
        self._log(tool, value, "recording", partId=rec.part_id)
        if rec.status == "error":
            return TapeResult(rec.error or "", is_error=True)
        return TapeResult(copy.deepcopy(rec.output))
