"""The read-only SQL guard: a query may read the public views and nothing else.

Each check is a small function over the parsed tree; :func:`guard_sql` runs them in order and the
first failure becomes one :class:`QueryRefused` line. Functions are checked against an allow-list
of DuckDB's catalogue (:mod:`recstore.query.functions`): a function not reviewed is refused.

This is the first of two walls: queries also run on a read-only DuckDB connection with external
access disabled and its configuration locked (:func:`~recstore.query.sqltext.lock_down`), so a
construct this parser misreads still cannot write, read files or reach the network.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator

import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.errors import OptimizeError, ParseError, SqlglotError, TokenError
from sqlglot.optimizer.qualify import qualify

from recstore.errors import QueryRefused
from recstore.query.functions import check_calls
from recstore.query.sqltext import (  # noqa: F401 - re-exported: their home before issue 27.1
    lock_down,
    looks_like_sql,
    refuse_deep_nesting,
)
from recstore.query.views import Catalog

# Statement and clause kinds that write, configure or escape the store, anywhere in the tree.
_FORBIDDEN_NODES: tuple[type[exp.Expr], ...] = tuple(
    getattr(exp, name)
    for name in (
        "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "TruncateTable",
        "Copy", "Attach", "Detach", "Pragma", "Set", "SetItem", "Command", "Use", "Install",
        "LoadData", "Describe", "Summarize", "Show", "Transaction", "Commit", "Rollback",
        "Cache", "Uncache", "Refresh", "Kill", "Into", "Export", "Grant", "Revoke", "Analyze",
    )
    if hasattr(exp, name)
)

# The JSON path parts sqlglot's DuckDB printer writes (with the root and subscripts that hold them).
_JSON_PATH_PARTS = frozenset(DuckDB.generator_class.SUPPORTED_JSON_PATH_PARTS)
_JSON_PATH_PART_NAMES = {
    "JSONPathRecursive": "recursive descent (..)", "JSONPathSlice": "a slice ([a:b])",
    "JSONPathSelector": "a filter ([?(...)])", "JSONPathFilter": "a filter ([?(...)])",
    "JSONPathScript": "a script ([(...)])", "JSONPathUnion": "a union ([a,b])",
}


def parse_single_query(sql: str) -> exp.Query:
    """Parse ``sql`` (DuckDB dialect) into exactly one statement that is a query."""
    try:
        with _CommandFallbackAsError():
            statements = [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]
    except TokenError as exc:
        raise QueryRefused(f"could not read SQL: {_token_problem(exc)}") from None
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        line, column = first.get("line"), first.get("col")
        where = f" at line {line}, column {column}" if first else ""
        raise QueryRefused(f"could not parse SQL{where}: {first.get('description', exc)}",
                           line=line, column=column) from None
    if len(statements) != 1:
        raise QueryRefused(f"expected one statement, found {len(statements)}")
    tree = statements[0]
    if not isinstance(tree, exp.Query):
        raise QueryRefused(f"only queries may run, not {_kind(tree)}")
    return tree


def _token_problem(exc: TokenError) -> str:
    """What sqlglot's tokenizer stopped at, in one line: an unclosed quote names its quote
    character, anything else quotes the text around where it stopped."""
    missing = re.match(r"Missing (\S+) from", str(exc.__cause__ or ""))
    if missing:
        return f"a {missing.group(1)} quote is never closed (a string, quoted name or $$ block)"
    return f"stopped near {str(exc).removeprefix('Error tokenizing ')}".replace("\n", "\\n")


def check_nodes(tree: exp.Expr) -> None:
    """No statement that writes or configures, anywhere (data-modifying CTEs included)."""
    for node in tree.walk():
        if isinstance(node, _FORBIDDEN_NODES):
            raise QueryRefused(f"{_kind(node)} is not allowed in a query")


def check_functions(tree: exp.Expr) -> None:
    """Every function the query calls is on the reviewed allow-list (see
    :mod:`recstore.query.functions`), checked on DuckDB's parse of the SQL that runs."""
    if tree.find(exp.Placeholder):  # $name binds to a literal later; DuckDB parses it as NULL
        tree = tree.transform(lambda n: exp.null() if isinstance(n, exp.Placeholder) else n)
    with refuse_unprintable("duckdb"):
        sql = tree.sql(dialect="duckdb", comments=False)
    check_calls(sql)


def check_json_paths(tree: exp.Expr) -> None:
    """Every JSON path uses only the parts DuckDB's SQL printer writes back (keys, ``[N]``,
    ``[*]``): sqlglot parses more (``$..x``, ``[1:2]``, ``[?(...)]``, ``[0,1]``), then fails to
    print some and silently drops others, so the query that ran would not be the one asked."""
    for path in tree.find_all(exp.JSONPath):
        for part in path.find_all(exp.JSONPathPart):
            if type(part) not in _JSON_PATH_PARTS:
                what = _JSON_PATH_PART_NAMES.get(type(part).__name__, type(part).__name__)
                raise QueryRefused(f"JSON path {path.sql()} uses {what}, which is not supported "
                                   "(use keys, [N] and [*])")


def check_tables(tree: exp.Expr, catalog: Catalog) -> None:
    """Every table is a public view or a CTE in scope; no table functions, files or schemas."""
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            raise QueryRefused(f"table function {table.this.sql('duckdb')[:60]} is not allowed")
        if table.args.get("db") or table.args.get("catalog"):
            raise QueryRefused(f"{table.sql('duckdb')} is not a public view (see `recstore schema`)")
    for table in view_references(tree):
        if catalog.get(table.name.lower()) is None:
            raise QueryRefused(f"unknown view {table.name!r}; views: {', '.join(catalog.names())}")


def view_references(tree: exp.Expr) -> list[exp.Table]:
    """The tables of ``tree`` that name a stored table or view rather than a CTE in scope."""
    return [table for table in tree.find_all(exp.Table) if not _names_cte_in_scope(table)]


def _names_cte_in_scope(table: exp.Table) -> bool:
    """Whether ``table`` resolves to a CTE, by the scoping DuckDB applies (checked against it in
    tests/test_query_guard.py): the CTEs of a WITH are visible in its query and in the CTEs after
    them, never before; a CTE's own body sees the CTE only in the recursive term (the right side
    of the top UNION) of a WITH RECURSIVE. Anywhere else the name reads the stored table of that
    name, so ``WITH meta AS (SELECT * FROM meta) ...`` must not pass as a CTE reference."""
    name = table.name.lower()
    path: list[exp.Expr] = [table]  # from the table up to the child of ``node``
    node = table.parent
    while node is not None:
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            ctes = list(with_.expressions)
            # the CTE whose body holds the table, when the path comes up through this WITH
            own = path[-2] if path[-1] is with_ else None
            before = next((i for i, cte in enumerate(ctes) if cte is own), len(ctes))
            if any(cte.alias_or_name.lower() == name for cte in ctes[:before]):
                return True
            if (isinstance(own, exp.CTE) and own.alias_or_name.lower() == name
                    and with_.args.get("recursive") and _in_recursive_term(own, path)):
                return True
        path.append(node)
        node = node.parent
    return False


def _in_recursive_term(cte: exp.CTE, path: list[exp.Expr]) -> bool:
    body = cte.this
    return isinstance(body, exp.Union) and any(n is body.expression for n in path)


def check_columns(tree: exp.Query, catalog: Catalog) -> None:
    """Column references resolve against the views (sqlglot ``qualify``). Only an unresolved
    column refuses the query: other optimizer limits are left to DuckDB, which validates too."""
    try:
        qualify(tree.copy(), schema=catalog.sqlglot_schema(), dialect="duckdb",
                validate_qualify_columns=True, quote_identifiers=False)
    except OptimizeError as exc:
        message = str(exc)
        if "could not be resolved" in message or "Unknown column" in message:
            raise QueryRefused(message.split(". Line")[0].strip()) from None
    except Exception:  # noqa: BLE001 - qualify is an early, friendlier check, not the validator
        return


def guard_sql(sql: str, catalog: Catalog) -> exp.Query:
    """Parse and check one read-only query over ``catalog``; return its tree or raise
    :class:`QueryRefused`.

    Example:
        >>> from recstore.query.views import default_catalog
        >>> guard_sql("SELECT status, count(*) FROM runs GROUP BY 1", default_catalog()).sql()
        'SELECT status, COUNT(*) FROM runs GROUP BY 1'
    """
    tree = parse_single_query(sql)
    check_nodes(tree)
    check_json_paths(tree)  # before check_functions prints the tree: a path may not print
    check_functions(tree)
    check_tables(tree, catalog)
    check_columns(tree, catalog)
    return tree


@contextlib.contextmanager
def refuse_unprintable(dialect: str) -> Iterator[None]:
    """Turn sqlglot's failure to print a parsed construct in ``dialect`` (a ``ValueError``
    such as "Unsupported expression type X") into one clear error: the query cannot run as
    checked, so it is refused rather than shown as a traceback."""
    try:
        yield
    except (ValueError, SqlglotError) as exc:
        raise QueryRefused(f"sqlglot cannot write this query as {dialect} SQL: "
                           f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                           ) from None


def _kind(node: exp.Expr) -> str:
    if isinstance(node, exp.Command):
        return str(node.this).upper()
    if isinstance(node, exp.Column):  # a bare word such as CHECKPOINT parses as a column
        return node.sql().upper()
    return type(node).__name__.upper()


class _CommandFallbackAsError(logging.Filter):
    """sqlglot parses unsupported statements (LOAD, CALL, EXPLAIN ...) as ``Command`` with a
    logged warning; the root check refuses them, so the warning is only noise here."""

    def __enter__(self) -> _CommandFallbackAsError:
        logging.getLogger("sqlglot").addFilter(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger("sqlglot").removeFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()
