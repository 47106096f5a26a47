"""agentuse's strict replay matching (docs/agentuse-sessions.md §2.3, §2.7, §3) as a tool tape.

A strict replay serves every tool call of the new run from the source run's recordings and stops
at the first call it cannot serve; no live call and no fabrication ever happens. This module is
the closed dispatcher: :class:`AgentuseTape` answers one call at a time, keeps the per-call
provenance trace (§3.4) and reports a ``replay.json``-shaped dict (§3.6). It is pure apart from
reading the snapshotted reference files it is given.

Recordings come from an agentuse session (:func:`recordings_from_session`) or from any aioc
RunRecord (:func:`recordings_from_record`), so ``--match agentuse`` works on both formats.

Example:
    >>> rec = RecordingSet(source_id="s1", recordings=[Recording("tools__bash",
    ...     {"command": "ls"}, "completed", {"output": "a"}, None, "p1")], cwd="/proj")
    >>> tape = AgentuseTape(rec, project_root="/proj")
    >>> tape.call("tools__bash", {"intent": "list", "command": "ls"}).value
    {'output': 'a'}
    >>> tape.call("tools__bash", {"command": "ls"}).value["error"]
    'REPLAY_INPUT_MISSING'
    >>> tape.status()
    'mismatch'

Where agentuse's own behaviour looks accidental, docs/agentuse.md ("Fidelity choices") says which
side recstore takes.
"""

from __future__ import annotations

import copy
import hashlib
import math
import posixpath
import unicodedata
import uuid
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from recstore.canonical import (
    canonical_json,
    is_array_index,
    js_number,
    js_stringify,
    sha256_text,
)
from recstore.errors import InputError
from recstore.formats.agentuse import AgentuseRun, ToolCall
from recstore.progress import NO_PROGRESS, Progress
from recstore.records import extract_tool_calls
from recstore.replay.harness import Harness
from recstore.replay.replay import replay_run
from recstore.runtime import ABSENT, AgentRunError, RunHalted

__all__ = [
    "MISMATCH_REASON",
    "AgentuseReplay",
    "AgentuseReplayStop",
    "AgentuseTape",
    "Recording",
    "RecordingSet",
    "ReferenceFile",
    "ReplaySourceError",
    "TapeResult",
    "match_key",
    "recordings_from_record",
    "recordings_from_session",
    "replay_agentuse",
    "snapshot_references",
]

MISMATCH_REASON = (
    "No unused recording matches this tool and its arguments before the source session's first "
    "proposal. No live call or fabrication was attempted."
)
MEDIA_REASON = (
    "This recording contains media whose model-facing bytes are not available to text/JSON replay."
)
STALE_LIST_REASON = "queries after temporary writes require a complete snapshot"
NO_OUTCOME_ERROR = "Replay ended without a proposal or final output."
STRIP_INTENT = frozenset({"intent"})
STRIP_RUNTIME_KEYS = frozenset({"intent", "recovers"})
READ_TOOL = "tools__filesystem_read"
GATE_TOOL = "await_human"
OUTCOME_TOOLS = {"report_complete": "complete", "report_incomplete": "incomplete"}
TEMP_STORE = "replay-memory"
TEMP_ID_PREFIX = "replay-"
MAX_REFERENCE_BYTES = 4 * 1024 * 1024
# agentuse's read-tool limits (AGENTUSE_TOOL_MAX_LINES / _MAX_LINE_LENGTH defaults)
MAX_READ_LINES = 2000
MAX_READ_LINE = 2000
_LIST_WINDOW_KEYS = ("fields", "limit", "offset", "intent")
# problems of the files agentuse reads to load a replay source that make it refuse the source:
# JSON.parse fails (CorruptStorageError) or the value cannot be used; a part holding `null` is
# skipped there (readJSON's null), a session, tool or message file holding `null` is absent
_UNREADABLE = frozenset({"corrupt_json", "salvaged", "not_an_object"})
_UNREADABLE_OR_NULL = _UNREADABLE | {"json_null"}


class ReplaySourceError(InputError):
    """The source run cannot be replayed strictly (mock/replay session, still running, ...)."""


@dataclass(frozen=True)
class Recording:
    """One recorded tool call: a completed output or a recorded error message."""

    tool: str
    input: Any
    status: str  # completed | error
    output: Any
    error: str | None
    part_id: str
    source_sha256: str | None = None


@dataclass
class RecordingSet:
    """Everything a strict replay takes from its source (§2.3 "recording selection")."""

    source_id: str
    recordings: list[Recording]
    cwd: str | None = None
    source_run_key: str | None = None
    user_prompt: str | None = None
    model: str | None = None
    created_at: int | None = None  # ms epoch; "now" of the replay and temp-store timestamps
    original_text: str = ""
    original_proposal: Any = ABSENT  # the first gate's input (``None`` when it was null)
    tools_snapshot: list[dict] = field(default_factory=list)


@dataclass(frozen=True)
class ReferenceFile:
    """A read-only file grant snapshotted before generation: its current content and hash."""

    path: str
    sha256: str
    text: str


@dataclass(frozen=True)
class TapeResult:
    """What the tape answers: ``value`` for the model, or ``is_error`` with the recorded message
    (to be raised as a tool error, not a stop)."""

    value: Any
    is_error: bool = False

    @property
    def error_message(self) -> str | None:
        return self.value if self.is_error else None


# ----------------------------------------------------------------------------------------------
# Keys


def resolve_lexically(path: str, cwd: str | None) -> str:
    """``path`` joined to ``cwd`` and normalised without touching the filesystem (§3.1 step 2):
    no symlinks, no case change, no ``~`` expansion."""
    joined = path if path.startswith("/") or not cwd else posixpath.join(cwd, path)
    normal = posixpath.normpath(joined)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def canonical_args(
    tool: str, args: Any, cwd: str | None, strip: Iterable[str] = STRIP_INTENT
) -> Any:
    """The argument half of the match key: top-level ``strip`` keys removed (nested ones are
    significant) and ``tools__filesystem_read.file_path`` resolved against ``cwd``."""
    if not isinstance(args, dict):
        return args
    drop = set(strip)
    out = {k: v for k, v in args.items() if k not in drop}
    if tool == READ_TOOL and isinstance(out.get("file_path"), str):
        out["file_path"] = resolve_lexically(out["file_path"], cwd)
    return out


def _collation_key(key: str) -> bytes:
    return unicodedata.normalize("NFD", key).encode("utf-16-be", "surrogatepass")


def agentuse_key_order(keys: list[str]) -> list[str]:
    """The key order of agentuse's canonical objects: array-index keys first in numeric order
    (JavaScript enumerates them so), then the rest sorted as ``localeCompare`` does for equality:
    canonically equivalent keys (NFC and NFD spellings) tie and keep their insertion order.
    ``__proto__`` is an ordinary key (``Object.fromEntries`` keeps it)."""
    index = sorted((k for k in keys if is_array_index(k)), key=int)
    rest = sorted((k for k in keys if not is_array_index(k)), key=_collation_key)
    return index + rest


def match_key(tool: str, args: Any, cwd: str | None, strip: Iterable[str] = STRIP_INTENT) -> str:
    """agentuse's match key: JSON of ``[tool, canonicalArgs]`` with object keys sorted at every
    depth (:func:`agentuse_key_order`), array order kept and JavaScript number formatting (so
    ``1`` equals ``1.0``)."""
    return js_stringify([tool, canonical_args(tool, args, cwd, strip)], agentuse_key_order)


def has_media(value: Any) -> bool:
    """True if a recorded output carries media the replay cannot serve (§2.3 step 7)."""
    if isinstance(value, dict):
        if "_media" in value or "__mediaCacheRef" in value:
            return True
        if value.get("type") in ("image", "audio") and ("data" in value or "source" in value):
            return True
        return any(has_media(v) for v in value.values())
    if isinstance(value, list):
        return any(has_media(v) for v in value)
    return False


# ----------------------------------------------------------------------------------------------
# Recording selection


def recordings_from_session(run: AgentuseRun) -> RecordingSet:
    """The recordings of an agentuse session, by agentuse's load rules (§2.3, §3.3).

    The primary message is the first message directory (sorted) that has a ``message.json``.
    Superseded parts (a rewound attempt, left out of the model's history) are skipped.

    Raises:
        ReplaySourceError: mock/replay/result-test sessions, sessions still running or
            preparing, sessions without a primary message or tool snapshot, and sessions with a
            file agentuse cannot read (corrupt, salvageable or not an object: agentuse's
            ``CorruptStorageError``). Ingest keeps what it can of such files; replay does not.
    """
    root = run.root
    where = run.run_key
    _refuse_unreadable(run, _session_files(run), where, _UNREADABLE_OR_NULL)
    if root.mock:
        raise ReplaySourceError(
            "is a mock, replay or result-test session (mock:true); its approvals are not human data and it cannot be a replay source",
            source=where,
        )
    if root.status in ("running", "preparing"):
        raise ReplaySourceError(
            f"is still '{root.status}'; only completed, error or suspended sessions can be replayed",
            source=where,
        )
    primary = run.primary_message
    if primary is None or not primary.has_file:
        raise ReplaySourceError("has no primary message (message.json)", source=where)
    if not run.tools_snapshot:
        raise ReplaySourceError("has no tools.json snapshot (or it is empty)", source=where)
    message_json = f"{run.root.dir_name}/{primary.dir_name}/message.json"
    _refuse_unreadable(run, {message_json}, where, _UNREADABLE_OR_NULL)
    _refuse_unreadable(run, _part_files(run, primary), where, _UNREADABLE)
    parts = sorted(
        [c for c in run.tool_calls if c.message_id == primary.message_id]
        + [e for e in run.events if e.message_id == primary.message_id],
        key=lambda p: p.order,
    )
    recordings: list[Recording] = []
    text: list[str] = []
    proposal: Any = ABSENT
    for part in parts:
        if part.superseded:
            continue
        if not isinstance(part, ToolCall):
            if part.type != "text":
                continue
            if part.payload.get("role") == "user":
                break  # a follow-up continuation: excluded with everything after it
            body = part.payload.get("text")
            text.append(body if isinstance(body, str) else "")  # agentuse: "undefined"; see docs
        else:
            if part.tool == GATE_TOOL:
                proposal = copy.deepcopy(part.input) if part.has_input else ABSENT
                break
            if part.raw_status in ("completed", "error"):
                recordings.append(
                    Recording(
                        part.tool,
                        part.input,
                        part.raw_status,
                        part.output,
                        part.error,
                        part.part_id,
                        part.sha256 or None,
                    )
                )
    return RecordingSet(
        source_id=run.session_id,
        source_run_key=run.run_key,
        recordings=recordings,
        cwd=primary.root,
        user_prompt=primary.user_prompt or None,
        model=root.model,
        created_at=root.created,
        original_text="".join(text),
        original_proposal=proposal,
        tools_snapshot=run.tools_snapshot,
    )


def _session_files(run: AgentuseRun) -> set[str]:
    top = run.root.dir_name
    return {f"{top}/session.json", f"{top}/tools.json"}


def _part_files(run: AgentuseRun, message: Any) -> set[str]:
    prefix = f"{run.root.dir_name}/{message.dir_name}/part/"
    return {p.rel_path for p in run.problems if p.rel_path.startswith(prefix)}


def _refuse_unreadable(
    run: AgentuseRun, paths: set[str], where: str, codes: frozenset[str]
) -> None:
    for problem in run.problems:
        if problem.rel_path in paths and problem.code in codes:
            raise ReplaySourceError(
                f"has a file agentuse cannot read (CorruptStorageError), {problem.rel_path}: "
                f"{problem.reason}",
                source=where,
            )


def recordings_from_record(record: dict, *, cwd: str | None = None) -> RecordingSet:
    """The recordings of an aioc RunRecord under agentuse's rules: tool calls with outputs,
    before the first ``await_human`` call or user message after the input scope. Each output is
    served as recorded, envelope included: agentuse hands recorded outputs to the model as they
    are, and an aioc model saw the envelope.

    Raises:
        ReplaySourceError: the record is itself a replay (``metadata.replayOfRunId``) or a mock.
    """
    metadata = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
    run_id = str(record.get("runId", ""))
    if metadata.get("replayOfRunId") or metadata.get("mock") is True:
        raise ReplaySourceError(
            "is a replay or mock run and cannot be a strict replay source", source=f"aioc:{run_id}"
        )
    items = record.get("items") if isinstance(record.get("items"), list) else []
    input_count = record.get("inputItemCount")
    stop_at = len(items)
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        after_input = isinstance(input_count, int) and index >= input_count
        if item.get("type") == "tool_call_item" and item.get("name") == GATE_TOOL:
            stop_at = index
            break
        if after_input and item.get("type") == "message" and item.get("role") == "user":
            stop_at = index
            break
    proposal: Any = ABSENT
    if stop_at < len(items) and items[stop_at].get("type") == "tool_call_item":
        proposal = copy.deepcopy(items[stop_at].get("arguments"))
    recordings = [
        Recording(call["name"], call["arguments"], "completed", call.get("output"), None, call["callId"])
        for call in extract_tool_calls(items[:stop_at])
        if call["hasOutput"] and call["name"]
    ]
    text = [
        item["content"]
        for item in items[:stop_at]
        if isinstance(item, dict)
        and item.get("type") == "message"
        and item.get("role") == "assistant"
        and isinstance(item.get("content"), str)
    ]
    return RecordingSet(
        source_id=run_id,
        source_run_key=f"aioc:{run_id}",
        recordings=recordings,
        cwd=cwd,
        user_prompt=record.get("question") if isinstance(record.get("question"), str) else None,
        model=record.get("model") if isinstance(record.get("model"), str) else None,
        created_at=_iso_to_ms(record.get("startedAt")),
        original_text="".join(text),
        original_proposal=proposal,
    )


def _iso_to_ms(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def snapshot_references(paths: Sequence[str | Path], project_root: str) -> list[ReferenceFile]:
    """Snapshot explicit read-only file grants (§2.3): regular files of at most 4 MiB without NUL
    bytes, resolved against ``project_root``.

    Raises:
        InputError: a granted file is missing, not a regular file, too large or binary.
    """
    out = []
    for raw in paths:
        path = resolve_lexically(str(raw), project_root)
        p = Path(path)
        if not p.is_file():
            raise InputError("reference file is missing or not a regular file", source=path)
        data = p.read_bytes()
        if len(data) > MAX_REFERENCE_BYTES or b"\0" in data:
            raise InputError(
                "reference file is larger than 4 MiB or contains NUL bytes", source=path
            )
        out.append(
            ReferenceFile(path, hashlib.sha256(data).hexdigest(), data.decode("utf-8", "replace"))
        )
    return out


# ----------------------------------------------------------------------------------------------
# The tape


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _js_slice_bound(index: float, length: int) -> int:
    """``Array.prototype.slice``'s handling of one bound: truncated, negative from the end."""
    if index != index:  # NaN
        return 0
    if index in (math.inf, -math.inf):
        return length if index > 0 else 0
    whole = int(index)
    return max(length + whole, 0) if whole < 0 else min(whole, length)


def _utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _truncate_line(line: str, limit: int) -> str:
    """agentuse's ``truncateEnd``: the first ``limit`` UTF-16 units, without a stranded high
    surrogate, then the ``... (truncated)`` marker."""
    units = line.encode("utf-16-le", "surrogatepass")[: 2 * limit]
    head = units.decode("utf-16-le", "surrogatepass")
    if head and 0xD800 <= ord(head[-1]) <= 0xDBFF:
        head = head[:-1]
    return head + "... (truncated)"


def format_read(
    text: str,
    offset: Any = None,
    limit: Any = None,
    *,
    max_lines: int = MAX_READ_LINES,
    max_line_length: int = MAX_READ_LINE,
) -> dict:
    """A reference file read as agentuse's replay serves it: ``{"output": ...}`` with 1-based
    line numbers right-aligned to a common width and a tab, every line of ``text.split("\\n")``
    (so a trailing newline gives a last, empty line), long lines cut, and a
    ``[Reading lines a-b of N total]`` header plus a blank line when lines remain after the page.
    ``offset``/``limit`` follow JavaScript: non-numbers and 0 take the defaults."""
    start = max(1, offset or 1) if _is_number(offset) else 1
    count = (limit or max_lines) if _is_number(limit) else max_lines
    lines = text.split("\n")
    end = min(start + count - 1, len(lines))
    window = lines[_js_slice_bound(start - 1, len(lines)) : _js_slice_bound(end, len(lines))]
    width = len(js_number(start + len(window) - 1))
    body = "\n".join(
        js_number(start + i).rjust(width)
        + "\t"
        + (_truncate_line(line, max_line_length) if _utf16_len(line) > max_line_length else line)
        for i, line in enumerate(window)
    )
    header = (
        f"[Reading lines {js_number(start)}-{js_number(end)} of {len(lines)} total]\n\n"
        if end < len(lines)
        else ""
    )
    return {"output": header + body}


# JavaScript's String.prototype.trim: WhiteSpace (Zs included) and LineTerminator code points.
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def js_trim(text: str) -> str:
    """``text.trim()`` as JavaScript does it (Python's ``strip`` also removes U+001C..U+001F and
    U+0085, and keeps U+FEFF)."""
    return text.strip(_JS_SPACE)


def _split_list_input(value: dict, drop_include_data: bool) -> tuple[dict, Any, Any, Any]:
    """store_list input → (query, fields, limit, offset)."""
    query = {k: v for k, v in value.items() if k not in _LIST_WINDOW_KEYS}
    if drop_include_data:
        query.pop("includeData", None)
    offset = value.get("offset", 0)
    return query, value.get("fields"), value.get("limit"), offset if offset is not None else 0


def _js_truthy(value: Any) -> bool:
    if isinstance(value, (dict, list)):
        return True
    if _is_number(value):
        return value == value and value != 0
    return bool(value)


def project_store_list(new_input: dict, recorded_input: dict, recorded_output: Any) -> dict | None:
    """Serve a ``store_list`` call from a wider recorded page (§3.5), or None if it does not fit."""
    new_query, fields, limit, offset = _split_list_input(new_input, False)
    rec_query, _rec_fields, _rec_limit, rec_offset = _split_list_input(recorded_input, True)
    if canonical_json(new_query) != canonical_json(rec_query):
        return None
    out = recorded_output
    if not (
        isinstance(out, dict) and _js_truthy(out.get("success")) and isinstance(out.get("items"), list)
    ) or has_media(out):
        return None
    if not (_is_number(offset) and _is_number(rec_offset)) or (
        limit is not None and not _is_number(limit)
    ):
        return None
    rows: list = out["items"]
    total = out.get("total") if _is_number(out.get("total")) else len(rows) + rec_offset
    start = int(offset - rec_offset)
    end = start + int(limit) if limit is not None else int(total - rec_offset)
    if start < 0 or start > len(rows):
        return None
    if end > len(rows) and rec_offset + len(rows) < total:
        return None  # the window runs past a page that was not the tail of the list
    include_data = bool(recorded_input.get("includeData"))
    picked = []
    for row in rows[start:end]:
        projected = _project_row(row, fields, include_data)
        if projected is None:
            return None
        picked.append(projected)
    result = {k: copy.deepcopy(v) for k, v in out.items() if k != "dataKeysByType"}
    result.update(items=picked, count=len(picked), replay=True)
    return result


def _project_row(row: Any, fields: Any, include_data: bool) -> dict | None:
    """One recorded row cut to ``fields``: a key of the row's ``data`` is copied, a key the row
    itself carries (its own metadata) is already there, a known absence (the recording used
    ``includeData``, or the row lists the key in ``missingFields``) goes to ``missingFields``;
    any other key is unknown and the recording cannot serve the call."""
    if not isinstance(row, dict):
        return None
    data = row.get("data") if isinstance(row.get("data"), dict) else {}
    known_missing = row.get("missingFields") if isinstance(row.get("missingFields"), list) else []
    out = {k: copy.deepcopy(v) for k, v in row.items() if k not in ("data", "missingFields")}
    picked: dict = {}
    missing: list = []
    for key in fields or []:
        if key in data:
            picked[key] = copy.deepcopy(data[key])
        elif key in row:
            continue
        elif include_data or key in known_missing:
            if key not in missing:
                missing.append(key)
        else:
            return None  # a field the recording cannot answer
    if fields:
        out["data"] = picked
    if missing:
        out["missingFields"] = missing
    return out


class AgentuseTape:
    """The closed dispatcher of a strict replay: every tool call goes through :meth:`call`.

    ``project_root`` is the replay's own root (new relative read paths resolve against it);
    recordings resolve against the source's ``cwd``. ``strip_keys`` is ``{"intent"}`` by default
    (agentuse's documented rule); pass :data:`STRIP_RUNTIME_KEYS` to ignore ``recovers`` too.
    """

    def __init__(
        self,
        recordings: RecordingSet,
        *,
        project_root: str | None = None,
        references: Sequence[ReferenceFile] = (),
        strip_keys: Iterable[str] = STRIP_INTENT,
    ) -> None:
        self.source = recordings
        self.project_root = project_root if project_root is not None else recordings.cwd
        self.strip_keys = frozenset(strip_keys)
        self.references = {r.path: r for r in references}
        self.queues: dict[str, deque[Recording]] = {}
        for rec in recordings.recordings:
            key = match_key(rec.tool, rec.input, recordings.cwd, self.strip_keys)
            self.queues.setdefault(key, deque()).append(rec)
        self.calls: list[dict] = []
        self.stop: str | None = None  # proposal | complete | incomplete | missing
        self.stop_reason: str | None = None
        self.proposal: Any = None
        self.outcome: Any = None
        self.temp_items: dict[str, dict] = {}
        self.store_changed = False

    # -- bookkeeping
    def _log(self, tool: str, value: Any, source: str, **extra: Any) -> None:
        entry = {"tool": tool, "input": copy.deepcopy(value), "source": source}
        entry.update({k: v for k, v in extra.items() if v is not None})
        self.calls.append(entry)

    def _missing(
        self, tool: str, value: Any, reason: str, part_id: str | None = None
    ) -> TapeResult:
        self.stop, self.stop_reason = "missing", reason
        self._log(tool, value, "missing", partId=part_id)
        return TapeResult({"replay": True, "error": "REPLAY_INPUT_MISSING", "reason": reason})

    @property
    def stopped(self) -> bool:
        """True once the replay has stopped; the runner should end its step loop."""
        return self.stop is not None

    # -- dispatch (§2.3 "Dispatcher behaviour", in its order)
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

    def _reference(self, tool: str, value: Any) -> TapeResult | None:
        if (
            tool != READ_TOOL
            or not isinstance(value, dict)
            or not isinstance(value.get("file_path"), str)
        ):
            return None
        ref = self.references.get(resolve_lexically(value["file_path"], self.project_root))
        if ref is None:
            return None
        self._log(
            tool, value, "current-reference", reference={"path": ref.path, "sha256": ref.sha256}
        )
        return TapeResult(format_read(ref.text, value.get("offset"), value.get("limit")))

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

    # -- store adapter (§2.7)
    def _store(self, tool: str, value: dict) -> TapeResult | None:
        if tool == "store_create":
            return self._store_create(tool, value)
        item_id = value.get("id")
        if (
            tool in ("store_get", "store_update", "store_delete")
            and isinstance(item_id, str)
            and item_id in self.temp_items
        ):
            return self._store_temp(tool, value, item_id)
        if tool == "store_list":
            return self._store_projection(tool, value)
        return None

    def _now_iso(self) -> str:
        ms = self.source.created_at or 0
        return (
            datetime.fromtimestamp(ms / 1000, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z")
        )

    def _store_create(self, tool: str, value: dict) -> TapeResult:
        item_id = TEMP_ID_PREFIX + str(uuid.uuid4())
        now = self._now_iso()
        fields = {k: copy.deepcopy(v) for k, v in value.items() if k != "intent"}
        # the replay's own id and the source's start time win over anything the input names
        item = {**fields, "id": item_id, "createdAt": now, "updatedAt": now}
        self.temp_items[item_id] = item
        self.store_changed = True
        self._log(tool, value, "temporary-store")
        return TapeResult(
            {
                "success": True,
                "replay": True,
                "store": TEMP_STORE,
                "id": item_id,
                "item": _metadata(item),
            }
        )

    def _store_temp(self, tool: str, value: dict, item_id: str) -> TapeResult:
        item = self.temp_items[item_id]
        self._log(tool, value, "temporary-store")
        base = {"success": True, "store": TEMP_STORE, "id": item_id}
        if tool == "store_delete":
            del self.temp_items[item_id]
            return TapeResult({**base, "deleted": True})
        if tool == "store_update":
            for key, new in value.items():
                if key in _TEMP_FIXED_KEYS:
                    continue
                if key == "data" and isinstance(new, dict):
                    item["data"] = {**_data_of(item), **copy.deepcopy(new)}
                else:
                    item[key] = copy.deepcopy(new)
            self.store_changed = True
            return TapeResult({**base, "item": _metadata(item)})
        fields = value.get("fields")
        shown = copy.deepcopy(item)
        if isinstance(fields, list):
            shown["data"] = {k: v for k, v in _data_of(item).items() if k in fields}
        return TapeResult({**base, "item": shown})

    def _store_projection(self, tool: str, value: dict) -> TapeResult | None:
        fields = value.get("fields")
        if value.get("countOnly") or value.get("includeData") or self.store_changed:
            return None
        if fields is not None and not (
            isinstance(fields, list) and all(isinstance(f, str) for f in fields)
        ):
            return None
        for queue in self.queues.values():
            head = queue[0] if queue else None
            if (
                head is None
                or head.tool != "store_list"
                or head.status != "completed"
                or not isinstance(head.input, dict)
            ):
                continue
            result = project_store_list(value, head.input, head.output)
            if result is not None:
                queue.popleft()
                self._log(tool, value, "store-projection", partId=head.part_id)
                return TapeResult(result)
        return None

    # -- outcome and report
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


# keys of a temporary item an update cannot change: its replay id and the source-time stamps
_TEMP_FIXED_KEYS = frozenset({"id", "intent", "createdAt", "updatedAt"})


def _data_of(item: dict) -> dict:
    return copy.deepcopy(item["data"]) if isinstance(item.get("data"), dict) else {}


def _metadata(item: dict) -> dict:
    return {k: copy.deepcopy(v) for k, v in item.items() if k != "data"}


# ----------------------------------------------------------------------------------------------
# Running a candidate under agentuse's rules


class AgentuseReplayStop(AgentRunError):
    """The tape stopped the replay short of success: ``report_incomplete`` (``INCOMPLETE``)."""

    error_name = "INCOMPLETE"


class AgentuseInputMissing(AgentRunError):
    """The tape found no recording for a call (agentuse's ``REPLAY_INPUT_MISSING`` session error)."""

    error_name = "REPLAY_INPUT_MISSING"
    code = "REPLAY_INPUT_MISSING"


# agentuse replay status -> recstore replay report status (``replays.report_status``, exit code)
_REPORT_STATUS = {
    "proposal": "completed",
    "completed": "completed",
    "incomplete": "incomplete",
    "mismatch": "incomplete",
    "error": "error",
}
_SERVED = ("recording", "store-projection", "temporary-store", "current-reference")


@dataclass
class AgentuseReplay:
    """A replay under agentuse's rules: aioc's outcome (record, report) and the
    ``replay.json``-shaped report, which the record also carries as ``metadata.agentuseReplay``."""

    outcome: Any  # recstore.replay.replay.ReplayOutcome
    report: dict


def _tape_executor(tape: AgentuseTape) -> Any:
    """Every call goes to the tape and its answer to the model as is: a recorded output as
    recorded, a recorded error as its message (agentuse re-raises it as a tool error, which the
    model reads as that text), a stop's ``{replay, ...}`` object."""

    def execute(tool: Any, arguments: Any, call: Any) -> Any:
        result = tape.call(tool.name, arguments)
        return result.error_message if result.is_error else result.value

    return execute


def _tape_halt(tape: AgentuseTape) -> Any:
    """After a step with a stop, end the run as agentuse's runner does (``replay.stopped()``):
    cleanly after a proposal or ``report_complete``, failed otherwise."""

    def halt() -> Exception | None:
        if tape.stop in ("proposal", "complete"):
            return RunHalted(tape.stop)
        if tape.stop == "incomplete":
            return AgentuseReplayStop("Agent reported incomplete")
        if tape.stop == "missing":
            missing = next(c for c in tape.calls if c["source"] == "missing")
            return AgentuseInputMissing(
                f"{tape.stop_reason} Unmatched call: {missing['tool']} "
                f"{canonical_json(missing['input'])}"
            )
        return None

    return halt


def current_instructions(candidate: Any, context: Any = None) -> str:
    """The candidate entry agent's instructions, as its first request would resolve them."""
    built = candidate.build() if isinstance(candidate, Harness) else candidate
    return built.entry.resolve_instructions({} if context is None else context)


def agentuse_user_message(instructions: str, user_prompt: str | None) -> str:
    """The one user message of an agentuse replay: the current instructions, then two newlines
    and the recorded user prompt when the source had one (never the old instructions)."""
    return f"{instructions}\n\n{user_prompt}" if user_prompt else instructions


def replay_agentuse(
    source_record: dict,
    candidate: Any,
    recordings: RecordingSet,
    *,
    input_mode: str = "recorded",
    project_root: str | None = None,
    references: Sequence[ReferenceFile] = (),
    strip_keys: Iterable[str] = STRIP_INTENT,
    provider: Any = None,
    run_id: str | None = None,
) -> AgentuseReplay:
    """Strictly replay ``source_record`` against ``candidate`` (a harness or candidate), serving
    every tool call from ``recordings`` under agentuse's rules.

    The model gets :func:`agentuse_user_message` as its input and tool results without aioc's
    envelope. The report's status follows agentuse (``proposal`` and ``completed`` succeed); the
    aioc comparison with the source is kept in the report's ``differences`` and ``reason`` but no
    longer decides the verdict. ``input_mode`` is recorded but agentuse has a single input rule.
    """
    tape = AgentuseTape(
        recordings, project_root=project_root, references=references, strip_keys=strip_keys
    )
    instructions = current_instructions(candidate, source_record.get("contextSnapshot"))
    message = agentuse_user_message(instructions, recordings.user_prompt)
    outcome = replay_run(
        source_record,
        candidate,
        "strict",
        input_mode,
        metadata_overrides={"matching": "agentuse"},
        provider=provider,
        run_id=run_id,
        tool_executor=_tape_executor(tape),
        input_override=(message, "agentuse"),
        envelope_outputs=False,
        halt=_tape_halt(tape),
    )
    record = outcome.record or {}
    failure = outcome.error
    error = (
        None
        if failure is None or isinstance(failure, (AgentuseReplayStop, AgentuseInputMissing))
        else str(failure)
    )
    finish = "stop" if record.get("status") == "completed" and tape.stop is None else None
    harness = (record.get("metadata") or {}).get("harness") or {}
    report = tape.report(
        session_id=str(record.get("runId")),
        model=record.get("model"),
        final_text=record.get("response") or "",
        finish_reason=finish,
        error=error,
        instructions_sha256=sha256_text(instructions),
        agent_sha256=str(harness.get("descriptorHash", "")).removeprefix("sha256:") or None,
    )
    if outcome.record is not None:
        outcome.record.setdefault("metadata", {})["agentuseReplay"] = report
    served = sum(c["source"] in _SERVED for c in tape.calls)
    outcome.stats.recordedToolCalls = len(recordings.recordings)
    outcome.stats.replayedFromRecord = served
    outcome.stats.missingToolCalls = sum(c["source"] == "missing" for c in tape.calls)
    _agentuse_verdict(outcome.report, report)
    outcome.report.unconsumed = sum(len(q) for q in tape.queues.values())
    return AgentuseReplay(outcome, report)


def _agentuse_verdict(verdict: Any, report: dict) -> None:
    """agentuse's status decides ``verdict.status`` (and so the exit code); the aioc comparison
    stays in ``differences`` and is named in ``reason``."""
    compared = "the same response and tool calls as the source"
    if verdict.differences:
        compared = "a different response or tool calls than the source (reported, not judged)"
    status = report["status"]
    verdict.status = _REPORT_STATUS[status]
    detail = report.get("error") or compared
    missing = next((c for c in report["calls"] if c["source"] == "missing"), None)
    if missing is not None:  # agentuse's CLI names the call and its exact input
        detail += f" Unmatched call: {missing['tool']} {canonical_json(missing['input'])}"
    verdict.reason = f"agentuse {status}: {detail}"


def source_recordings(store: Any, run_key: str, record: dict) -> RecordingSet:
    """The recordings of a stored run: agentuse sessions by their own rules (§2.3), aioc runs
    from their items (:func:`recordings_from_record`)."""
    if not run_key.startswith("agentuse:"):
        return recordings_from_record(record)
    from recstore.store.agentuse_ingest import stored_run

    with store.reader() as con:
        return recordings_from_session(stored_run(con, run_key))


def replay_stored_agentuse(
    store: Any,
    run_keys: Sequence[str],
    job: Any,
    *,
    project_root: str | None = None,
    reference_paths: Sequence[str] = (),
    strip_keys: Iterable[str] = STRIP_INTENT,
    save: bool = True,
    progress: Progress = NO_PROGRESS,
) -> list[Any]:
    """``recstore replay --match agentuse``: replay stored runs (any format) with agentuse's
    strict rules against ``job``'s candidate and store each replay with its lineage.

    Returns ``ReplayResult`` rows like :func:`recstore.replay.batch.replay_stored`.

    Raises:
        ReplaySourceError: a source agentuse refuses (mock, still running, corrupt, ...);
            nothing is replayed or stored for it, as with an external replayer.
    """
    from recstore.errors import RecstoreError
    from recstore.replay.batch import ReplayResult
    from recstore.replay.lineage import load_sources, store_replays
    from recstore.replay.replay import error_outcome, provider_for

    results = []
    for source in load_sources(store, list(run_keys)):
        recordings = source_recordings(store, source.run_key, source.record)
        try:
            root = project_root or recordings.cwd
            references = snapshot_references(reference_paths, root) if reference_paths else ()
            candidate = job.candidate_for(source.record)
            done = replay_agentuse(
                source.record,
                candidate,
                recordings,
                input_mode=job.input_mode,
                project_root=root,
                references=references,
                strip_keys=strip_keys,
            )
            outcome = done.outcome
            provider = provider_for(candidate.provider, source.record).name
        except RecstoreError as exc:
            outcome, provider = error_outcome(source.record, "strict", job.input_mode, exc), "none"
        key = None
        if save and outcome.record is not None:
            (key,) = store_replays(store, [(source, outcome.record, outcome.report, provider)])
        results.append(ReplayResult(source.run_key, key, outcome.report))
        progress.update(len(results), len(run_keys))
    return results
