"""agentuse session trees in the store: file events, incremental re-scans, projections.

agentuse rewrites its files while a run is alive (docs/agentuse-sessions.md §1.8), so a session
tree is stored as a stream of **file events**: one ``agentuse_file`` event per file version
(payload ``{path, kind, sha256, size, text}``, the text exactly as read). A re-scan appends only
files whose SHA-256 changed, as a new revision of the stream; nothing is rewritten. The run is
the fold of the latest version of every path over *all* revisions
(:func:`recstore.formats.agentuse.assemble_run`), projected through the same
:func:`~recstore.store.projection.project_record` as aioc records (via
:func:`~recstore.formats.agentuse.to_run_record`) plus the agentuse columns of
``schema/030_agentuse.sql``.

Bad inputs (§4.2) become ``rejects`` rows naming the file and the reason, appended only when the
file is new or changed; problems whose content was still used are also run ``findings``.

Hooks the store calls: :func:`ingest_tree` (from ``BatchWriter`` while it holds the write lock),
:func:`project_stream` (rebuild/verify) and :func:`stored_record` (``get_record``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb

from recstore.canonical import canonical_json
from recstore.errors import InputError
from recstore.formats.agentuse import (
    AgentuseRun,
    Problem,
    SessionTree,
    TreeFile,
    assemble_run,
    is_agentuse_tree,
    iso_ms,
    message_columns,
    scan_tree,
    session_columns,
    to_run_record,
)
from recstore.formats.events import Event
from recstore.formats.jsontext import dumps_json, loads_json
from recstore.formats.reader import RawInput
from recstore.store.ingest import BatchWriter, SourceCounts, run_key_for
from recstore.store.projection import (
    COLUMNS,
    Projection,
    RunContext,
    project_record,
    rows_from_dicts,
)

__all__ = [
    "FILE_EVENT",
    "AgentuseSource",
    "ingest_tree",
    "project_run",
    "project_stream",
    "split_paths",
    "stored_files",
    "stored_record",
    "stored_run",
    "tree_hash",
]

FILE_EVENT = "agentuse_file"
FORMAT = "agentuse"
# resumePayload keys that would let a reader act on a pending gate; never projected.
_SECRET_KEYS = frozenset({"resumeToken", "approvalUrl", "signature"})


def file_payload(f: TreeFile) -> str:
    """The JSON payload of one file event (the text kept byte-exact as a JSON string)."""
    return dumps_json(
        {"path": f.rel_path, "kind": f.kind, "sha256": f.sha256, "size": f.size, "text": f.text}
    )


def tree_hash(files: Iterable[TreeFile]) -> bytes:
    """SHA-256 over the sorted ``(path, sha256)`` pairs: the stream revision's record_hash."""
    return hashlib.sha256(
        canonical_json(sorted([f.rel_path, f.sha256] for f in files)).encode()
    ).digest()


def stored_files(
    con: duckdb.DuckDBPyConnection, run_key: str, max_revision: int | None = None
) -> tuple[dict[str, TreeFile], dict[str, int]]:
    """The latest stored version of every file of a stream, and the seq of its event."""
    rows = con.execute(
        "SELECT seq, payload FROM events WHERE stream_key = ? AND type = ? "
        "AND (? IS NULL OR revision <= ?) ORDER BY seq",
        [run_key, FILE_EVENT, max_revision, max_revision],
    ).fetchall()
    files: dict[str, TreeFile] = {}
    seqs: dict[str, int] = {}
    for seq, payload in rows:
        p = loads_json(payload)
        files[p["path"]] = TreeFile(p["path"], p["kind"], p["sha256"], p["size"], p["text"])
        seqs[p["path"]] = seq
    return files, seqs


def stored_run(
    con: duckdb.DuckDBPyConnection, run_key: str, revision: int | None = None
) -> AgentuseRun:
    """A stored agentuse run, folded from its file events."""
    files, _ = stored_files(con, run_key, revision)
    return assemble_run(list(files.values()))


def stored_record(
    con: duckdb.DuckDBPyConnection, run_key: str, revision: int | None = None
) -> dict:
    """The aioc-shaped record of a stored agentuse run (for replay, compare and export)."""
    return to_run_record(stored_run(con, run_key, revision))[0]


def project_stream(con: duckdb.DuckDBPyConnection, ctx: RunContext) -> Projection:
    """Projection rows of an agentuse stream from its events alone (rebuild and verify)."""
    files, seqs = stored_files(con, ctx.run_key, ctx.revision)
    return project_run(assemble_run(list(files.values())), ctx, seqs)


# ----------------------------------------------------------------------------------------------
# Projection


def project_run(
    run: AgentuseRun, ctx: RunContext, seq_of_path: dict[str, int]
) -> Projection:
    """All projection rows of one agentuse run. Its events are whole files, so the JSON the
    public views would read from an aioc run's events (items, outputs, gates) is kept in the
    rows; item, call and gate rows point at the event of their file."""
    record, origins = to_run_record(run)
    base = project_record(record, ctx)
    rows = {table: [dict(zip(COLUMNS[table], row, strict=True)) for row in base[table]]
            for table in ("proj_runs", "proj_items", "proj_tool_calls", "proj_findings")}
    session_seq = seq_of_path.get(f"{run.root.dir_name}/session.json", ctx.first_seq)

    def seq_of_item(index: int | None) -> int | None:
        if index is None:
            return None
        return seq_of_path.get(origins[index].rel_path or "", session_seq)

    items = record["items"]
    for row in rows["proj_items"]:
        row["event_seq"] = seq_of_item(row["item_index"])
        row["payload"] = dumps_json(items[row["item_index"]])
    for row in rows["proj_tool_calls"]:
        row["call_seq"] = seq_of_item(row["item_index"])
        row["output_seq"] = seq_of_item(row["output_item_index"])
        if row["has_output"]:
            output = items[row["output_item_index"]].get("output")
            row["output"] = None if output is None else dumps_json(output)
    _patch_run_row(rows["proj_runs"][0], run)
    _patch_tool_calls(rows["proj_tool_calls"], run, origins)
    findings = rows["proj_findings"]
    findings.extend(
        {
            "run_seq": ctx.first_seq,
            "finding_index": len(findings) + i,
            "code": f"agentuse.{p.code}",
            "message": p.reason,
            "path": p.rel_path,
        }
        for i, p in enumerate(p for p in run.problems if p.kept)
    )
    rows["proj_runs"][0]["finding_count"] = len(findings)
    return {
        **base,
        "proj_runs": rows_from_dicts("proj_runs", rows["proj_runs"], extra=True),
        "proj_items": rows_from_dicts("proj_items", rows["proj_items"]),
        "proj_tool_calls": rows_from_dicts("proj_tool_calls", rows["proj_tool_calls"], extra=True),
        "proj_findings": rows_from_dicts("proj_findings", findings),
        "proj_visits": rows_from_dicts("proj_visits", _visit_rows(run, ctx, origins), extra=True),
        "proj_suspended_proposals": rows_from_dicts(
            "proj_suspended_proposals", _gate_rows(run, ctx, seq_of_path, session_seq)
        ),
    }


def _patch_run_row(row: dict, run: AgentuseRun) -> None:
    root = run.root
    tokens = run.tree_tokens()
    lineage = {e.kind: e.source_session_id for e in run.lineage}
    row.update(
        visit_count=len(run.visits),
        final_agent=run.visits[-1].agent_id,
        approval_count=len(run.gates),
        trigger=root.trigger,
        mock=root.mock,
        error_code=root.error_code,
        tokens_input=tokens.get("input"),
        tokens_output=tokens.get("output"),
        tokens_reasoning=tokens.get("reasoning"),
        tokens_cache_read=tokens.get("cache_read"),
        tokens_cache_write=tokens.get("cache_write"),
        replay_of_run_id=lineage.get("strict_replay"),
        result_of_run_id=lineage.get("result_test"),
        **session_columns(root),
    )


def _patch_tool_calls(rows: list[dict], run: AgentuseRun, origins: list) -> None:
    """Per call: its visit and agent (by item origin), status, error and timing from the part."""
    by_path = {c.rel_path: c for c in run.tool_calls}
    for row in rows:
        index = row["item_index"]
        if index is None:
            continue
        origin = origins[index]
        call = by_path.get(origin.rel_path or "")
        row["visit_index"] = origin.visit_index
        row["agent"] = run.visits[origin.visit_index].agent_id
        if call is None:
            continue
        row.update(
            part_id=call.part_id,
            status=call.status,
            error=call.error,
            started_text=iso_ms(call.t_start),
            ended_text=iso_ms(call.t_end),
            duration_ms=(call.t_end - call.t_start)
            if call.t_start is not None and call.t_end is not None
            else None,
            arguments_normalised=dumps_json(call.input_norm)
            if call.input_norm is not None
            else None,
            artifact_path=call.artifact_path,
            child_session_id=call.child_session_id,
            child_link=call.child_link,
            child_link_confidence=call.child_link_confidence,
            superseded=call.superseded,
            parent_call_id=call.parent_call_id,
            raw_approved_input=dumps_json(call.raw_approved_input)
            if call.raw_approved_input is not None
            else None,
        )


def _visit_rows(run: AgentuseRun, ctx: RunContext, origins: list) -> list[dict]:
    index_of = {v.session_id: i for i, v in enumerate(run.visits)}
    spans: dict[int, list[int]] = {}
    for k, origin in enumerate(origins):
        spans.setdefault(origin.visit_index, []).append(k)
    rows = []
    for i, v in enumerate(run.visits):
        span = spans.get(i, [])
        rows.append(
            {
                "run_seq": ctx.first_seq,
                "visit_index": i,
                "agent": v.agent_id,
                "entered_after_turn": None,
                "via_call_id": v.via_call_id,
                "transition": "initial" if i == 0 else "subagent",
                "request_count": 0,
                "first_turn": None,
                "last_turn": None,
                "item_start": span[0] if span else None,
                "item_end": span[-1] + 1 if span else None,
                "session_id": v.session_id,
                "parent_visit_index": index_of.get(v.parent_session_id or ""),
                "parent_link": v.parent_link,
                "link_confidence": v.link_confidence,
                "depth": v.depth,
                "status": v.status,
                "model": v.model,
                "tokens_input": v.tokens.get("input"),
                "tokens_output": v.tokens.get("output"),
                **message_columns(run, v),
            }
        )
    return rows


def _gate_rows(
    run: AgentuseRun, ctx: RunContext, seq_of_path: dict[str, int], default_seq: int
) -> list[dict]:
    """Gates as suspended proposals: ``await_human`` parts (kind ``approval_gate``; the decision
    is the reason, the reviewer's comment the public reason) and tool calls held for approval
    (kind ``tool_approval``; reason = the part's state). Resume tokens are left out."""
    agents = {v.session_id: v.agent_id for v in run.visits}
    paths = {c.part_id: c.rel_path for c in run.tool_calls}
    rows = []
    for i, g in enumerate(run.gates):
        payload = {k: v for k, v in (g.resume_payload or {}).items() if k not in _SECRET_KEYS}
        rows.append(
            {
                "run_seq": ctx.first_seq,
                "proposal_index": i,
                "turn": g.turn,
                "call_id": g.call_id,
                "kind": g.kind,
                "agent": agents.get(g.session_id),
                "tool_name": g.tool,
                "reason": g.decision or g.status,
                "public_reason": g.comment,
                "args_canonical": canonical_json(g.input) if g.input is not None else None,
                "timestamp_text": iso_ms(g.suspended_at or g.t_start),
                "metadata": dumps_json(_gate_metadata(g, payload)),
                "payload": dumps_json(g.input),
                "event_seq": seq_of_path.get(paths.get(g.part_id, ""), default_seq),
            }
        )
    return rows


def _gate_metadata(gate: Any, payload: dict) -> dict:
    meta = {"status": gate.status, "reviewer": gate.reviewer, "resumePayload": payload}
    if gate.raw_approved_input is not None:
        meta["rawApprovedInput"] = gate.raw_approved_input
    if gate.superseded:
        meta["superseded"] = True
    return meta


# ----------------------------------------------------------------------------------------------
# Ingest


class AgentuseSource:
    """An agentuse tree given to ``recstore ingest`` (a data root, project, container or session)."""

    format = FORMAT

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.uri = str(self.path.resolve())


def ingest_tree(writer: BatchWriter, source: AgentuseSource) -> None:
    """Scan one tree and append, through ``writer``, the files of each session that are new or
    changed, the rejects of new or changed bad files, and projections."""
    counts = SourceCounts(writer.open_source(source.uri, FORMAT))
    scan = scan_tree(source.path)
    known_rejects = _known_rejects(writer.con)
    for problem in scan.problems:
        _reject(writer, source, counts, problem, None, known_rejects)
    for tree in scan.trees:
        counts.add(_store_tree(writer, source, counts, tree, known_rejects))
        writer.submit_if_full()
    writer.finish_source(counts)


def _known_rejects(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    return set(con.execute("SELECT source_uri, reason FROM rejects").fetchall())


def _reject(
    writer: BatchWriter,
    source: AgentuseSource,
    counts: SourceCounts,
    problem: Problem,
    file: TreeFile | None,
    known: set,
) -> None:
    uri = problem.source_path or f"{source.uri}#{problem.rel_path}"
    reason = f"agentuse {problem.code}: {problem.reason}"
    if (uri, reason) in known:
        return  # the same bad file was reported by an earlier scan
    known.add((uri, reason))
    text = file.text if file is not None else _read_text(problem.source_path)
    raw = RawInput(uri, None, text, data=(text or "").encode("utf-8", "surrogatepass"))
    writer.reject(raw, counts.source_id, reason, problem.rel_path)
    counts.rejected += 1


def _read_text(path: str) -> str | None:
    p = Path(path) if path else None
    if p is None or not p.is_file():
        return None
    return p.read_bytes().decode("utf-8", "replace")


def _store_tree(
    writer: BatchWriter,
    source: AgentuseSource,
    counts: SourceCounts,
    tree: SessionTree,
    known_rejects: set,
) -> str:
    key = run_key_for(FORMAT, tree.session_id)
    current = writer.current(key)
    if current is not None and current.record_hash == tree_hash(tree.files):
        writer.count_duplicate()  # fast path: every file as stored, nothing to read back
        return "duplicate"
    stored, seqs = stored_files(writer.con, key) if current is not None else ({}, {})
    changed = [
        f for f in tree.files if f.rel_path not in stored or stored[f.rel_path].sha256 != f.sha256
    ]
    if not changed:
        writer.count_duplicate()
        return "duplicate"
    merged = {**stored, **{f.rel_path: f for f in tree.files}}
    run = assemble_run(list(merged.values()))

    def project(ctx: RunContext) -> Projection:
        for offset, f in enumerate(changed):
            seqs[f.rel_path] = ctx.first_seq + offset
        return project_run(run, ctx, seqs)

    ctx = writer.append_revision(
        key, tree.session_id, FORMAT, tree_hash(merged.values()),
        [Event(FILE_EVENT, None, None, file_payload(f)) for f in changed],
        counts.source_id, None, project,
    )
    for problem in run.problems:
        file = merged.get(problem.rel_path) or merged.get(problem.rel_path.rsplit(":", 1)[0])
        _reject(writer, source, counts, problem, file, known_rejects)
    return "accepted" if ctx.revision == 1 else "revised"


def split_paths(
    paths: Iterable[str], fmt: str | None = None
) -> tuple[list[AgentuseSource], list[str]]:
    """Ingest paths → (agentuse trees, everything else). ``fmt`` ``agentuse`` forces every path
    to be a tree, ``aioc``/``otlp`` none; otherwise directories that look like agentuse trees are.

    Raises:
        InputError: ``fmt`` is ``agentuse`` and a path is not an agentuse tree.
    """
    trees: list[AgentuseSource] = []
    rest: list[str] = []
    for path in paths:
        if fmt == "agentuse":
            if not Path(path).is_dir() or not is_agentuse_tree(path):
                raise InputError(
                    "not an agentuse data root, project, session container or session directory",
                    source=path,
                )
            trees.append(AgentuseSource(path))
        elif fmt is None and path != "-" and Path(path).is_dir() and is_agentuse_tree(path):
            trees.append(AgentuseSource(path))
        else:
            rest.append(path)
    return trees, rest
