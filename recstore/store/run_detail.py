"""One run as the public views show it, read in one connection: its ``runs`` row, its rows in
every per-run view, and its lineage both ways (``Store.run_detail``, the run page's data).

Why not one guarded query per view: on a 200,000-run store compiling each view query through
the query guard cost ~14 ms (sqlglot, the catalogue), more than the read itself (2–11 ms by
``run_key``, which the ``proj_runs`` index serves), and the ``lineage`` view cost ~100 ms per
read whatever the filter, because its thread-continuation branch ranks every run's prefixes
before a filter on one run applies. So the texts here are fixed SQL over the public views with
the run key bound, run one after another on one cursor; the ``runs`` row and the ``lineage``
rows are read from the tables under those views by the run's key and first_seq (see
:func:`read_run_row` and :func:`read_lineage`), with the same result.
"""

from __future__ import annotations

from typing import Any

import duckdb

from recstore.formats.jsontext import loads_json

__all__ = ["CHILD_READS", "read_lineage", "read_run_detail", "read_run_row"]

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

# The run's lineage, the rows of the ``lineage`` view (schema/003_views.sql) that name it as
# child or as parent, read branch by branch with the run's own values bound: the view cost
# ~100 ms per read at 200k runs whatever the filter (its thread-continuation branch ranks every
# run's prefixes before a filter on one run applies); each query here reads the run's rows by
# an index, its first_seq (zone maps) or one narrow column. A branch added to the view needs
# its query here: tests/test_run_detail.py compares every run with the view.
#
# replay_of, as child: the run's replayOfRunId, its parent resolved by key (run_key is
# format:run_id), unless a lineage_log row lists the replay.
_REPLAY_PARENT = """
SELECT $key AS child_run_key, p.run_key AS parent_run_key, $replay_of AS parent_run_id,
       'replay_of' AS relation, CAST(NULL AS JSON) AS detail, $source_id::BIGINT AS source_id
FROM (SELECT 1) LEFT JOIN run_rows p ON p.run_key = $format || ':' || $replay_of
WHERE NOT EXISTS (SELECT 1 FROM lineage_log x
                  WHERE x.child_run_key = $key AND x.relation = 'replay_of')
"""
# replay_of, as parent: the runs of its format whose replayOfRunId is its run id.
_REPLAY_CHILDREN = """
SELECT c.run_key AS child_run_key, $key AS parent_run_key, c.replay_of_run_id AS parent_run_id,
       'replay_of' AS relation, CAST(NULL AS JSON) AS detail, c.source_id
FROM proj_runs c
WHERE c.replay_of_run_id = $run_id AND c.format = $format
  AND NOT EXISTS (SELECT 1 FROM lineage_log x
                  WHERE x.child_run_key = c.run_key AND x.relation = 'replay_of')
"""
# lineage_log rows (attached at ingest) that can name the run, resolved as the view does.
_LOGGED = """
SELECT l.child_run_key,
       coalesce(l.parent_run_key, p.run_key) AS parent_run_key,
       coalesce(l.parent_run_id, p2.run_id) AS parent_run_id,
       l.relation, l.detail, l.source_id
FROM (SELECT * FROM lineage_log
      WHERE child_run_key = $key OR parent_run_key = $key OR parent_run_id = $run_id) l
LEFT JOIN run_rows p ON l.parent_run_key IS NULL AND p.run_key = 'aioc:' || l.parent_run_id
                    AND p.format = 'aioc'
LEFT JOIN run_rows p2 ON l.parent_run_key IS NOT NULL AND p2.run_key = l.parent_run_key
"""
# thread_continuation: for each run of ``{children}`` (run_key, first_seq, item_count, started,
# source_id), the runs whose whole item list is the longest prefix of its input, its prefixes
# read by its first_seq (the order they are appended in, so zone maps prune), ranked as the
# view ranks them.
_THREAD = """
SELECT child_run_key, parent_run_key, parent_run_id, 'thread_continuation' AS relation, detail,
       source_id
FROM (
    SELECT c.run_key AS child_run_key, p.run_key AS parent_run_key, p.run_id AS parent_run_id,
           json_object('prefixItems', x.prefix_len) AS detail, c.source_id,
           rank() OVER (PARTITION BY c.run_key ORDER BY x.prefix_len DESC) AS nearest
    FROM ({children}) c
    JOIN proj_input_prefixes x ON x.run_seq = c.first_seq
    JOIN run_rows p ON p.items_key = x.prefix_key AND p.item_count = x.prefix_len
    WHERE p.run_key <> c.run_key
      AND p.item_count < c.item_count
      AND p.item_count > coalesce(p.input_item_count, 0)
      AND coalesce(p.started <= c.started, p.first_seq < c.first_seq)
)
WHERE nearest = 1 AND {side} = $key
"""
_CHILD_COLUMNS = "SELECT run_key, first_seq, item_count, started, source_id FROM proj_runs"
# as child: the run itself (by its key); as parent: the runs with the run's whole item list as
# an input prefix (a narrow read of proj_runs by their first_seq), whose nearest parent it is.
_THREAD_PARENTS = _THREAD.format(children=f"{_CHILD_COLUMNS} WHERE run_key = $key",
                                 side="child_run_key")
_THREAD_CHILDREN = _THREAD.format(children=f"""{_CHILD_COLUMNS}
    WHERE first_seq IN (SELECT run_seq FROM proj_input_prefixes
                        WHERE prefix_key = $items_key AND prefix_len = $item_count)""",
                                  side="parent_run_key")
def read_lineage(con: duckdb.DuckDBPyConnection, run: dict) -> tuple[list[dict], list[dict]]:
    """The ``lineage`` rows of the run whose ``run_rows`` row is ``run``: ``(parents,
    children)``, as child and as parent (a row naming the run both ways is in both)."""
    key, run_id, fmt = run["run_key"], run["run_id"], run["format"]
    parents: list[dict] = []
    children: list[dict] = []
    if run["replay_of_run_id"] is not None:
        parents += _dicts(con.execute(_REPLAY_PARENT, {
            "key": key, "format": fmt, "source_id": run["source_id"],
            "replay_of": run["replay_of_run_id"]}))
    children += _dicts(con.execute(_REPLAY_CHILDREN, {"key": key, "run_id": run_id,
                                                      "format": fmt}))
    logged = _dicts(con.execute(_LOGGED, {"key": key, "run_id": run_id}))
    parents += [row for row in logged if row["child_run_key"] == key]
    children += [row for row in logged if row["parent_run_key"] == key]
    parents += _dicts(con.execute(_THREAD_PARENTS, {"key": key}))
    if run["item_count"] > (run["input_item_count"] or 0):  # else it parents no thread
        children += _dicts(con.execute(_THREAD_CHILDREN, {
            "key": key, "items_key": run["items_key"], "item_count": run["item_count"]}))
    return parents, children


# The runs view joins streams (record_hash) and source_files (source_uri) to run_rows; streams
# has no index, and its stream_key is random, so the view read by run_key scanned it (~40-70 ms
# at 200k runs). The same row is read here from run_rows by key (its index) and from streams by
# the revision's first_seq (equal to proj_runs.first_seq by construction; zone maps prune).
_RUN_ROW = "SELECT * FROM run_rows WHERE run_key = $key"
_RUN_EXTRAS = """
SELECT lower(hex(s.record_hash)) AS record_hash, f.uri AS source_uri
FROM streams s LEFT JOIN source_files f ON f.source_id = $source_id
WHERE s.first_seq = $first_seq AND s.stream_key = $key AND s.revision = $revision
"""


def read_run_row(con: duckdb.DuckDBPyConnection, key: str) -> dict:
    """The ``runs`` row of the stored run ``key`` (JSON columns as their text)."""
    return _runs_row(con, _dicts(con.execute(_RUN_ROW, {"key": key}), parse_json=False)[0])


def _runs_row(con: duckdb.DuckDBPyConnection, row: dict) -> dict:
    """The ``runs`` view's row for the ``run_rows`` row ``row``: its columns in the view's
    order, with the record hash and source URI the view joins."""
    extras = _dicts(con.execute(_RUN_EXTRAS, {
        "key": row["run_key"], **{k: row[k] for k in ("source_id", "first_seq", "revision")}}),
        parse_json=False)[0]
    columns = [d[0] for d in con.execute("SELECT * FROM runs LIMIT 0").description]
    return {name: extras[name] if name in extras else row[name] for name in columns}


def read_run_detail(con: duckdb.DuckDBPyConnection, key: str) -> dict[str, Any]:
    """Everything the run page shows of the stored run ``key``: ``run`` (its ``runs`` row),
    one list of rows per :data:`CHILD_READS` view (JSON columns parsed), and ``parents`` /
    ``children``, its ``lineage`` rows as child and as parent."""
    own = _dicts(con.execute(_RUN_ROW, {"key": key}), parse_json=False)[0]
    detail: dict[str, Any] = {"run": _runs_row(con, own)}
    for name, sql in CHILD_READS.items():
        detail[name] = _dicts(con.execute(sql, {"key": key}))
    detail["parents"], detail["children"] = read_lineage(con, own)
    return detail


def _dicts(cur: duckdb.DuckDBPyConnection, parse_json: bool = True) -> list[dict]:
    names = [d[0] for d in cur.description]
    json_cols = {i for i, d in enumerate(cur.description) if parse_json and d[1] == "JSON"}
    return [{name: loads_json(v) if i in json_cols and isinstance(v, str) else v
             for i, (name, v) in enumerate(zip(names, row, strict=True))}
            for row in cur.fetchall()]
