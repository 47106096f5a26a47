"""The README's Python examples run as written (a block after ``<!-- test: NAME -->``)."""

from __future__ import annotations

import re

from recstore.store import Store

from .conftest import AIOC_FIXTURES, REPO_ROOT


def readme_block(name: str) -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(rf"<!-- test: {name} -->\s*```python\n(.*?)```", text, re.S)
    assert found, f"README has no block marked {name}"
    return found.group(1)


def test_replay_from_python_is_stored_with_lineage(tmp_path, capsys):
    store = Store(tmp_path / "s.duckdb")
    store.ingest([str(AIOC_FIXTURES / "tool-allow.json")])
    keys = [row["run_key"] for row in store.runs()]
    exec(readme_block("replay-from-python"), {"store": store, "keys": keys})
    printed = capsys.readouterr().out
    assert printed.startswith("completed ['aioc:")
    with store.reader() as con:
        ((child, parent),) = con.execute(
            "SELECT child_run_key, parent_run_key FROM lineage WHERE relation = 'replay_of'"
        ).fetchall()
    assert parent == keys[0] and child in printed
