"""Changed copies of the fixture tree through the store, one data case per line.

* ``bad_trees.ndjson``: hostile trees lose nothing silently (issue 12.3). Each case damages one
  file; the real ``recstore ingest`` must exit 1 with that file in ``rejects`` under its reason,
  store the rest of the tree, and keep ``verify`` clean.
* ``format_features.ndjson``: newer agentuse format features (superseded parts, tool approvals,
  newer session.json and message fields) reach their columns.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from recstore.store.store import Store

from .test_agentuse_external import cli
from .test_agentuse_fidelity import load
from .test_agentuse_format import session_dir, writable_copy

RUN_KEY = "agentuse:01M8PCRENAD8M1WA7TYT0KGN5Y"


def _set(value: dict, dotted: str, new) -> None:
    *head, last = dotted.split(".")
    for key in head:
        value = value[key]
    value[last] = new


def damage(root: Path, op: dict) -> None:
    """Apply one operation of a case to the tree under the ``session/`` container ``root``."""
    path = root / op["path"]
    if op["op"] == "write":
        path.write_text(op["text"], encoding="utf-8")
    elif op["op"] == "append":
        path.write_text(path.read_text(encoding="utf-8") + op["text"], encoding="utf-8")
    elif op["op"] == "patch":
        value = json.loads(path.read_text(encoding="utf-8"))
        for dotted, new in op["set"].items():
            _set(value, dotted, new)
        path.write_text(json.dumps(value), encoding="utf-8")
    elif op["op"] == "replace_with_file":
        shutil.rmtree(path)
        path.write_text(op["text"], encoding="utf-8")
    else:
        raise AssertionError(f"unknown op {op['op']}")


@pytest.mark.parametrize("case", load("bad_trees.ndjson"))
def test_bad_tree_is_a_reject_and_the_rest_is_stored(case, tmp_path):
    data = writable_copy(tmp_path)
    for op in case["ops"]:
        damage(session_dir(data), op)
    db = tmp_path / "bad.duckdb"
    done = cli(db, "ingest", str(data))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"agentuse {case['code']}:" in done.stderr
    store = Store(db)
    with store.reader() as con:
        rejects = con.execute("SELECT path, reason FROM rejects").fetchall()
        run = con.execute(
            "SELECT visit_count, item_count, tool_call_count FROM runs WHERE run_key = ?",
            [RUN_KEY],
        ).fetchall()
    assert rejects, "nothing rejected"
    (path, reason), *others = rejects
    assert not others, rejects  # one damaged file, one reject
    assert path == case["path"] and reason.startswith(f"agentuse {case['code']}: ")
    for needle in case["reason_has"]:
        assert needle in reason, reason
    assert run == [tuple(case["stored"])]  # what the damaged file did not hold is all there
    assert store.verify().ok
    again = cli(db, "ingest", str(data))  # a re-scan of the same damage reports nothing new
    assert again.returncode == 0 and again.stdout.startswith("accepted 0, duplicate 1")


@pytest.mark.parametrize("case", load("format_features.ndjson"))
def test_format_feature_is_projected(case, tmp_path):
    data = writable_copy(tmp_path)
    for op in case["ops"]:
        damage(session_dir(data), op)
    store = Store(tmp_path / "features.duckdb")
    summary = store.ingest([str(data)])
    assert summary.rejected == 0, summary.rejects
    with store.reader() as con:
        rows = [list(r) for r in con.execute(case["sql"]).fetchall()]
    assert rows == case["rows"]
    assert store.verify().ok
