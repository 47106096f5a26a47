"""agentuse session trees -> runs, visits, tool calls, approval gates and events.

agentuse (docs/agentuse-sessions.md §1) stores one directory per agent visit, one JSON file per
message and per part, and rewrites those files in place while a run is alive. This package is the
pure half of ingesting them, in two steps that the store composes:

1. :func:`scan_tree` walks a data root, a project directory, a ``session/`` container or a single
   session directory (auto-detected) and returns, per top-level session, the files of its tree
   (raw text + SHA-256, keyed by a path relative to the ``session/`` container, which is also how
   agentuse addresses artifacts). Files that cannot belong to any tree (``*.tmp`` leftovers,
   orphaned children whose parent is absent, non-UTF-8 bytes) come back as problems.
2. :func:`assemble_run` folds the files of one tree into an :class:`AgentuseRun`. It reads only
   the (path, text) pairs it is given, so the store can rebuild a run from its event log alone,
   and a re-scan only has to append files whose hash changed.

Every anomaly of §4.2 is reported as a :class:`Problem` naming the file; ``kept`` says whether
the file's content was still used (salvaged JSON, stuck ``running`` sessions, ``callID:
"unknown"``) or dropped (truncated JSON, temp files, orphans).

Example:
    >>> scan = scan_tree("~/.local/share/agentuse")  # doctest: +SKIP
    >>> run = assemble_run(scan.trees[0].files)  # doctest: +SKIP
    >>> run.run_key, run.status, [v.agent_id for v in run.visits]  # doctest: +SKIP
    ('agentuse:01M8PCRENAD8M1WA7TYT0KGN5Y', 'completed', ['agents/reply', 'agents/research'])


The package's modules, each owning one thing:

- ``model``: the dataclasses (TreeFile ... AgentuseRun, ItemOrigin) and file-name constants;
- ``scan``: walking a tree on disk (the only module that reads files);
- ``fields``: tolerant JSON getters, expected field types, part order, token counts;
- ``assemble``: :func:`assemble_run`, composing the steps of ``builder.BuilderState``:
  ``visits`` (visits, lineage, subagent links), ``messages`` (messages, parts, artifacts) and
  ``tools`` (tool calls and approval gates);
- ``record``: the aioc-shaped record (:func:`to_run_record`) and ``metadata.agentuse``;
- ``columns``: what an agentuse run adds to its aioc projection (schema 030): columns per
  run, tool call and visit, visit and gate rows, kept problems as findings.
"""

from recstore.formats.agentuse.assemble import assemble_run
from recstore.formats.agentuse.columns import (
    finding_rows,
    gate_rows,
    message_columns,
    run_columns,
    session_columns,
    tool_call_columns,
    visit_rows,
)
from recstore.formats.agentuse.fields import (
    normalised_input,
    part_sort_key,
    session_extras,
    wrong_typed_fields,
)
from recstore.formats.agentuse.model import (
    AgentuseRun,
    Artifact,
    Gate,
    ItemOrigin,
    LineageEdge,
    Message,
    PartEvent,
    Problem,
    Scan,
    SessionTree,
    ToolCall,
    TreeFile,
    Visit,
)
from recstore.formats.agentuse.record import agentuse_metadata, iso_ms, to_run_record
from recstore.formats.agentuse.scan import is_agentuse_tree, scan_tree

__all__ = [
    "AgentuseRun",
    "Artifact",
    "Gate",
    "LineageEdge",
    "Message",
    "PartEvent",
    "Problem",
    "Scan",
    "SessionTree",
    "ToolCall",
    "TreeFile",
    "Visit",
    "ItemOrigin",
    "agentuse_metadata",
    "assemble_run",
    "is_agentuse_tree",
    "iso_ms",
    "finding_rows",
    "gate_rows",
    "message_columns",
    "run_columns",
    "tool_call_columns",
    "visit_rows",
    "normalised_input",
    "part_sort_key",
    "scan_tree",
    "session_columns",
    "session_extras",
    "to_run_record",
    "wrong_typed_fields",
]
