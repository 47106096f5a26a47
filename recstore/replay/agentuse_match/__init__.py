"""agentuse's strict replay matching (docs/agentuse-sessions.md §2.3, §2.7, §3) as a tool tape.

A strict replay serves every tool call of the new run from the source run's recordings and stops
at the first call it cannot serve; no live call and no fabrication ever happens. This package is
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

from recstore.replay.agentuse_match.reads import format_read, snapshot_references
from recstore.replay.agentuse_match.recordings import (
    Recording,
    RecordingSet,
    ReferenceFile,
    ReplaySourceError,
    TapeResult,
    recordings_from_record,
    recordings_from_session,
    source_recordings,
)
from recstore.replay.agentuse_match.rules import (
    MISMATCH_REASON,
    NO_OUTCOME_ERROR,
    STRIP_INTENT,
    STRIP_RUNTIME_KEYS,
    match_key,
)
from recstore.replay.agentuse_match.runner import (
    AgentuseReplay,
    AgentuseReplayStop,
    replay_agentuse,
    replay_stored_agentuse,
)
from recstore.replay.agentuse_match.tape import AgentuseTape

__all__ = [
    "NO_OUTCOME_ERROR",
    "STRIP_INTENT",
    "STRIP_RUNTIME_KEYS",
    "format_read",
    "replay_stored_agentuse",
    "source_recordings",
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
