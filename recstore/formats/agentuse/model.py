"""The agentuse data model: files of a session tree, problems, and the run they fold into.

Plain dataclasses, no behaviour beyond a few derived properties; scanning (``scan``), assembling
(``assemble``) and mapping (``record``, ``columns``) all speak in these types."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

ULID = re.compile(r"[0-9A-Z]{26}")


SESSION_DIR_NAME = re.compile(r"(?P<id>[0-9A-Z]{26})-(?P<agent>.+)")


SESSION_FILE = "session.json"


SUBAGENT_DIR = "subagent"


# Keys agentuse's runtime injects into every tool input (§1.6); narration, not arguments.
RUNTIME_INPUT_KEYS = ("intent", "recovers")


@dataclass(frozen=True)
class TreeFile:
    """One file of a session tree as read from disk.

    ``rel_path`` is POSIX-style and relative to the ``session/`` container (first segment = the
    top-level session directory), ``kind`` one of ``session, tools, context, message, part,
    artifact, replay_report, result_report, effect_wal, checkpoint, other``.
    """

    rel_path: str
    kind: str
    sha256: str
    size: int
    text: str
    source_path: str = ""


@dataclass(frozen=True)
class Problem:
    """A bad or odd input (§4.2). ``kept`` is False when the file's content was not used."""

    rel_path: str
    reason: str
    kept: bool
    source_path: str = ""
    code: str = ""


@dataclass
class SessionTree:
    """The files of one top-level session, including its subagents and top-level orphans."""

    session_id: str
    dir_name: str
    files: list[TreeFile]


@dataclass
class Scan:
    """Result of :func:`scan_tree`: session trees plus files that belong to none of them."""

    root: str
    layout: str
    trees: list[SessionTree]
    problems: list[Problem]


@dataclass
class Message:
    message_id: str
    session_id: str
    created: int | None
    completed: int | None
    task: str | None
    user_prompt: str | None
    model: str | None
    cwd: str | None
    root: str | None
    tokens: dict[str, int]
    context: dict | None
    has_file: bool = True  # False when message.json is missing and only parts exist
    dir_name: str = ""  # the message directory's name (its id, unless message.json says otherwise)
    error: dict | None = None  # assistant.error {message, type?, stack?}
    summary: bool | None = None  # assistant.summary


@dataclass
class ToolCall:
    """A ``tool`` part. ``status`` is the part's state, or ``abandoned`` for a call left
    ``running`` in a session that is no longer running; ``raw_status`` keeps the file's value."""

    part_id: str
    message_id: str
    session_id: str
    call_id: str
    tool: str
    kind: str
    status: str
    raw_status: str
    input: Any
    input_norm: Any
    output: Any
    error: str | None
    t_start: int | None
    t_end: int | None
    metadata: dict | None
    parent_call_id: str | None
    order: int
    turn: int
    child_session_id: str | None = None
    child_link: str | None = None
    child_link_confidence: float | None = None
    artifact_path: str | None = None
    rel_path: str = ""
    sha256: str = ""
    has_input: bool = True  # False when state.input is absent (not null)
    superseded: bool = False  # part of a rewound attempt, left out of the model's history
    raw_approved_input: Any = None  # state.rawApprovedInput: the signed value an approval covered


@dataclass
class Gate:
    """An approval gate, its part's latest state: an ``await_human`` part (``kind``
    ``approval_gate``) or an ordinary tool call held for approval (``resumePayload.kind:
    'tool_approval'``, ``kind`` ``tool_approval``)."""

    part_id: str
    session_id: str
    call_id: str
    status: str
    prompt: str | None
    input: Any
    decision: str | None
    comment: str | None
    reviewer: str | None
    suspended_at: int | None
    resume_payload: dict | None
    t_start: int | None
    t_end: int | None
    turn: int
    kind: str = "approval_gate"
    tool: str = "await_human"
    raw_approved_input: Any = None
    superseded: bool = False


@dataclass
class PartEvent:
    """Any non-tool part (text, reasoning, log, compaction, learning, error, unknown types)."""

    part_id: str
    message_id: str
    session_id: str
    type: str
    subtype: str | None
    t: int | None
    order: int
    turn: int
    payload: dict
    rel_path: str = ""
    sha256: str = ""
    superseded: bool = False


@dataclass
class Artifact:
    """A full tool output saved beside a clamped part (``<msg>/artifact/``)."""

    rel_path: str
    message_id: str
    session_id: str
    tool: str | None
    format: str
    bytes: int
    output: Any
    part_id: str | None = None
    call_id: str | None = None


@dataclass
class Visit:
    """One agent visit: the run's own session (depth 0) or a nested subagent session."""

    session_id: str
    parent_session_id: str | None
    parent_link: str | None
    depth: int
    dir_name: str
    agent_id: str
    agent_name: str | None
    is_subagent: bool
    model: str | None
    status: str
    trigger: str
    mock: bool
    created: int | None
    updated: int | None
    completed: int | None
    tokens: dict[str, int]
    error_code: str | None
    error_message: str | None
    version: str | None
    project_root: str | None
    config: dict
    via_part_id: str | None = None
    via_call_id: str | None = None
    link_confidence: float | None = None
    derived_from_dir_name: bool = False
    extras: dict = field(default_factory=dict)  # newer session.json fields (SESSION_EXTRAS)


@dataclass
class LineageEdge:
    """A derived session's link to its source (strict replay or result test)."""

    kind: str
    source_session_id: str
    source_run_key: str
    report_rel_path: str | None
    report: dict | None


@dataclass
class AgentuseRun:
    """One top-level session with everything below it, mapped onto recstore's model."""

    session_id: str
    run_key: str
    visits: list[Visit]
    messages: list[Message]
    tool_calls: list[ToolCall]
    gates: list[Gate]
    events: list[PartEvent]
    artifacts: list[Artifact]
    lineage: list[LineageEdge]
    tools_snapshot: list[dict]
    problems: list[Problem]

    @property
    def root(self) -> Visit:
        return self.visits[0]

    @property
    def status(self) -> str:
        return self.root.status

    @property
    def primary_message(self) -> Message | None:
        """agentuse's primary message: the root session's first message directory (sorted by
        name) that has a ``message.json``; the first directory when none has one."""
        own = [m for m in self.messages if m.session_id == self.session_id]
        return next((m for m in own if m.has_file), own[0] if own else None)

    def tree_tokens(self) -> dict[str, int]:
        """Token totals over all visits (each session counts only its own calls, §1.11)."""
        total: dict[str, int] = {}
        for visit in self.visits:
            for key, value in visit.tokens.items():
                total[key] = total.get(key, 0) + value
        return total


@dataclass(frozen=True)
class ItemOrigin:
    """Where an item of :func:`to_run_record` came from: its part file and agent visit."""

    rel_path: str | None
    visit_index: int
