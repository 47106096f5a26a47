"""What every page and API route shows, as plain data: library calls over a served store.

Each function here is one page's data. They call what the CLI calls (``run_query`` and the guard,
``Store.get_record``/``run_row``/``rejects``, ``bulk_compare``, ``align_calls``,
``list_saved``); the SQL they run on the public views goes through :func:`run_query` with
``$name`` parameters, so it is checked by the same guard as a user's query. Nothing here renders:
``api`` turns the results into JSON, ``pages`` into HTML.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import duckdb
import orjson
from sqlglot import exp, parse_one

from recstore.errors import InputError
from recstore.formats.jsontext import loads_json
from recstore.query import QueryLimits, compile_dsl, execute, open_reader, run_query
from recstore.query.api import CompiledQuery, lean_runs
from recstore.query.dsl import python_literal
from recstore.query.limits import QUERY_MAX_ROWS, QUERY_TIMEOUT
from recstore.query.saved import list_saved, resolve_saved
from recstore.query.views import Catalog, catalog_from_connection
from recstore.store import Store

__all__ = [
    "FACETS", "RUN_COLUMNS", "SORTS", "comparisons", "console_query", "facets", "pair",
    "rejects", "run_detail", "runs_and_facets", "runs_page", "saved_queries", "sweep_detail", "sweeps",
]

#: Columns of the runs table, in order.
RUN_COLUMNS = ["run_key", "status", "agent", "model", "started", "duration_ms",
               "tool_call_count", "format", "question"]
#: Sortable columns -> the key they sort by (NULLs as the lowest value, so keyset paging holds).
SORTS = {
    "started": "coalesce(runs.started, TIMESTAMP '0001-01-01')",
    "duration_ms": "coalesce(runs.duration_ms, -1)",
    "tool_call_count": "coalesce(runs.tool_call_count, -1)",
    "status": "coalesce(runs.status, '')",
    "agent": "coalesce(runs.agent, '')",
    "model": "coalesce(runs.model, '')",
    "run_key": "runs.run_key",
}
_SORT_TYPES = {"started": "TIMESTAMP", "duration_ms": "BIGINT", "tool_call_count": "BIGINT"}
#: Facet columns of the runs table (``tag`` counts ``key=value`` pairs of the tags).
FACETS = ["agent", "status", "model", "format", "tag"]
PAGE_ROWS = 50
_FACET_VALUES = 12
#: Limits of the pages' own queries (the SQL console takes `recstore query`'s).
PAGE_LIMITS = QueryLimits(timeout=30.0, max_rows=10_000)


def _rows(store: Store, sql: str, params: Mapping[str, Any] | None = None,
          limits: QueryLimits = PAGE_LIMITS) -> list[dict]:
    with run_query(store, sql, params, language="sql", limits=limits) as result:
        columns = result.columns
        json_cols = {i for i, t in enumerate(result.types) if t == "JSON"}
        out = []
        for row in result.rows():
            out.append({c: (loads_json(v) if i in json_cols and isinstance(v, str) else v)
                        for i, (c, v) in enumerate(zip(columns, row, strict=True))})
        return out


def _filter_tree(text: str, catalog: Any) -> exp.Select:
    """The runs the DSL filter ``text`` selects, as a tree over ``runs`` (its own fields, order
    and limit dropped: the table chooses those)."""
    query = compile_dsl(text or "", catalog)
    tree = query.tree
    source = tree.args.get("from_")
    if not isinstance(tree, exp.Select) or source is None or getattr(source.this, "name", "") != "runs":
        raise InputError("the filter box takes a filter over runs (e.g. status = 'failed')",
                         source="filter")
    tree = tree.copy()
    for arg in ("order", "limit", "offset"):
        tree.set(arg, None)
    return tree


def encode_cursor(value: Any, run_key: str) -> str:
    """An opaque keyset cursor: the last row's sort value and run key."""
    text = orjson.dumps([value if value is None or isinstance(value, int | float | str)
                         else str(value), run_key])
    return base64.urlsafe_b64encode(text).decode("ascii")


def _decode_cursor(cursor: str) -> tuple[Any, str]:
    try:
        value, key = orjson.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        if not isinstance(key, str):
            raise ValueError
        return value, key
    except (ValueError, TypeError, orjson.JSONDecodeError):
        raise InputError("not a cursor this server gave out", source="after") from None


def _sort_value(value: Any, sort: str) -> exp.Expression:
    if value is None:
        value = "0001-01-01" if sort == "started" else -1 if sort in _SORT_TYPES else ""
    literal = python_literal(value)[0]
    kind = _SORT_TYPES.get(sort)
    return exp.cast(literal, kind) if kind else literal


def runs_page(store: Store, text: str = "", sort: str = "started", descending: bool = True,
              after: str | None = None, limit: int = PAGE_ROWS) -> dict:
    """One page of the runs table: rows the DSL filter ``text`` selects, sorted, paged by keyset
    (``after``: the ``next`` cursor of the page before), so page 1,000 costs what page 1 does."""
    with open_reader(store) as con:
        return _runs_page(con, catalog_from_connection(con), text, sort, descending, after, limit)


def runs_and_facets(store: Store, text: str = "", sort: str = "started",
                    descending: bool = True, after: str | None = None) -> tuple[dict, dict]:
    """:func:`runs_page` and :func:`facets` of one filter, read through one connection (the
    runs page shows both)."""
    with open_reader(store) as con:
        catalog = catalog_from_connection(con)
        return (_runs_page(con, catalog, text, sort, descending, after, PAGE_ROWS),
                _facets(con, catalog, text))


def _runs_page(con: duckdb.DuckDBPyConnection, catalog: Catalog, text: str, sort: str, descending: bool,
               after: str | None, limit: int) -> dict:
    if sort not in SORTS:
        raise InputError(f"cannot sort by {sort!r} (one of {', '.join(SORTS)})", source="sort")
    limit = max(1, min(int(limit), 500))
    sort_key = exp.maybe_parse(SORTS[sort], dialect="duckdb")
    tree = _filter_tree(text, catalog)
    tree.set("expressions", [exp.column(c, table="runs") for c in RUN_COLUMNS]
             + [sort_key.copy().as_("sort_value")])
    lean_runs(tree)
    if after:
        value, key = _decode_cursor(after)
        bound = exp.Tuple(expressions=[_sort_value(value, sort), python_literal(key)[0]])
        row = exp.Tuple(expressions=[sort_key.copy(), exp.column("run_key", table="runs")])
        tree = tree.where(exp.LT(this=row, expression=bound) if descending
                          else exp.GT(this=row, expression=bound))
    order = [exp.Ordered(this=sort_key.copy(), desc=descending),
             exp.Ordered(this=exp.column("run_key", table="runs"), desc=descending)]
    tree.set("order", exp.Order(expressions=order))
    tree.set("limit", exp.Limit(expression=exp.Literal.number(limit + 1)))
    result = execute(con, CompiledQuery(tree, "dsl", catalog), limits=PAGE_LIMITS)
    try:
        rows = [dict(zip(result.columns, r, strict=True)) for r in result.rows()]
    finally:
        result.close()
    more = len(rows) > limit
    rows = rows[:limit]
    cursor = encode_cursor(rows[-1]["sort_value"], rows[-1]["run_key"]) if more else None
    for row in rows:
        row.pop("sort_value")
    return {"filter": text, "sort": sort, "descending": descending, "columns": RUN_COLUMNS,
            "rows": rows, "next": cursor}


def facets(store: Store, text: str = "") -> dict[str, list[dict]]:
    """Counts of the most frequent values of each facet among the runs ``text`` selects."""
    with open_reader(store) as con:
        return _facets(con, catalog_from_connection(con), text)


def _facets(con: duckdb.DuckDBPyConnection, catalog: Catalog, text: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    where = _filter_tree(text, catalog).args.get("where")
    base = exp.select(*[exp.column(c, table="runs") for c in ["tags", *FACETS[:-1]]]
                      ).from_("runs")
    if where is not None:
        base.set("where", where.copy())
    lean_runs(base)  # over run_rows when the filter needs none of the view's joins
    result = execute(con, CompiledQuery(_facets_tree(base), "sql", catalog),
                     limits=PAGE_LIMITS)
    try:
        for facet, value, runs in result.rows():
            out.setdefault(facet, []).append({"value": value, "runs": runs})
    finally:
        result.close()
    return {name: out.get(name, []) for name in FACETS}


def _facets_template() -> exp.Query:
    parts = []
    for name in FACETS:
        if name == "tag":
            value = "k || '=' || json_extract_string(tags, '$.\"' || k || '\"')"
            source = "(SELECT tags, unnest(json_keys(tags)) AS k FROM selected) AS f"
        else:
            value, source = f"CAST({name} AS VARCHAR)", "selected AS f"
        parts.append(f"(SELECT '{name}' AS facet, {value} AS value, count(*) AS runs "
                     f"FROM {source} GROUP BY ALL ORDER BY runs DESC, value "
                     f"LIMIT {_FACET_VALUES})")
    return parse_one("WITH selected AS (SELECT 1) " + " UNION ALL ".join(parts), dialect="duckdb")


_FACETS_TEMPLATE = _facets_template()


def _facets_tree(base: exp.Select) -> exp.Query:
    """The facet counts over the runs ``base`` selects: ``base`` (whose filter the guard checked
    once, in :func:`_filter_tree`) read once as a CTE by every facet, so neither the guard nor
    DuckDB goes through the filter once per facet. The rest is this module's own fixed SQL."""
    tree = _FACETS_TEMPLATE.copy()
    cte = tree.find(exp.CTE)
    assert cte is not None and cte.alias == "selected"
    cte.set("this", base)
    cte.set("materialized", True)  # the filter runs once, not once per facet
    return tree


def facet_filter(text: str, facet: str, value: str | None) -> str:
    """``text`` narrowed to runs whose ``facet`` is ``value`` (a DSL clause appended)."""
    if facet not in FACETS:
        raise InputError(f"no facet {facet!r}", source="facet")
    if facet == "tag":
        key, _, tag_value = (value or "").partition("=")
        clause = f"tag.{key} = {_dsl_string(tag_value)}"
    elif value is None:
        clause = f"{facet} is null"
    else:
        clause = f"{facet} = {_dsl_string(value)}"
    return f"{text} and {clause}" if text.strip() else clause


def _dsl_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def run_detail(store: Store, ref: str) -> dict:
    """Everything the run page shows (:meth:`Store.run_detail`): the ``runs`` row, its
    requests, items, visits, tool calls, policy and guardrail decisions, and lineage both
    ways."""
    return store.run_detail(ref)


def console_query(store: Store, text: str, params: Mapping[str, str] | None = None,
                  max_rows: int = QUERY_MAX_ROWS, timeout: float = QUERY_TIMEOUT) -> dict:
    """The SQL console: ``text`` (SQL, DSL or ``@saved``) with `recstore query`'s guard, timeout
    and row cap; ``truncated`` says the rows were cut at ``max_rows``."""
    text, bound, language = resolve_saved(text.strip(), params or {})
    limits = QueryLimits(timeout=timeout or None, max_rows=max_rows or None)
    with run_query(store, text, bound, language=language, limits=limits) as result:
        rows = [list(r) for r in result.rows()]
        return {"columns": result.columns, "types": result.types, "rows": rows,
                "truncated": result.truncated}


def saved_queries() -> list[dict]:
    """The saved queries (``queries/``), as ``recstore queries`` lists them."""
    return [{"name": q.name, "language": q.language, "description": q.description,
             "params": [p.name for p in q.params]} for q in list_saved()]


def comparisons(store: Store, limit: int = 200) -> list[dict]:
    """Stored comparisons, newest first (without their aggregate)."""
    return _rows(store, "SELECT * EXCLUDE (aggregate) FROM comparisons "
                 "ORDER BY comparison_id DESC LIMIT $n", {"n": limit})


def pair(store: Store, baseline: str, candidate: str) -> dict:
    """Two runs side by side: their tool calls aligned (``align_calls``), the compare summary,
    questions and responses."""
    from recstore.records.compare import compare_records
    from recstore.records.diff import align_calls
    from recstore.records.toolcalls import extract_tool_calls

    left_key, right_key = store.resolve_run(baseline), store.resolve_run(candidate)
    left, right = store.get_record(left_key), store.get_record(right_key)
    calls_a, calls_b = extract_tool_calls(left), extract_tool_calls(right)
    steps = [{"op": s.op, "baseline": None if s.a is None else calls_a[s.a],
              "candidate": None if s.b is None else calls_b[s.b]}
             for s in align_calls(calls_a, calls_b)]
    report = compare_records(left, right)
    return {"baseline": _pair_side(left_key, left), "candidate": _pair_side(right_key, right),
            "equal": report["equal"], "summary": report["summary"], "metrics": report["metrics"],
            "differences": [_shown_difference(d) for d in report["differences"]],
            "steps": steps}


def _pair_side(run_key: str, record: dict) -> dict:
    return {"run_key": run_key, **{k: record.get(k) for k in
                                   ("status", "question", "response", "error")}}


def _shown_difference(difference: dict) -> dict:
    """One aioc difference with each side also as :func:`~recstore.records.render.visible`
    text, so a trailing space, a tab or NBSP shows on the page as it does in ``compare A B``."""
    from recstore.records.render import visible

    shown = {side: visible(difference[side]) for side in ("left", "right") if side in difference}
    return {**difference, "shown": shown}


def sweeps(store: Store) -> list[dict]:
    """Every sweep with its latest run and outcome counts."""
    return _rows(store, "SELECT * FROM sweeps ORDER BY 1")


def sweep_detail(store: Store, name: str) -> dict:
    """One sweep: its runs (the gate outcome and the pass/warn/fail trend) and the cases of its
    latest run."""
    params = {"name": name}
    runs = _rows(store, "SELECT * FROM sweep_runs WHERE sweep_name = $name "
                 "ORDER BY run_number", params)
    if not runs:
        from recstore.errors import NotFoundError

        raise NotFoundError(f"no sweep {name!r}")
    cases = _rows(store, "SELECT * EXCLUDE (comparison, judge) FROM sweep_cases "
                  "WHERE sweep_run_id = $run ORDER BY case_index",
                  {"run": runs[-1]["sweep_run_id"]})
    return {"name": name, "runs": runs, "cases": cases}


def rejects(store: Store, limit: int = 200) -> dict:
    """The newest rejects (reason, source and line, what was kept) and counts by reason."""
    rows = _rows(store, "SELECT reject_id, source_uri, line, reason, path, raw_size, rejected_at, "
                 "left(raw_text, 2000) AS raw_text FROM rejects ORDER BY reject_id DESC "
                 "LIMIT $n", {"n": limit})
    return {"rejects": rows, "summary": store.reject_summary()}
