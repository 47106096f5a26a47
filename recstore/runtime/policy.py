"""Policy evaluation, tool-result envelopes and suspended proposals, as aioc 0.2.8 shapes them.

Kept free of the loop so each rule can be read (and tested) on its own: §1.3 envelopes, §1.6
decisions and runtime deny reasons, §1.7 proposals, §3 proposal hashes.
"""

from __future__ import annotations

from typing import Any

from recstore.canonical import canonical_json, sha256_canonical
from recstore.runtime.agents import ABSENT, PolicyFn, PolicyInput
from recstore.runtime.errors import error_name_of

__all__ = [
    "blocked_envelope",
    "decision_record",
    "evaluate_policy",
    "ok_envelope",
    "proposal_hash",
    "result_mode",
    "suspended_proposal",
]

_DECISIONS = ("allow", "deny", "require_approval")
_RESULT_MODES = ("throw", "tool_result")
_OPTIONAL_TEXT = ("publicReason", "policyVersion", "expiresAt")


def _runtime_deny(reason: str, metadata: dict | None = None) -> dict:
    result: dict = {"decision": "deny", "reason": reason, "resultMode": "throw"}
    if metadata is not None:
        result["metadata"] = metadata
    return result


def _normalize(raw: Any) -> dict:
    """A well-formed policy result (None values dropped), or a runtime deny explaining why not."""
    if not isinstance(raw, dict):
        return _runtime_deny("invalid_policy_result")
    if "denyMode" in raw:
        return _runtime_deny(
            "deprecated_policy_field_denyMode",
            {
                "deprecatedField": "denyMode",
                "replacementField": "resultMode",
                "receivedValue": raw["denyMode"],
            },
        )
    result = {k: v for k, v in raw.items() if v is not None}
    reason = result.get("reason")
    if result.get("decision") not in _DECISIONS or not isinstance(reason, str) or not reason.strip():
        return _runtime_deny("invalid_policy_result")
    if "resultMode" in result and result["resultMode"] not in _RESULT_MODES:
        return _runtime_deny("invalid_policy_result")
    if any(k in result and not isinstance(result[k], str) for k in _OPTIONAL_TEXT):
        return _runtime_deny("invalid_policy_result")
    if "metadata" in result and not isinstance(result["metadata"], dict):
        return _runtime_deny("invalid_policy_result")
    return result


def evaluate_policy(policy: PolicyFn | None, policy_input: PolicyInput) -> dict:
    """Run ``policy`` and return the normalized result. No policy → ``policy_not_configured``; a
    raising policy → ``policy_error`` with ``{errorName, errorMessage}``; a malformed result →
    ``invalid_policy_result``; a ``denyMode`` field → ``deprecated_policy_field_denyMode``."""
    if policy is None:
        return _runtime_deny("policy_not_configured")
    try:
        raw = policy(policy_input)
    except Exception as exc:  # a policy bug must deny, never crash the run
        return _runtime_deny("policy_error", {"errorName": error_name_of(exc), "errorMessage": str(exc)})
    return _normalize(raw)


def result_mode(result: dict) -> str:
    """``throw`` unless the policy chose ``tool_result``."""
    return result.get("resultMode", "throw")


def decision_record(timestamp: str, turn: int, call_id: str, result: dict, kind: str, name: str) -> dict:
    """A ``policyDecisions[]`` entry in aioc's key order (``resultMode`` only for non-allow)."""
    record: dict = {
        "timestamp": timestamp,
        "turn": turn,
        "callId": call_id,
        "decision": result["decision"],
        "reason": result["reason"],
    }
    if "publicReason" in result:
        record["publicReason"] = result["publicReason"]
    if result["decision"] != "allow":
        record["resultMode"] = result_mode(result)
    if "policyVersion" in result:
        record["policyVersion"] = result["policyVersion"]
    record["resource"] = {"kind": kind, "name": name}
    if "expiresAt" in result:
        record["expiresAt"] = result["expiresAt"]
    if "metadata" in result:
        record["metadata"] = result["metadata"]
    return record


def ok_envelope(data: Any) -> dict:
    """The envelope of an executed tool or an allowed handoff; ``ABSENT`` data leaves no key."""
    envelope: dict = {"status": "ok", "code": None, "publicReason": None}
    if data is not ABSENT:
        envelope["data"] = data
    return envelope


def blocked_envelope(result: dict) -> dict:
    """The envelope of a deny / require_approval in ``tool_result`` mode: trimmed publicReason,
    defaulted when blank."""
    approval = result["decision"] == "require_approval"
    public = result.get("publicReason")
    public = public.strip() if isinstance(public, str) else ""
    if not public:
        public = "Action requires approval." if approval else "Action not allowed."
    return {
        "status": "approval_required" if approval else "denied",
        "code": result["reason"],
        "publicReason": public,
        "data": None,
    }


def proposal_hash(kind: str, agent_name: str, target: str, arguments: Any) -> str:
    """aioc's proposalHash: tool → H({kind, agentName, toolName, argsCanonicalJson}); handoff →
    H({kind, fromAgentName, toAgentName, payloadCanonicalJson}). The canonical JSON of the
    arguments is nested as a string."""
    if kind == "tool":
        body = {"kind": "tool", "agentName": agent_name, "toolName": target,
                "argsCanonicalJson": canonical_json(arguments)}
    else:
        body = {"kind": "handoff", "fromAgentName": agent_name, "toAgentName": target,
                "payloadCanonicalJson": canonical_json(arguments)}
    return sha256_canonical(body)


def suspended_proposal(
    timestamp: str, run_id: str, turn: int, call_id: str, result: dict, policy_input: PolicyInput
) -> dict:
    """A ``suspendedProposals[]`` entry for a require_approval outcome (either result mode)."""
    args = policy_input.arguments
    proposal: dict = {
        "timestamp": timestamp,
        "kind": policy_input.kind,
        "runId": run_id,
        "turn": turn,
        "callId": call_id,
        "agentName": policy_input.agent_name,
        "proposalHash": proposal_hash(policy_input.kind, policy_input.agent_name, policy_input.name, args),
        "reason": result["reason"],
    }
    for key in ("publicReason", "policyVersion", "expiresAt", "metadata"):
        if key in result:
            proposal[key] = result[key]
    if policy_input.kind == "tool":
        proposal["toolName"] = policy_input.name
        proposal["rawArguments"] = policy_input.raw_arguments
        proposal["parsedArguments"] = args
        proposal["argsCanonicalJson"] = canonical_json(args)
    else:
        proposal["fromAgentName"] = policy_input.agent_name
        proposal["toAgentName"] = policy_input.name
        proposal["handoffPayload"] = args
        proposal["payloadCanonicalJson"] = canonical_json(args)
    return proposal
