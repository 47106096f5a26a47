"""§1.11 invariants of a runtime-written RunRecord, checked independently of recstore.records.

Used by test_runtime.py and test_synth.py; returns problems as strings so a failing test names
every broken rule at once.
"""

from __future__ import annotations

import re

from recstore.canonical import sha256_canonical, sha256_text
from recstore.records import analyze

TOP_LEVEL_ORDER = [
    "runId", "startedAt", "completedAt", "status", "agentName", "providerName", "model",
    "question", "response", "contextSnapshot", "contextRedacted", "items", "inputItemCount",
    "promptSnapshots", "requestFingerprints", "policyDecisions", "suspendedProposals",
    "guardrailDecisions", "errorName", "errorMessage", "metadata",
]
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


def _order_problems(record: dict) -> list[str]:
    keys = list(record)
    expected = [k for k in TOP_LEVEL_ORDER if k in record]
    problems = [] if keys == expected else [f"top-level key order {keys}"]
    for key in ("suspendedProposals", "guardrailDecisions"):
        if key in record and not record[key]:
            problems.append(f"{key} present but empty (aioc omits it)")
    failed = record["status"] == "failed"
    if failed != ("errorName" in record and "errorMessage" in record):
        problems.append("errorName/errorMessage must be present exactly when failed")
    return problems


def _request_problems(record: dict) -> list[str]:
    problems = []
    snaps, fps, items = record["promptSnapshots"], record["requestFingerprints"], record["items"]
    if len(snaps) != len(fps):
        problems.append("snapshot and fingerprint counts differ")
    if fps and fps[0]["messageCount"] != record["inputItemCount"]:
        problems.append("first messageCount != inputItemCount")
    previous = 0
    for i, (snap, fp) in enumerate(zip(snaps, fps, strict=False)):
        if snap["turn"] != i + 1 or fp["turn"] != i + 1:
            problems.append(f"request {i} turn numbering")
        if snap["agentName"] != fp["agentName"]:
            problems.append(f"request {i} snapshot/fingerprint agent differ")
        count = fp["messageCount"]
        if count < previous or count > len(items):
            problems.append(f"request {i} messageCount {count} out of order")
        previous = count
        if fp["messagesHash"] != sha256_canonical(items[:count]):
            problems.append(f"request {i} messagesHash != H(items[:messageCount])")
        if "promptText" in snap and (snap["promptHash"] != sha256_text(snap["promptText"])
                                     or fp["systemPromptHash"] != sha256_canonical(snap["promptText"])):
            problems.append(f"request {i} prompt hashes do not match promptText")
        if not all(_HEX64.match(fp[k]) for k in ("requestHash", "toolsHash", "modelSettingsHash")):
            problems.append(f"request {i} hash format")
    return problems


def _item_problems(record: dict) -> list[str]:
    problems = []
    items = record["items"][record["inputItemCount"]:]
    for i, item in enumerate(items):
        if item["type"] != "tool_call_item":
            continue
        following = items[i + 1] if i + 1 < len(items) else None
        paired = following is not None and following["type"] == "tool_call_output_item" \
            and following["callId"] == item["callId"]
        if not paired and not (record["status"] == "failed" and following is None):
            problems.append(f"emitted call {item['callId']} is not followed by its output")
    last = record["items"][-1] if record["items"] else None
    if record["status"] == "completed":
        if not (last and last.get("role") == "assistant" and last["content"] == record["response"]):
            problems.append("completed run does not end with the response message")
    elif record["response"] != "":
        problems.append("failed run has a response")
    return problems


def _decision_problems(record: dict) -> list[str]:
    problems = []
    turns = len(record["requestFingerprints"])
    for key in ("policyDecisions", "guardrailDecisions", "suspendedProposals"):
        for entry in record.get(key, []):
            if not 1 <= entry["turn"] <= turns:
                problems.append(f"{key} entry with turn {entry['turn']} outside 1..{turns}")
    for d in record["policyDecisions"]:
        if (d["decision"] == "allow") == ("resultMode" in d):
            problems.append(f"decision {d['callId']}: resultMode must be absent exactly for allow")
    approvals = [d for d in record["policyDecisions"] if d["decision"] == "require_approval"]
    if len(approvals) != len(record.get("suspendedProposals", [])):
        problems.append("one suspended proposal per require_approval decision")
    return problems


def _agent_problems(record: dict) -> list[str]:
    """The agent of request t+1 is the last handoff target allowed in turn t (else unchanged),
    and ``agentName`` is the final agent."""
    fps = record["requestFingerprints"]
    if not fps:
        return []
    current = fps[0]["agentName"]
    problems = []
    for i, fp in enumerate(fps):
        if fp["agentName"] != current:
            problems.append(f"request {i} agent {fp['agentName']} != expected {current}")
        current = fp["agentName"]
        for d in record["policyDecisions"]:
            if d["turn"] == i + 1 and d["resource"]["kind"] == "handoff" and d["decision"] == "allow":
                current = d["resource"]["name"]
    if record["agentName"] != current:
        problems.append(f"agentName {record['agentName']} != final agent {current}")
    return problems


def record_problems(record: dict) -> list[str]:
    """Every §1.11 / key-order problem of ``record``, plus ``analyze`` findings other than the
    dangling call a failed run may end with. Empty when the record is sound."""
    problems = (_order_problems(record) + _request_problems(record) + _item_problems(record)
                + _decision_problems(record) + _agent_problems(record))
    for finding in analyze(record).findings:
        if not (finding.code == "dangling_call" and record["status"] == "failed"):
            problems.append(f"analyze finding {finding.code}: {finding.message}")
    return problems
