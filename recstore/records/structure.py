"""Structure of one RunRecord: input scope, requests and their output intervals, handoff
transitions, agent visits, joined tool calls and decisions, and consistency findings
(docs/aioc-runrecord.md §1.11, §1.14, §8.2).

Everything is derived from the JSON form in one pass per array; nothing here raises on a record
that passed validation — structural inconsistencies become :class:`Finding` entries instead.

Example:
    >>> rec = {"agentName": "A", "items": [{"type": "message", "role": "user", "content": "q"}],
    ...        "inputItemCount": 1, "requestFingerprints": [], "promptSnapshots": [],
    ...        "policyDecisions": []}
    >>> input_scope(rec)
    InputScope(count=1, source='inputItemCount')
    >>> [(v.agent, v.transition) for v in visits(rec)]
    [('A', 'initial')]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from recstore.records.toolcalls import locate_tool_calls

__all__ = [
    "DecisionJoin",
    "Finding",
    "HandoffTransition",
    "InputScope",
    "RecordAnalysis",
    "Request",
    "ToolCallJoin",
    "Visit",
    "analyze",
    "envelope_of",
    "handoff_transitions",
    "initial_agent",
    "input_scope",
    "requests",
    "visits",
]

ENVELOPE_STATUSES = ("ok", "denied", "approval_required")
# Top-level fields that mark a record as newer than aioc 0.2.8 (§1.14); so does any
# `handoffApplied` flag on a policy decision.
NEWER_FIELDS = ("initialAgentName", "executionRecordingStatus")


# how a handoff is known to have switched agent, and how a visit was entered
HandoffBasis = Literal["recorded", "inferred", "unknown"]
VisitTransition = Literal["initial", "applied", "inferred", "unknown"]


@dataclass(slots=True)
class InputScope:
    """How many leading items were the run's input, and which field said so."""

    count: int | None
    source: Literal["inputItemCount", "requestFingerprint"] | None


@dataclass(slots=True)
class Request:
    """One model request (one request fingerprint); its output interval is
    ``items[output_start:output_end]``."""

    index: int
    turn: Any
    agent: Any
    model: Any
    provider: Any
    message_count: int | None
    output_start: int
    output_end: int
    fingerprint: dict[str, Any]


@dataclass(slots=True)
class HandoffTransition:
    """One handoff policy decision and whether it switched the agent.

    ``applied`` is three-valued: ``True``/``False`` when recorded (``handoffApplied``) or inferred
    from ``decision == "allow"`` in legacy records, ``None`` when unknown (newer record, flag
    absent)."""

    decision_index: int
    turn: Any
    call_id: Any
    target: Any
    decision: Any
    applied: bool | None
    basis: HandoffBasis


@dataclass(slots=True)
class Visit:
    """A stretch of the run handled by one agent (§8.2). Empty visits are kept."""

    index: int
    agent: Any
    entered_after_turn: Any
    via_call_id: Any
    transition: VisitTransition
    turns: list[Any] = field(default_factory=list)
    item_start: int | None = None
    item_end: int | None = None


@dataclass(slots=True)
class ToolCallJoin:
    """An extracted tool call (aioc order) joined to its items, request, visit and decisions."""

    index: int
    call: dict[str, Any]
    call_item_index: int | None
    output_item_index: int | None
    in_input: bool
    request_index: int | None = None
    request_turn: Any = None
    visit_index: int | None = None
    agent: Any = None
    policy_decision_index: int | None = None
    decision: Any = None
    suspended_proposal_index: int | None = None
    is_handoff: bool = False
    handoff_target: Any = None
    envelope_status: str | None = None
    envelope_code: Any = None


@dataclass(slots=True)
class DecisionJoin:
    """A policy decision, guardrail decision or suspended proposal joined to its request
    (by turn) and, for the first and last, to a tool call (by callId inside the request)."""

    kind: Literal["policy", "guardrail", "proposal"]
    index: int
    entry: dict[str, Any]
    turn: Any
    request_index: int | None
    tool_call_index: int | None = None


@dataclass(slots=True)
class Finding:
    """A structural inconsistency in a record: reported, never raised."""

    code: str
    message: str
    path: str


@dataclass(slots=True)
class RecordAnalysis:
    """Everything :func:`analyze` derives from one record; projections are built from it."""

    run_id: Any
    status: Any
    agent_name: Any
    initial_agent: Any
    initial_agent_source: str
    execution_recording_status: Any
    item_count: int
    scope: InputScope
    requests: list[Request]
    transitions: list[HandoffTransition]
    visits: list[Visit]
    tool_calls: list[ToolCallJoin]
    policy_decisions: list[DecisionJoin]
    guardrail_decisions: list[DecisionJoin]
    suspended_proposals: list[DecisionJoin]
    findings: list[Finding]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of the whole analysis (``inspect --json``)."""
        return asdict(self)


def _count(value: Any) -> int | None:
    """A JS ``Number.isInteger`` value >= 0 as int (``2.0`` counts, ``True`` does not)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def input_scope(record: dict[str, Any]) -> InputScope:
    """§8.2.1: ``inputItemCount`` if valid, else the first request's ``messageCount``, else none."""
    n_items = len(record["items"])
    count = _count(record.get("inputItemCount"))
    if count is not None and count <= n_items:
        return InputScope(count, "inputItemCount")
    fingerprints = record.get("requestFingerprints") or []
    if fingerprints and isinstance(fingerprints[0], dict):
        count = _count(fingerprints[0].get("messageCount"))
        if count is not None and count <= n_items:
            return InputScope(count, "requestFingerprint")
    return InputScope(None, None)


def _requests(record: dict[str, Any], findings: list[Finding]) -> list[Request]:
    n_items = len(record["items"])
    fingerprints = record.get("requestFingerprints") or []
    starts: list[int] = []
    counts: list[int | None] = []
    previous = 0
    for i, fp in enumerate(fingerprints):
        raw = fp.get("messageCount")
        count = _count(raw)
        path = f"$.requestFingerprints[{i}].messageCount"
        start = previous
        if count is None:
            findings.append(
                Finding("message_count_invalid", f"messageCount {raw!r} is not a count", path)
            )
        elif count > n_items:
            findings.append(
                Finding(
                    "message_count_out_of_range", f"messageCount {count} > {n_items} items", path
                )
            )
            start = n_items
        elif count < previous:
            findings.append(
                Finding(
                    "message_count_non_monotonic",
                    f"messageCount {count} is below the previous request's {previous}",
                    path,
                )
            )
        else:
            start = count
        starts.append(start)
        counts.append(count)
        previous = start
    return [
        Request(
            index=i,
            turn=fp.get("turn"),
            agent=fp.get("agentName"),
            model=fp.get("model"),
            provider=fp.get("providerName"),
            message_count=counts[i],
            output_start=starts[i],
            output_end=starts[i + 1] if i + 1 < len(starts) else n_items,
            fingerprint=fp,
        )
        for i, fp in enumerate(fingerprints)
    ]


def requests(record: dict[str, Any]) -> list[Request]:
    """§8.2.2: one :class:`Request` per request fingerprint, with its output item interval.

    Intervals are kept monotonic and inside ``items`` even when ``messageCount`` is not (see
    :func:`analyze` for the findings that report it)."""
    return _requests(record, [])


def initial_agent(record: dict[str, Any]) -> tuple[Any, str]:
    """§1.14: the agent the run started with, and the field it came from."""
    if isinstance(record.get("initialAgentName"), str):
        return record["initialAgentName"], "initialAgentName"
    for key, source in (
        ("requestFingerprints", "requestFingerprint"),
        ("promptSnapshots", "promptSnapshot"),
    ):
        entries = record.get(key) or []
        if (
            entries
            and isinstance(entries[0], dict)
            and isinstance(entries[0].get("agentName"), str)
        ):
            return entries[0]["agentName"], source
    return record.get("agentName"), "agentName"


def _is_newer_record(record: dict[str, Any], decisions: list[Any]) -> bool:
    return any(key in record for key in NEWER_FIELDS) or any(
        isinstance(d, dict) and "handoffApplied" in d for d in decisions
    )


def _transitions(record: dict[str, Any], findings: list[Finding]) -> list[HandoffTransition]:
    decisions = record.get("policyDecisions") or []
    newer = None  # whether the record is newer than aioc 0.2.8: looked at only when a flag is absent
    out: list[HandoffTransition] = []
    for i, d in enumerate(decisions):
        resource = d.get("resource")
        if not isinstance(resource, dict) or resource.get("kind") != "handoff":
            continue
        flag = d.get("handoffApplied")
        basis: HandoffBasis
        if isinstance(flag, bool):
            applied, basis = flag, "recorded"
        elif newer or (newer is None and (newer := _is_newer_record(record, decisions))):
            # Three-valued: an absent flag in a newer record is unknown, never read as false.
            applied, basis = None, "unknown"
            findings.append(
                Finding(
                    "handoff_applied_unknown",
                    f"handoff to {resource.get('name')!r} ({d.get('decision')}) has no handoffApplied "
                    "flag in a record that records execution; whether it switched agent is unknown",
                    f"$.policyDecisions[{i}]",
                )
            )
        else:  # legacy (aioc <= 0.2.8): an allowed handoff always applied
            applied, basis = d.get("decision") == "allow", "inferred"
        out.append(
            HandoffTransition(
                i,
                d.get("turn"),
                d.get("callId"),
                resource.get("name"),
                d.get("decision"),
                applied,
                basis,
            )
        )
    return out


def handoff_transitions(record: dict[str, Any]) -> list[HandoffTransition]:
    """One :class:`HandoffTransition` per handoff policy decision, in recorded order."""
    return _transitions(record, [])


def _opens_visit(t: HandoffTransition) -> VisitTransition | None:
    """The visit transition a handoff opens, or None when the agent did not change."""
    if t.applied is True:
        return "applied" if t.basis == "recorded" else "inferred"
    if t.applied is None and t.decision == "allow":
        # Possibly applied: open a visit but mark it so nobody reads it as confirmed.
        return "unknown"
    return None


def _visits(record: dict[str, Any], transitions: list[HandoffTransition], reqs: list[Request]) -> list[Visit]:
    agent, _ = initial_agent(record)
    result = [Visit(0, agent, None, None, "initial")]
    for t in transitions:
        kind = _opens_visit(t)
        if kind is not None:
            result.append(Visit(len(result), t.target, t.turn, t.call_id, kind))
    for req in reqs:
        visit = _visit_for_turn(result, req.turn)
        visit.turns.append(req.turn)
        visit.item_start = (
            req.output_start
            if visit.item_start is None
            else min(visit.item_start, req.output_start)
        )
        visit.item_end = (
            req.output_end if visit.item_end is None else max(visit.item_end, req.output_end)
        )
    return result


def _visit_for_turn(all_visits: list[Visit], turn: Any) -> Visit:
    """§8.2.4: the last visit entered before ``turn`` (the initial visit if none)."""
    chosen = all_visits[0]
    if not _is_number(turn):
        return chosen
    for v in all_visits[1:]:
        if _is_number(v.entered_after_turn) and v.entered_after_turn < turn:
            chosen = v
    return chosen


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def visits(record: dict[str, Any]) -> list[Visit]:
    """§8.2.3–4: agent visits in order (never deduped, empty ones kept) with their request turns
    and item intervals."""
    return _visits(record, handoff_transitions(record), requests(record))


def envelope_of(output: Any) -> tuple[str, Any]:
    """``(status, code)`` of an aioc tool-result envelope, or ``("raw", None)`` for any other
    output (legacy records)."""
    if (
        isinstance(output, dict)
        and output.get("status") in ENVELOPE_STATUSES
        and "code" in output
        and "publicReason" in output
        and "data" in output
    ):
        return output["status"], output["code"]
    return "raw", None


def _handoff_target_from_output(output: Any) -> Any:
    if isinstance(output, dict) and isinstance(output.get("data"), dict):
        return output["data"].get("handoffTo")
    return None


class _TurnCallQueues:
    """Entries keyed by ``(turn, callId)``, consumed in record order (callIds repeat)."""

    def __init__(self, entries: list[Any]) -> None:
        self._queues: dict[tuple[Any, ...], list[int]] = {}
        for i, entry in enumerate(entries):
            if isinstance(entry, dict):
                key = (entry.get("turn"), entry.get("callId"))
                try:
                    self._queues.setdefault(key, []).append(i)
                except TypeError:  # unhashable ids in a hand-edited record: cannot join
                    continue
        self.joined: dict[int, int] = {}

    def take(self, turn: Any, call_id: Any, tool_call_index: int) -> int | None:
        try:
            queue = self._queues.get((turn, call_id))
        except TypeError:
            return None
        if not queue:
            return None
        entry = queue.pop(0)
        self.joined[entry] = tool_call_index
        return entry

    def take_any_turn(self, call_id: Any, tool_call_index: int) -> int | None:
        """The first unjoined entry with this callId whatever its turn (records without
        request fingerprints have no turns to join by)."""
        keys = [key for key, queue in self._queues.items() if key[1] == call_id and queue]
        if not keys:
            return None
        key = min(keys, key=lambda k: self._queues[k][0])
        return self.take(key[0], call_id, tool_call_index)


def analyze(record: dict[str, Any]) -> RecordAnalysis:
    """The whole structure of one JSON-form record: scope, requests, transitions, visits, tool
    calls joined to requests/visits/decisions/envelopes, decision joins, and findings."""
    items = record["items"]
    findings: list[Finding] = []
    scope = input_scope(record)
    reqs = _requests(record, findings)
    transitions = _transitions(record, findings)
    all_visits = _visits(record, transitions, reqs)
    visit_of_request = [_visit_for_turn(all_visits, r.turn) for r in reqs]

    policy = record.get("policyDecisions") or []
    proposals = record.get("suspendedProposals") or []
    joiner = _CallJoiner(len(items), scope, reqs, visit_of_request, policy, proposals)
    calls, positions = locate_tool_calls(items)
    joins = [
        joiner.join(i, call, pos)
        for i, (call, pos) in enumerate(zip(calls, positions, strict=True))
    ]

    turn_to_request: dict[Any, int] = {}
    for r in reqs:
        if _is_number(r.turn):
            turn_to_request.setdefault(r.turn, r.index)
    policy_joins = _decision_joins("policy", policy, turn_to_request, joiner.policy.joined)
    proposal_joins = _decision_joins(
        "proposal", proposals, turn_to_request, joiner.proposals.joined
    )
    guardrail_joins = _decision_joins(
        "guardrail", record.get("guardrailDecisions") or [], turn_to_request, {}
    )

    agent, source = initial_agent(record)
    analysis = RecordAnalysis(
        run_id=record.get("runId"),
        status=record.get("status"),
        agent_name=record.get("agentName"),
        initial_agent=agent,
        initial_agent_source=source,
        execution_recording_status=record.get("executionRecordingStatus"),
        item_count=len(items),
        scope=scope,
        requests=reqs,
        transitions=transitions,
        visits=all_visits,
        tool_calls=joins,
        policy_decisions=policy_joins,
        guardrail_decisions=guardrail_joins,
        suspended_proposals=proposal_joins,
        findings=findings,
    )
    _check_consistency(record, analysis, visit_of_request)
    return analysis


class _CallJoiner:
    """Joins each extracted tool call to its request, visit, agent, policy decision, suspended
    proposal, handoff target and envelope (§8.2.5)."""

    def __init__(
        self,
        n_items: int,
        scope: InputScope,
        reqs: list[Request],
        visit_of_request: list[Visit],
        policy: list[Any],
        proposals: list[Any],
    ) -> None:
        self.reqs = reqs
        self.visit_of_request = visit_of_request
        self.owner: list[int | None] = [None] * n_items
        for r in reqs:
            self.owner[r.output_start : r.output_end] = [r.index] * (r.output_end - r.output_start)
        self.input_end = (
            scope.count if scope.count is not None else (reqs[0].output_start if reqs else 0)
        )
        self.decisions = policy
        self.policy = _TurnCallQueues(policy)
        self.proposals = _TurnCallQueues(proposals)

    def join(self, index: int, call: dict[str, Any], position: list[int | None]) -> ToolCallJoin:
        call_at, output_at = position
        anchor = call_at if call_at is not None else output_at
        assert anchor is not None  # a located call has its call item or its output item
        join = ToolCallJoin(index, call, call_at, output_at, in_input=anchor < self.input_end)
        if not join.in_input:
            self._join_request(join, self.owner[anchor])
        self._join_outcome(join)
        return join

    def _join_request(self, join: ToolCallJoin, request_index: int | None) -> None:
        call_id = join.call.get("callId")
        if request_index is None:
            if not self.reqs:  # nothing to join by turn: fall back to the callId alone
                join.policy_decision_index = self.policy.take_any_turn(call_id, join.index)
                join.suspended_proposal_index = self.proposals.take_any_turn(call_id, join.index)
            return
        req = self.reqs[request_index]
        visit = self.visit_of_request[request_index]
        join.request_index, join.request_turn = request_index, req.turn
        join.visit_index, join.agent = visit.index, visit.agent
        join.policy_decision_index = self.policy.take(req.turn, call_id, join.index)
        join.suspended_proposal_index = self.proposals.take(req.turn, call_id, join.index)

    def _join_outcome(self, join: ToolCallJoin) -> None:
        call = join.call
        if join.policy_decision_index is not None:
            decision = self.decisions[join.policy_decision_index]
            join.decision = decision.get("decision")
            resource = decision.get("resource")
            if isinstance(resource, dict) and resource.get("kind") == "handoff":
                join.is_handoff, join.handoff_target = True, resource.get("name")
        if call["hasOutput"]:
            join.envelope_status, join.envelope_code = envelope_of(call.get("output"))
            target = _handoff_target_from_output(call.get("output"))
            if not join.is_handoff and target is not None:
                join.is_handoff, join.handoff_target = True, target
        name = call.get("name")
        if not join.is_handoff and isinstance(name, str) and name.startswith("handoff_to_"):
            join.is_handoff = True  # the target cannot be recovered from a sanitized name (§1.3)


def _decision_joins(
    kind: Literal["policy", "guardrail", "proposal"],
    entries: list[Any],
    turn_to_request: dict[Any, int],
    joined_calls: dict[int, int],
) -> list[DecisionJoin]:
    out = []
    for i, entry in enumerate(entries):
        entry = entry if isinstance(entry, dict) else {}
        turn = entry.get("turn")
        request_index = turn_to_request.get(turn) if _is_number(turn) else None
        out.append(DecisionJoin(kind, i, entry, turn, request_index, joined_calls.get(i)))
    return out


def _check_consistency(
    record: dict[str, Any], analysis: RecordAnalysis, visit_of_request: list[Visit]
) -> None:
    """§8.2.6 and §1.11 invariants, reported as findings."""
    findings = analysis.findings
    snapshots = record.get("promptSnapshots") or []
    if len(snapshots) != len(analysis.requests):
        findings.append(
            Finding(
                "snapshot_fingerprint_count_mismatch",
                f"{len(snapshots)} prompt snapshots but {len(analysis.requests)} request fingerprints",
                "$.promptSnapshots",
            )
        )
    for req in analysis.requests:
        if req.turn != req.index + 1:
            findings.append(
                Finding(
                    "request_turn_out_of_sequence",
                    f"request {req.index} has turn {req.turn!r}, expected {req.index + 1}",
                    f"$.requestFingerprints[{req.index}].turn",
                )
            )
        expected = visit_of_request[req.index].agent
        if req.agent != expected:
            findings.append(
                Finding(
                    "agent_mismatch",
                    f"turn {req.turn} was sent by {req.agent!r} but the visit agent is {expected!r}",
                    f"$.requestFingerprints[{req.index}].agentName",
                )
            )
    if analysis.requests and analysis.scope.source == "inputItemCount":
        first = analysis.requests[0].message_count
        if first is not None and first != analysis.scope.count:
            findings.append(
                Finding(
                    "input_scope_mismatch",
                    f"first request's messageCount {first} differs from inputItemCount {analysis.scope.count}",
                    "$.requestFingerprints[0].messageCount",
                )
            )
    final_agent = analysis.visits[-1].agent
    if record.get("agentName") != final_agent:
        findings.append(
            Finding(
                "final_agent_mismatch",
                f"agentName {record.get('agentName')!r} is not the last visit's agent {final_agent!r}",
                "$.agentName",
            )
        )
    if not analysis.requests and record.get("response"):
        findings.append(
            Finding(
                "no_requests_recorded",
                "the record has a response but no request fingerprints (hand-written or partial)",
                "$.requestFingerprints",
            )
        )
    _check_calls(record, analysis, findings)


def _check_calls(record: dict[str, Any], analysis: RecordAnalysis, findings: list[Finding]) -> None:
    failed = record.get("status") == "failed"
    for join in analysis.tool_calls:
        call = join.call
        if not call["hasOutput"] and join.call_item_index is not None:
            note = "the run failed before its output" if failed else "in a run that did not fail"
            findings.append(
                Finding(
                    "dangling_call",
                    f"tool call {call.get('name')!r} ({call.get('callId')}) has no output: {note}",
                    f"$.items[{join.call_item_index}]",
                )
            )
        if join.call_item_index is None:
            findings.append(
                Finding(
                    "orphan_output",
                    f"tool output for callId {call.get('callId')!r} has no earlier tool call",
                    f"$.items[{join.output_item_index}]",
                )
            )
    for d in analysis.policy_decisions:
        if d.tool_call_index is None:
            findings.append(
                Finding(
                    "policy_decision_unjoined",
                    f"policy decision for callId {_field(record, 'policyDecisions', d.index, 'callId')!r} "
                    f"matches no tool call of turn {d.turn!r}",
                    f"$.policyDecisions[{d.index}]",
                )
            )


def _field(record: dict[str, Any], key: str, index: int, name: str) -> Any:
    entry = record[key][index]
    return entry.get(name) if isinstance(entry, dict) else None
