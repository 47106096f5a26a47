"""The tree of runs derived from a run (``recstore lineage``), read from the ``lineage`` view.

Apart from :mod:`recstore.replay.lineage`, which writes replays, so that reading the tree
imports neither the replay machinery nor the store's ingest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from recstore.errors import InputError

if TYPE_CHECKING:
    from recstore.store import Store

__all__ = ["TREE_LIMIT", "lineage_tree", "render_tree"]

TREE_LIMIT = 500


def lineage_tree(store: Store, ref: str, *, limit: int = TREE_LIMIT) -> dict:
    """``{run_key, run_id, relation, status, children: [...]}``: every run derived from ``ref``
    (replays of it, replays of those, thread continuations, ...), from the ``lineage`` view.

    Lineage rows come from input (``metadata.replayOfRunId``, rows attached at ingest) and can
    form cycles or dense graphs, so the walk is guarded. Each run's subtree is shown once: a run
    met again is a leaf with ``marker`` ``"cycle"`` (it is an ancestor on this path: the link
    points back up) or ``"repeat"`` (its subtree is shown earlier). At most ``limit`` nodes are
    shown; when the walk stops early the root gets ``truncated: {limit, runsShown,
    runsReachable}``.
    """
    if limit < 1:
        raise InputError("the lineage limit must be at least 1")
    root = store.resolve_run(ref)
    with store.reader() as con:
        rows = con.execute(
            "SELECT l.parent_run_key, l.child_run_key, l.relation, r.run_id, r.status, "
            "rp.report_status, rp.mode "
            "FROM lineage l JOIN runs r ON r.run_key = l.child_run_key "
            "LEFT JOIN replays rp ON rp.replay_run_key = l.child_run_key AND l.relation = 'replay_of' "
            "WHERE l.parent_run_key IS NOT NULL"
        ).fetchall()
        root_row = con.execute("SELECT run_id, status FROM runs WHERE run_key = ?", [root]).fetchone()
    children: dict[str, list[tuple]] = {}
    for row in sorted(set(rows), key=lambda r: (r[1], r[2])):
        children.setdefault(row[0], []).append(row[1:])
    tree = _node(root, None, root_row[0], root_row[1], None, None)
    shown = _walk(tree, children, limit)
    if shown["omitted"]:
        tree["truncated"] = {"limit": limit, "runsShown": len(shown["runs"]),
                             "runsReachable": len(_reachable(root, children))}
    return tree


def _node(key: str, relation: str | None, run_id, status, report, mode) -> dict:
    out = {"run_key": key, "run_id": run_id, "relation": relation, "status": status}
    if report is not None or mode is not None:  # a replay line's has a mode, no verdict
        out.update(report_status=report, mode=mode)
    out["children"] = []
    return out


def _walk(tree: dict, children: dict[str, list[tuple]], limit: int) -> dict:
    """Fill ``tree`` depth first (iteratively: lineage chains can be thousands deep), expanding
    each run once and stopping after ``limit`` nodes; returns the runs shown and whether any
    link was left out."""
    expanded = {tree["run_key"]}
    count = 1
    # (node to fill, the runs on the path from the root to it)
    stack: list[tuple[dict, frozenset]] = [(tree, frozenset({tree["run_key"]}))]
    omitted = False
    while stack:
        parent, path = stack.pop()
        pending = []
        for child, relation, run_id, status, report, mode in children.get(parent["run_key"], []):
            if count >= limit:
                omitted = True
                break
            node = _node(child, relation, run_id, status, report, mode)
            parent["children"].append(node)
            count += 1
            if child in path:
                node["marker"] = "cycle"
            elif child in expanded:
                node["marker"] = "repeat"
            else:
                expanded.add(child)
                pending.append((node, path | {child}))
        stack.extend(reversed(pending))
    return {"runs": expanded, "omitted": omitted}


def _reachable(root: str, children: dict[str, list[tuple]]) -> set[str]:
    seen, todo = {root}, [root]
    while todo:
        for child, *_ in children.get(todo.pop(), []):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


_MARKERS = {"cycle": " ↻ cycle: an ancestor on this path", "repeat": " (subtree shown above)"}


def render_tree(tree: dict) -> str:
    """The tree as indented text, one run per line (cycles and repeats marked, a note when the
    walk stopped at its limit)."""
    lines: list[str] = []
    # (node, prefix of its line, prefix of its children's lines)
    stack: list[tuple[dict, str, str]] = [(tree, "", "")]
    while stack:
        node, lead, indent = stack.pop()
        label = f"{node['run_key']} [{node['status']}]"
        if node.get("relation"):
            extra = "".join(f" {node[k]}" for k in ("mode", "report_status") if node.get(k))
            label = f"{label} ({node['relation']}{extra})"
        lines.append(lead + label + _MARKERS.get(node.get("marker"), ""))
        kids = node["children"]
        for i, kid in reversed(list(enumerate(kids))):
            last = i == len(kids) - 1
            stack.append((kid, indent + ("└── " if last else "├── "),
                          indent + ("    " if last else "│   ")))
    cut = tree.get("truncated")
    if cut:
        lines.append(f"… stopped after {cut['limit']} lines: {cut['runsShown']} of "
                     f"{cut['runsReachable']} derived runs shown (--limit N shows more)")
    return "\n".join(lines)
