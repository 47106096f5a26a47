"""Assembling step: messages, their parts in agentuse order (human-level turns), non-tool part
events and artifacts saved beside clamped tool outputs."""

from __future__ import annotations

from pathlib import PurePosixPath

from recstore.formats.agentuse.builder import BuilderState, SessionFiles
from recstore.formats.agentuse.fields import (
    as_int,
    as_str,
    dig,
    part_sort_key,
    part_specs,
    token_counts,
)
from recstore.formats.agentuse.model import Artifact, Message, PartEvent, TreeFile, Visit
from recstore.formats.agentuse.tools import gate_kind


class MessageSteps(BuilderState):
    """Messages, parts and artifacts."""

    @staticmethod
    def _message_dirs(s: SessionFiles) -> list[str]:
        return sorted(
            {
                f.rel_path[len(s.dir_rel) + 1 :].split("/", 1)[0]
                for f in s.files
                if f.kind in ("message", "part", "artifact")
            }
        )

    def _messages(self, s: SessionFiles, sid: str) -> list[Message]:
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
                    message_id=as_str(raw.get("id")) or mid,
                    session_id=sid,
                    created=as_int(dig(raw, "time", "created")),
                    completed=as_int(dig(raw, "time", "completed")),
                    task=as_str(dig(raw, "user", "prompt", "task")),
                    user_prompt=as_str(dig(raw, "user", "prompt", "user")),
                    model=as_str(assistant.get("modelID")),
                    cwd=as_str(dig(assistant, "path", "cwd")),
                    root=as_str(dig(assistant, "path", "root")),
                    tokens=token_counts(assistant.get("tokens")),
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

    def _parts(self, s: SessionFiles, mid: str, m: Message, visit: Visit) -> None:
        prefix = f"{s.dir_rel}/{mid}/"
        entries = []
        for f in s.files:
            if not f.rel_path.startswith(prefix):
                continue
            if f.kind == "part":
                part = self.parsed.get(f.rel_path)
                if isinstance(part, dict):
                    self._check_fields(f.rel_path, part, *part_specs(part))
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
        part_id = as_str(part.get("id")) or PurePosixPath(f.rel_path).stem
        ptype = as_str(part.get("type")) or "unknown"
        if ptype == "tool":
            call = self._tool_call(part, part_id, f, m, visit, turn)
            held_as = gate_kind(call, part)
            if held_as is not None:
                self._gate(call, part, held_as)
                if call.kind == "gate" and call.raw_status == "completed":
                    return turn + 1
            return turn
        if ptype == "text" and part.get("role") == "user":
            turn += 1
        subtype = as_str(
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
                as_int(dig(part, "time", "start")),
                self.order,
                turn,
                part,
                f.rel_path,
                f.sha256,
                superseded=part.get("superseded") is True,
            )
        )
        return turn

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
                    as_str(value.get("toolName")),
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
