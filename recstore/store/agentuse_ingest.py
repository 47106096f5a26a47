"""agentuse session trees in the store: file events, incremental re-scans, projections.

agentuse rewrites its files while a run is alive (docs/agentuse-sessions.md §1.8), so a session
tree is stored as a stream of **file events**: one ``agentuse_file`` event per file version
(payload ``{path, kind, sha256, size, text}``, the text exactly as read). A re-scan appends only
files whose SHA-256 changed, as a new revision of the stream; nothing is rewritten. The run is
the fold of the latest version of every path over *all* revisions
(:func:`recstore.formats.agentuse.assemble_run`), projected through the same
:func:`~recstore.store.projection.project_record` as aioc records (via
:func:`~recstore.formats.agentuse.to_run_record`) joined with what only agentuse
has (``schema/030_agentuse.sql``), which :mod:`recstore.formats.agentuse.columns` computes: this
module only places those rows and gives them their events' seqs.

Bad inputs (§4.2) become ``rejects`` rows naming the file and the reason, appended only when the
file is new or changed; problems whose content was still used are also run ``findings``.

Hooks the store calls: :func:`ingest_tree` (from ``BatchWriter`` while it holds the write lock),
:func:`project_stream` (rebuild/verify) and :func:`stored_record` (``get_record``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import duckdb

from recstore.canonical import canonical_json
from recstore.errors import InputError
from recstore.formats.agentuse import (
    AgentuseRun,
    Problem,
    SessionTree,
    TreeFile,
    assemble_run,
    finding_rows,
    gate_rows,
    is_agentuse_tree,
    run_columns,
    scan_tree,
    to_run_record,
    tool_call_columns,
    visit_rows,
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
    """All projection rows of one agentuse run: the projection of its aioc record joined with
    the columns and rows only agentuse has (``formats.agentuse.columns``). Its events are whole
    files, so the JSON the public views would read from an aioc run's events (items, outputs,
    gates) is kept in the rows; item, call and gate rows point at the event of their file."""
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
    call_columns = tool_call_columns(run, origins)
    for row in rows["proj_tool_calls"]:
        row["call_seq"] = seq_of_item(row["item_index"])
        row["output_seq"] = seq_of_item(row["output_item_index"])
        if row["has_output"]:
            output = items[row["output_item_index"]].get("output")
            row["output"] = None if output is None else dumps_json(output)
        row.update(call_columns.get(row["item_index"], {}))
    rows["proj_runs"][0].update(run_columns(run))
    findings = rows["proj_findings"]
    findings += [{"run_seq": ctx.first_seq, "finding_index": len(findings) + i, **finding}
                 for i, finding in enumerate(finding_rows(run))]
    rows["proj_runs"][0]["finding_count"] = len(findings)
    visits = [{"run_seq": ctx.first_seq, **row} for row in visit_rows(run, origins)]
    gates = [{"run_seq": ctx.first_seq, **row, "event_seq": seq_of_path.get(path, session_seq)}
             for row, path in gate_rows(run)]
    return {
        **base,
        "proj_runs": rows_from_dicts("proj_runs", rows["proj_runs"], extra=True),
        "proj_items": rows_from_dicts("proj_items", rows["proj_items"]),
        "proj_tool_calls": rows_from_dicts("proj_tool_calls", rows["proj_tool_calls"], extra=True),
        "proj_findings": rows_from_dicts("proj_findings", findings),
        "proj_visits": rows_from_dicts("proj_visits", visits, extra=True),
        "proj_suspended_proposals": rows_from_dicts("proj_suspended_proposals", gates),
    }


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
