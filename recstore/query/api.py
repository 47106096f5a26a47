"""The query layer's library API: compile text (SQL or DSL) once, run it on a store or print it
for another engine. The CLI and the compare/sweep layers call only these functions."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from recstore.errors import EmptySelectionError, InputError
from recstore.query.limits import LimitWatch, QueryLimitError, QueryLimits, query_error
from recstore.query.output import BATCH_ROWS, TIME_TYPES, ResultStream, RowBatch, plain_type
from recstore.query.sqltext import lock_down, looks_like_sql, refuse_deep_nesting
from recstore.query.views import Catalog, catalog_from_connection, default_catalog

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp

    from recstore.query.checked_cache import CheckedCache
    from recstore.store import Store

# Plain SQL needs only the guard: the DSL compiler and the other engines' dialects (sqlglot's
# Spark dialect among them) are imported when a query uses them, and a text whose checked SQL is
# remembered (recstore.query.checked_cache) imports no sqlglot at all.


class CompiledQuery:
    """A checked query: its DuckDB-dialect tree, whether it came from SQL or the DSL, and the
    catalogue it was checked against.

    ``CompiledQuery.remembered(sql, language, catalog, text)`` is a query whose ``text`` the
    guard passed on an earlier run as ``sql`` (:mod:`recstore.query.checked_cache`), or, with
    ``plain=True``, SQL that :mod:`recstore.query.plain_sql` accepted as written: it runs as
    ``sql``, and compiles ``text`` again only when something asks for its tree.
    """

    def __init__(self, tree: exp.Query, language: str, catalog: Catalog):
        self._tree: exp.Query | None = tree
        self.language = language  # "sql" | "dsl"
        self.catalog = catalog
        self._text: str | None = None
        self._sql: str | None = None
        self.plain = False  # accepted by plain_sql, not yet by the full guard

    @classmethod
    def remembered(cls, sql: str, language: str, catalog: Catalog, text: str, *,
                   plain: bool = False) -> CompiledQuery:
        """The query ``text`` that compiled to the checked ``sql`` (see the class docstring)."""
        query = cls.__new__(cls)
        query._tree, query.language, query.catalog = None, language, catalog
        query._text, query._sql, query.plain = text, sql, plain
        return query

    @property
    def tree(self) -> exp.Query:
        """The query's sqlglot tree (a remembered query compiles its text again for it)."""
        if self._tree is None:
            assert self._text is not None
            self._tree = compile_query(self._text, self.catalog, language=self.language).tree
        return self._tree

    @property
    def sql(self) -> str:
        """DuckDB SQL, as run on the store (without comments: what runs is exactly the tree
        the guard checked, or the SQL it printed for this text before)."""
        if self._sql is not None:
            return self._sql
        from recstore.query.guard import refuse_unprintable

        with refuse_deep_nesting(), refuse_unprintable("duckdb"):
            return self.tree.sql(dialect="duckdb", comments=False)

    def views(self) -> list[str]:
        """The public views the query reads (CTE names excluded)."""
        from recstore.query.guard import view_references

        return sorted({t.name.lower() for t in view_references(self.tree)})

    def to(self, dialect: str, pretty: bool = False) -> str:
        """SQL for ``dialect`` (spark, trino, postgres, bigquery, clickhouse or duckdb)."""
        from recstore.query.dialects import to_dialect
        from recstore.query.guard import refuse_unprintable

        with refuse_deep_nesting(), refuse_unprintable(dialect):
            return to_dialect(self.tree, dialect, self.catalog, pretty=pretty)


def compile_query(text: str, catalog: Catalog | None = None,
                  params: Mapping[str, Any] | None = None,
                  now: datetime | None = None, language: str | None = None, *,
                  cache: CheckedCache | None = None,
                  plain_on: duckdb.DuckDBPyConnection | None = None) -> CompiledQuery:
    """Compile SQL or DSL ``text``: ``language`` "sql" or "dsl", or by default SQL when its
    first word is a SQL statement keyword.

    SQL goes through the read-only guard; ``$name`` placeholders are replaced by literal nodes
    from ``params``. DSL compiles to a tree that passes the same structural checks. With a
    ``cache``, a text compiled before (without parameters, and for the DSL without reading the
    clock) runs as the SQL it was checked as then, and a text that compiles is remembered (see
    :mod:`recstore.query.checked_cache`). With ``plain_on`` (the reader connection), SQL
    without parameters that :mod:`recstore.query.plain_sql` understands runs as written,
    and the everyday DSL as the SQL :mod:`recstore.query.plain_dsl` writes for it, without
    sqlglot (``query.plain``): should DuckDB refuse it, compile it again without ``plain_on``
    so that the full guard says why (as :func:`run_query` does).

    Raises:
        InputError: the query is refused, invalid, or too deeply nested to compile.
    """
    catalog = catalog or default_catalog()
    language = "sql" if language == "sql" or language is None and looks_like_sql(text) else "dsl"
    # plain first: it reads the text alone, where a cache key hashes the query layer's code
    plain = _plain_query(text, language, catalog, plain_on) if plain_on and not params else None
    if plain is not None:
        return plain
    key = None
    if cache is not None and not params:
        from recstore.query.checked_cache import entry_key

        key = entry_key(text, language, catalog)
        sql = cache.get(key)
        if sql is not None:
            return CompiledQuery.remembered(sql, language, catalog, text)
    with refuse_deep_nesting():
        if language == "sql":
            from recstore.query.guard import guard_sql

            tree = bind_placeholders(guard_sql(text, catalog), params or {})
            query, timeless = CompiledQuery(tree, "sql", catalog), True
        else:
            query, timeless = _compile_dsl(text, catalog, params, now)
        sql = query.sql  # prove the tree prints here, where nesting errors are caught
    if key is not None and cache is not None and timeless:
        cache.put(key, sql)
    return query


def _plain_query(text: str, language: str, catalog: Catalog,
                 con: duckdb.DuckDBPyConnection) -> CompiledQuery | None:
    """``text`` as SQL that runs as written (:mod:`recstore.query.plain_sql`; a DSL text
    through :mod:`recstore.query.plain_dsl` first), or None: the full compiler's to check."""
    from recstore.query.plain_sql import plain_select

    if language == "sql":
        sql: str | None = text
    else:
        from recstore.query.plain_dsl import plain_dsl_sql

        sql = plain_dsl_sql(text, catalog)
    if sql is None or not plain_select(sql, catalog, con, dsl=language == "dsl"):
        return None
    return CompiledQuery.remembered(sql, language, catalog, text, plain=True)


def compile_dsl(text: str, catalog: Catalog | None = None,
                params: Mapping[str, Any] | None = None,
                now: datetime | None = None) -> CompiledQuery:
    """Compile filter-DSL ``text``; see :mod:`recstore.query.dsl` for the grammar."""
    return _compile_dsl(text, catalog or default_catalog(), params, now)[0]


def _compile_dsl(text: str, catalog: Catalog, params: Mapping[str, Any] | None,
                 now: datetime | None) -> tuple[CompiledQuery, bool]:
    """:func:`compile_dsl`, and whether the SQL holds at any time (no relative time read
    ``now``)."""
    from recstore.query.dsl import compile_dsl_clocked
    from recstore.query.guard import check_functions, check_nodes, check_tables

    with refuse_deep_nesting():
        tree, read_now = compile_dsl_clocked(text, catalog, params, now)
        for check in (check_nodes, check_functions):
            check(tree)
        check_tables(tree, catalog)
    return CompiledQuery(tree, "dsl", catalog), not read_now


def bind_placeholders(tree: exp.Query, params: Mapping[str, Any]) -> exp.Query:
    """Replace ``$name`` / ``:name`` placeholders by literals (never by SQL text)."""
    from sqlglot import exp

    def bind(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Placeholder):
            name = node.name
            if not name:
                raise InputError("positional ? parameters are not supported; use $name",
                                 source="query")
            if name not in params:
                raise InputError(f"no value for parameter ${name}; give {name}=... in `params`",
                                 source="query", param="params")
            from recstore.query.dsl import python_literal  # the DSL's literals, when one is bound

            return python_literal(params[name])[0]
        return node

    bound = tree.transform(bind)
    assert isinstance(bound, exp.Query)  # only placeholders, never the root, are replaced
    return bound


def open_reader(store: Store) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]:
    """A read-only store connection locked down for user queries (see ``sqltext.lock_down``)."""
    @contextlib.contextmanager
    def reader() -> Iterator[duckdb.DuckDBPyConnection]:
        with store.reader() as con:
            if not store.locked_down:  # a served store's readers already are
                lock_down(con)
            yield con

    return reader()


def execute(con: duckdb.DuckDBPyConnection, query: CompiledQuery,
            batch_rows: int = BATCH_ROWS, limits: QueryLimits | None = None, *,
            arrow: bool = True) -> ResultStream:
    """Run ``query`` on ``con``; rows stream as Arrow batches of ``batch_rows``.

    The query runs on a cursor of ``con`` (same database, same locked settings) so that an
    unfinished result of an earlier ``con.execute`` cannot block it. ``limits`` (none by
    default) stop it after a time, cut its rows (``result.truncated``) or let Ctrl-C stop it;
    they hold until the rows are read to the end or the result is closed. ``arrow=False``: the
    caller only reads ``rows()`` or writes a text format, so a result of plain column types
    (:func:`~recstore.query.output.plain_type`) streams DuckDB's own rows, without pyarrow, as
    does one with dates and timestamps when its first batch is all of it and Python holds
    every such value (see ``_RowReader.whole_and_in_range``).

    Raises:
        InputError: DuckDB refused the query; QueryLimitError: it ran past ``limits.timeout``
            (also while its rows are fetched; the caller's time between batches is not counted).
    """
    cursor = con.cursor()
    watch = LimitWatch(cursor, limits or QueryLimits())
    try:
        relation = cursor.sql(query.sql)
        types = [str(t) for t in relation.types]
        reader: Any = None
        if not arrow and all(plain_type(t) or t in TIME_TYPES for t in types):
            reader = _RowReader(cursor, query.sql, batch_rows)
            if not reader.whole_and_in_range([i for i, t in enumerate(types) if t in TIME_TYPES]):
                cursor.abort()  # the rows read so far; Arrow's path runs the query again
                reader = None
        schema = None
        if reader is None:
            reader = relation.to_arrow_reader(batch_rows)
            schema = reader.schema
    except (duckdb.Error, RuntimeError) as exc:
        watch.close()
        raise watch.error(exc) from None
    except BaseException:
        watch.close()
        raise
    watch.pause()  # until the caller fetches a batch: its time before that is not the query's
    result = ResultStream(list(relation.columns), types, iter(()), schema)
    result.batches = watch.batches(reader, result)
    return result


class _RowReader:
    """DuckDB's rows of a statement as :class:`RowBatch` es, read like an Arrow batch reader
    (the first batch is read here, so an error shows where Arrow's reader shows it)."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, sql: str, batch_rows: int):
        self._cursor = cursor.execute(sql)
        self._batch_rows = batch_rows
        self._first: list[tuple[Any, ...]] | None = cursor.fetchmany(batch_rows)

    def whole_and_in_range(self, time_columns: list[int]) -> bool:
        """Whether the first batch is the whole result and, in ``time_columns`` (DATE,
        TIMESTAMP), holds only values Python's dates hold as themselves: DuckDB's rows give a
        year past 9999 as text and infinity as Python's last (or first) instant, where Arrow's
        path prints what is stored. Without time columns, always true."""
        if not time_columns:
            return True
        rows = self._first or []
        if len(rows) >= self._batch_rows:
            return False  # more rows may follow, unchecked
        edges = (datetime.min, datetime.max, date.min, date.max)
        return not any(isinstance(row[i], str) or row[i] in edges
                       for row in rows for i in time_columns)

    def __iter__(self) -> Iterator[RowBatch]:
        rows, self._first = self._first, None
        while rows:
            yield RowBatch(rows)
            rows = self._cursor.fetchmany(self._batch_rows)

    def close(self) -> None:
        """Nothing to release: the cursor closes with the watch."""


@contextlib.contextmanager
def run_query(store: Store, text: str, params: Mapping[str, Any] | None = None,
              now: datetime | None = None, batch_rows: int = BATCH_ROWS, *,
              language: str | None = None, limits: QueryLimits | None = None,
              arrow: bool = True, cache: CheckedCache | None = None,
              plain: bool = False) -> Iterator[ResultStream]:
    """Compile and run ``text`` (``language`` and ``cache`` as in :func:`compile_query`) on
    ``store``; the result streams while the context is open. ``limits`` and ``arrow``: see
    :func:`execute`. ``plain``: SQL that :mod:`recstore.query.plain_sql` understands runs
    without the full guard, unless DuckDB refuses it (then the guard checks it as always).

    Example (library use)::

        with run_query(store, "status = 'failed' order by started desc limit 10") as result:
            for row in result.rows():
                print(row)
    """
    with open_reader(store) as con:
        catalog = catalog_from_connection(con)
        query = compile_query(text, catalog, params, now, language, cache=cache,
                              plain_on=con if plain else None)
        try:
            result = execute(con, query, batch_rows, limits, arrow=arrow)
        except InputError as exc:
            if not query.plain or isinstance(exc, QueryLimitError):
                raise
            # DuckDB refused what plain_sql let through (an unknown column, a type mismatch):
            # the full guard checks it, so the error is the one a checked query gives
            query = compile_query(text, catalog, params, now, language, cache=cache)
            result = execute(con, query, batch_rows, limits, arrow=arrow)
        try:
            yield result
        finally:
            result.close()


def select_run_keys(store: Store, dsl_filter: str, params: Mapping[str, Any] | None = None,
                    now: datetime | None = None, *, what: str | None = None) -> list[str]:
    """Run keys selected by a DSL filter (or a SQL query with a ``run_key`` column), in the
    filter's ``order by`` when it has one, else sorted. Compare and sweep resolve case sets with
    this.

    Raises:
        InputError: the selection cannot compile or run (DuckDB's error in one line); the
            message names it as ``what`` (``--select``, ``select.query``) when given.
    """
    with open_reader(store) as con, _selection(what):
        query = compile_query(dsl_filter, catalog_from_connection(con), params, now)
        tree = run_key_tree(query)
        return [row[0] for row in con.execute(tree.sql(dialect="duckdb", comments=False)).fetchall()]


@contextlib.contextmanager
def _selection(what: str | None) -> Iterator[None]:
    """A selection's errors as one line naming it (``what``, when given): DuckDB's errors
    while it runs (a conversion that fails on some row, a SQL query without ``run_key``) as
    well as the compiler's."""
    try:
        yield
    except InputError as exc:
        if what:
            exc.said_of(what)
        raise
    except duckdb.Error as exc:
        if isinstance(exc, duckdb.BinderException) and '"run_key" not found' in str(exc):
            raise InputError(f"{what or 'the query'} has no run_key column; a selection picks "
                             "runs") from None
        raise query_error(exc, what or "query") from None


# Columns of the runs view that joins add to run_rows (a selection that reads neither skips them).
_JOINED_RUN_COLUMNS = frozenset({"record_hash", "source_uri"})


def select_gate_runs(store: Store, text: str, *, what: str, allow_empty: bool = False,
                     params: Mapping[str, Any] | None = None) -> list[str]:
    """:func:`select_run_keys` for a gate (compare, replay, sweep): a selection that matches no
    run checks nothing, so it raises instead of passing.

    Raises:
        EmptySelectionError: ``text`` selects no runs and ``allow_empty`` is false; the message
            names the selection as ``what`` (e.g. ``the baseline filter``).
    """
    keys = select_run_keys(store, text, params=params, what=what)
    require_selection(len(keys), text, what, allow_empty)
    return keys


def select_gate_run_sets(store: Store, selections: Sequence[tuple[str, str]], *,
                         allow_empty: bool = False) -> list[pa.Table]:
    """:func:`select_gate_runs` for several ``(what, text)`` selections at once (bulk compare's
    two sides): the run keys each selects as a one-column (``run_key``) Arrow table, distinct
    and in no particular order, read in one locked-down connection with no Python object per
    run.

    Raises:
        EmptySelectionError: as :func:`select_gate_runs`, for the first empty selection.
    """
    out = []
    with open_reader(store) as con:
        catalog = catalog_from_connection(con)
        for what, text in selections:
            with _selection(what):
                tree = run_key_tree(compile_query(text, catalog), ordered=False)
                keys = con.sql(tree.sql(dialect="duckdb", comments=False)).to_arrow_table()
            require_selection(keys.num_rows, text, what, allow_empty)
            out.append(keys)
    return out


def require_selection(count: int, text: str, what: str, allow_empty: bool) -> None:
    """Raise EmptySelectionError when a gate's selection ``text`` (``what``) found no run,
    unless ``allow_empty``."""
    if not count and not allow_empty:
        raise EmptySelectionError(
            f"{what} {text!r} selects no runs: nothing would be checked "
            "(`allow_empty` accepts an empty selection)", what=what)


_Tree = TypeVar("_Tree", bound="exp.Expr")


def lean_runs(tree: _Tree) -> _Tree:
    """``tree`` (checked by the guard already) reading ``run_rows`` wherever it reads the
    ``runs`` view, under the same name, when no part of it reads a column the view's joins add
    or selects ``*``: those joins cost more than the rest of a filter over many runs. Changes
    ``tree`` in place and returns it."""
    from sqlglot import exp

    if any(c.name in _JOINED_RUN_COLUMNS for c in tree.find_all(exp.Column)):
        return tree
    if any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
           for select in tree.find_all(exp.Select) for p in select.expressions):
        return tree
    for table in list(tree.find_all(exp.Table)):
        if table.name == "runs" and not table.db:
            table.replace(exp.to_table("run_rows").as_(table.alias_or_name))
    return tree


def run_key_tree(query: CompiledQuery, ordered: bool = True) -> exp.Query:
    """The ``run_key`` column of ``query``'s rows (distinct; ``ordered``: in the query's own
    order, else by run key)."""
    from sqlglot import exp

    tree = query.tree
    from_ = tree.args.get("from_") if isinstance(tree, exp.Select) else None  # none: SELECT 1
    from_table = from_.this if from_ is not None else None
    if query.language == "dsl" and isinstance(tree, exp.Select) and \
            isinstance(from_table, exp.Table) and from_table.name == "runs":
        keys = tree.copy()
        keys.set("expressions", [exp.column("run_key", table="runs")])
        lean_runs(keys)
        # a limit without an order takes the first runs by run key, ordered or not
        if keys.args.get("order") or not (ordered or keys.args.get("limit")):
            return keys
        return keys.order_by(exp.column("run_key", "runs"))
    keys = exp.select("run_key").distinct().from_(tree.subquery("q"))
    return keys.order_by(exp.column("run_key")) if ordered else keys
