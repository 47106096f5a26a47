"""The per-tree work of an agentuse ingest, as pure functions (the counterpart of
:mod:`recstore.store.prepare` for aioc records).

:func:`prepare_tree` turns one scanned session tree, given the files already stored for it, into
a :class:`PreparedTree`: its file events (one per new or changed file), the stream revision's
record hash and the folded run. :func:`project_run` makes all projection rows of a run once its
file events have seqs: the rows of its aioc record (:func:`~recstore.formats.agentuse.to_run_record`)
made by :func:`~recstore.store.projection.project_record` with what only agentuse knows
(:class:`~recstore.store.projection.OwnRows`, computed by :mod:`recstore.formats.agentuse.columns`).
Nothing here knows the store; :mod:`recstore.store.agentuse_ingest` places and writes these.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from recstore.canonical import canonical_json
from recstore.formats.agentuse import (
    AgentuseRun,
    SessionTree,
    TreeFile,
    assemble_run,
    finding_rows,
    gate_rows,
    run_columns,
    to_run_record,
    tool_call_columns,
    visit_rows,
)
from recstore.formats.events import Event
from recstore.formats.jsontext import dumps_json
from recstore.store.projection import OwnRows, Projection, RunContext, project_record

__all__ = ["FILE_EVENT", "PreparedTree", "prepare_tree", "project_run", "tree_hash"]

FILE_EVENT = "agentuse_file"


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


@dataclass(frozen=True, slots=True)
class PreparedTree:
    """A new revision of a session's stream: the file events of its new or changed files (in
    ``changed`` order), the record hash of all its files, and the run they fold into."""

    record_hash: bytes
    changed: list[str]  # paths of the files the events hold
    events: list[Event]
    files: dict[str, TreeFile]  # every file of the run: the stored ones, then the tree's
    run: AgentuseRun


def prepare_tree(tree: SessionTree, stored: dict[str, TreeFile]) -> PreparedTree | None:
    """The revision ``tree`` adds to a stream whose latest files are ``stored`` (empty: a new
    stream), or None when every file is as stored."""
    changed = [
        f for f in tree.files if f.rel_path not in stored or stored[f.rel_path].sha256 != f.sha256
    ]
    if not changed:
        return None
    files = {**stored, **{f.rel_path: f for f in tree.files}}
    return PreparedTree(
        tree_hash(files.values()),
        [f.rel_path for f in changed],
        [Event(FILE_EVENT, None, None, file_payload(f)) for f in changed],
        files,
        assemble_run(list(files.values())),
    )


def project_run(run: AgentuseRun, ctx: RunContext, seq_of_path: dict[str, int]) -> Projection:
    """All projection rows of one agentuse run whose files' events have the seqs
    ``seq_of_path``. Its events are whole files, so the JSON the public views would read from an
    aioc run's events (items, outputs, gates) is kept in the rows; item, call and gate rows point
    at the event of their file (the session's ``session.json`` when they have none)."""
    record, origins = to_run_record(run)
    session_seq = seq_of_path.get(f"{run.root.dir_name}/session.json", ctx.first_seq)
    own = OwnRows(
        item_seqs=[seq_of_path.get(o.rel_path or "", session_seq) for o in origins],
        run=run_columns(run),
        calls=tool_call_columns(run, origins),
        findings=finding_rows(run),
        visits=[{"run_seq": ctx.first_seq, **row} for row in visit_rows(run, origins)],
        proposals=[
            {"run_seq": ctx.first_seq, **row, "event_seq": seq_of_path.get(path, session_seq)}
            for row, path in gate_rows(run)
        ],
    )
    return project_record(record, ctx, own=own)
