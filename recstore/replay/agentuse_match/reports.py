"""The outcome and the ``replay.json`` report (§2.3 "Status, report and exit code", §3.6)."""

from __future__ import annotations

from recstore.replay.agentuse_match.rules import NO_OUTCOME_ERROR, js_trim
from recstore.replay.agentuse_match.state import TapeState
from recstore.runtime import ABSENT


class ReportSteps(TapeState):
    """The replay's status and its ``replay.json`` report."""

    def status(
        self, *, error: str | None = None, final_text: str = "", finish_reason: str | None = None
    ) -> str:
        """The replay status (§2.3 "Status, report and exit code")."""
        if error is not None:
            return "error"
        if self.stop == "missing":
            return "mismatch"
        if self.stop == "proposal":
            return "proposal"
        if self.stop == "incomplete":
            return "incomplete"
        if self.stop == "complete" or (finish_reason == "stop" and js_trim(final_text)):
            return "completed"
        return "error"

    def report(
        self,
        *,
        session_id: str,
        model: str | None,
        final_text: str = "",
        finish_reason: str | None = None,
        error: str | None = None,
        instructions_sha256: str | None = None,
        agent_sha256: str | None = None,
        report_path: str | None = None,
    ) -> dict:
        """The ``replay.json`` fields (§3.6), in agentuse's order."""
        status = self.status(error=error, final_text=final_text, finish_reason=finish_reason)
        if status == "mismatch":
            error = self.stop_reason
        elif status == "error" and error is None:
            error = NO_OUTCOME_ERROR
        original: dict = {"text": self.source.original_text}
        if self.source.original_proposal is not ABSENT:
            original = {"proposal": self.source.original_proposal, **original}
        current: dict = {"text": final_text}
        if self.proposal is not None:
            current["proposal"] = self.proposal
        if self.outcome is not None:
            current["output"] = self.outcome
        report = {
            "success": status in ("proposal", "completed"),
            "status": status,
            "sourceSessionId": self.source.source_id,
            "sessionId": session_id,
            "model": model,
            "sourceModel": self.source.model,
            "instructionsSha256": instructions_sha256,
            "agentSha256": agent_sha256,
            "referenceFiles": [
                {"path": r.path, "sha256": r.sha256} for r in self.references.values()
            ],
            "original": original,
            "current": current,
            "calls": self.calls,
        }
        if error is not None:
            report["error"] = error
        report["reportPath"] = report_path
        return report
