"""agentuse session trees in the store: file events, incremental re-scans, rejects.

agentuse rewrites its files while a run is alive (docs/agentuse-sessions.md §1.8), so a session
tree is stored as a stream of **file events**: one ``agentuse_file`` event per file version
(payload ``{path, kind, sha256, size, text}``, the text exactly as read). A re-scan appends only
files whose SHA-256 changed, as a new revision of the stream; nothing is rewritten. The run is
the fold of the latest version of every path over *all* revisions
(:func:`recstore.formats.agentuse.assemble_run`). :mod:`recstore.store.agentuse_prepare` turns a
tree into that revision's events and rows; this module reads what is stored, gives the new
file events their seqs, and writes events, rows and rejects through the ``BatchWriter``.

Bad inputs (§4.2) become ``rejects`` rows naming the file and the reason, appended only when the
file is new or changed; problems whose content was still used are also run ``findings``.

Hooks the store calls: :func:`ingest_tree` (from ``BatchWriter`` while it holds the write lock),
:func:`project_stream` (rebuild/verify) and :func:`stored_record` (``get_record``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import duckdb

from recstore.errors import InputError
from recstore.formats.agentuse import (
    AgentuseRun,
    Problem,
    SessionTree,
    TreeFile,
    assemble_run,
    is_agentuse_tree,
    scan_tree,
    to_run_record,
)
from recstore.formats.jsontext import loads_json
from recstore.formats.reader import RawInput
from recstore.store.agentuse_prepare import FILE_EVENT, prepare_tree, project_run, tree_hash
from recstore.store.counts import SourceCounts
from recstore.store.ingest import BatchWriter, run_key_for
from recstore.store.projection import Projection, RunContext

__all__ = [
    "AgentuseSource",
    "ingest_tree",
    "project_stream",
    "split_paths",
    "stored_files",
    "stored_record",
    "stored_run",
]

FORMAT = "agentuse"


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
    prepared = prepare_tree(tree, stored)
    if prepared is None:
        writer.count_duplicate()
        return "duplicate"

    def project(ctx: RunContext) -> Projection:
        # the new file events are the revision's first, in the order prepare_tree gave them
        placed = {path: ctx.first_seq + offset for offset, path in enumerate(prepared.changed)}
        return project_run(prepared.run, ctx, {**seqs, **placed})

    ctx = writer.append_revision(
        key, tree.session_id, FORMAT, prepared.record_hash, prepared.events,
        counts.source_id, None, project,
    )
    files = prepared.files
    for problem in prepared.run.problems:
        file = files.get(problem.rel_path) or files.get(problem.rel_path.rsplit(":", 1)[0])
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
