"""``Store.run_detail`` (the run page's data) equals the public views for every run: its rows
in each per-run view, and its lineage both ways, including the runs it reads ``lineage`` for
only after a pre-check (replays, lineage rows attached at ingest by run id and by run key, and
thread continuations)."""

from __future__ import annotations

import json

import pytest

from recstore.errors import NotFoundError
from recstore.store import Store
from recstore.store.run_detail import CHILD_READS, read_run_detail

from .conftest import AIOC_FIXTURES
from .query_support import build_store


def _record(run_id: str, replay_of: str | None = None) -> dict:
    record = json.loads((AIOC_FIXTURES / "simple-run.json").read_text(encoding="utf-8"))
    record["runId"] = run_id
    record["metadata"] = {"replayOfRunId": replay_of} if replay_of else {}
    return record


def _thread() -> list[dict]:
    """Runs whose item lists prefix one another: done-a and done-b hold the same complete run,
    follow continues both, follow-2 continues follow; failed-1/2 hold only the input."""
    def run(run_id: str, texts: list[str], inputs: int, second: int) -> dict:
        items = [{"type": "message", "role": "user" if i % 2 == 0 else "assistant",
                  "content": t} for i, t in enumerate(texts)]
        started = f"2026-01-01T00:00:0{second}Z"
        return {"runId": run_id, "startedAt": started, "completedAt": started,
                "status": "completed", "agentName": "A", "question": "q", "response": "",
                "items": items, "inputItemCount": inputs, "promptSnapshots": [],
                "requestFingerprints": [], "policyDecisions": []}

    return [run("failed-1", ["hi"], 1, 1), run("failed-2", ["hi"], 1, 2),
            run("done-a", ["hi", "hello"], 1, 3), run("done-b", ["hi", "hello"], 1, 4),
            run("follow", ["hi", "hello", "more", "ok"], 3, 5),
            run("follow-2", ["hi", "hello", "more", "ok", "again"], 5, 6)]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    """The query store (fixtures, dev corpus, its replays), runs that continue a thread
    (as input-only and identical runs that do not), and lineage_log rows of each kind: by parent run id, by parent run key, and a replay that
    names a parent stored later."""
    store = build_store(tmp_path_factory.mktemp("run-detail") / "runs.duckdb")
    store.ingest_records(_thread(), source_uri="thread")
    store.ingest_records([_record("rd-parent")], source_uri="parent")
    store.ingest_records([_record("rd-by-id")], source_uri="by-id", lineage=[
        {"relation": "derived", "parent_run_id": "rd-parent"}])
    store.ingest_records([_record("rd-by-key")], source_uri="by-key", lineage=[
        {"relation": "derived", "parent_run_key": "aioc:rd-by-id"}])
    store.ingest_records([_record("rd-replay", replay_of="rd-late")], source_uri="replay")
    store.ingest_records([_record("rd-late")], source_uri="late")
    return store


def _view_rows(con, sql: str, params: dict, parse_json: bool = True) -> list[dict]:
    """The rows of ``sql``, JSON columns parsed (as the page shows them)."""
    cur = con.execute(sql, params)
    names = [d[0] for d in cur.description]
    json_cols = {d[0] for d in cur.description if parse_json and d[1] == "JSON"}
    return [{n: json.loads(v) if n in json_cols and v is not None else v
             for n, v in zip(names, row, strict=True)} for row in cur.fetchall()]


def _canonical(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in rows)


def test_every_run_equals_the_views(store):
    with store.reader() as con:
        keys = [k for (k,) in con.execute("SELECT run_key FROM runs ORDER BY 1").fetchall()]
        lineage = _view_rows(con, "SELECT * FROM lineage", {})  # once: ~0.3 s a read
    relations = {row["relation"] for row in lineage}
    assert len(keys) > 700 and {"replay_of", "derived", "thread_continuation"} <= relations
    # up to 20 runs at each end of each kind of link, and every eighth run: all of them took
    # 104 s of the CI's 19 minutes, and the runs between are of the same fixture shapes
    ends: dict[tuple[str, str], list[str]] = {}
    for row in lineage:
        for column in ("child_run_key", "parent_run_key"):
            ends.setdefault((row["relation"], column), []).append(row[column])
    with_lineage = {key for found in ends.values() for key in sorted(set(found))[:20]}
    checked = [k for i, k in enumerate(keys) if k in with_lineage or i % 8 == 0]
    linked = 0
    with store.reader() as con:  # one connection (Store.run_detail opens one a call)
        for key in checked:
            detail = read_run_detail(con, key)
            params = {"key": key}
            run = _view_rows(con, "SELECT * FROM runs WHERE run_key = $key", params,
                             parse_json=False)[0]
            assert list(detail["run"].items()) == list(run.items())  # the view's column order
            for name, sql in CHILD_READS.items():
                assert _canonical(detail[name]) == _canonical(_view_rows(con, sql, params)), name
            for side, column in (("parents", "child_run_key"), ("children", "parent_run_key")):
                expected = [row for row in lineage if row[column] == key]
                assert _canonical(detail[side]) == _canonical(expected), (key, side)
                linked += bool(expected)
    assert linked > 50  # runs with lineage were compared, at both ends of every kind of link
    assert {end for end, found in ends.items() if set(found) & set(checked)} == set(ends)


def test_lineage_both_ways(store):
    by_id = store.run_detail("aioc:rd-by-id")
    assert [p["parent_run_key"] for p in by_id["parents"]] == ["aioc:rd-parent"]
    assert [c["child_run_key"] for c in by_id["children"]] == ["aioc:rd-by-key"]
    follow = store.run_detail("aioc:follow")
    assert sorted(p["parent_run_key"] for p in follow["parents"]) == ["aioc:done-a",
                                                                      "aioc:done-b"]
    assert [c["child_run_key"] for c in follow["children"]] == ["aioc:follow-2"]
    late = store.run_detail("rd-late")  # a run id resolves too
    assert [c["child_run_key"] for c in late["children"]] == ["aioc:rd-replay"]


def test_unknown_run_is_not_found(store):
    with pytest.raises(NotFoundError):
        store.run_detail("no-such-run")
