"""Assembling step: agent visits (one per session directory), their order, lineage to a source
session, and the link between a ``subagent__*`` call and the child visit it started."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from recstore.formats.agentuse.builder import BuilderState, SessionFiles
from recstore.formats.agentuse.fields import as_int, as_str, dig, session_extras
from recstore.formats.agentuse.model import (
    SESSION_DIR_NAME,
    SESSION_FILE,
    SUBAGENT_DIR,
    ULID,
    LineageEdge,
    ToolCall,
    Visit,
)


class VisitSteps(BuilderState):
    """Visits, lineage and subagent links."""

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
                as_int(dig(info, "time", "created")) or 0,
                str(dig(info, "agent", "id") or ""),
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
        name_match = SESSION_DIR_NAME.fullmatch(dir_name)
        if not derived and name_match and info.get("id") and info["id"] != name_match.group("id"):
            self._problem(
                f"{dir_rel}/{SESSION_FILE}",
                f"session id {info['id']} differs from the directory name prefix {name_match.group('id')}; the file is trusted",
                True,
                "id_mismatch",
            )
        parent_id = as_str(info.get("parentSessionID"))
        parent_link = "parentSessionID" if parent_id else None
        if not parent_id and s.nested_parent_dir and s.nested_parent_dir in ids:
            parent_id, parent_link = ids[s.nested_parent_dir], "nesting"
        status = as_str(info.get("status")) or "unknown"
        msgs = self._messages(s, sid)
        tokens: dict[str, int] = {}
        for m in msgs:
            for k, v in m.tokens.items():
                tokens[k] = tokens.get(k, 0) + v
        error = info.get("error") if isinstance(info.get("error"), dict) else {}
        agent = info.get("agent") if isinstance(info.get("agent"), dict) else {}
        agent_id = (
            as_str(agent.get("id"))
            or as_str(agent.get("name"))
            or (name_match.group("agent") if name_match else dir_name)
        )
        visit = Visit(
            session_id=sid,
            parent_session_id=parent_id,
            parent_link=parent_link,
            depth=s.depth or (self._depth_of(parent_id) + 1 if parent_id else 0),
            dir_name=dir_name,
            agent_id=agent_id,
            agent_name=as_str(agent.get("name")),
            is_subagent=agent.get("isSubAgent") is True or parent_id is not None,
            model=as_str(info.get("model")) or next((m.model for m in msgs if m.model), None),
            status=status,
            trigger=as_str(info.get("trigger")) or "manual",
            mock=info.get("mock") is True,
            created=as_int(dig(info, "time", "created")),
            updated=as_int(dig(info, "time", "updated")),
            completed=max((m.completed for m in msgs if m.completed), default=None),
            tokens=tokens,
            error_code=as_str(error.get("code")),
            error_message=as_str(error.get("message")),
            version=as_str(info.get("version")),
            project_root=as_str(dig(info, "project", "root")),
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

    def _misplaced_files(self, s: SessionFiles) -> None:
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

    def _lineage(self, dir_rel: str, visit: Visit) -> None:
        if visit.depth:
            return
        for key, kind, report_name in (
            ("replaySourceSessionId", "strict_replay", "replay.json"),
            ("resultSourceSessionId", "result_test", "result-test.json"),
        ):
            source = as_str(visit.config.get(key))
            report_rel = f"{dir_rel}/{report_name}"
            report = self.parsed.get(report_rel)
            if source is None and isinstance(report, dict):
                source = as_str(report.get("sourceSessionId"))
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
