"""The state every assembling step shares: the files of a tree grouped by session directory,
their parsed JSON, and the problems found so far, with the helpers that report problems."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from recstore.canonical import json_type_name
from recstore.formats.agentuse.fields import wrong_typed_fields
from recstore.formats.agentuse.model import (
    Artifact,
    Gate,
    LineageEdge,
    Message,
    PartEvent,
    Problem,
    ToolCall,
    TreeFile,
    Visit,
)


@dataclass
class SessionFiles:
    dir_rel: str
    depth: int
    nested_parent_dir: str | None
    files: list[TreeFile] = field(default_factory=list)


class BuilderState:
    """What the steps of :class:`~recstore.formats.agentuse.assemble.RunBuilder` read and fill."""

    def __init__(
        self,
        sessions: dict[str, SessionFiles],
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
