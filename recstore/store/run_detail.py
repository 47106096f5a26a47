"""One run as the public views show it, read in one connection: its ``runs`` row, its rows in
every per-run view, and its lineage both ways (``Store.run_detail``, the run page's data).

Why not one guarded query per view: on a 200,000-run store compiling each view query through
the query guard cost ~14 ms (sqlglot, the catalogue), more than the read itself (2–11 ms by
``run_key``, which the ``proj_runs`` index serves), and the ``lineage`` view cost ~100 ms per
read whatever the filter, because its thread-continuation branch ranks every run's prefixes
before a filter on one run applies. So the texts here are fixed SQL over the public views with
the run key bound, run one after another on one cursor, and ``lineage`` is read only for a run
that can have a lineage row at all (:data:`_MAY_HAVE_LINEAGE`), once for both directions.
"""

from __future__ import annotations

from typing import Any

import duckdb

from recstore.formats.jsontext import loads_json

__all__ = ["CHILD_READS", "read_run_detail", "read_run_row"]

#: The run's rows in each per-run view, as the run page lists them.
CHILD_READS = {
    "requests": "SELECT * FROM requests WHERE run_key = $key ORDER BY request_index",
    "items": "SELECT item_index, type, role, call_id, name, request_turn, in_input, content, "
             "payload FROM items WHERE run_key = $key ORDER BY item_index",
    "visits": "SELECT * FROM visits WHERE run_key = $key ORDER BY visit_index",
    "tool_calls": "SELECT * FROM tool_calls WHERE run_key = $key ORDER BY call_index",
    "policy_decisions": "SELECT * FROM policy_decisions WHERE run_key = $key "
                        "ORDER BY decision_index",
    "guardrail_decisions": "SELECT * FROM guardrail_decisions WHERE run_key = $key",
}

# Whether a branch of the lineage view (schema/003_views.sql) other than a replay's own metadata
# (``replay_of_run_id``, in the run row) can name the run: a replay of it, a lineage_log row, an
# input prefix of it that is another run's whole item list, or its item list as another run's
# prefix. False means no lineage row names the run. The run's values are bound, not joined: a
# correlated form joined every run (~45 ms at 200k runs). A branch added to the view needs its
# test here (tests/test_run_detail.py compares every run with the view).
_MAY_HAVE_LINEAGE = """
SELECT EXISTS (SELECT 1 FROM proj_runs WHERE replay_of_run_id = $run_id AND format = $format)
    OR EXISTS (SELECT 1 FROM lineage_log WHERE child_run_key = $key OR parent_run_key = $key
                                            OR parent_run_id = $run_id)
    OR EXISTS (SELECT 1 FROM proj_input_prefixes x
               JOIN proj_runs p ON p.items_key = x.prefix_key AND p.item_count = x.prefix_len
               WHERE x.run_seq = $first_seq)
    OR EXISTS (SELECT 1 FROM proj_input_prefixes
               WHERE prefix_len = $item_count
                 AND prefix_key = (SELECT items_key FROM proj_runs WHERE run_key = $key))
"""
_LINEAGE = """
SELECT r.replay_of_run_id IS NOT NULL
    OR EXISTS (SELECT 1 FROM proj_runs c
               WHERE c.replay_of_run_id = r.run_id AND c.format = r.format)
    OR EXISTS (SELECT 1 FROM lineage_log l
               WHERE l.child_run_key = r.run_key OR l.parent_run_key = r.run_key
                  OR l.parent_run_id = r.run_id)
    OR EXISTS (SELECT 1 FROM proj_input_prefixes x
               JOIN proj_runs p ON p.items_key = x.prefix_key AND p.item_count = x.prefix_len
               WHERE x.run_seq = r.first_seq)
    OR EXISTS (SELECT 1 FROM proj_input_prefixes x
               WHERE x.prefix_key = r.items_key AND x.prefix_len = r.item_count)
FROM run_rows r WHERE r.run_key = $key
"""
_LINEAGE = "SELECT * FROM lineage WHERE child_run_key = $key OR parent_run_key = $key"


def read_run_row(con: duckdb.DuckDBPyConnection, key: str) -> dict:
    """The ``runs`` row of the stored run ``key`` (JSON columns as their text)."""
    return _dicts(con.execute("SELECT * FROM runs WHERE run_key = $key", {"key": key}),
                  parse_json=False)[0]


def read_run_detail(con: duckdb.DuckDBPyConnection, key: str) -> dict[str, Any]:
    """Everything the run page shows of the stored run ``key``: ``run`` (its ``runs`` row),
    one list of rows per :data:`CHILD_READS` view (JSON columns parsed), and ``parents`` /
    ``children``, its ``lineage`` rows as child and as parent."""
    params = {"key": key}
    run = read_run_row(con, key)
    detail: dict[str, Any] = {"run": run}
    for name, sql in CHILD_READS.items():
        detail[name] = _dicts(con.execute(sql, params))
    lineage: list[dict] = []
    if run["replay_of_run_id"] is not None or con.execute(_MAY_HAVE_LINEAGE, {
            **params, **{k: run[k] for k in ("run_id", "format", "first_seq", "item_count")}
    }).fetchall()[0][0]:
        lineage = _dicts(con.execute(_LINEAGE, params))
    detail["parents"] = [row for row in lineage if row["child_run_key"] == key]
    detail["children"] = [row for row in lineage if row["parent_run_key"] == key]
    return detail


def _dicts(cur: duckdb.DuckDBPyConnection, parse_json: bool = True) -> list[dict]:
    names = [d[0] for d in cur.description]
    json_cols = {i for i, d in enumerate(cur.description) if parse_json and d[1] == "JSON"}
    return [{name: loads_json(v) if i in json_cols and isinstance(v, str) else v
             for i, (name, v) in enumerate(zip(names, row, strict=True))}
            for row in cur.fetchall()]
