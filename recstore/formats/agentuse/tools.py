"""Assembling step: tool calls (``tool`` parts) and approval gates (``await_human`` parts and
tool calls held for approval)."""

from __future__ import annotations

import re
from typing import Any

from recstore.formats.agentuse.builder import BuilderState
from recstore.formats.agentuse.fields import as_int, as_str, dig, normalised_input, tool_kind
from recstore.formats.agentuse.model import Gate, Message, ToolCall, TreeFile, Visit

_ARTIFACT_NOTE = re.compile(
    r"\[Full tool output saved to session artifact: (?P<path>.+?) \((?P<bytes>\d+) bytes\)\.\]"
)


def _resume_payload(state: dict) -> dict | None:
    """A pending part's ``resumePayload``, or the one a resolved part kept in its metadata."""
    payload = state.get("resumePayload") or dig(state, "metadata", "resumePayload")
    return payload if isinstance(payload, dict) else None


def gate_kind(call: ToolCall, part: dict) -> str | None:
    """``approval_gate`` for ``await_human``, ``tool_approval`` for an ordinary tool call held
    for approval (newer builds), else None."""
    if call.kind == "gate":
        return "approval_gate"
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    payload = _resume_payload(state)
    if payload is not None and payload.get("kind") == "tool_approval":
        return "tool_approval"
    return None


def _artifact_ref(output: Any) -> str | None:
    ref = dig(output, "metadata", "fullOutputArtifact", "path")
    if isinstance(ref, str):
        return ref
    if isinstance(output, str):
        m = _ARTIFACT_NOTE.search(output)
        if m:
            return m.group("path")
    return None


class ToolCallSteps(BuilderState):
    """Tool calls and gates."""

    def _tool_call(
        self, part: dict, part_id: str, f: TreeFile, m: Message, visit: Visit, turn: int
    ) -> ToolCall:
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        raw_status = as_str(state.get("status")) or "unknown"
        status = raw_status
        if raw_status == "running" and visit.status not in ("running", "preparing"):
            status = "abandoned"
            self._problem(
                f.rel_path,
                f"tool part left 'running' in a '{visit.status}' session; kept as 'abandoned'",
                True,
                "abandoned_call",
            )
        call_id = as_str(part.get("callID")) or "unknown"
        if call_id == "unknown":
            self._problem(
                f.rel_path,
                "tool part has callID 'unknown'; keyed by part id instead",
                True,
                "unknown_call_id",
            )
        tool = as_str(part.get("tool")) or ""
        inp = state.get("input", None)
        t_start = as_int(dig(state, "time", "start"))
        if raw_status == "pending":
            t_start = t_start if t_start is not None else as_int(state.get("suspendedAt"))
        call = ToolCall(
            part_id=part_id,
            message_id=m.message_id,
            session_id=visit.session_id,
            call_id=call_id,
            tool=tool,
            kind=tool_kind(tool),
            status=status,
            raw_status=raw_status,
            input=inp,
            input_norm=normalised_input(inp),
            output=state.get("output") if raw_status == "completed" else None,
            error=as_str(state.get("error")) if raw_status == "error" else None,
            t_start=t_start,
            t_end=as_int(dig(state, "time", "end")),
            metadata=state.get("metadata") if isinstance(state.get("metadata"), dict) else None,
            parent_call_id=as_str(part.get("parentCallID")),
            order=self.order,
            turn=turn,
            artifact_path=_artifact_ref(state.get("output")),
            rel_path=f.rel_path,
            sha256=f.sha256,
            has_input="input" in state,
            superseded=part.get("superseded") is True,
            raw_approved_input=state.get("rawApprovedInput"),
        )
        payload = _resume_payload(state)
        if (
            call.kind == "subagent"
            and isinstance(payload, dict)
            and as_str(payload.get("childSessionID"))
        ):
            call.child_session_id = payload["childSessionID"]
            call.child_link, call.child_link_confidence = "resumePayload", 1.0
        self.tool_calls.append(call)
        return call

    def _gate(self, call: ToolCall, part: dict, kind: str) -> None:
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        payload = _resume_payload(state)
        # a tool approval's output is the tool's own result, not a reviewer's decision
        out = call.output if isinstance(call.output, dict) and kind == "approval_gate" else {}
        self.gates.append(
            Gate(
                part_id=call.part_id,
                session_id=call.session_id,
                call_id=call.call_id,
                status=call.status,
                prompt=as_str(dig(call.input, "prompt")) if isinstance(call.input, dict) else None,
                input=call.input,
                decision=as_str(out.get("status")),
                comment=as_str(out.get("comment")),
                reviewer=as_str(dig(out, "reviewer", "username")),
                suspended_at=as_int(state.get("suspendedAt")),
                resume_payload=payload if isinstance(payload, dict) else None,
                t_start=call.t_start,
                t_end=call.t_end,
                turn=call.turn,
                kind=kind,
                tool=call.tool,
                raw_approved_input=call.raw_approved_input,
                superseded=call.superseded,
            )
        )
