"""``recstore lineage RUN`` on lineage a user can make cyclic or dense: each run's subtree is
printed once, a link back to an ancestor is marked as a cycle, and the output is bounded."""

from __future__ import annotations

import json
import sys

import pytest

from recstore.store import Store

from .conftest import AIOC_FIXTURES, run_cli

LAYERS, WIDTH = 12, 2  # every run of a layer derives from both runs of the layer above: 2^12 paths


def _record(run_id: str, replay_of: str | None = None) -> dict:
    record = json.loads((AIOC_FIXTURES / "simple-run.json").read_text(encoding="utf-8"))
    record["runId"] = run_id
    record["metadata"] = {"replayOfRunId": replay_of} if replay_of else {}
    return record


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("lineage") / "store.duckdb"
    store = Store(path)
    # A replay cycle, as two exported records can claim: a -> b -> c -> a (replayOfRunId).
    store.ingest_records([_record("cyc-a", "cyc-c"), _record("cyc-b", "cyc-a"), _record("cyc-c", "cyc-b")],
                         source_uri="cycle")
    # A dense graph through lineage rows attached at ingest; the last layer links back to the top.
    store.ingest_records([_record("dense-top")], source_uri="dense")
    previous = ["dense-top"]
    for layer in range(LAYERS):
        names = [f"dense-{layer}-{i}" for i in range(WIDTH)]
        links = [{"relation": "derived", "parent_run_id": parent, "child": name}
                 for name in names for parent in previous]
        store.ingest_records([_record(name) for name in names], source_uri=f"layer-{layer}",
                             lineage=links)
        previous = names
    store.ingest_records([_record("dense-top-again")], source_uri="loop", lineage=[
        {"relation": "derived", "parent_run_id": previous[0], "child": "dense-top-again"}])
    # ... and the loop closes: a new revision of the top run names the last layer as its parent.
    top = dict(_record("dense-top"), response="revised")
    store.ingest_records([top], source_uri="revision", lineage=[
        {"relation": "derived", "parent_run_id": previous[1], "child": "dense-top"}])
    return path


def _paths(text: str) -> list[tuple[list[str], str]]:
    """(run keys from the root to the line, the line) for every run line of a rendered tree."""
    stack: list[str] = []
    out = []
    for line in text.splitlines():
        if line.startswith("…"):
            continue
        label = line.lstrip("│ ├└─")
        stack = stack[: (len(line) - len(label)) // 4] + [label.split(" ")[0]]
        out.append((list(stack), line))
    return out


def test_a_replay_cycle_is_marked_not_followed(db):
    done = run_cli(db, "lineage", "cyc-a")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "aioc:cyc-a [completed]",
        "└── aioc:cyc-b [completed] (replay_of)",
        "    └── aioc:cyc-c [completed] (replay_of)",
        "        └── aioc:cyc-a [completed] (replay_of) ↻ cycle: an ancestor on this path",
    ]
    tree = json.loads(run_cli(db, "lineage", "cyc-a", "--json").stdout)
    leaf = tree["children"][0]["children"][0]["children"][0]
    assert leaf["run_key"] == "aioc:cyc-a" and leaf["marker"] == "cycle" and leaf["children"] == []


def test_a_dense_graph_prints_each_subtree_once(db):
    done = run_cli(db, "lineage", "dense-top")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    expanded = [line for line in lines if "↻" not in line and "shown above" not in line]
    keys = [line.lstrip("│ ├└─").split(" ")[0] for line in expanded]
    assert len(keys) == len(set(keys)) == 1 + LAYERS * WIDTH + 1  # every run, expanded once
    assert len(lines) < 3 * len(keys)  # not the 2^12 paths of the graph
    assert any("↻ cycle" in line for line in lines)
    for path, line in _paths(done.stdout):
        assert len(set(path[:-1])) == len(path) - 1  # no run twice on one path
        assert (path[-1] in path[:-1]) == ("↻ cycle" in line)


def test_the_output_is_bounded(db):
    done = run_cli(db, "lineage", "dense-top", "--limit", "10")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 11
    assert lines[-1] == ("… stopped after 10 lines: 10 of 26 derived runs shown "
                         "(--limit N shows more)")
    tree = json.loads(run_cli(db, "lineage", "dense-top", "--limit", "10", "--json").stdout)
    assert tree["truncated"] == {"limit": 10, "runsShown": 10, "runsReachable": 26}


CHAIN = 1000


def test_a_thousand_deep_replay_chain_is_walked_and_written(tmp_path):
    """Each run replays the one before (metadata.replayOfRunId): the tree is CHAIN deep, past
    Python's recursion limit, in the text and the JSON output alike."""
    path = tmp_path / "chain.duckdb"
    Store(path).ingest_records(
        [_record(f"chain-{i}", f"chain-{i - 1}" if i else None) for i in range(CHAIN)],
        source_uri="chain")
    done = run_cli(path, "lineage", "chain-0", "--limit", str(CHAIN), "--json")
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10 * CHAIN)  # the JSON is 2 levels per run: reading it needs the room
    try:
        node = json.loads(done.stdout)
    finally:
        sys.setrecursionlimit(limit)
    keys = []
    while True:
        keys.append(node["run_key"])
        if not node["children"]:
            break
        (node,) = node["children"]
    assert keys == [f"aioc:chain-{i}" for i in range(CHAIN)]
    text = run_cli(path, "lineage", "chain-0", "--limit", str(CHAIN))
    assert text.returncode == 0 and text.stderr == "", text.stderr[-2000:]
    assert [p[-1] for p, _ in _paths(text.stdout)] == keys
