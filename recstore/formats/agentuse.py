"""agentuse session trees -> runs, visits, tool calls, approval gates and events.

agentuse (docs/agentuse-sessions.md §1) stores one directory per agent visit, one JSON file per
message and per part, and rewrites those files in place while a run is alive. This module is the
pure half of ingesting them, in two steps that the store composes:

1. :func:`scan_tree` walks a data root, a project directory, a ``session/`` container or a single
   session directory (auto-detected) and returns, per top-level session, the files of its tree
   (raw text + SHA-256, keyed by a path relative to the ``session/`` container, which is also how
   agentuse addresses artifacts). Files that cannot belong to any tree (``*.tmp`` leftovers,
   orphaned children whose parent is absent, non-UTF-8 bytes) come back as problems.
2. :func:`assemble_run` folds the files of one tree into an :class:`AgentuseRun`. It reads only
   the (path, text) pairs it is given, so the store can rebuild a run from its event log alone,
   and a re-scan only has to append files whose hash changed.

Every anomaly of §4.2 is reported as a :class:`Problem` naming the file; ``kept`` says whether
the file's content was still used (salvaged JSON, stuck ``running`` sessions, ``callID:
"unknown"``) or dropped (truncated JSON, temp files, orphans).

Example:
    >>> scan = scan_tree("~/.local/share/agentuse")  # doctest: +SKIP
    >>> run = assemble_run(scan.trees[0].files)  # doctest: +SKIP
    >>> run.run_key, run.status, [v.agent_id for v in run.visits]  # doctest: +SKIP
    ('agentuse:01M8PCRENAD8M1WA7TYT0KGN5Y', 'completed', ['agents/reply', 'agents/research'])
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from recstore.canonical import JSONParseError, json_type_name, loads_strict
from recstore.formats.jsontext import dumps_json

__all__ = [
    "AgentuseRun",
    "Artifact",
    "Gate",
    "LineageEdge",
    "Message",
    "PartEvent",
    "Problem",
    "Scan",
    "SessionTree",
    "ToolCall",
    "TreeFile",
    "Visit",
    "ItemOrigin",
    "agentuse_metadata",
    "assemble_run",
    "is_agentuse_tree",
    "iso_ms",
    "message_columns",
    "normalised_input",
    "part_sort_key",
    "scan_tree",
    "session_columns",
    "session_extras",
    "to_run_record",
    "wrong_typed_fields",
]

ULID = re.compile(r"[0-9A-Z]{26}")
_SESSION_DIR = re.compile(r"(?P<id>[0-9A-Z]{26})-(?P<agent>.+)")
_TMP_FILE = re.compile(r".*\.(json|txt|jsonl)\.[^/]+\.tmp|.*\.tmp")
_ARTIFACT_NOTE = re.compile(
    r"\[Full tool output saved to session artifact: (?P<path>.+?) \((?P<bytes>\d+) bytes\)\.\]"
)
SESSION_FILE = "session.json"
SUBAGENT_DIR = "subagent"
# Keys agentuse's runtime injects into every tool input (§1.6); narration, not arguments.
RUNTIME_INPUT_KEYS = ("intent", "recovers")
_REPORT_FILES = {"replay.json": "replay_report", "result-test.json": "result_report"}
_SESSION_LEVEL_FILES = {
    SESSION_FILE: "session",
    "tools.json": "tools",
    "context.json": "context",
    "effect-wal.jsonl": "effect_wal",
    **_REPORT_FILES,
}


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


# ----------------------------------------------------------------------------------------------
# Scanning


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _is_session_dir(path: Path, parent_is_container: bool) -> bool:
    if (path / SESSION_FILE).is_file():
        return True
    # A session dir whose session.json is missing (§4.2.3) still has its ULID-agent name.
    return parent_is_container and _SESSION_DIR.fullmatch(path.name) is not None


def _find_containers(root: Path) -> tuple[str, list[Path]]:
    """The ``session/`` containers under ``root`` and the detected layout."""
    if (root / SESSION_FILE).is_file():
        return "session", [root.parent]
    if root.name == "session" or any(
        child.is_dir() and (child / SESSION_FILE).is_file() for child in _subdirs(root)
    ):
        return "session_container", [root]
    if (root / "session").is_dir():
        return "project", [root / "session"]
    for base in (root, root / "agentuse"):
        if (base / "project").is_dir():
            return "data_root", [
                p / "session" for p in _subdirs(base / "project") if (p / "session").is_dir()
            ]
    return "unknown", []


def _subdirs(path: Path) -> list[Path]:
    try:
        return sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return []


def is_agentuse_tree(path: str | Path) -> bool:
    """True if ``path`` is an agentuse data root, project dir, session container or session."""
    p = Path(path)
    return p.is_dir() and bool(_find_containers(p)[1])


def _read_file(path: str, rel: str, kind: str, problems: list[Problem]) -> TreeFile | None:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:  # removed while we scanned (a live run); other I/O errors surface
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(
            Problem(
                rel,
                f"not UTF-8 text (invalid byte at offset {exc.start}); skipped",
                False,
                path,
                "not_utf8",
            )
        )
        return None
    return TreeFile(rel, kind, _sha256(data), len(data), text, path)


def _collect_session(path: Path, rel: str, out: list[TreeFile], problems: list[Problem]) -> None:
    """All files of the session at ``path`` (recursing into ``subagent/``)."""
    for entry in sorted(path.iterdir()):
        entry_rel = f"{rel}/{entry.name}"
        if entry.is_file():
            if _TMP_FILE.fullmatch(entry.name):
                problems.append(
                    Problem(
                        entry_rel,
                        "leftover temp file of an interrupted atomic write; ignored",
                        False,
                        str(entry),
                        "tmp_file",
                    )
                )
                continue
            kind = _SESSION_LEVEL_FILES.get(entry.name) or (
                "checkpoint" if entry.suffix == ".json" else "other"
            )
            tree_file = _read_file(str(entry), entry_rel, kind, problems)
            if tree_file:
                out.append(tree_file)
        elif entry.name == SUBAGENT_DIR:
            for child in _subdirs(entry):
                if _is_session_dir(child, True):
                    _collect_session(child, f"{entry_rel}/{child.name}", out, problems)
                else:
                    problems.append(
                        Problem(
                            f"{entry_rel}/{child.name}",
                            "subagent directory is not a session (no session.json, name not <ULID>-<agent>); skipped",
                            False,
                            str(child),
                            "not_session",
                        )
                    )
        elif entry.is_dir():
            _collect_message_dir(entry, entry_rel, out, problems)


def _walk_files(path: str, rel: str) -> list[tuple[str, str]]:
    """(absolute path, path relative to the message dir) of every file below ``path``, sorted;
    os.scandir because pathlib's per-path parsing dominated scans of big trees."""
    found = []
    try:
        entries = list(os.scandir(path))
    except FileNotFoundError:  # removed while we scanned
        return []
    for entry in entries:
        sub = f"{rel}/{entry.name}" if rel else entry.name
        if entry.is_dir(follow_symlinks=False):
            found.extend(_walk_files(entry.path, sub))
        elif entry.is_file():
            found.append((entry.path, sub))
    return sorted(found, key=lambda f: f[1])


def _message_file_kind(inner: str) -> str:
    head, _, name = inner.partition("/")
    if inner == "message.json":
        return "message"
    if head == "part" and "/" not in name and name.endswith(".json"):
        return "part"
    if head == "artifact" and "/" not in name:
        return "artifact"
    return "other"


def _collect_message_dir(
    path: Path, rel: str, out: list[TreeFile], problems: list[Problem]
) -> None:
    for file, inner in _walk_files(str(path), ""):
        file_rel = f"{rel}/{inner}"
        if _TMP_FILE.fullmatch(inner.rsplit("/", 1)[-1]):
            problems.append(
                Problem(
                    file_rel,
                    "leftover temp file of an interrupted atomic write; ignored",
                    False,
                    file,
                    "tmp_file",
                )
            )
            continue
        tree_file = _read_file(file, file_rel, _message_file_kind(inner), problems)
        if tree_file:
            out.append(tree_file)


def _peek_session(files: Sequence[TreeFile], dir_rel: str) -> dict:
    """The parsed session.json at ``dir_rel`` (salvaged if need be), or {}."""
    for f in files:
        if f.rel_path == f"{dir_rel}/{SESSION_FILE}":
            value, _ = _parse_json(f.text)
            return value if isinstance(value, dict) else {}
    return {}


def scan_tree(path: str | Path) -> Scan:
    """Walk an agentuse tree (layout auto-detected) and group its files by top-level session.

    Top-level directories that are really subagents (``parentSessionID`` set; a pre-2026-06-05
    resume bug wrote some there, §1.10) join their parent's tree when the parent is in the scan;
    otherwise they are reported as orphans and skipped.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    root = Path(path).expanduser()
    if not root.exists():
        raise FileNotFoundError(str(path))
    layout, containers = _find_containers(root)
    problems: list[Problem] = []
    trees: list[SessionTree] = []
    if layout == "session":
        containers_dirs = [(root.parent, [root])]
    else:
        containers_dirs = [
            (c, [d for d in _subdirs(c) if _is_session_dir(d, True)]) for c in containers
        ]
    for _container, session_dirs in containers_dirs:
        by_dir: list[tuple[str, dict, list[TreeFile]]] = []
        for session_dir in session_dirs:
            files: list[TreeFile] = []
            _collect_session(session_dir, session_dir.name, files, problems)
            by_dir.append((session_dir.name, _peek_session(files, session_dir.name), files))
        trees.extend(_group_orphans(by_dir, problems))
    return Scan(str(root), layout, trees, problems)


def _session_ids_in(files: Iterable[TreeFile]) -> set[str]:
    """IDs of every session directory that owns one of ``files`` (from the directory names)."""
    ids = set()
    for f in files:
        if f.kind == "session":
            m = _SESSION_DIR.fullmatch(f.rel_path.rsplit("/", 2)[-2])
            if m:
                ids.add(m.group("id"))
    return ids


def _group_orphans(
    by_dir: list[tuple[str, dict, list[TreeFile]]], problems: list[Problem]
) -> list[SessionTree]:
    trees: dict[str, SessionTree] = {}
    orphans: list[tuple[str, dict, list[TreeFile]]] = []
    for dir_name, info, files in by_dir:
        sid = _session_id(info, dir_name)
        if info.get("parentSessionID"):
            orphans.append((dir_name, info, files))
        else:
            trees[dir_name] = SessionTree(sid, dir_name, files)
    owner_of: dict[str, SessionTree] = {}
    for tree in trees.values():
        for sid in _session_ids_in(tree.files) | {tree.session_id}:
            owner_of[sid] = tree
    pending = orphans
    while pending:  # an orphan's parent may itself be an orphan listed later
        progressed, rest = False, []
        for dir_name, info, files in pending:
            owner = owner_of.get(info["parentSessionID"])
            if owner is None:
                rest.append((dir_name, info, files))
                continue
            owner.files.extend(files)
            owner_of[_session_id(info, dir_name)] = owner
            progressed = True
        pending = rest
        if not progressed:
            break
    for dir_name, info, files in pending:
        problems.append(
            Problem(
                f"{dir_name}/{SESSION_FILE}",
                f"orphaned subagent session: parent session {info['parentSessionID']} is not in this "
                f"tree; its {len(files)} file(s) were skipped",
                False,
                next((f.source_path for f in files if f.kind == "session"), ""),
                "orphan",
            )
        )
    return list(trees.values())


def _session_id(info: dict, dir_name: str) -> str:
    sid = info.get("id")
    if isinstance(sid, str) and sid:
        return sid
    m = _SESSION_DIR.fullmatch(dir_name)
    return m.group("id") if m else dir_name


# ----------------------------------------------------------------------------------------------
# Assembling


def _parse_json(text: str) -> tuple[Any, str | None]:
    """(value, problem): strict parse; a complete object followed by garbage is salvaged (§4.2.1)."""
    try:
        return loads_strict(text), None
    except JSONParseError as exc:
        stripped = text.lstrip()
        try:
            value, end = json.JSONDecoder().raw_decode(stripped)
        except (json.JSONDecodeError, RecursionError):
            return None, f"corrupt JSON ({exc}); skipped"
        trailing = len(stripped) - end
        return (
            value,
            f"valid JSON object followed by {trailing} byte(s) of garbage; first object salvaged",
        )


def _num(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value)


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


# part types agentuse orders by their own ``time.start``; every other type (declared but never
# written, or newer than this code) sorts last, as in agentuse's getPartOrder
_TIMED_PART_TYPES = frozenset(
    {"text", "reasoning", "compaction", "corrections", "learning", "error", "log", "verify"}
)


def part_sort_key(part: dict) -> tuple[float, str]:
    """agentuse's part order (§1.9): own start time (pending tools: ``suspendedAt``), +inf when
    unknown or for part types agentuse does not time, ties broken by part ID."""
    ptype = part.get("type")
    if ptype == "tool":
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        t = (
            _num(state.get("suspendedAt"))
            if state.get("status") == "pending"
            else _num(_get(state, "time", "start"))
        )
    elif isinstance(ptype, str) and ptype in _TIMED_PART_TYPES:
        t = _num(_get(part, "time", "start"))
    else:
        t = None
    return (math.inf if t is None else float(t), str(part.get("id", "")))


def normalised_input(value: Any, strip: Iterable[str] = RUNTIME_INPUT_KEYS) -> Any:
    """A tool input without the runtime-injected top-level narration keys (``intent``,
    ``recovers``); non-object inputs are returned unchanged."""
    if isinstance(value, dict):
        drop = set(strip)
        return {k: v for k, v in value.items() if k not in drop}
    return value


def _tokens(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {
        "input": _num(raw.get("input")) or 0,
        "output": _num(raw.get("output")) or 0,
        "reasoning": _num(raw.get("reasoning")) or 0,
        "cache_read": _num(_get(raw, "cache", "read")) or 0,
        "cache_write": _num(_get(raw, "cache", "write")) or 0,
    }


def _tool_kind(name: str) -> str:
    if name == "await_human":
        return "gate"
    if name.startswith("subagent__"):
        return "subagent"
    if name.startswith("store_"):
        return "store"
    if name.startswith("mcp__"):
        return "mcp"
    return "tool"


# The JSON type of every field agentuse's writers give a type (src/session/types.ts), by file
# kind and part type. A present field of another type is an input error: the field is ignored
# and the file is reported (``invalid_field``), instead of silently reading as absent. ``null``
# counts as absent. "number" excludes booleans, as in JSON.
_FIELD_TYPES: dict[str, dict[str, str]] = {
    "session": {
        "id": "string", "parentSessionID": "string", "status": "string", "trigger": "string",
        "agent": "object", "agent.id": "string", "agent.name": "string",
        "agent.filePath": "string", "agent.description": "string", "agent.isSubAgent": "boolean",
        "model": "string", "version": "string", "mock": "boolean", "config": "object",
        "config.replaySourceSessionId": "string", "config.resultSourceSessionId": "string",
        "project": "object", "project.root": "string", "project.cwd": "string",
        "time": "object", "time.created": "number", "time.updated": "number",
        "time.execution": "array", "owner": "object", "owner.pid": "number",
        "error": "object", "error.message": "string", "error.code": "string",
        "errorHistory": "array", "dismissedAt": "number", "reviewedAt": "number",
        "verification": "object", "verification.status": "string",
        "verification.redoCount": "number", "executionBudget": "object", "channels": "object",
    },
    "message": {
        "id": "string", "time": "object", "time.created": "number", "time.completed": "number",
        "user": "object", "user.prompt": "object", "user.prompt.task": "string",
        "user.prompt.user": "string", "assistant": "object", "assistant.modelID": "string",
        "assistant.path": "object", "assistant.path.cwd": "string",
        "assistant.path.root": "string", "assistant.tokens": "object",
        "assistant.tokens.input": "number", "assistant.tokens.output": "number",
        "assistant.tokens.reasoning": "number", "assistant.tokens.cache": "object",
        "assistant.tokens.cache.read": "number", "assistant.tokens.cache.write": "number",
        "assistant.context": "object", "assistant.error": "object",
        "assistant.summary": "boolean",
    },
    "tools": {"tools": "array"},
    "part": {"id": "string", "type": "string", "superseded": "boolean"},
    "part:text": {
        "text": "string", "role": "string", "synthetic": "boolean", "time": "object",
        "time.start": "number", "time.end": "number",
    },
    "part:tool": {
        "callID": "string", "tool": "string", "parentCallID": "string", "state": "object",
        "state.status": "string", "state.time": "object", "state.time.start": "number",
        "state.time.end": "number", "state.error": "string", "state.metadata": "object",
        "state.suspendedAt": "number", "state.resumePayload": "object",
    },
    "part:timed": {"time": "object", "time.start": "number"},
}
_JSON_TYPES = {
    "string": str, "boolean": bool, "object": dict, "array": list, "number": (int, float),
}


def _a(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


def wrong_typed_fields(value: dict, spec: str) -> list[str]:
    """``"<field> is a <type> (expected a <type>)"`` for each present, non-null field of
    ``value`` whose JSON type differs from :data:`_FIELD_TYPES` ``[spec]``."""
    wrong = []
    for path, expected in _FIELD_TYPES[spec].items():
        field_value = _get(value, *path.split("."))
        if field_value is None:
            continue
        is_bool = isinstance(field_value, bool)
        ok = isinstance(field_value, _JSON_TYPES[expected]) and (expected != "number" or not is_bool)
        if not ok:
            actual = json_type_name(field_value)
            wrong.append(f"{path} is {_a(actual)} (expected {_a(expected)})")
    return wrong


# session.json fields of newer agentuse builds, kept per visit as they are (well-typed only)
SESSION_EXTRAS = {
    "errorHistory": ("errorHistory",),
    "verification": ("verification",),
    "owner": ("owner",),
    "execution": ("time", "execution"),
    "executionBudget": ("executionBudget",),
    "channels": ("channels",),
    "dismissedAt": ("dismissedAt",),
    "reviewedAt": ("reviewedAt",),
    "observability": ("observability",),
}
_EXTRA_TYPES = {"dismissedAt": "number", "reviewedAt": "number", "errorHistory": "array",
                "execution": "array"}


def session_extras(info: dict) -> dict:
    """The newer ``session.json`` fields present in ``info`` (``time.execution`` as
    ``execution``); a field of the wrong JSON type is left out (and reported by the builder)."""
    out = {}
    for name, path in SESSION_EXTRAS.items():
        value = _get(info, *path)
        expected = _JSON_TYPES[_EXTRA_TYPES.get(name, "object")]
        if isinstance(value, expected) and not isinstance(value, bool):
            out[name] = value
    return out


@dataclass
class _SessionFiles:
    dir_rel: str
    depth: int
    nested_parent_dir: str | None
    files: list[TreeFile] = field(default_factory=list)


def _split_sessions(files: Sequence[TreeFile]) -> dict[str, _SessionFiles]:
    """Group files by the session directory that owns them (the deepest ``<dir>`` before a
    non-``subagent`` segment)."""
    sessions: dict[str, _SessionFiles] = {}
    for f in files:
        segments = f.rel_path.split("/")
        i = 1  # segments[0] is a top-level session dir
        while i + 1 < len(segments) and segments[i] == SUBAGENT_DIR:
            i += 2
        dir_rel = "/".join(segments[:i])
        if dir_rel not in sessions:
            depth = dir_rel.count(f"/{SUBAGENT_DIR}/")
            parent = dir_rel.rsplit(f"/{SUBAGENT_DIR}/", 1)[0] if depth else None
            sessions[dir_rel] = _SessionFiles(dir_rel, depth, parent)
        sessions[dir_rel].files.append(f)
    return sessions


def assemble_run(files: Sequence[TreeFile]) -> AgentuseRun:
    """Fold the files of one session tree into an :class:`AgentuseRun`.

    ``files`` may come from :func:`scan_tree` or from stored events (latest version per path).

    Raises:
        ValueError: no top-level session can be identified in ``files``.
    """
    problems: list[Problem] = []
    sessions = _split_sessions(files)
    parsed: dict[str, Any] = {}
    by_rel: dict[str, TreeFile] = {}
    for f in files:
        by_rel[f.rel_path] = f
        if f.kind in ("artifact", "other") and not f.rel_path.endswith(".json"):
            continue
        if f.kind == "effect_wal":
            parsed[f.rel_path] = _parse_wal(f, problems)
            continue
        value, problem = _parse_json(f.text)
        if problem:
            problems.append(
                Problem(
                    f.rel_path,
                    problem,
                    value is not None,
                    f.source_path,
                    "salvaged" if value is not None else "corrupt_json",
                )
            )
        if value is not None or problem is None:  # a file holding `null` is parsed, not corrupt
            parsed[f.rel_path] = value

    builder = _RunBuilder(sessions, parsed, by_rel, problems)
    return builder.build()


def _parse_wal(f: TreeFile, problems: list[Problem]) -> list[dict]:
    rows = []
    for lineno, line in enumerate(f.text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(loads_strict(line))
        except JSONParseError as exc:
            problems.append(
                Problem(
                    f"{f.rel_path}:{lineno}",
                    f"corrupt effect-wal line ({exc}); skipped",
                    False,
                    f.source_path,
                    "corrupt_json",
                )
            )
    return rows


class _RunBuilder:
    """Builds one AgentuseRun; split out only to keep each step a short method."""

    def __init__(
        self,
        sessions: dict[str, _SessionFiles],
        parsed: dict[str, Any],
        by_rel: dict[str, TreeFile],
        problems: list[Problem],
    ) -> None:
        self.sessions = sessions
        self.parsed = parsed
        self.by_rel = by_rel
        self.problems = problems
        self.visits: list[Visit] = []
        self.messages: list[Message] = []
        self.tool_calls: list[ToolCall] = []
        self.gates: list[Gate] = []
        self.events: list[PartEvent] = []
        self.artifacts: list[Artifact] = []
        self.lineage: list[LineageEdge] = []
        self.tools_snapshot: list[dict] = []
        self.order = 0

    def _problem(self, rel: str, reason: str, kept: bool, code: str) -> None:
        f = self.by_rel.get(rel)
        self.problems.append(Problem(rel, reason, kept, f.source_path if f else "", code))

    def build(self) -> AgentuseRun:
        infos = {dir_rel: self._session_info(s) for dir_rel, s in self.sessions.items()}
        ids = {
            dir_rel: _session_id(info, dir_rel.rsplit("/", 1)[-1])
            for dir_rel, info in infos.items()
        }
        roots = [
            d
            for d, s in self.sessions.items()
            if s.depth == 0 and not infos[d].get("parentSessionID")
        ]
        if not roots:
            raise ValueError(
                "no top-level session (session.json without parentSessionID) in these files"
            )
        root_dir = sorted(roots)[0]
        by_id = {sid: d for d, sid in ids.items()}
        ordered = self._order_sessions(root_dir, infos, ids, by_id)
        for dir_rel in ordered:
            self._build_visit(dir_rel, infos[dir_rel], ids[dir_rel], ids)
        self._link_children()
        self._link_artifacts()
        root = self.visits[0]
        return AgentuseRun(
            session_id=root.session_id,
            run_key=f"agentuse:{root.session_id}",
            visits=self.visits,
            messages=self.messages,
            tool_calls=self.tool_calls,
            gates=self.gates,
            events=self.events,
            artifacts=self.artifacts,
            lineage=self.lineage,
            tools_snapshot=self.tools_snapshot,
            problems=self.problems,
        )

    def _session_info(self, s: _SessionFiles) -> dict:
        rel = f"{s.dir_rel}/{SESSION_FILE}"
        info = self.parsed.get(rel)
        if isinstance(info, dict):
            self._check_fields(rel, info, "session")
            return info
        if rel in self.parsed:
            self._not_an_object(
                rel, info, "id and agent taken from the directory name, status unknown"
            )
        elif rel not in self.by_rel:
            self._problem(
                s.dir_rel,
                "session directory without session.json; id and agent derived from the directory name",
                True,
                "missing_session_json",
            )
        return {"_derived": True}

    def _not_an_object(self, rel: str, value: Any, consequence: str) -> None:
        """A JSON file agentuse writes as an object holds something else: reported, not used
        (``null`` is its own code: agentuse reads it as an absent file)."""
        self._problem(
            rel,
            f"holds a JSON {json_type_name(value)}, not an object; {consequence}",
            False,
            "json_null" if value is None else "not_an_object",
        )

    def _check_fields(self, rel: str, value: dict, *specs: str) -> None:
        wrong = [w for spec in specs for w in wrong_typed_fields(value, spec)]
        if not wrong:
            return
        consequence = "those fields were ignored"
        if specs[0] == "part" and any(w.startswith("type ") for w in wrong):
            consequence = "the part's kind is unknown, so it is kept as an event of type 'unknown', not as a message or tool call"
        self._problem(
            rel, f"wrong-typed field(s): {'; '.join(wrong)}; {consequence}", True, "invalid_field"
        )

    def _order_sessions(self, root_dir: str, infos: dict, ids: dict, by_id: dict) -> list[str]:
        """Root first, then children depth-first in agentuse's child order
        ``(time.created, agent.id, id)``; parents come from ``parentSessionID`` else nesting."""
        children: dict[str, list[str]] = {}
        unreachable = []
        for dir_rel in infos:
            if dir_rel == root_dir:
                continue
            parent = self._parent_dir(dir_rel, infos, by_id)
            if parent is None:
                unreachable.append(dir_rel)
                continue
            children.setdefault(parent, []).append(dir_rel)

        def child_key(d: str) -> tuple:
            info = infos[d]
            return (
                _num(_get(info, "time", "created")) or 0,
                str(_get(info, "agent", "id") or ""),
                ids[d],
            )

        out: list[str] = []
        stack = [root_dir]
        while stack:
            d = stack.pop()
            out.append(d)
            stack.extend(sorted(children.get(d, []), key=child_key, reverse=True))
        for d in unreachable + [d for d in infos if d not in out and d not in unreachable]:
            self._problem(
                f"{d}/{SESSION_FILE}",
                "subagent session whose parent is not in this tree; skipped",
                False,
                "orphan",
            )
        return out

    def _parent_dir(self, dir_rel: str, infos: dict, by_id: dict) -> str | None:
        parent_id = infos[dir_rel].get("parentSessionID")
        if isinstance(parent_id, str) and parent_id in by_id:
            return by_id[parent_id]
        return self.sessions[dir_rel].nested_parent_dir

    def _build_visit(self, dir_rel: str, info: dict, sid: str, ids: dict) -> None:
        s = self.sessions[dir_rel]
        dir_name = dir_rel.rsplit("/", 1)[-1]
        derived = bool(info.get("_derived"))
        name_match = _SESSION_DIR.fullmatch(dir_name)
        if not derived and name_match and info.get("id") and info["id"] != name_match.group("id"):
            self._problem(
                f"{dir_rel}/{SESSION_FILE}",
                f"session id {info['id']} differs from the directory name prefix {name_match.group('id')}; the file is trusted",
                True,
                "id_mismatch",
            )
        parent_id = _str(info.get("parentSessionID"))
        parent_link = "parentSessionID" if parent_id else None
        if not parent_id and s.nested_parent_dir and s.nested_parent_dir in ids:
            parent_id, parent_link = ids[s.nested_parent_dir], "nesting"
        status = _str(info.get("status")) or "unknown"
        msgs = self._messages(s, sid)
        tokens: dict[str, int] = {}
        for m in msgs:
            for k, v in m.tokens.items():
                tokens[k] = tokens.get(k, 0) + v
        error = info.get("error") if isinstance(info.get("error"), dict) else {}
        agent = info.get("agent") if isinstance(info.get("agent"), dict) else {}
        agent_id = (
            _str(agent.get("id"))
            or _str(agent.get("name"))
            or (name_match.group("agent") if name_match else dir_name)
        )
        visit = Visit(
            session_id=sid,
            parent_session_id=parent_id,
            parent_link=parent_link,
            depth=s.depth or (self._depth_of(parent_id) + 1 if parent_id else 0),
            dir_name=dir_name,
            agent_id=agent_id,
            agent_name=_str(agent.get("name")),
            is_subagent=agent.get("isSubAgent") is True or parent_id is not None,
            model=_str(info.get("model")) or next((m.model for m in msgs if m.model), None),
            status=status,
            trigger=_str(info.get("trigger")) or "manual",
            mock=info.get("mock") is True,
            created=_num(_get(info, "time", "created")),
            updated=_num(_get(info, "time", "updated")),
            completed=max((m.completed for m in msgs if m.completed), default=None),
            tokens=tokens,
            error_code=_str(error.get("code")),
            error_message=_str(error.get("message")),
            version=_str(info.get("version")),
            project_root=_str(_get(info, "project", "root")),
            config=info.get("config") if isinstance(info.get("config"), dict) else {},
            derived_from_dir_name=derived,
            extras=session_extras(info),
        )
        self.visits.append(visit)
        if status in ("running", "preparing"):
            self._problem(
                f"{dir_rel}/{SESSION_FILE}",
                f"session is still '{status}' (live, or stuck after a crash); kept as '{status}' and re-read on the next scan",
                True,
                "still_running",
            )
        if not self.tools_snapshot and s.depth == 0:
            self.tools_snapshot = self._tools_snapshot(f"{dir_rel}/tools.json")
        self._lineage(dir_rel, visit)
        self._misplaced_files(s)
        for mid, m in zip(self._message_dirs(s), msgs, strict=True):
            self._parts(s, mid, m, visit)

    def _misplaced_files(self, s: _SessionFiles) -> None:
        """Files where agentuse keeps a directory (a message directory, ``subagent/``, a
        message's ``part/`` or ``artifact/``): nothing is read from them, so say so."""
        for f in s.files:
            inner = f.rel_path[len(s.dir_rel) + 1 :].split("/")
            misplaced = (len(inner) == 1 and (ULID.fullmatch(inner[0]) or inner[0] == SUBAGENT_DIR)) or (
                len(inner) == 2 and ULID.fullmatch(inner[0]) and inner[1] in ("part", "artifact")
            )
            if misplaced:
                self._problem(
                    f.rel_path,
                    f"is a file where agentuse keeps the directory '{inner[-1]}'; no message, "
                    "part or session was read from it (its bytes are kept)",
                    False,
                    "not_a_directory",
                )

    def _tools_snapshot(self, rel: str) -> list[dict]:
        if rel not in self.parsed:
            return []
        snapshot = self.parsed[rel]
        if not isinstance(snapshot, dict):
            self._not_an_object(rel, snapshot, "the session has no tool snapshot")
            return []
        self._check_fields(rel, snapshot, "tools")
        tools = snapshot.get("tools")
        return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    def _depth_of(self, session_id: str | None) -> int:
        return next((v.depth for v in self.visits if v.session_id == session_id), -1)

    @staticmethod
    def _message_dirs(s: _SessionFiles) -> list[str]:
        return sorted(
            {
                f.rel_path[len(s.dir_rel) + 1 :].split("/", 1)[0]
                for f in s.files
                if f.kind in ("message", "part", "artifact")
            }
        )

    def _messages(self, s: _SessionFiles, sid: str) -> list[Message]:
        """Messages in directory order (agentuse's primary message = first by sorted key)."""
        out = []
        for mid in self._message_dirs(s):
            rel = f"{s.dir_rel}/{mid}/message.json"
            raw = self.parsed.get(rel)
            if rel not in self.by_rel:
                self._problem(
                    f"{s.dir_rel}/{mid}",
                    "message directory without message.json; its parts are kept, prompt and tokens unknown",
                    True,
                    "missing_message_json",
                )
            if isinstance(raw, dict):
                self._check_fields(rel, raw, "message")
            elif rel in self.parsed:
                self._not_an_object(rel, raw, "prompt and tokens unknown")
            raw = raw if isinstance(raw, dict) else {}
            assistant = raw.get("assistant") if isinstance(raw.get("assistant"), dict) else {}
            out.append(
                Message(
                    message_id=_str(raw.get("id")) or mid,
                    session_id=sid,
                    created=_num(_get(raw, "time", "created")),
                    completed=_num(_get(raw, "time", "completed")),
                    task=_str(_get(raw, "user", "prompt", "task")),
                    user_prompt=_str(_get(raw, "user", "prompt", "user")),
                    model=_str(assistant.get("modelID")),
                    cwd=_str(_get(assistant, "path", "cwd")),
                    root=_str(_get(assistant, "path", "root")),
                    tokens=_tokens(assistant.get("tokens")),
                    context=assistant.get("context")
                    if isinstance(assistant.get("context"), dict)
                    else None,
                    has_file=rel in self.by_rel,
                    dir_name=mid,
                    error=assistant.get("error") if isinstance(assistant.get("error"), dict) else None,
                    summary=assistant.get("summary") if isinstance(assistant.get("summary"), bool) else None,
                )
            )
        self.messages.extend(out)
        return out

    def _parts(self, s: _SessionFiles, mid: str, m: Message, visit: Visit) -> None:
        prefix = f"{s.dir_rel}/{mid}/"
        entries = []
        for f in s.files:
            if not f.rel_path.startswith(prefix):
                continue
            if f.kind == "part":
                part = self.parsed.get(f.rel_path)
                if isinstance(part, dict):
                    self._check_fields(f.rel_path, part, *_part_specs(part))
                    entries.append((part_sort_key(part), part, f))
                elif f.rel_path in self.parsed:
                    self._not_an_object(f.rel_path, part, "the part was skipped")
            elif f.kind == "artifact":
                self._artifact(f, m)
        entries.sort(key=lambda e: e[0])
        turn = 1
        for _key, part, f in entries:
            turn = self._part(part, f, m, visit, turn)

    def _part(self, part: dict, f: TreeFile, m: Message, visit: Visit, turn: int) -> int:
        """Record one part; returns the turn the next part belongs to (§1.13: follow-up prompts
        and resolved gates start a new human-level turn)."""
        self.order += 1
        part_id = _str(part.get("id")) or PurePosixPath(f.rel_path).stem
        ptype = _str(part.get("type")) or "unknown"
        if ptype == "tool":
            call = self._tool_call(part, part_id, f, m, visit, turn)
            gate_kind = _gate_kind(call, part)
            if gate_kind is not None:
                self._gate(call, part, gate_kind)
                if call.kind == "gate" and call.raw_status == "completed":
                    return turn + 1
            return turn
        if ptype == "text" and part.get("role") == "user":
            turn += 1
        subtype = _str(
            part.get("level")
            or part.get("reason")
            or part.get("status")
            or part.get("source")
            or part.get("role")
            or part.get("verdict")
        )
        self.events.append(
            PartEvent(
                part_id,
                m.message_id,
                visit.session_id,
                ptype,
                subtype,
                _num(_get(part, "time", "start")),
                self.order,
                turn,
                part,
                f.rel_path,
                f.sha256,
                superseded=part.get("superseded") is True,
            )
        )
        return turn

    def _tool_call(
        self, part: dict, part_id: str, f: TreeFile, m: Message, visit: Visit, turn: int
    ) -> ToolCall:
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        raw_status = _str(state.get("status")) or "unknown"
        status = raw_status
        if raw_status == "running" and visit.status not in ("running", "preparing"):
            status = "abandoned"
            self._problem(
                f.rel_path,
                f"tool part left 'running' in a '{visit.status}' session; kept as 'abandoned'",
                True,
                "abandoned_call",
            )
        call_id = _str(part.get("callID")) or "unknown"
        if call_id == "unknown":
            self._problem(
                f.rel_path,
                "tool part has callID 'unknown'; keyed by part id instead",
                True,
                "unknown_call_id",
            )
        tool = _str(part.get("tool")) or ""
        inp = state.get("input", None)
        t_start = _num(_get(state, "time", "start"))
        if raw_status == "pending":
            t_start = t_start if t_start is not None else _num(state.get("suspendedAt"))
        call = ToolCall(
            part_id=part_id,
            message_id=m.message_id,
            session_id=visit.session_id,
            call_id=call_id,
            tool=tool,
            kind=_tool_kind(tool),
            status=status,
            raw_status=raw_status,
            input=inp,
            input_norm=normalised_input(inp),
            output=state.get("output") if raw_status == "completed" else None,
            error=_str(state.get("error")) if raw_status == "error" else None,
            t_start=t_start,
            t_end=_num(_get(state, "time", "end")),
            metadata=state.get("metadata") if isinstance(state.get("metadata"), dict) else None,
            parent_call_id=_str(part.get("parentCallID")),
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
            and _str(payload.get("childSessionID"))
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
                prompt=_str(_get(call.input, "prompt")) if isinstance(call.input, dict) else None,
                input=call.input,
                decision=_str(out.get("status")),
                comment=_str(out.get("comment")),
                reviewer=_str(_get(out, "reviewer", "username")),
                suspended_at=_num(state.get("suspendedAt")),
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

    def _artifact(self, f: TreeFile, m: Message) -> None:
        if f.rel_path.endswith(".json"):
            value = self.parsed.get(f.rel_path)
            if not isinstance(value, dict):
                return  # corrupt: already reported
            self.artifacts.append(
                Artifact(
                    f.rel_path,
                    m.message_id,
                    m.session_id,
                    _str(value.get("toolName")),
                    "json",
                    f.size,
                    value.get("output"),
                )
            )
            return
        header, _, body = f.text.partition("\n\n")
        fields = (
            dict(line.split(": ", 1) for line in header.splitlines()[1:] if ": " in line)
            if header.startswith("# AgentUse Tool Output Artifact")
            else {}
        )
        self.artifacts.append(
            Artifact(
                f.rel_path,
                m.message_id,
                m.session_id,
                fields.get("toolName") or fields.get("tool"),
                "text",
                f.size,
                body if fields else f.text,
            )
        )

    def _link_artifacts(self) -> None:
        by_path = {a.rel_path: a for a in self.artifacts}
        for call in self.tool_calls:
            if not call.artifact_path:
                continue
            artifact = by_path.get(call.artifact_path)
            if artifact is None:
                self._problem(
                    call.rel_path,
                    f"clamped output refers to artifact {call.artifact_path}, which is missing or corrupt",
                    True,
                    "missing_artifact",
                )
                continue
            artifact.part_id, artifact.call_id = call.part_id, call.call_id

    def _lineage(self, dir_rel: str, visit: Visit) -> None:
        if visit.depth:
            return
        for key, kind, report_name in (
            ("replaySourceSessionId", "strict_replay", "replay.json"),
            ("resultSourceSessionId", "result_test", "result-test.json"),
        ):
            source = _str(visit.config.get(key))
            report_rel = f"{dir_rel}/{report_name}"
            report = self.parsed.get(report_rel)
            if source is None and isinstance(report, dict):
                source = _str(report.get("sourceSessionId"))
            if source:
                self.lineage.append(
                    LineageEdge(
                        kind,
                        source,
                        f"agentuse:{source}",
                        report_rel if report_rel in self.by_rel else None,
                        report if isinstance(report, dict) else None,
                    )
                )

    def _link_children(self) -> None:
        """Tie each ``subagent__*`` call to a child visit: ``resumePayload.childSessionID`` when
        present, else serve's name/time score (§1.10), recorded as inferred with a confidence."""
        by_id = {v.session_id: v for v in self.visits}
        taken = {c.child_session_id for c in self.tool_calls if c.child_session_id}
        for call in self.tool_calls:
            if call.kind != "subagent" or call.child_session_id:
                continue
            candidates = [
                v
                for v in self.visits
                if v.parent_session_id == call.session_id and v.session_id not in taken
            ]
            best = _best_child(call, candidates)
            if best:
                child, score = best
                call.child_session_id, call.child_link = child.session_id, "inferred"
                call.child_link_confidence = round(min(score, 110) / 110, 3)
                taken.add(child.session_id)
        for call in self.tool_calls:
            child = by_id.get(call.child_session_id or "")
            if child:
                child.via_part_id, child.via_call_id = call.part_id, call.call_id
                child.link_confidence = call.child_link_confidence


def _resume_payload(state: dict) -> dict | None:
    """A pending part's ``resumePayload``, or the one a resolved part kept in its metadata."""
    payload = state.get("resumePayload") or _get(state, "metadata", "resumePayload")
    return payload if isinstance(payload, dict) else None


def _gate_kind(call: ToolCall, part: dict) -> str | None:
    """``approval_gate`` for ``await_human``, ``tool_approval`` for an ordinary tool call held
    for approval (newer builds), else None."""
    if call.kind == "gate":
        return "approval_gate"
    state = part.get("state") if isinstance(part.get("state"), dict) else {}
    payload = _resume_payload(state)
    if payload is not None and payload.get("kind") == "tool_approval":
        return "tool_approval"
    return None


def _part_specs(part: dict) -> tuple[str, ...]:
    ptype = part.get("type")
    if ptype in ("text", "reasoning"):
        return ("part", "part:text")
    if ptype == "tool":
        return ("part", "part:tool")
    if isinstance(ptype, str) and ptype in _TIMED_PART_TYPES:
        return ("part", "part:timed")
    return ("part",)


def _artifact_ref(output: Any) -> str | None:
    ref = _get(output, "metadata", "fullOutputArtifact", "path")
    if isinstance(ref, str):
        return ref
    if isinstance(output, str):
        m = _ARTIFACT_NOTE.search(output)
        if m:
            return m.group("path")
    return None


def _tokens_of(name: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", name.lower()) if t]


def _name_score(tool_suffix: str, agent_names: Iterable[str]) -> int:
    want = "-".join(_tokens_of(tool_suffix))
    best = 0
    for name in agent_names:
        base = "-".join(_tokens_of(name.rsplit("/", 1)[-1]))
        if not base or not want:
            continue
        if base == want:
            return 100
        if want in base or base in want:
            best = max(best, 80)
            continue
        tokens, have = set(_tokens_of(want)), set(_tokens_of(base))
        common = len(tokens & have)
        if tokens and common == len(tokens):
            best = max(best, 70)
        elif tokens and common * 2 >= len(tokens):
            best = max(best, 40)
    return best


def _best_child(call: ToolCall, candidates: list[Visit]) -> tuple[Visit, int] | None:
    suffix = call.tool[len("subagent__") :]
    scored = []
    for child in candidates:
        score = _name_score(suffix, [n for n in (child.agent_id, child.agent_name) if n])
        if score == 0:
            continue
        created, start, end = child.created, call.t_start, call.t_end
        if created is not None and start is not None:
            if created < start or (end is not None and created > end):
                continue
            if created - start <= 5000:
                score += 10
        distance = abs(created - start) if created is not None and start is not None else math.inf
        scored.append((-score, distance, child.session_id, child, score))
    if not scored:
        return None
    scored.sort(key=lambda s: s[:3])
    return scored[0][3], scored[0][4]


# ----------------------------------------------------------------------------------------------
# Mapping onto the aioc record model


@dataclass(frozen=True)
class ItemOrigin:
    """Where an item of :func:`to_run_record` came from: its part file and agent visit."""

    rel_path: str | None
    visit_index: int


def iso_ms(ms: int | None) -> str | None:
    """A millisecond epoch as aioc's ISO form (``2026-01-15T10:00:00.000Z``)."""
    if ms is None:
        return None
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _tool_items(call: ToolCall) -> list[dict]:
    args = call.input if call.input is not None else {}
    items = [
        {"type": "tool_call_item", "callId": call.call_id, "name": call.tool, "arguments": args}
    ]
    if call.raw_status == "completed":
        items.append(
            {"type": "tool_call_output_item", "callId": call.call_id, "output": call.output}
        )
    elif call.raw_status == "error":
        # the shape the model saw for a failed call (§1.6); error parts keep only the message
        output = {"success": False, "error": call.error}
        items.append({"type": "tool_call_output_item", "callId": call.call_id, "output": output})
    return items


def _part_items(part: ToolCall | PartEvent) -> list[dict]:
    if isinstance(part, ToolCall):
        return _tool_items(part)
    if part.type != "text" or not isinstance(part.payload.get("text"), str):
        return []
    role = "user" if part.payload.get("role") == "user" else "assistant"
    return [{"type": "message", "role": role, "content": part.payload["text"]}]


def to_run_record(run: AgentuseRun) -> tuple[dict, list[ItemOrigin]]:
    """An aioc-shaped RunRecord of ``run`` (so runs, items and tool_calls read the same for both
    formats) and, per item, the part file and visit it came from.

    Items: the user prompt, then each visit's text and tool parts in agentuse order; a child
    visit's items sit right after the ``subagent__*`` call that started it (or at the end when
    no call is linked). agentuse-only facts go to ``metadata.agentuse``.
    """
    index_of = {v.session_id: i for i, v in enumerate(run.visits)}
    parts_of: dict[str, list[ToolCall | PartEvent]] = {v.session_id: [] for v in run.visits}
    for part in [*run.tool_calls, *run.events]:
        parts_of.setdefault(part.session_id, []).append(part)
    primary = run.primary_message
    question = (primary.user_prompt or primary.task or "") if primary else ""
    items: list[dict] = [{"type": "message", "role": "user", "content": question}]
    origins = [ItemOrigin(None, 0)]
    placed: set[str] = set()

    def emit(visit: Visit) -> None:
        placed.add(visit.session_id)
        for part in sorted(parts_of.get(visit.session_id, []), key=lambda p: p.order):
            for k, item in enumerate(_part_items(part)):
                items.append(item)
                origins.append(ItemOrigin(part.rel_path, index_of[visit.session_id]))
                child = run_visit(part.child_session_id) if isinstance(part, ToolCall) else None
                if k == 0 and child is not None and child.session_id not in placed:
                    emit(child)

    def run_visit(session_id: str | None) -> Visit | None:
        return run.visits[index_of[session_id]] if session_id in index_of else None

    emit(run.root)
    for visit in run.visits:
        if visit.session_id not in placed:
            emit(visit)
    return _record_shell(run, question, items), origins


def _final_text(run: AgentuseRun) -> str:
    texts = [e for e in run.events if e.session_id == run.session_id and e.type == "text"]
    texts = [
        e
        for e in texts
        if e.payload.get("role") != "user" and isinstance(e.payload.get("text"), str)
    ]
    return max(texts, key=lambda e: e.order).payload["text"] if texts else ""


def _record_shell(run: AgentuseRun, question: str, items: list[dict]) -> dict:
    root = run.root
    record: dict[str, Any] = {
        "runId": run.session_id,
        "startedAt": iso_ms(root.created),
        "completedAt": iso_ms(root.completed or root.updated),
        "status": root.status,
        "agentName": root.agent_id,
        "providerName": root.model.split(":", 1)[0] if root.model else None,
        "model": root.model,
        "question": question,
        "response": _final_text(run),
        "items": items,
        "inputItemCount": 1,
        "promptSnapshots": [],
        "requestFingerprints": [],
        "policyDecisions": [],
    }
    if root.error_code or root.error_message:
        record["errorName"] = root.error_code or "Error"
        record["errorMessage"] = root.error_message or ""
    record["metadata"] = {"agentuse": agentuse_metadata(run)}
    return {k: v for k, v in record.items() if v is not None}


def session_columns(visit: Visit) -> dict:
    """The ``runs`` columns of schema 030 that come from newer ``session.json`` fields:
    ``error_history``, ``verification(_status)``, ``owner_pid``, ``execution`` (the intervals)
    and ``execution_ms`` (their closed total), ``execution_budget``, ``channels``,
    ``dismissed_at_text`` and ``reviewed_at_text``. JSON columns hold JSON text."""
    extras = visit.extras
    intervals = extras.get("execution") or []
    closed = [
        (_num(i.get("start")), _num(i.get("end"))) for i in intervals if isinstance(i, dict)
    ]
    closed = [(a, b) for a, b in closed if a is not None and b is not None]
    verification = extras.get("verification") or {}
    return {
        "error_history": _json_text(extras.get("errorHistory")),
        "verification": _json_text(extras.get("verification")),
        "verification_status": _str(verification.get("status")),
        "owner_pid": _num(_get(extras, "owner", "pid")),
        "execution": _json_text(extras.get("execution")),
        "execution_ms": sum(b - a for a, b in closed) if closed else None,
        "execution_budget": _json_text(extras.get("executionBudget")),
        "channels": _json_text(extras.get("channels")),
        "dismissed_at_text": iso_ms(_num(extras.get("dismissedAt"))),
        "reviewed_at_text": iso_ms(_num(extras.get("reviewedAt"))),
    }


def message_columns(run: AgentuseRun, visit: Visit) -> dict:
    """The ``visits`` columns of schema 030 from the visit's messages: ``assistant_error`` (the
    last message's ``assistant.error``, JSON text) and ``assistant_summary``."""
    own = [m for m in run.messages if m.session_id == visit.session_id]
    errors = [m.error for m in own if m.error is not None]
    summaries = [m.summary for m in own if m.summary is not None]
    return {
        "assistant_error": _json_text(errors[-1]) if errors else None,
        "assistant_summary": any(summaries) if summaries else None,
    }


def _json_text(value: Any) -> str | None:
    return None if value is None else dumps_json(value)


def agentuse_metadata(run: AgentuseRun) -> dict:
    """agentuse facts without an aioc field: trigger, mock, tokens, lineage, project."""
    root = run.root
    meta: dict[str, Any] = {
        "sessionId": run.session_id,
        "status": root.status,
        "trigger": root.trigger,
        "mock": root.mock,
        "agentId": root.agent_id,
        "version": root.version,
        "projectRoot": root.project_root,
        "tokens": root.tokens,
        "treeTokens": run.tree_tokens(),
        "subagents": len(run.visits) - 1,
        "gates": len(run.gates),
    }
    if root.error_code:
        meta["errorCode"] = root.error_code
    for edge in run.lineage:
        strict = edge.kind == "strict_replay"
        meta["replaySourceSessionId" if strict else "resultSourceSessionId"] = (
            edge.source_session_id
        )
        if edge.report is not None:  # replay.json / result-test.json: status, calls[].partId, ...
            meta["replayReport" if strict else "resultReport"] = edge.report
    return meta
