"""The tape's bookkeeping: recordings queued by match key, the per-call provenance trace
(§3.4) and how a stop is recorded. Every tool family's steps build on it."""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from recstore.replay.agentuse_match.recordings import (
    Recording,
    RecordingSet,
    ReferenceFile,
    TapeResult,
)
from recstore.replay.agentuse_match.rules import STRIP_INTENT, match_key


class TapeState:
    """Recordings queued by match key and the calls answered so far."""

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
