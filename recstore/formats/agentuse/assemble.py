"""Folding the files of one session tree into an :class:`AgentuseRun`: parse every JSON file
once, group files by session directory, then run the steps (visits, messages and parts, tool
calls and gates) that :class:`RunBuilder` composes. Reads only ``(rel_path, text)`` pairs, so
the store can rebuild a run from its event log alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from recstore.canonical import JSONParseError, loads_strict
from recstore.formats.agentuse.builder import SessionFiles
from recstore.formats.agentuse.fields import parse_json
from recstore.formats.agentuse.messages import MessageSteps
from recstore.formats.agentuse.model import (
    SESSION_FILE,
    SUBAGENT_DIR,
    AgentuseRun,
    Problem,
    TreeFile,
)
from recstore.formats.agentuse.scan import session_id_of
from recstore.formats.agentuse.tools import ToolCallSteps
from recstore.formats.agentuse.visits import VisitSteps


def _split_sessions(files: Sequence[TreeFile]) -> dict[str, SessionFiles]:
    """Group files by the session directory that owns them (the deepest ``<dir>`` before a
    non-``subagent`` segment)."""
    sessions: dict[str, SessionFiles] = {}
    for f in files:
        segments = f.rel_path.split("/")
        i = 1  # segments[0] is a top-level session dir
        while i + 1 < len(segments) and segments[i] == SUBAGENT_DIR:
            i += 2
        dir_rel = "/".join(segments[:i])
        if dir_rel not in sessions:
            depth = dir_rel.count(f"/{SUBAGENT_DIR}/")
            parent = dir_rel.rsplit(f"/{SUBAGENT_DIR}/", 1)[0] if depth else None
            sessions[dir_rel] = SessionFiles(dir_rel, depth, parent)
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
        value, problem = parse_json(f.text)
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

    builder = RunBuilder(sessions, parsed, by_rel, problems)
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


class RunBuilder(VisitSteps, MessageSteps, ToolCallSteps):
    """Builds one AgentuseRun; each step is a short method of the mixin that owns it."""

    def build(self) -> AgentuseRun:
        infos = {dir_rel: self._session_info(s) for dir_rel, s in self.sessions.items()}
        ids = {
            dir_rel: session_id_of(info, dir_rel.rsplit("/", 1)[-1])
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

    def _session_info(self, s: SessionFiles) -> dict:
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
